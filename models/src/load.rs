//! Work estimate per node: the packets each node will send, receive and forward in a run,
//! from the workload's flows and the routing tables, to balance shards by (DESIGN §5).
//!
//! Every flow is known before the run starts (traffic, and every flow of a collective's
//! DAG). A flow of `b` bytes is `ceil(b / mtu)` data packets from its source to its
//! destination and `ceil(packets / ack_interval)` ACKs back. Each direction is followed over
//! the ECMP next hops of [`Routing`], splitting its packets evenly at every fan-out (what
//! per-flow hashing does on average over many flows and per-packet spraying does exactly),
//! so that every node on a path is charged its share:
//!
//! - the sender, 1 per packet (the port serialising it),
//! - every switch on the way, 2 per packet (its arrival and its departure),
//! - the receiver, 1 per packet (its arrival).
//!
//! These are the per-packet events of the network model; per-flow timers, PFC frames and
//! CNPs are left out, as are non-minimal dragonfly paths (Valiant, UGAL), which the
//! estimate routes minimally. A flow into an in-network aggregation tree (its destination
//! is the source's leaf switch) is charged to the source and that switch, up and down.

use crate::network::config::NetConfig;
use crate::traffic::FlowSpec;
use crate::workload::on_demand::Source;
use crate::workload::{Workload, NONE};
use hashbrown::HashMap;
use netsim_topo::{NodeIndex, Routing, Topology};

/// Work charged per packet to the node that sends it, forwards it, or receives it.
const SEND: f64 = 1.0;
const FORWARD: f64 = 2.0;
const RECEIVE: f64 = 1.0;

/// The estimated work of every node (indexed by node id) for running `workload` over
/// `topo` with `config`, in packet events, rounded up. `routing` must hold full rows for
/// every switch (from [`Routing::build`], or [`Routing::build_for`] with every node owned).
///
/// Deterministic: host pairs are walked in order and the sums do not depend on any shard
/// count.
pub fn node_work(
    topo: &Topology,
    routing: &Routing,
    workload: &Workload,
    config: &NetConfig,
) -> Vec<u64> {
    let mut work = vec![0f64; topo.node_count() as usize];
    let mtu = u64::from(config.mtu_bytes.max(1));
    let ack_interval = u64::from(config.ack_interval.max(1));
    // Packets per (from, to) host pair, data and ACKs alike: the walk of
    // a pair is linear in its packets, so each pair is walked once with
    // its total (a 9,216-GPU workload has 138 M flows over a few hundred
    // thousand pairs, issue 32).
    let mut pairs: HashMap<(NodeIndex, NodeIndex), u64> = HashMap::new();
    let mut add = |i: u32, flow: &FlowSpec| {
        let packets = flow.size_bytes.div_ceil(mtu).max(1);
        let into_tree = workload.flow_ina_op(i) != NONE;
        if into_tree || !topo.is_host(flow.dst) {
            // Up into the tree and the result back down, over the host's own link.
            let p = 2.0 * packets as f64;
            work[flow.src as usize] += (SEND + RECEIVE) * p;
            work[flow.dst as usize] += (SEND + RECEIVE) * p;
            return;
        }
        if flow.src == flow.dst {
            return;
        }
        let acks = packets.div_ceil(ack_interval);
        *pairs.entry((flow.src, flow.dst)).or_default() += packets;
        *pairs.entry((flow.dst, flow.src)).or_default() += acks;
    };
    match &workload.lazy {
        // Expanded one collective at a time: a collective's flows are
        // never all held at once.
        Some(lazy) => lazy.each_flow(
            Source {
                workload,
                topo,
                config,
            },
            add,
        ),
        None => {
            for (i, flow) in workload.flows.iter().enumerate() {
                add(i as u32, flow);
            }
        }
    }
    // In pair order, so that the sums do not depend on the map's order.
    let mut pairs: Vec<_> = pairs.into_iter().collect();
    pairs.sort_unstable();
    let mut walk = Walk::default();
    for ((src, dst), packets) in pairs {
        walk.spread(topo, routing, src, dst, packets as f64, &mut work);
    }
    work.into_iter().map(|w| w.ceil() as u64).collect()
}

/// Reusable frontiers of one walk: (node, packets) pairs.
#[derive(Default)]
struct Walk {
    frontier: Vec<(NodeIndex, f64)>,
    next: Vec<(NodeIndex, f64)>,
}

impl Walk {
    /// Follows `packets` from host `src` to host `dst`, hop by hop over every ECMP next hop,
    /// and adds each node's share of the work to `work`.
    fn spread(
        &mut self,
        topo: &Topology,
        routing: &Routing,
        src: NodeIndex,
        dst: NodeIndex,
        packets: f64,
        work: &mut [f64],
    ) {
        self.frontier.clear();
        self.frontier.push((src, packets));
        work[src as usize] += SEND * packets;
        // Minimum-latency paths never revisit a node; the bound only guards a routing bug.
        for _ in 0..topo.node_count() {
            if self.frontier.is_empty() {
                return;
            }
            self.next.clear();
            for &(node, p) in &self.frontier {
                let hops = routing.next_hops(node, dst);
                if hops.is_empty() {
                    // Unreachable: the run reports it; the estimate drops the packets.
                    continue;
                }
                let share = p / hops.len() as f64;
                for i in 0..hops.len() {
                    let peer = topo.port(node, hops.get(i)).peer;
                    if peer == dst {
                        work[dst as usize] += RECEIVE * share;
                    } else {
                        work[peer as usize] += FORWARD * share;
                        self.next.push((peer, share));
                    }
                }
            }
            // Paths that meet again travel on as one.
            self.next.sort_by_key(|&(n, _)| n);
            self.frontier.clear();
            for &(n, p) in &self.next {
                match self.frontier.last_mut() {
                    Some(last) if last.0 == n => last.1 += p,
                    _ => self.frontier.push((n, p)),
                }
            }
        }
    }
}
