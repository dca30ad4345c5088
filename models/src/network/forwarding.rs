//! Forwarding at switches and NICs: ECMP by 5-tuple hash or per-packet
//! spraying, and dragonfly Valiant and UGAL routing through an
//! intermediate router.

use super::common::{ecmp_pick, entropy_salt, five_tuple_hash, NO_NODE};
use super::config::{DragonflyRouting, EcmpMode};
use super::packet::{Packet, PacketKind, PRIO_DATA};
use super::{Fabric, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use hashbrown::HashMap;
use netsim_engine::{Context, NodeId};
use netsim_topo::DragonflyIndex;

/// One shard's forwarding state: ECMP seeds and UGAL's choices.
#[derive(Debug)]
pub(crate) struct Forwarding {
    /// Per local node, the seed of its ECMP hash.
    pub ecmp_seed: Vec<u64>,
    /// UGAL: the path (intermediate router or `NO_NODE`) each flow took at
    /// its source router `(router, flow)`.
    pub ugal_choice: HashMap<(u32, u32), u32>,
}

impl Forwarding {
    /// The forwarding state of the shard's nodes `nodes`.
    pub(crate) fn new(fabric: &Fabric, nodes: &[NodeId]) -> Forwarding {
        Forwarding {
            ecmp_seed: nodes.iter().map(|n| fabric.ecmp_seed(n.0)).collect(),
            ugal_choice: HashMap::new(),
        }
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
        match pkt.kind {
            PacketKind::InaUp | PacketKind::InaDown => pkt.flow,
            _ => self.fabric.source_port(pkt.flow),
        }
    }

    /// The output port of the current switch for `pkt`, which arrived on
    /// `in_port`. Dragonfly Valiant and UGAL decide at the source router and
    /// steer the packet through an intermediate router (`pkt.via`).
    pub(crate) fn route(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        in_port: u16,
        pkt: &mut Packet,
    ) -> u16 {
        let fabric = self.fabric;
        let node = ctx.node().0;
        // A SACK never takes a Valiant path; its `via` holds its mask.
        let sack = pkt.kind == PacketKind::Sack;
        if pkt.via == node && !sack {
            pkt.via = NO_NODE;
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
