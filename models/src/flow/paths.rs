//! The path a flow takes, hop by hop, with the same choices packet mode
//! makes for its packets: the same per-node ECMP hash of the 5-tuple, the
//! same Valiant intermediate router, and UGAL's decision at the source router
//! from the load it sees there.

use crate::network::config::DragonflyRouting;
use crate::network::{ecmp_pick, five_tuple_hash, Fabric, NO_NODE};
use crate::traffic::FlowSpec;

/// Channels (link directions) are numbered node by node, port by port:
/// channel `base[node] + port` leaves `node` through `port`.
#[derive(Debug)]
pub struct Channels {
    base: Vec<u32>,
}

impl Channels {
    pub fn new(fabric: &Fabric) -> Channels {
        let topo = &fabric.topo;
        let mut base = Vec::with_capacity(topo.node_count() as usize + 1);
        let mut next = 0u32;
        for n in 0..topo.node_count() {
            base.push(next);
            next += topo.ports(n).len() as u32;
        }
        base.push(next);
        Channels { base }
    }

    pub fn count(&self) -> u32 {
        *self.base.last().expect("one entry past the last node")
    }

    #[inline]
    pub fn of(&self, node: u32, port: u16) -> u32 {
        self.base[node as usize] + u32::from(port)
    }
}

/// Writes into `channels` the channels flow `flow` crosses, in order, and into
/// `hops` each one's `(bandwidth_bps, latency_ps)`. `load(channel)` is the
/// number of flows on a channel now, for UGAL's choice. `first_port`, when
/// given and among the source's next hops, is the source's choice instead
/// of its hash (a class member leaves its host as its representative does).
#[allow(clippy::too_many_arguments)]
pub fn route(
    fabric: &Fabric,
    index: &Channels,
    flow: u32,
    spec: &FlowSpec,
    first_port: Option<u16>,
    load: impl Fn(u32) -> usize,
    channels: &mut Vec<u32>,
    hops: &mut Vec<(u64, u64)>,
) {
    let topo = &fabric.topo;
    let routing = &fabric.routing;
    channels.clear();
    hops.clear();
    let (src, dst) = (spec.src, spec.dst);
    let first = routing.next_hops(src, dst);
    assert!(!first.is_empty(), "host {src} has no route to host {dst}");
    let mut port = match first_port.filter(|&p| (0..first.len()).any(|i| first.get(i) == p)) {
        Some(p) => p,
        None => first.get(ecmp_pick(
            fabric.ecmp_seed(src),
            fabric.source_port(flow),
            src,
            dst,
            first.len(),
        )),
    };
    let mut at = src;
    let mut via = NO_NODE;
    loop {
        channels.push(index.of(at, port));
        let p = topo.port(at, port);
        let link = topo.link(p.link);
        hops.push((link.bandwidth_bps, link.latency_ps));
        let from = at;
        at = p.peer;
        if at == dst {
            return;
        }
        assert!(
            hops.len() <= topo.node_count() as usize,
            "routing loop from {src} to {dst}"
        );
        if via == at {
            via = NO_NODE;
        }
        if topo.is_host(from) && fabric.config.dragonfly_routing != DragonflyRouting::Minimal {
            via = intermediate(fabric, index, flow, spec, at, &load);
        }
        let toward = if via == NO_NODE {
            dst
        } else {
            fabric.proxy_host[via as usize]
        };
        let next = routing.switch_next_hops(at, toward);
        assert!(
            !next.is_empty(),
            "switch {at} has no route to host {toward}"
        );
        let source_port = fabric.source_port(flow);
        port = next[ecmp_pick(fabric.ecmp_seed(at), source_port, src, dst, next.len())];
    }
}

/// At the source router `router` of a dragonfly: Valiant's intermediate
/// router, or for UGAL the intermediate only if the least-loaded minimal
/// output carries more than twice the flows of the least-loaded Valiant one
/// (packet mode compares queued bytes; a fluid model has no queues, and the
/// number of flows sharing an output is what slows a new one down).
fn intermediate(
    fabric: &Fabric,
    index: &Channels,
    flow: u32,
    spec: &FlowSpec,
    router: u32,
    load: &impl Fn(u32) -> usize,
) -> u32 {
    let Some(dragonfly) = &fabric.dragonfly else {
        return NO_NODE;
    };
    let (Some(here), Some(there)) = (
        fabric.group(router),
        fabric.group(fabric.topo.port(spec.dst, 0).peer),
    ) else {
        return NO_NODE;
    };
    if here == there {
        return NO_NODE;
    }
    let Some(intermediate) = dragonfly.intermediate_router(
        here,
        there,
        five_tuple_hash(fabric.source_port(flow), spec.src, spec.dst),
    ) else {
        return NO_NODE;
    };
    if fabric.config.dragonfly_routing == DragonflyRouting::Valiant {
        return intermediate;
    }
    let least = |toward: u32| {
        fabric
            .routing
            .switch_next_hops(router, toward)
            .iter()
            .map(|&p| load(index.of(router, p)))
            .min()
            .unwrap_or(0)
    };
    let minimal = least(spec.dst);
    let valiant = least(fabric.proxy_host[intermediate as usize]);
    if minimal > 2 * valiant + 1 {
        intermediate
    } else {
        NO_NODE
    }
}
