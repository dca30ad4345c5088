//! The fabric: the read-only description of a run every shard shares
//! (topology, routing, workload, configuration, seed), and the ideal
//! completion time of a flow alone in it.

use super::common::{serialization, NO_NODE};
use super::config::{EcmpEntropy, NetConfig};
use super::fast_forward::twin_draws::Twin;
use super::faults::FaultPlan;
use crate::traffic::FlowSpec;
use crate::workload::{CollectiveOp, Workload};
use hashbrown::HashMap;
use netsim_engine::{splitmix64, SimTime};
use netsim_topo::{DragonflyIndex, Routing, Topology};
use std::sync::Arc;

/// The read-only description of a run that every shard shares.
#[derive(Debug)]
pub struct Fabric {
    pub topo: Topology,
    pub routing: Routing,
    /// Flows, and for a workload the task DAG over them and the
    /// aggregation trees of offloaded operations.
    pub workload: Workload,
    pub config: NetConfig,
    pub seed: u64,
    /// Faults and the routing tables the fabric converges to around them
    /// (empty: a fault-free run).
    pub faults: FaultPlan,
    /// Dragonflies: routers by group, for Valiant and UGAL.
    pub(crate) dragonfly: Option<DragonflyIndex>,
    /// Per node: a host attached to it (routing toward that host reaches
    /// the node minimally), `NO_NODE` for nodes without hosts.
    pub(crate) proxy_host: Vec<u32>,
    /// Per flow, the source port its 5-tuple hashes with
    /// (`--ecmp-entropy connection`); empty: the flow id (`flow`). Shared
    /// with memo sandboxes, whose workloads hold no collectives.
    pub(crate) source_ports: Arc<[u32]>,
    /// Per flow, whose identity it draws RED with at its switch: twin
    /// rails draw alike (`fast_forward/twin_draws.rs`); empty: none has a
    /// twin. Shared with memo sandboxes.
    pub(crate) twin_draws: Arc<[Twin]>,
    /// SimBricks links of hosts' ports (`external`); empty: none.
    pub external: super::external::ExternalPorts,
    /// With `window_fabric_max`, the window every RoCE queue pair gets.
    pub(crate) widest: Option<WidestPath>,
}

/// The largest bandwidth-delay product and, separately, the largest RTT
/// over every ordered pair of hosts, each on its minimum-latency path
/// (SimAI's `maxBdp` and `maxRtt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WidestPath {
    pub bdp_bytes: u64,
    pub rtt: SimTime,
}

impl Fabric {
    /// A fabric running independent flows (traffic).
    pub fn new(
        topo: Topology,
        routing: Routing,
        flows: Vec<FlowSpec>,
        config: NetConfig,
        seed: u64,
    ) -> Fabric {
        Fabric::with_workload(topo, routing, Workload::from_flows(flows), config, seed)
    }

    /// A fabric running a workload (collectives and compute as a task DAG).
    pub fn with_workload(
        topo: Topology,
        routing: Routing,
        workload: Workload,
        config: NetConfig,
        seed: u64,
    ) -> Fabric {
        let mut fabric = Fabric::assemble(topo, routing, workload, config, seed);
        fabric.twin_draws = super::fast_forward::twin_draws::build(&fabric);
        fabric
    }

    /// A k = 4 fat-tree with `tiers` tiers (2: 4 leaves of 2 hosts and 2
    /// spines; 3: 16 hosts and 20 switches) of 100 Gb/s, 1 us links: the
    /// unit tests' small fabric.
    #[cfg(test)]
    pub(crate) fn k4_fat_tree(
        tiers: u32,
        workload: Workload,
        config: NetConfig,
        seed: u64,
    ) -> Fabric {
        let topo = netsim_topo::build(&netsim_topo::TopoSpec::FatTree(
            netsim_topo::FatTreeParams {
                k: 4,
                tiers,
                ..netsim_topo::FatTreeParams::default()
            },
        ))
        .unwrap();
        let routing = Routing::build(&topo).unwrap();
        Fabric::with_workload(topo, routing, workload, config, seed)
    }

    /// The fabric of `workload` on `self`'s network, sharing `self`'s
    /// connection ports and twin draws (memo's sandboxes: their workloads
    /// keep the run's flow ids but hold no collectives).
    pub(crate) fn sharing(&self, workload: Workload) -> Fabric {
        let mut fabric = Fabric::assemble(
            self.topo.clone(),
            self.routing.clone(),
            workload,
            self.config.clone(),
            self.seed,
        );
        fabric.source_ports = self.source_ports.clone();
        fabric.twin_draws = self.twin_draws.clone();
        fabric.widest = self.widest;
        fabric
    }

    /// The fabric of `workload`, without twin draws.
    fn assemble(
        topo: Topology,
        routing: Routing,
        workload: Workload,
        config: NetConfig,
        seed: u64,
    ) -> Fabric {
        let proxy_host = (0..topo.node_count())
            .map(|n| {
                topo.ports(n)
                    .iter()
                    .map(|p| p.peer)
                    .find(|&peer| topo.is_host(peer))
                    .unwrap_or(NO_NODE)
            })
            .collect();
        let source_ports = match config.ecmp_entropy {
            EcmpEntropy::Flow => Arc::from([]),
            EcmpEntropy::Connection => connection_ports(&workload),
        };
        let mut fabric = Fabric {
            source_ports,
            twin_draws: Arc::from([]),
            dragonfly: DragonflyIndex::new(&topo),
            topo,
            routing,
            workload,
            config,
            seed,
            faults: FaultPlan::default(),
            proxy_host,
            external: Default::default(),
            widest: None,
        };
        if fabric.config.window_fabric_max {
            fabric.widest = Some(widest_path(&fabric).0);
        }
        fabric
    }

    /// The seed of `node`'s ECMP hash: per node, so that switches of one
    /// tier do not all make the same choice (polarisation).
    pub(crate) fn ecmp_seed(&self, node: u32) -> u64 {
        let mut s = self.seed ^ (u64::from(node) << 20) ^ 0xEC3F;
        splitmix64(&mut s)
    }

    /// The UDP source port flow `flow`'s 5-tuple carries (its own id, or
    /// its connection's with `--ecmp-entropy connection`).
    #[inline]
    pub(crate) fn source_port(&self, flow: u32) -> u32 {
        self.source_ports
            .get(flow as usize)
            .copied()
            .unwrap_or(flow)
    }

    /// Dragonfly group of `node`, if it has one.
    #[inline]
    pub(crate) fn group(&self, node: u32) -> Option<u32> {
        self.topo.node(node).coords.group
    }
}

/// Per flow, its connection's source port: a hash of its communicator
/// (job, group size, point-to-point or not; the 5-tuple adds source and
/// destination), with the top bit set so it never equals a flow id (below
/// 2^31), which flows outside collectives keep.
fn connection_ports(workload: &Workload) -> Arc<[u32]> {
    (0..workload.flows.len() as u32)
        .map(|f| {
            let Some(c) = workload.flow_collective(f) else {
                return f;
            };
            let c = &workload.collectives[c as usize];
            let p2p = matches!(c.op, CollectiveOp::AllToAll | CollectiveOp::Send);
            let mut h = u64::from(c.job) << 33 | u64::from(c.group_size) << 1 | u64::from(p2p);
            splitmix64(&mut h) as u32 | 1 << 31
        })
        .collect()
}

/// SimAI's `maxBdp` and `maxRtt`: the maximum over every ordered pair of
/// hosts on its minimum-latency path (as SimAI's all-pairs table), each
/// BDP the path's RTT at its slowest link. Hosts with the same attachment
/// (every port's peer, rate and latency, in port order) have the same
/// distances, so the same routes to and from every node: one host of each
/// class stands for all, and the walks are `classes^2`, not `hosts^2`.
/// Returns the maximum and the number of paths walked.
fn widest_path(fabric: &Fabric) -> (WidestPath, u64) {
    let reps = host_classes(&fabric.topo);
    let mut widest = WidestPath {
        bdp_bytes: 0,
        rtt: SimTime::ZERO,
    };
    let mut walks = 0;
    for a in &reps {
        for b in &reps {
            // Within a class: its two hosts, if it has two.
            let (src, dst) = if a == b { (a[0], a[1]) } else { (a[0], b[0]) };
            let Some(port) = (dst != NO_NODE)
                .then(|| fabric.routing.first_next_hop(src, dst))
                .flatten()
            else {
                continue;
            };
            let spec = FlowSpec {
                src,
                dst,
                size_bytes: u64::from(fabric.config.mtu_bytes),
                start: SimTime::ZERO,
            };
            walks += 1;
            let t = path_timing(fabric, &spec, port);
            let bdp = u128::from(t.rtt.as_ps()) * u128::from(t.bottleneck_bps) / 8_000_000_000_000;
            widest.bdp_bytes = widest.bdp_bytes.max(bdp as u64);
            widest.rtt = widest.rtt.max(t.rtt);
        }
    }
    (widest, walks)
}

/// Paths `--window-scope fabric` may walk at setup: 4,096 host classes.
/// A topology past it is refused (`host_classes`: a rail-optimized file
/// whose every GPU has its own NVSwitch and rail ports is a class a GPU).
pub const MAX_FABRIC_WINDOW_WALKS: u64 = 1 << 24;

/// Hosts grouped by their attachment (every port's peer, rate and latency,
/// in port order), up to two of each class (a pair within one class), in
/// host order: [`widest_path`] walks the classes' pairs.
pub fn host_classes(topo: &Topology) -> Vec<[u32; 2]> {
    let mut classes: HashMap<Vec<(u32, u64, u64)>, [u32; 2]> = HashMap::new();
    for host in (0..topo.node_count()).filter(|&n| topo.is_host(n)) {
        let key = topo
            .ports(host)
            .iter()
            .map(|p| {
                let link = topo.link(p.link);
                (p.peer, link.bandwidth_bps, link.latency_ps)
            })
            .collect();
        let entry = classes.entry(key).or_insert([host, NO_NODE]);
        if entry[1] == NO_NODE && entry[0] != host {
            entry[1] = host;
        }
    }
    let mut reps: Vec<[u32; 2]> = classes.into_values().collect();
    reps.sort_unstable();
    reps
}

/// Ideal completion time of a flow alone in the network, as the sender sees
/// it (last ACK received), and the round-trip time of a full packet and its
/// ACK (what a window must cover to keep the path busy), along a
/// minimum-latency path.
pub fn ideal_fct(fabric: &Fabric, spec: &FlowSpec, first_port: u16) -> (SimTime, SimTime) {
    let timing = path_timing(fabric, spec, first_port);
    (timing.ideal_fct(), timing.rtt)
}

/// The timing of flow `spec` alone on its path from `first_port` (the
/// first next hop at every switch).
pub(crate) fn path_timing(fabric: &Fabric, spec: &FlowSpec, first_port: u16) -> PathTiming {
    let topo = &fabric.topo;
    let mut hops = Vec::new();
    let mut at = spec.src;
    let mut port = first_port;
    loop {
        let p = topo.port(at, port);
        let link = topo.link(p.link);
        hops.push((link.bandwidth_bps, link.latency_ps));
        at = p.peer;
        if at == spec.dst {
            break;
        }
        // The first next hop is known at every switch, also on MPI ranks that
        // hold full routing rows only for their own.
        port = fabric
            .routing
            .first_next_hop(at, spec.dst)
            .unwrap_or_else(|| panic!("node {at} has no route to host {}", spec.dst));
        assert!(hops.len() <= topo.node_count() as usize, "routing loop");
    }
    PathTiming::new(&fabric.config, spec.size_bytes, &hops)
}

/// How long a flow alone on a path takes, in parts: its bytes cross the
/// bottleneck link back to back; every other hop adds one store-and-forward
/// of the last packet; the ACK returns over the same links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PathTiming {
    pub bottleneck_bps: u64,
    /// The flow's wire bytes: payload and one header per packet.
    pub wire_bytes: u64,
    /// From the bottleneck's last bit to the destination's last byte:
    /// latencies and the other hops' store-and-forward.
    pub forward_tail: SimTime,
    /// The last ACK's way back.
    pub ack_return: SimTime,
    /// A full-size packet out and its ACK back, store-and-forward at every hop.
    pub rtt: SimTime,
}

impl PathTiming {
    /// Timing of `size_bytes` over `hops` (bandwidth in b/s, latency in ps).
    pub fn new(config: &NetConfig, size_bytes: u64, hops: &[(u64, u64)]) -> PathTiming {
        let mtu = u64::from(config.mtu_bytes);
        let packets = size_bytes.div_ceil(mtu);
        let wire_bytes = size_bytes + packets * u64::from(config.header_bytes);
        let last_wire = size_bytes - (packets - 1) * mtu + u64::from(config.header_bytes);
        let control = u64::from(config.control_bytes);
        let bottleneck_bps = hops.iter().map(|h| h.0).min().expect("a path has a link");
        let mut timing = PathTiming {
            bottleneck_bps,
            wire_bytes,
            forward_tail: SimTime::ZERO,
            ack_return: SimTime::ZERO,
            rtt: SimTime::ZERO,
        };
        let mut bottleneck_counted = false;
        for &(rate, latency) in hops {
            timing.forward_tail += SimTime(latency);
            if rate == bottleneck_bps && !bottleneck_counted {
                bottleneck_counted = true;
            } else {
                timing.forward_tail += serialization(last_wire, rate);
            }
            let back = SimTime(latency) + serialization(control, rate);
            timing.ack_return += back;
            timing.rtt +=
                SimTime(latency) + serialization(mtu + u64::from(config.header_bytes), rate) + back;
        }
        timing
    }

    /// Completion as the sender sees it, alone on the path.
    pub fn ideal_fct(&self) -> SimTime {
        serialization(self.wire_bytes, self.bottleneck_bps) + self.forward_tail + self.ack_return
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SimAI's `maxBdp`/`maxRtt` on a k = 4 fat-tree of 100 Gb/s, 1 us
    /// links: the longest host pair crosses the core (6 links on 3 tiers,
    /// 4 on 2), each link a full packet and its ACK, out and back.
    #[test]
    fn the_fabric_window_covers_the_longest_path() {
        let config = NetConfig {
            window_fabric_max: true,
            ..NetConfig::default()
        };
        let packet_ps = u64::from(config.mtu_bytes + config.header_bytes) * 8 * 10; // 100 Gb/s: 10 ps a bit
        let ack_ps = u64::from(config.control_bytes) * 8 * 10;
        for (tiers, links) in [(2, 4), (3, 6)] {
            let fabric =
                Fabric::k4_fat_tree(tiers, Workload::from_flows(Vec::new()), config.clone(), 1);
            let rtt_ps = links * (2 * 1_000_000 + packet_ps + ack_ps);
            let widest = fabric.widest.expect("window_fabric_max");
            assert_eq!(widest.rtt, SimTime(rtt_ps), "{tiers} tiers");
            assert_eq!(widest.bdp_bytes, rtt_ps * 100 / 8 / 1000, "{tiers} tiers");
        }
        let path =
            Fabric::k4_fat_tree(3, Workload::from_flows(Vec::new()), NetConfig::default(), 1);
        assert_eq!(path.widest, None);
    }

    /// HPCC's queue term takes the same base RTT as the window: the
    /// fabric's largest with the option, a neighbour's own path without.
    #[test]
    fn hpcc_takes_the_fabric_rtt_with_the_fabric_window() {
        let config = NetConfig {
            window_fabric_max: true,
            ..NetConfig::default()
        };
        let wide = Fabric::k4_fat_tree(3, Workload::from_flows(Vec::new()), config, 1);
        let path =
            Fabric::k4_fat_tree(3, Workload::from_flows(Vec::new()), NetConfig::default(), 1);
        let hosts: Vec<u32> = (0..path.topo.node_count())
            .filter(|&n| path.topo.is_host(n))
            .collect();
        let (a, b) = (hosts[0], hosts[1]);
        let widest = wide.widest.expect("window_fabric_max").rtt;
        assert_eq!(crate::network::cc::flow_base_rtt(&wide, a, b), widest);
        assert!(crate::network::cc::flow_base_rtt(&path, a, b) < widest);
    }

    /// The class-wise maximum is the all-pairs one (every ordered pair
    /// walked), on k = 4 fat-trees, with `classes^2` walks: a k = 4
    /// fat-tree's hosts share their leaf: one class per leaf.
    #[test]
    fn the_widest_path_by_class_is_the_all_pairs_maximum() {
        let config = NetConfig {
            window_fabric_max: true,
            ..NetConfig::default()
        };
        for tiers in [2, 3] {
            let fabric =
                Fabric::k4_fat_tree(tiers, Workload::from_flows(Vec::new()), config.clone(), 1);
            let hosts: Vec<u32> = (0..fabric.topo.node_count())
                .filter(|&n| fabric.topo.is_host(n))
                .collect();
            let mut all = WidestPath {
                bdp_bytes: 0,
                rtt: SimTime::ZERO,
            };
            for &src in &hosts {
                for &dst in hosts.iter().filter(|&&d| d != src) {
                    let port = fabric.routing.first_next_hop(src, dst).expect("a route");
                    let spec = FlowSpec {
                        src,
                        dst,
                        size_bytes: u64::from(config.mtu_bytes),
                        start: SimTime::ZERO,
                    };
                    let t = path_timing(&fabric, &spec, port);
                    let bdp = u128::from(t.rtt.as_ps()) * u128::from(t.bottleneck_bps)
                        / 8_000_000_000_000;
                    all.bdp_bytes = all.bdp_bytes.max(bdp as u64);
                    all.rtt = all.rtt.max(t.rtt);
                }
            }
            let (widest, walks) = widest_path(&fabric);
            assert_eq!(widest, all, "{tiers} tiers");
            let mut leaves: Vec<u32> = hosts
                .iter()
                .map(|&h| fabric.topo.ports(h)[0].peer)
                .collect();
            leaves.sort_unstable();
            leaves.dedup();
            assert!(
                leaves.len() < hosts.len(),
                "{tiers} tiers: leaves of several hosts"
            );
            let leaves = leaves.len() as u64;
            assert_eq!(
                walks,
                leaves * leaves,
                "{tiers} tiers: one walk per pair of classes"
            );
        }
    }
}
