//! Forwarding at switches and NICs: ECMP by 5-tuple hash or per-packet
//! spraying, and dragonfly Valiant and UGAL routing through an
//! intermediate router.
//!
//! Where a switch's choice is a function of the packet and fixed tables
//! alone (hash ECMP, no faults, no dragonfly routing), the node that puts
//! a packet on the wire toward a switch makes that switch's choice for it
//! ([`Network::route_ahead`]), as htsim's packets carry their route: the
//! switch then reads its out-port from the arriving event, and the first
//! touch of that port no longer waits on the routing tables' lookups.

use super::common::{ecmp_pick, entropy_salt, five_tuple_hash, NO_NODE};
use super::config::{DragonflyRouting, EcmpMode};
use super::packet::{Packet, PacketKind, PRIO_DATA};
use super::{Fabric, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use hashbrown::HashMap;
use netsim_engine::{Context, NodeId};
use netsim_topo::{DragonflyIndex, Routing};

/// An `Arrive` whose sender did not choose the switch's out-port for it.
pub(crate) const NO_ROUTE_AHEAD: u8 = u8::MAX;

/// One shard's forwarding state: ECMP seeds and UGAL's choices.
#[derive(Debug)]
pub(crate) struct Forwarding {
    /// Per local node, the seed of its ECMP hash.
    pub ecmp_seed: Vec<u64>,
    /// UGAL: the path (intermediate router or `NO_NODE`) each flow took at
    /// its source router `(router, flow)`.
    pub ugal_choice: HashMap<(u32, u32), u32>,
    /// Every switch's choice is hash ECMP over tables that do not change
    /// (no faults, no dragonfly routing): a sender may make it one hop
    /// ahead. The same on every shard and rank (one fabric).
    pub ahead: bool,
}

impl Forwarding {
    /// The forwarding state of the shard's nodes `nodes`.
    pub(crate) fn new(fabric: &Fabric, nodes: &[NodeId]) -> Forwarding {
        Forwarding {
            ecmp_seed: nodes.iter().map(|n| fabric.ecmp_seed(n.0)).collect(),
            ugal_choice: HashMap::new(),
            ahead: fabric.faults.is_empty()
                && fabric.dragonfly.is_none()
                && fabric.config.ecmp == EcmpMode::Hash,
        }
    }
}

/// The host a packet at switch `node` heads for: its destination, or the
/// host standing for the intermediate router in `via` (Valiant), unless
/// that router is `node` itself (where `route` clears it). A SACK's `via`
/// holds its mask.
#[inline]
fn toward(fabric: &Fabric, node: u32, pkt: &Packet) -> u32 {
    if pkt.via == NO_NODE || pkt.via == node || pkt.kind == PacketKind::Sack {
        pkt.dst
    } else {
        fabric.proxy_host[pkt.via as usize]
    }
}

/// Hash ECMP's next hop at switch `node` (ECMP seed `seed`) for `pkt`
/// heading for host `toward` in `tables`, before any check that the port
/// lives; `None` without a route: what a sender picks for a switch one hop
/// ahead, and (checked in debug builds) what the switch would pick.
#[inline]
fn hash_pick(
    fabric: &Fabric,
    tables: &Routing,
    node: u32,
    seed: u64,
    pkt: &Packet,
    toward: u32,
) -> Option<u16> {
    let hops = tables.switch_next_hops(node, toward);
    let pick = match hops.len() {
        0 => return None,
        1 => 0,
        n => ecmp_pick(
            seed ^ entropy_salt(pkt.entropy),
            source_port(fabric, pkt),
            pkt.src,
            pkt.dst,
            n,
        ),
    };
    Some(hops[pick])
}

/// The UDP source port `pkt`'s 5-tuple carries: its flow's (or
/// connection's, `--ecmp-entropy connection`); an aggregation packet's
/// `flow` is its operation, which it keeps.
#[inline]
fn source_port(fabric: &Fabric, pkt: &Packet) -> u32 {
    match pkt.kind {
        PacketKind::InaUp | PacketKind::InaDown => pkt.flow,
        _ => fabric.source_port(pkt.flow),
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// ECMP choice of `node` among `n` next hops for `pkt`.
    #[inline]
    pub(crate) fn ecmp_choice(
        &self,
        ctx: &mut Context<'_, NetEvent>,
        pkt: &Packet,
        n: usize,
    ) -> usize {
        if n == 1 {
            return 0;
        }
        match self.fabric.config.ecmp {
            EcmpMode::Hash => ecmp_pick(
                self.forwarding.ecmp_seed[ctx.local_index()] ^ entropy_salt(pkt.entropy),
                self.source_port(pkt),
                pkt.src,
                pkt.dst,
                n,
            ),
            EcmpMode::Spray => ctx.rng().below(n as u64) as usize,
        }
    }

    /// The UDP source port `pkt`'s 5-tuple carries: its flow's (or
    /// connection's, `--ecmp-entropy connection`); an aggregation packet's
    /// `flow` is its operation, which it keeps.
    #[inline]
    pub(crate) fn source_port(&self, pkt: &Packet) -> u32 {
        source_port(self.fabric, pkt)
    }

    /// The out-port that switch `peer` will choose for `pkt`, which this
    /// node is putting on the wire toward it, or [`NO_ROUTE_AHEAD`]: where
    /// the choice depends on more than the packet and fixed tables (faults,
    /// spraying, dragonfly routing), `peer` is a host or outside these
    /// tables' scope (another MPI rank's switch), the packet is aggregated
    /// rather than forwarded, or the port's number does not fit.
    #[inline]
    pub(crate) fn route_ahead(&self, peer: u32, pkt: &Packet) -> u8 {
        let fabric = self.fabric;
        if !self.forwarding.ahead
            || peer < fabric.topo.host_count()
            || matches!(pkt.kind, PacketKind::InaUp | PacketKind::InaDown)
            || !fabric.routing.has_row(peer)
        {
            return NO_ROUTE_AHEAD;
        }
        let seed = fabric.ecmp_seed(peer);
        match hash_pick(
            fabric,
            &fabric.routing,
            peer,
            seed,
            pkt,
            toward(fabric, peer, pkt),
        ) {
            Some(port) if port < u16::from(NO_ROUTE_AHEAD) => port as u8,
            _ => NO_ROUTE_AHEAD,
        }
    }

    /// The output port of the current switch for `pkt`, which arrived on
    /// `in_port` with the choice its sender made for it, `ahead` (or
    /// [`NO_ROUTE_AHEAD`]). Dragonfly Valiant and UGAL decide at the
    /// source router and steer the packet through an intermediate router
    /// (`pkt.via`).
    pub(crate) fn route(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        in_port: u16,
        pkt: &mut Packet,
        ahead: u8,
    ) -> u16 {
        let fabric = self.fabric;
        let node = ctx.node().0;
        // A SACK never takes a Valiant path; its `via` holds its mask.
        let sack = pkt.kind == PacketKind::Sack;
        if pkt.via == node && !sack {
            pkt.via = NO_NODE;
        }
        if ahead != NO_ROUTE_AHEAD {
            // Made by the sender only where it is this switch's choice
            // (`route_ahead`); a debug build checks it is.
            debug_assert_eq!(
                Some(u16::from(ahead)),
                hash_pick(
                    fabric,
                    self.tables_at(ctx.now()),
                    node,
                    self.forwarding.ecmp_seed[ctx.local_index()],
                    pkt,
                    toward(fabric, node, pkt)
                ),
                "switch {node}: the out-port chosen ahead differs"
            );
            return u16::from(ahead);
        }
        if let Some(index) = &fabric.dragonfly {
            let adaptive = fabric.config.dragonfly_routing != DragonflyRouting::Minimal;
            if adaptive
                && pkt.kind == PacketKind::Data
                && fabric.topo.is_host(fabric.topo.port(node, in_port).peer)
            {
                self.choose_intermediate(ctx, index, pkt);
            }
        }
        let toward = if pkt.via == NO_NODE || sack {
            pkt.dst
        } else {
            fabric.proxy_host[pkt.via as usize]
        };
        let hops = self.tables_at(ctx.now()).switch_next_hops(node, toward);
        assert!(
            !hops.is_empty(),
            "switch {node} has no route to host {toward}"
        );
        let pick = hops[self.ecmp_choice(ctx, pkt, hops.len())];
        if !self.port_is_down(self.port_index(ctx.local_index(), pick)) {
            return pick;
        }
        self.reroute_around(ctx, pkt, toward, pick)
    }

    /// Valiant: every packet of a flow crosses the same random intermediate
    /// router of a third group (per flow, so a queue pair is not reordered).
    /// UGAL (local): when a flow's first packet reaches its source router,
    /// take that Valiant path if the minimal output queue is more than twice
    /// as long as the Valiant one (the usual estimate of the Valiant path's
    /// extra hops), and keep the choice for the whole flow: deciding per
    /// packet reorders a RoCE queue pair into go-back-N storms.
    pub(crate) fn choose_intermediate(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        index: &DragonflyIndex,
        pkt: &mut Packet,
    ) {
        let fabric = self.fabric;
        let node = ctx.node().0;
        let (Some(here), Some(there)) = (
            fabric.group(node),
            fabric.group(fabric.topo.port(pkt.dst, 0).peer),
        ) else {
            return;
        };
        if here == there {
            return;
        }
        let Some(intermediate) = index.intermediate_router(
            here,
            there,
            five_tuple_hash(self.source_port(pkt), pkt.src, pkt.dst),
        ) else {
            return;
        };
        if fabric.config.dragonfly_routing == DragonflyRouting::Ugal {
            let key = (node, pkt.flow);
            if let Some(&via) = self.forwarding.ugal_choice.get(&key) {
                pkt.via = via;
                return;
            }
            let local = ctx.local_index();
            let minimal = fabric.routing.switch_next_hops(node, pkt.dst);
            let valiant = fabric
                .routing
                .switch_next_hops(node, fabric.proxy_host[intermediate as usize]);
            let queue = |ports: &[u16], this: &Self| {
                ports
                    .iter()
                    .map(|&p| this.ports[this.port_index(local, p)].egress.queued_bytes[PRIO_DATA])
                    .min()
                    .unwrap_or(0)
            };
            let (q_minimal, q_valiant) = (queue(minimal, self), queue(valiant, self));
            let via = if q_minimal > 2 * q_valiant + u64::from(fabric.config.mtu_bytes) {
                intermediate
            } else {
                NO_NODE
            };
            self.forwarding.ugal_choice.insert(key, via);
            pkt.via = via;
            return;
        }
        pkt.via = intermediate;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::config::NetConfig;
    use crate::telemetry::MemorySink;
    use crate::workload::Builder;
    use netsim_engine::SimTime;
    use std::collections::HashSet;

    /// A three-tier k = 4 fat-tree (16 hosts, 20 switches) without traffic.
    fn fat_tree(config: NetConfig) -> Fabric {
        Fabric::k4_fat_tree(3, Builder::new(SimTime::ZERO).finish(), config, 7)
    }

    fn data(flow: u32, src: u32, dst: u32, entropy: u16) -> Packet {
        Packet {
            flow,
            src,
            dst,
            psn: flow ^ 5,
            wire_bytes: 4158,
            in_port: 0,
            kind: PacketKind::Data,
            ce: 0,
            last: false,
            sack_offset: 0,
            via: NO_NODE,
            util: 0,
            entropy,
        }
    }

    /// What a sender picks for a switch one hop ahead is that switch's own
    /// hash ECMP choice, by its own seed table, for every switch and host
    /// pair, flow and entropy; the choice spreads over the next hops (it is
    /// not one port); hosts, sprayed packets and aggregation packets get
    /// none.
    #[test]
    fn route_ahead_is_the_switch_own_choice() {
        let fabric = fat_tree(NetConfig::default());
        let nodes: Vec<NodeId> = (0..fabric.topo.node_count()).map(NodeId).collect();
        let net = Network::new(&fabric, &nodes, MemorySink::default());
        let hosts = fabric.topo.host_count();
        let mut chosen = HashSet::new();
        for switch in hosts..fabric.topo.node_count() {
            for (src, dst) in [(0, 15), (3, 4), (9, 2), (12, 13)] {
                for (flow, entropy) in [(0, 0), (1, 0), (2, 0), (7, 3), (7, 900)] {
                    let pkt = data(flow, src, dst, entropy);
                    let hops = fabric.routing.switch_next_hops(switch, dst);
                    // Node ids are local indices here: one shard of all.
                    let seed = net.forwarding.ecmp_seed[switch as usize];
                    let own = match hops.len() {
                        1 => 0,
                        n => ecmp_pick(seed ^ entropy_salt(entropy), flow, src, dst, n),
                    };
                    assert_eq!(net.route_ahead(switch, &pkt), hops[own] as u8);
                    chosen.insert((switch, dst, hops[own]));
                }
            }
        }
        let routes: HashSet<(u32, u32)> = chosen.iter().map(|&(s, d, _)| (s, d)).collect();
        assert!(chosen.len() > routes.len(), "ECMP never spread");
        let pkt = data(1, 0, 15, 0);
        assert_eq!(net.route_ahead(3, &pkt), NO_ROUTE_AHEAD);
        let ina = Packet {
            kind: PacketKind::InaUp,
            ..pkt
        };
        assert_eq!(net.route_ahead(hosts, &ina), NO_ROUTE_AHEAD);
        let spray = fat_tree(NetConfig {
            ecmp: EcmpMode::Spray,
            ..NetConfig::default()
        });
        let net = Network::new(&spray, &nodes, MemorySink::default());
        assert_eq!(net.route_ahead(hosts, &pkt), NO_ROUTE_AHEAD);
    }
}
