//! What a check of per-domain jumps agrees on (`--ff-scope domain`,
//! docs/design/fast-forward.md), at a cost of the flows sending and the
//! nodes, not of the workload: the flows sending with their own longest
//! jumps and the flows started since the last agreement, gathered by
//! source host (one `all_max` of counts per host gives each host's offset,
//! a second the flows), and, only at a check with a candidate domain, the
//! pending starts of the flows not started on its resources, found through
//! a per-resource index of the workload's flows that sheds started ones.

use super::memo::resources::Resource;
use crate::network::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::{Aborted, AllMax, SimTime};

/// What every shard agreed at a check of per-domain jumps.
#[derive(Debug, Default)]
pub(super) struct Agreed {
    /// Whether a memo replay is in flight (no domain jumps then).
    pub(super) replaying: bool,
    /// The flows sending, by id, with their own longest jump (ps; 0: not
    /// steady) over the long window, and over the short one where the
    /// flow is quiet (0: not quiet, or not steady over it).
    pub(super) active: Vec<(u32, u64, u64)>,
    /// Per node: whether a port of it is unsteady over the long window
    /// (bit 0), over the short one (bit 1) ...
    pub(super) unsteady: Vec<u64>,
    /// ... and `k + 1` where check `k` is the last at which a flow through
    /// it ended or a packet was dropped at it (0: never).
    pub(super) disturbed: Vec<u64>,
}

/// A shard's index of the workload's flows by resource, for the flows
/// waiting on a candidate domain's resources.
#[derive(Debug, Default)]
pub(super) struct FlowIndex {
    /// Per resource, the flows using it not yet known to have started;
    /// started ones are shed whenever a list is read.
    pub(super) waiting: hashbrown::HashMap<Resource, Vec<u32>>,
    /// Per workload flow, agreed: it was started on some shard.
    pub(super) started: Vec<bool>,
    /// Whether `waiting` holds every flow (built at the first candidate).
    built: bool,
}

impl FlowIndex {
    /// An index of `flows` flows, none started, built when first read.
    pub(super) fn new(flows: usize) -> FlowIndex {
        FlowIndex {
            started: vec![false; flows],
            ..FlowIndex::default()
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Agrees check `index`'s (slot `slot`) flows sending, flows started
    /// since the last agreement and per-node steadiness (see [`Agreed`]),
    /// noting the started flows in the index.
    pub(super) fn ff_domain_agree(
        &mut self,
        index: u64,
        slot: usize,
        all_max: AllMax<'_>,
    ) -> Result<Agreed, Aborted> {
        let hosts = self.fabric.topo.host_count() as usize;
        let nodes = self.fabric.topo.node_count() as usize;
        let local = self.ff_domain_local(index, slot);
        let (active, opened) = (&local.active, &local.opened);
        let src = |f: u32| self.fabric.workload.flows[f as usize].src as usize;
        // Counts per host: the sending flows', then the started flows'.
        let mut counts = vec![0u64; 1 + 2 * hosts + 2 * nodes];
        counts[0] = u64::from(local.replaying);
        for &(f, _, _) in active {
            counts[1 + src(f)] += 1;
        }
        for &f in opened {
            counts[1 + hosts + src(f)] += 1;
        }
        counts[1 + 2 * hosts..].copy_from_slice(&local.node_values);
        all_max(&mut counts)?;
        // Each host's offset: sending flows three values each, then started
        // flows one each, in host order.
        let mut offset = vec![0usize; 2 * hosts];
        let mut at = 0usize;
        for h in 0..2 * hosts {
            offset[h] = at;
            at += counts[1 + h] as usize * if h < hosts { 3 } else { 1 };
        }
        let mut flows = vec![0u64; at];
        for &(f, long, short) in active {
            let k = &mut offset[src(f)];
            flows[*k..*k + 3].copy_from_slice(&[u64::from(f), long, short]);
            *k += 3;
        }
        for &f in opened {
            let k = &mut offset[hosts + src(f)];
            flows[*k] = u64::from(f);
            *k += 1;
        }
        if !flows.is_empty() {
            all_max(&mut flows)?;
        }
        let sending = 3 * counts[1..1 + hosts].iter().sum::<u64>() as usize;
        let mut agreed = Agreed {
            replaying: counts[0] != 0,
            active: flows[..sending]
                .chunks_exact(3)
                .map(|p| (p[0] as u32, p[1], p[2]))
                .collect(),
            unsteady: counts[1 + 2 * hosts..1 + 2 * hosts + nodes].to_vec(),
            disturbed: counts[1 + 2 * hosts + nodes..].to_vec(),
        };
        agreed.active.sort_unstable();
        let d = self.ff.domains.as_mut().expect("domain scope");
        for &f in &flows[sending..] {
            d.index.started[f as usize] = true;
        }
        Ok(agreed)
    }

    /// This shard's flows not started that use resources of `candidates`
    /// (a resource and its domain's root): `(root, flow)`, sorted, once
    /// each. The lists read shed the flows started since.
    pub(super) fn ff_not_started_on(&mut self, candidates: &[(Resource, u32)]) -> Vec<(u32, u32)> {
        let d = self.ff.domains.as_ref().expect("domain scope");
        if !d.index.built {
            let flows = self.fabric.workload.flows.len() as u32;
            for f in 0..flows {
                let (from, len) = self.ff_flow_path(f);
                let d = self.ff.domains.as_mut().expect("on");
                for k in from..from + len {
                    let r = d.resources[k];
                    d.index.waiting.entry(r).or_default().push(f);
                }
            }
            self.ff.domains.as_mut().expect("on").index.built = true;
        }
        let index = &mut self.ff.domains.as_mut().expect("on").index;
        let mut out = Vec::new();
        for &(r, root) in candidates {
            let Some(list) = index.waiting.get_mut(&r) else {
                continue;
            };
            list.retain(|&f| !index.started[f as usize]);
            out.extend(list.iter().map(|&f| (root, f)));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Agrees, per flow of `flows` (ids, sorted), its pending start (ps + 1;
    /// 0: none), noting this shard's pending flow starts and compute ends
    /// for the DAG view.
    pub(super) fn ff_agree_starts(
        &mut self,
        flows: &[u32],
        pending: &mut dyn Iterator<Item = (SimTime, NetEvent)>,
        all_max: AllMax<'_>,
    ) -> Result<Vec<u64>, Aborted> {
        let d = self.ff.domains.as_mut().expect("domain scope");
        d.wait.clear_pending();
        let mut starts = vec![0u64; flows.len()];
        for (at, event) in pending {
            d.wait.pending(at, &event);
            if let NetEvent::FlowStart { flow } = event {
                if let Ok(k) = flows.binary_search(&flow) {
                    starts[k] = at.as_ps().saturating_add(1);
                }
            }
        }
        all_max(&mut starts)?;
        Ok(starts)
    }
}
