//! The ports of a shard, built from the topology: each link's rate and
//! latency, ECN thresholds, bit-error streams and the switches' PFC headroom.

use super::Port;
use crate::network::faults::LinkHealth;
use crate::network::switch::{ecn_class, EcnMarking, SharedBuffer};
use crate::network::Fabric;
use netsim_engine::{NodeId, SimTime};

/// A shard's ports and, by the same index, their side arrays.
pub(crate) struct ShardPorts {
    /// Where each node's ports begin (one more entry than nodes).
    pub port_base: Vec<u32>,
    pub ports: Vec<Port>,
    /// Per node, its shared buffer with its PFC headroom taken off.
    pub buffers: Vec<SharedBuffer>,
    /// The distinct ECN markings of the ports (`Port::ecn_class`).
    pub ecn: Vec<EcnMarking>,
    /// Per port, its link's health besides `down_causes` (bit errors).
    pub health: Vec<LinkHealth>,
    /// Some port's link loses packets to bit errors.
    pub lossy: bool,
}

/// The ports of the shard's nodes `nodes` (increasing ids).
pub(crate) fn shard_ports(fabric: &Fabric, nodes: &[NodeId]) -> ShardPorts {
    let topo = &fabric.topo;
    let config = &fabric.config;
    let mut port_base = Vec::with_capacity(nodes.len() + 1);
    // Sized up front: growing a vector of ports reallocates and zeroes
    // pages again at each doubling.
    let port_count = nodes.iter().map(|n| topo.ports(n.0).len()).sum();
    let mut ports = Vec::with_capacity(port_count);
    let mut ecns = Vec::new();
    let mut healths = Vec::with_capacity(port_count);
    let mut buffers = Vec::with_capacity(nodes.len());
    for &node in nodes {
        port_base.push(ports.len() as u32);
        let mut headroom = 0;
        for p in topo.ports(node.0) {
            let link = topo.link(p.link);
            let ecn = config.ecn_for(link.bandwidth_bps);
            // Fixed headroom, rate x latency headroom (SimAI: 3 x) and
            // the ingress reserve, all off the shared pool.
            let in_flight_bytes =
                u128::from(link.bandwidth_bps) * u128::from(link.latency_ps) / 8_000_000_000_000;
            let scaled = in_flight_bytes * u128::from(config.pfc_headroom_latency_factor);
            headroom = [
                config.pfc_headroom_bytes,
                config.pfc_reserve_bytes,
                u64::try_from(scaled).unwrap_or(u64::MAX),
            ]
            .into_iter()
            .fold(headroom, u64::saturating_add);
            let mut port = Port::new(
                NodeId(p.peer),
                p.peer_port,
                link.bandwidth_bps,
                SimTime(link.latency_ps),
            );
            port.ecn_class = ecn_class(
                &mut ecns,
                EcnMarking {
                    kmin_bytes: ecn.kmin_bytes,
                    kmax_bytes: ecn.kmax_bytes,
                    pmax: ecn.pmax,
                },
            );
            ports.push(port);
            let mut health = LinkHealth::default();
            // Bit errors on every link (the flag) and on this one (a SimAI
            // file's error_rate column), independent of each other.
            let loss = 1.0 - (1.0 - config.link_error_rate) * (1.0 - topo.link_error_rate(p.link));
            if loss > 0.0 {
                // Each link direction draws from its own stream.
                let direction = u64::from(link.a != node.0);
                let mut seed =
                    fabric.seed ^ (u64::from(p.link) << 1 | direction) ^ 0x1055_E7E5 << 32;
                health.error_rng = netsim_engine::splitmix64(&mut seed);
                health.error_threshold = (loss * 18_446_744_073_709_551_616.0) as u64;
            }
            healths.push(health);
        }
        buffers.push(SharedBuffer {
            used_bytes: 0,
            headroom_bytes: headroom,
        });
    }
    port_base.push(ports.len() as u32);
    let lossy = healths.iter().any(|h| h.error_threshold != 0);
    ShardPorts {
        port_base,
        ports,
        buffers,
        ecn: ecns,
        health: healths,
        lossy,
    }
}
