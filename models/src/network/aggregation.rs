//! In-network aggregation in the switches, and the member hosts' side of it.
//!
//! Members stream an operation's chunks up their tree (`InaUp`), at most
//! `slots` outstanding each. A switch holds one slot per outstanding chunk
//! (`chunk % slots`), counts the copies from its children, and once all
//! have arrived sends one partial aggregate up after its processing
//! latency; the root instead multicasts the result down (`InaDown`), and
//! every switch on the way frees the slot and replicates the result to its
//! children. A member sends chunk `j + slots` when result `j` arrives, so a
//! slot is always free when a chunk reaches a switch. Aggregation state is
//! switch SRAM, not packet buffer: consumed copies leave the buffer; the
//! partial aggregate and the result copies queue like any data packet
//! (PFC, ECN) on their egress ports.

use super::common::serialization;
use super::packet::{Packet, PacketKind};
use super::transport::SenderReliability;
use super::{Fabric, NetEvent, Network};
use crate::telemetry::{SwitchOffloadRecord, TelemetrySink};
use crate::workload::{offload, InaKind, InaOp, InaPattern};
use hashbrown::HashMap;
use netsim_engine::{Context, NodeId, SimTime};
use netsim_topo::Topology;

/// One switch's state for one operation.
#[derive(Debug)]
pub(super) struct Aggregator {
    /// Index of this switch in the operation's tree.
    tree_index: u32,
    /// Per slot: copies of the chunk received so far, and which chunk.
    copies: Vec<u16>,
    chunk: Vec<u32>,
    /// When the switch's engine is done with the chunks it has taken
    /// (operations with an [`InaOp::engine_bps`]).
    engine_free: SimTime,
    /// At the root, reduced chunks held back, counted by release group
    /// parity ([`InaOp::release_chunks`]): a group's count is reset when
    /// its last chunk is reduced. Exact while no chunk of group `g + 2` is
    /// reduced before group `g` completes; chunks are reduced in chunk
    /// order when each member's copies arrive in order (the NVSwitch's
    /// lossless links), which MockNccl's NVLS, the only user, relies on.
    held: [u32; 2],
    /// When the last held chunk released so far goes down.
    released_until: SimTime,
}

impl Aggregator {
    pub(super) fn new(tree_index: u32, slots: u32) -> Aggregator {
        Aggregator {
            tree_index,
            copies: vec![0; slots as usize],
            chunk: vec![0; slots as usize],
            engine_free: SimTime::ZERO,
            held: [0; 2],
            released_until: SimTime::ZERO,
        }
    }

    /// One more copy of chunk `chunk` of `op` (`(op id, switch)` for the
    /// message): whether every child's copy is now in.
    fn take_copy(&mut self, op: &InaOp, chunk: u32, (op_id, node): (u32, u32)) -> bool {
        let children = op.tree[self.tree_index as usize].child_ports.len() as u16;
        let slot = (chunk % op.slots) as usize;
        if self.copies[slot] == 0 {
            self.chunk[slot] = chunk;
        }
        assert_eq!(
            self.chunk[slot], chunk,
            "switch {node}: chunk {chunk} of operation {op_id} found its slot busy (members keep at most `slots` chunks outstanding)"
        );
        self.copies[slot] += 1;
        self.copies[slot] == children
    }
}

/// Wire time of chunk `chunk` of `op` (its own payload and a header) at
/// `bps`: how long a released chunk holds the way down.
fn down_time(op: &InaOp, chunk: u32, bps: u64, fabric: &Fabric) -> SimTime {
    let wire = op.chunk_payload_bytes(chunk) + u64::from(fabric.config.header_bytes);
    serialization(wire, bps)
}

/// Completion time of a member's stream on an idle tree with enough slots:
/// its chunks back to back at the slowest link of its path to the root,
/// then a full chunk's [`chunk_tail`]. Headers of `header_bytes` per chunk.
pub(crate) fn ideal_stream(
    topo: &Topology,
    op: &InaOp,
    host: u32,
    port: u16,
    header_bytes: u64,
) -> SimTime {
    let chunk_wire = u64::from(op.chunk_bytes) + header_bytes;
    let (tail, bottleneck_bps) = chunk_tail(topo, op, host, port, chunk_wire);
    serialization(op.loaded_wire_bytes(header_bytes), bottleneck_bps) + tail
}

/// What a chunk of `chunk_wire` bytes from `host` (through `port`) pays
/// after its last bit left the slowest link of its way up operation `op`'s
/// tree: the store-and-forward on every other link up and on every link
/// down, each link's latency both ways, every switch's processing on the
/// way up. Also returns that slowest link's rate.
pub(crate) fn chunk_tail(
    topo: &Topology,
    op: &InaOp,
    host: u32,
    port: u16,
    chunk_wire: u64,
) -> (SimTime, u64) {
    let mut links = vec![topo.link(topo.port(host, port).link)];
    let mut at = topo.port(host, port).peer;
    while let Some(parent) = op.tree_node(at).and_then(|t| t.parent_port) {
        let p = topo.port(at, parent);
        links.push(topo.link(p.link));
        at = p.peer;
    }
    let bottleneck_bps = links
        .iter()
        .map(|l| l.bandwidth_bps)
        .min()
        .expect("a path has a link")
        .min(op.engine_bps.unwrap_or(u64::MAX));
    // One switch per link up: the leaf, then each parent.
    let mut t = op.processing.saturating_mul(links.len() as u64);
    let mut bottleneck_counted = false;
    for l in &links {
        // Up and down.
        t += SimTime(l.latency_ps.saturating_mul(2)) + serialization(chunk_wire, l.bandwidth_bps);
        if l.bandwidth_bps == bottleneck_bps && !bottleneck_counted {
            bottleneck_counted = true;
        } else {
            t += serialization(chunk_wire, l.bandwidth_bps);
        }
    }
    (t, bottleneck_bps)
}

/// One shard's in-network aggregation: its hosts' aggregation streams,
/// its switches' aggregators and their counters.
#[derive(Debug)]
pub(crate) struct Aggregation {
    /// Local sender of `(op, host)`, while its stream runs.
    pub sender_of: HashMap<(u32, u32), u32>,
    /// The state of `(op, switch)` for local switches.
    pub aggregators: HashMap<(u32, u32), Aggregator>,
    /// Chunks `(op, host)` has received of an [`InaPattern::AllGather`]
    /// (they may arrive before its own stream starts).
    pub gathered: HashMap<(u32, u32), u32>,
    /// Per local node, in-network computing counters (switches).
    pub offload: Vec<SwitchOffloadRecord>,
}

impl Aggregation {
    /// The aggregation state of the shard's nodes `nodes` (increasing ids);
    /// no stream has started.
    pub(crate) fn new(fabric: &Fabric, nodes: &[NodeId]) -> Aggregation {
        let workload = &fabric.workload;
        let sender_of = HashMap::new();
        let mut aggregators = HashMap::new();
        for (op_id, op) in workload.ina_ops.iter().enumerate() {
            for (i, t) in op.tree.iter().enumerate() {
                if nodes.binary_search(&NodeId(t.node)).is_ok() {
                    aggregators.insert((op_id as u32, t.node), Aggregator::new(i as u32, op.slots));
                }
            }
        }
        let mut offload: Vec<SwitchOffloadRecord> = nodes
            .iter()
            .map(|n| SwitchOffloadRecord {
                node: n.0,
                ..SwitchOffloadRecord::default()
            })
            .collect();
        for (node, count) in &workload.fallbacks {
            if let Ok(local) = nodes.binary_search(&NodeId(*node)) {
                offload[local].reductions_fallback = count.reductions;
                offload[local].barriers_fallback = count.barriers;
            }
        }
        Aggregation {
            sender_of,
            aggregators,
            gathered: HashMap::new(),
            offload,
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// A member starts streaming its contribution into operation `op`'s tree.
    pub(super) fn ina_stream_start(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let fabric = self.fabric;
        let config = &fabric.config;
        let s = &self.transport.senders[i];
        let op = &fabric.workload.ina_ops[s.ina_op as usize];
        let host = ctx.node().0;
        // The member's port, as the tree recorded it (not a search of the
        // members: a barrier over 65,000 hosts would be quadratic).
        let port = offload::member_port(&fabric.topo, op, host).expect("a member has an uplink");
        let ideal = ideal_stream(&fabric.topo, op, host, port, u64::from(config.header_bytes));
        let gport = self.port_index(ctx.local_index(), port);
        let line_rate_bps = self.ports[gport].link.rate_bps;
        let s = &mut self.transport.senders[i];
        s.port = port;
        s.line_rate_bps = line_rate_bps;
        s.next_send = ctx.now();
        s.ideal_fct = ideal;
        self.hosts[gport].flows.push(i as u32);
        self.host_try_send(ctx, port);
    }

    /// A copy of a chunk (or a child switch's partial aggregate) arrived.
    pub(super) fn ina_aggregate(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        in_port: u16,
        pkt: Packet,
    ) {
        let fabric = self.fabric;
        let node = ctx.node().0;
        let op = &fabric.workload.ina_ops[pkt.flow as usize];
        let agg = self
            .aggregation
            .aggregators
            .get_mut(&(pkt.flow, node))
            .expect("aggregation packets reach only switches of their tree");
        // A gathered chunk is one member's data: nothing to wait for.
        let ready = match op.pattern {
            InaPattern::AllGather => true,
            InaPattern::AllReduce | InaPattern::ReduceScatter => {
                agg.take_copy(op, pkt.psn, (pkt.flow, node))
            }
        };
        if ready {
            let mut delay = op.processing;
            if let Some(engine_bps) = op.engine_bps {
                // The engine takes complete chunks in turn, each for its
                // wire time at the engine's rate, behind the ports.
                let wire = op.chunk_payload_bytes(pkt.psn) + u64::from(fabric.config.header_bytes);
                let start = agg.engine_free.max(ctx.now());
                agg.engine_free = start + serialization(wire, engine_bps);
                delay += agg.engine_free - ctx.now();
            }
            self.aggregation.offload[ctx.local_index()].chunks_aggregated += 1;
            let mut chunks = pkt.psn..pkt.psn + 1;
            // Release by group only at the root, where results go down.
            let tree_node = &op.tree[agg.tree_index as usize];
            let mut down_bps = None;
            if op.release_chunks > 1 && tree_node.parent_port.is_none() {
                // Held until every chunk of its group is reduced, then sent
                // down at the child ports' rate (SimAI's NVSwitch sends from
                // its memory; queued at once, a group would fill the buffer),
                // each chunk its own wire time at the slowest child port.
                let local = ctx.local_index();
                let bps = tree_node
                    .child_ports
                    .iter()
                    .map(|&p| self.ports[self.port_index(local, p)].link.rate_bps)
                    .min()
                    .expect("a root has children");
                down_bps = Some(bps);
                let agg = self
                    .aggregation
                    .aggregators
                    .get_mut(&(pkt.flow, node))
                    .expect("this switch aggregates the operation");
                let group = pkt.psn / op.release_chunks;
                let first = group * op.release_chunks;
                let end = (first + op.release_chunks).min(op.chunks);
                let held = &mut agg.held[(group % 2) as usize];
                *held += 1;
                if *held < end - first {
                    return;
                }
                *held = 0;
                chunks = first..end;
                // After the group before it, in chunk order.
                let start = (ctx.now() + delay).max(agg.released_until);
                let group_time = chunks
                    .clone()
                    .fold(SimTime::ZERO, |t, c| t + down_time(op, c, bps, fabric));
                agg.released_until = start + group_time;
                delay = start - ctx.now();
            }
            let mut offset = SimTime::ZERO;
            for chunk in chunks {
                ctx.schedule_self(
                    delay + offset,
                    NetEvent::InaEmit {
                        op: pkt.flow,
                        chunk,
                        in_port,
                    },
                );
                if let Some(bps) = down_bps {
                    offset += down_time(op, chunk, bps, fabric);
                }
            }
        }
    }

    /// Aggregation of a chunk is done here: send it up, or (root) down.
    pub(super) fn ina_emit(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        op_id: u32,
        chunk: u32,
        in_port: u16,
    ) {
        let fabric = self.fabric;
        let node = ctx.node().0;
        let op = &fabric.workload.ina_ops[op_id as usize];
        let tree_index = self.aggregation.aggregators[&(op_id, node)].tree_index;
        match op.tree[tree_index as usize].parent_port {
            Some(parent) => {
                let pkt = self.ina_packet(
                    op,
                    op_id,
                    chunk,
                    PacketKind::InaUp,
                    node,
                    fabric.topo.port(node, parent).peer,
                );
                self.switch_enqueue(ctx, in_port, parent, pkt);
            }
            None if op.pattern == InaPattern::AllGather => {
                self.ina_gather_multicast(ctx, op_id, chunk, in_port)
            }
            None => self.ina_multicast(ctx, op_id, chunk, in_port),
        }
    }

    /// A result arrived from the parent switch: pass it down.
    pub(super) fn ina_down(&mut self, ctx: &mut Context<'_, NetEvent>, in_port: u16, pkt: Packet) {
        self.ina_multicast(ctx, pkt.flow, pkt.psn, in_port);
    }

    /// Passes member `origin`'s chunk (it arrived on `in_port`) to every
    /// member, `origin` included, unreduced (one switch: the root).
    fn ina_gather_multicast(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        op_id: u32,
        chunk: u32,
        in_port: u16,
    ) {
        let fabric = self.fabric;
        let node = ctx.node().0;
        let op = &fabric.workload.ina_ops[op_id as usize];
        let origin = fabric.topo.port(node, in_port).peer;
        // Counted once per operation: with the first member's last chunk.
        if chunk + 1 == op.chunks && op.members.first().is_some_and(|m| m.0 == origin) {
            self.aggregation.offload[ctx.local_index()].reductions_offloaded += 1;
        }
        self.ina_copies_down(ctx, (op_id, chunk, in_port), 0, |_, pkt| pkt.src = origin);
    }

    /// Sends chunk `chunk` of operation `op_id` (it came in on `in_port`)
    /// to every child of the switch at `tree_index`, each copy shaped by
    /// `shape` (given the child's node) before it is queued.
    fn ina_copies_down(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        (op_id, chunk, in_port): (u32, u32, u16),
        tree_index: usize,
        shape: impl Fn(u32, &mut Packet),
    ) {
        let fabric = self.fabric;
        let node = ctx.node().0;
        let op = &fabric.workload.ina_ops[op_id as usize];
        for &child in &op.tree[tree_index].child_ports {
            let peer = fabric.topo.port(node, child).peer;
            let mut pkt = self.ina_packet(op, op_id, chunk, PacketKind::InaDown, node, peer);
            shape(peer, &mut pkt);
            self.switch_enqueue(ctx, in_port, child, pkt);
        }
    }

    /// Frees the chunk's slot and sends the result to every child (under
    /// [`InaPattern::ReduceScatter`], to its owner; a credit to the others).
    fn ina_multicast(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        op_id: u32,
        chunk: u32,
        in_port: u16,
    ) {
        let fabric = self.fabric;
        let node = ctx.node().0;
        let op = &fabric.workload.ina_ops[op_id as usize];
        let agg = self
            .aggregation
            .aggregators
            .get_mut(&(op_id, node))
            .expect("a tree switch has its state");
        let slot = (chunk % op.slots) as usize;
        debug_assert_eq!(agg.chunk[slot], chunk);
        agg.copies[slot] = 0;
        let tree_index = agg.tree_index as usize;
        if chunk + 1 == op.chunks {
            let counters = &mut self.aggregation.offload[ctx.local_index()];
            match op.kind {
                InaKind::Reduce => counters.reductions_offloaded += 1,
                InaKind::Barrier => counters.barriers_offloaded += 1,
            }
        }
        let owner = (op.pattern == InaPattern::ReduceScatter).then(|| op.owner_of(chunk));
        let header = fabric.config.header_bytes as u16;
        self.ina_copies_down(ctx, (op_id, chunk, in_port), tree_index, |peer, pkt| {
            if owner.is_some_and(|o| o != peer) {
                pkt.wire_bytes = header;
            }
        });
    }

    fn ina_packet(
        &self,
        op: &InaOp,
        op_id: u32,
        chunk: u32,
        kind: PacketKind,
        src: u32,
        dst: u32,
    ) -> Packet {
        let payload = op.chunk_payload_bytes(chunk);
        let wire_bytes = (payload + u64::from(self.fabric.config.header_bytes)) as u16;
        Packet {
            last: chunk + 1 == op.chunks,
            ..Packet::new(kind, op_id, src, dst, chunk, wire_bytes)
        }
    }

    /// A member received the result of one chunk: one more slot is free.
    pub(super) fn ina_result(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let op = &self.fabric.workload.ina_ops[pkt.flow as usize];
        if op.pattern == InaPattern::AllGather {
            return self.ina_gathered(ctx, pkt);
        }
        let i = self.aggregation.sender_of[&(pkt.flow, ctx.node().0)] as usize;
        let s = &mut self.transport.senders[i];
        assert_eq!(
            pkt.psn,
            s.qp.roce().acked(),
            "aggregation results come back in chunk order along a tree"
        );
        s.qp.roce().on_ack(pkt.psn + 1);
        let port = s.port;
        if s.qp.roce().acked() == s.packets {
            self.sender_finished(ctx, i);
        }
        self.host_try_send(ctx, port);
    }

    /// A member received one member's chunk of an all-gather: its own
    /// chunks free its slots, in order; its stream is done when it has
    /// its own results and every member's shard.
    fn ina_gathered(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let host = ctx.node().0;
        let op = &self.fabric.workload.ina_ops[pkt.flow as usize];
        let every_shard = u64::from(op.chunks) * op.members.len() as u64;
        let got = self
            .aggregation
            .gathered
            .entry((pkt.flow, host))
            .or_insert(0);
        *got += 1;
        let got = u64::from(*got);
        // Another member's shard may come before this member starts.
        let Some(&i) = self.aggregation.sender_of.get(&(pkt.flow, host)) else {
            return;
        };
        let s = &mut self.transport.senders[i as usize];
        if pkt.src == host {
            assert_eq!(
                pkt.psn,
                s.qp.roce().acked(),
                "a member's own chunks come back in order"
            );
            s.qp.roce().on_ack(pkt.psn + 1);
        }
        let port = s.port;
        if s.qp.roce().acked() == s.packets && got == every_shard {
            self.aggregation.gathered.remove(&(pkt.flow, host));
            self.sender_finished(ctx, i as usize);
        }
        self.host_try_send(ctx, port);
    }
}
