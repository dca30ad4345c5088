//! RED draws that twin rails share (DESIGN.md §3c, "Rail replay"). On a
//! rail-optimized fabric, two rail switches whose flows are the same flow
//! for flow (the k-th flow through each joins hosts of the same two
//! servers, with the same size, host and switch ports and last-hop links)
//! are *twins*. The k-th flow of every twin draws RED with the identity of
//! the lowest twin's k-th flow at the lowest twin's switch: twins in the
//! same state mark alike at packet level, by construction, and rail replay
//! may give a follower its leader's marks exactly. Within one switch the
//! draws stay independent: its flows map to distinct identities.
//!
//! The classes are a function of the fabric alone (hosts' first ports and
//! switches' first next hops, which every MPI rank knows), so the same on
//! every shard and rank, and found once per run; memo's sandboxes share
//! the run's.

use super::memo::resources::first_port;
use crate::network::Fabric;
use hashbrown::HashMap;
use std::sync::Arc;

/// A flow's route if it is one switch between two hosts: (switch, the
/// host port it leaves by, the switch's port toward the destination, the
/// switch's port back toward the source).
pub(super) type TwoHop = (u32, u16, u16, u16);

/// Flow `flow` draws RED with another's identity at its own switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Twin {
    /// The flow whose identity it draws with (the lowest twin's), or
    /// `u32::MAX`: its own.
    pub lead: u32,
    /// That flow's switch, which the draw names instead of `own`.
    pub lead_switch: u32,
    /// The flow's own switch: elsewhere it draws as itself.
    pub own: u32,
}

const NO_TWIN: Twin = Twin {
    lead: u32::MAX,
    lead_switch: u32::MAX,
    own: u32::MAX,
};

/// The server of host `host` beside its switch `rail`: its other
/// neighbour, if it has exactly one (the NVSwitch of a GPU server, or the
/// rail switch of a flow inside it).
pub(super) fn server(fabric: &Fabric, host: u32, rail: u32) -> Option<u32> {
    let mut others = fabric
        .topo
        .ports(host)
        .iter()
        .map(|p| p.peer)
        .filter(|&n| n != rail);
    let s = others.next()?;
    others.next().is_none().then_some(s)
}

/// The signature twin switches share: per flow in id order (routes from
/// `two_hop`), the servers it joins, its size, the switch and host ports
/// it takes and its last hop's link.
pub(super) fn signature(
    fabric: &Fabric,
    w: u32,
    flows: &[u32],
    two_hop: impl Fn(u32) -> Option<TwoHop>,
) -> Option<Vec<u64>> {
    let mut sig = Vec::with_capacity(flows.len() * 4);
    for &f in flows {
        let spec = fabric.workload.flows[f as usize];
        if spec.size_bytes == 0 {
            return None;
        }
        let (_, host_port, down, up) = two_hop(f)?;
        let (a, b) = (server(fabric, spec.src, w)?, server(fabric, spec.dst, w)?);
        let link = fabric.topo.link(fabric.topo.port(w, down).link);
        sig.extend([
            u64::from(a) << 32 | u64::from(b),
            spec.size_bytes,
            u64::from(host_port) << 32 | u64::from(down) << 16 | u64::from(up),
            link.bandwidth_bps ^ link.latency_ps.rotate_left(32),
        ]);
    }
    Some(sig)
}

/// Flow `flow`'s route if its source's first hop is a switch that reaches
/// the destination directly, and the way back crosses the same switch.
fn direct_two_hop(fabric: &Fabric, flow: u32) -> Option<TwoHop> {
    let (topo, routing) = (&fabric.topo, &fabric.routing);
    let spec = fabric.workload.flows[flow as usize];
    let host_port = first_port(fabric, flow, spec.src, spec.dst);
    let w = topo.port(spec.src, host_port).peer;
    if topo.is_host(w) {
        return None;
    }
    let back = first_port(fabric, flow, spec.dst, spec.src);
    if topo.port(spec.dst, back).peer != w {
        return None;
    }
    let down = routing.first_next_hop(w, spec.dst)?;
    let up = routing.first_next_hop(w, spec.src)?;
    (topo.port(w, down).peer == spec.dst && topo.port(w, up).peer == spec.src)
        .then_some((w, host_port, down, up))
}

/// Per flow of `fabric`, whose identity it draws RED with; empty without
/// `--ecn-draw rail` or where no two switches are twins (any fabric whose
/// hosts have one neighbour).
pub(crate) fn build(fabric: &Fabric) -> Arc<[Twin]> {
    let topo = &fabric.topo;
    let flows = fabric.workload.flows.len() as u32;
    let hosts_of_servers = topo.hosts().any(|h| topo.ports(h).len() == 2);
    if !fabric.config.ecn_draw_rails || flows == 0 || !hosts_of_servers {
        return Arc::from([]);
    }
    let mut by_switch: HashMap<u32, Vec<u32>> = HashMap::new();
    for flow in 0..flows {
        if let Some((w, ..)) = direct_two_hop(fabric, flow) {
            by_switch.entry(w).or_default().push(flow);
        }
    }
    let mut switches: Vec<(u32, Vec<u32>)> = by_switch.into_iter().collect();
    switches.sort_unstable();
    let mut classes: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut twins = vec![NO_TWIN; flows as usize];
    let mut any = false;
    for (k, (w, list)) in switches.iter().enumerate() {
        let Some(sig) = signature(fabric, *w, list, |f| direct_two_hop(fabric, f)) else {
            continue;
        };
        let Some(&lowest) = classes.get(&sig) else {
            classes.insert(sig, k);
            continue;
        };
        let (lead_switch, leads) = &switches[lowest];
        for (&f, &lead) in list.iter().zip(leads) {
            twins[f as usize] = Twin {
                lead,
                lead_switch: *lead_switch,
                own: *w,
            };
        }
        any = true;
    }
    if any {
        Arc::from(twins)
    } else {
        Arc::from([])
    }
}

/// The identity data packets of `flow` draw RED with at switch `node`:
/// (the switch, the flow) to hash, its twin's where it has one.
#[inline]
pub(crate) fn draw_identity(twins: &[Twin], node: u32, flow: u32) -> Option<(u32, u32)> {
    let t = twins.get(flow as usize)?;
    (t.own == node).then_some((t.lead_switch, t.lead))
}
