//! In-network aggregation (`--algo ina`, switch barriers) at flow level: an
//! operation's tree is one fluid stream that crosses every tree edge both
//! ways at one rate.
//!
//! ```text
//!  member streams ──up──> leaf ──up──> ... ──> root
//!        ^                                      │ results
//!        └──────────────down──── ... <──────────┘
//!  one rate r for every edge, both ways: r <= the share of each edge's
//!  channel, r <= slots x chunk / the loop time (the members' window)
//! ```
//!
//! At packet level a switch sends a chunk's partial aggregate up (the root:
//! its result down) once every child's copy has arrived, so no edge runs
//! ahead of the slowest child and, in steady state, every edge of the tree
//! carries the same bytes at the same rate. The fluid image is a single
//! flow whose path is the whole tree (each member's uplink and each child
//! switch's parent link, in both directions) plus a channel of its own whose
//! capacity is what the members' window allows: `slots` chunks per loop
//! (a chunk up the member's path to the root and its result back, alone on
//! the tree, the slowest member's). It starts when the last member starts
//! (before, switches would hold the early members' chunks waiting for it)
//! and is shared like any flow: max-min fairly with congestion control, and
//! with `--cc none` against the other in-network operations only (the FIFO
//! model shares paths, not trees). Once its bytes have drained, each member
//! pays the rest of its own loop: the store-and-forward of one chunk and the
//! latency of every link up and down, and every switch's processing on the
//! way up, so an operation alone finishes at exactly packet level's time
//! (its `ideal_fct_ns`, `aggregation::ideal_stream`, when the last chunk is
//! full; that formula charges a full chunk's store-and-forward to a shorter
//! last one, which the packets do not pay). Switches aggregate at the rate
//! chunks arrive (the profiles have a latency, not a throughput).

use crate::network::{chunk_tail, ideal_stream, serialization, Fabric};
use crate::telemetry::{SwitchOffloadRecord, TelemetrySink};
use crate::traffic::FlowSpec;
use crate::workload::{FlowInfo, InaKind, InaPattern, NONE};
use netsim_engine::SimTime;

use super::paths::Channels;

const BIT_PS_PER_BYTE: u128 = 8_000_000_000_000;

/// One member's stream: its flow and what it pays after the tree drained.
#[derive(Clone, Copy, Debug)]
pub(super) struct Member {
    pub flow: u32,
    /// From the last byte through the tree to the member's last result.
    pub tail: SimTime,
    /// Alone on the tree: packet level's `ideal_fct_ns` for the stream.
    pub ideal: SimTime,
}

/// Every in-network operation of the workload, as fluid streams.
#[derive(Debug)]
pub(super) struct InaTrees {
    /// The id of operation 0's stream in the sharing model (one past the
    /// last flow's); operation `op` is `first_stream + op`.
    first_stream: u32,
    /// Per operation: the channels it crosses, the window channel last.
    paths: Vec<Vec<u32>>,
    /// Per operation: its members (in member order) and how many started.
    members: Vec<Vec<Member>>,
    started: Vec<u32>,
    /// Per operation: one member's stream in wire bytes (chunks and headers).
    wire_bytes: Vec<u64>,
    /// Per flow of an operation: the operation (`NONE` otherwise) and its
    /// index in the operation's members; empty when the workload has none.
    op_of: Vec<u32>,
    member_of: Vec<u32>,
    /// Per node: its offload counters (empty when the workload has no
    /// operation and no fallback).
    offload: Vec<SwitchOffloadRecord>,
}

impl InaTrees {
    /// The workload's operations over `channels`; appends to `capacity_bps`
    /// one window channel per operation (numbered after the links').
    pub fn new(fabric: &Fabric, channels: &Channels, capacity_bps: &mut Vec<u64>) -> InaTrees {
        let workload = &fabric.workload;
        let topo = &fabric.topo;
        let header = u64::from(fabric.config.header_bytes);
        let ops = &workload.ina_ops;
        let mut trees = InaTrees {
            first_stream: workload.flow_count() as u32,
            paths: Vec::with_capacity(ops.len()),
            members: vec![Vec::new(); ops.len()],
            started: vec![0; ops.len()],
            wire_bytes: Vec::with_capacity(ops.len()),
            op_of: Vec::new(),
            member_of: Vec::new(),
            offload: Vec::new(),
        };
        if !ops.is_empty() {
            trees.op_of = (0..workload.flows.len() as u32)
                .map(|flow| workload.flow_ina_op(flow))
                .collect();
        }
        if !ops.is_empty() || !workload.fallbacks.is_empty() {
            trees.offload = (0..topo.node_count())
                .map(|node| SwitchOffloadRecord {
                    node,
                    ..SwitchOffloadRecord::default()
                })
                .collect();
            for (node, count) in &workload.fallbacks {
                let r = &mut trees.offload[*node as usize];
                r.reductions_fallback = count.reductions;
                r.barriers_fallback = count.barriers;
            }
        }
        trees.member_of = vec![NONE; trees.op_of.len()];
        for (flow, &op) in trees.op_of.iter().enumerate() {
            if op != NONE {
                trees.member_of[flow] = trees.members[op as usize].len() as u32;
                trees.members[op as usize].push(Member {
                    flow: flow as u32,
                    tail: SimTime::ZERO,
                    ideal: SimTime::ZERO,
                });
            }
        }
        for (op_id, op) in ops.iter().enumerate() {
            let wire = op.stream_wire_bytes(header);
            trees.wire_bytes.push(op.loaded_wire_bytes(header));
            // The tree's edges, both ways: toward each child and back up;
            // a reduce-scatter's results (`S/n`) and an all-gather's own
            // shards (`S/n`) are left to the packets' tails, only the
            // loaded direction carries the stream.
            let (down, up) = match op.pattern {
                InaPattern::AllReduce => (true, true),
                InaPattern::ReduceScatter => (false, true),
                InaPattern::AllGather => (true, false),
            };
            let mut path = Vec::new();
            for t in &op.tree {
                for &child in &t.child_ports {
                    let p = topo.port(t.node, child);
                    if down {
                        path.push(channels.of(t.node, child));
                    }
                    if up {
                        path.push(channels.of(p.peer, p.peer_port));
                    }
                }
            }
            // Each member's tail (its last chunk's), and the slowest
            // member's loop for one full chunk.
            let chunk_wire = u64::from(op.chunk_bytes) + header;
            let last_wire = wire - u64::from(op.chunks - 1) * chunk_wire;
            let mut slowest_loop = SimTime::ZERO;
            // The workload builds an operation's streams in member order.
            for (m, &(host, port)) in trees.members[op_id].iter_mut().zip(&op.members) {
                let spec = workload.flows[m.flow as usize];
                assert_eq!(spec.src, host, "operation {op_id}: streams in member order");
                m.ideal = ideal_stream(topo, op, spec.src, port, header);
                let (tail, bottleneck) = chunk_tail(topo, op, spec.src, port, last_wire);
                m.tail = tail;
                let (full, _) = chunk_tail(topo, op, spec.src, port, chunk_wire);
                slowest_loop = slowest_loop.max(serialization(chunk_wire, bottleneck) + full);
            }
            let window_bps = if op.chunks <= op.slots {
                u64::MAX // every chunk is outstanding at once: no limit
            } else {
                // Every member's window feeds an all-gather's stream.
                let windows = match op.pattern {
                    InaPattern::AllGather => op.members.len() as u128,
                    InaPattern::AllReduce | InaPattern::ReduceScatter => 1,
                };
                let bit_ps =
                    windows * u128::from(op.slots) * u128::from(chunk_wire) * BIT_PS_PER_BYTE;
                u64::try_from(bit_ps / u128::from(slowest_loop.as_ps().max(1)))
                    .unwrap_or(u64::MAX)
                    .max(1)
            };
            // The switch's engine, when slower than the ports, bounds the
            // stream as the window does.
            let window_bps = window_bps.min(op.engine_bps.unwrap_or(u64::MAX));
            path.push(u32::try_from(capacity_bps.len()).expect("under 2^32 channels"));
            capacity_bps.push(window_bps);
            trees.paths.push(path);
        }
        trees
    }

    /// How many operations (and so window channels and streams) there are.
    pub fn count(&self) -> usize {
        self.paths.len()
    }

    /// The operation flow `flow` streams into, if any.
    pub fn op_of(&self, flow: u32) -> Option<u32> {
        self.op_of
            .get(flow as usize)
            .copied()
            .filter(|&op| op != NONE)
    }

    /// The operation whose stream is `id` in the sharing model, if it is one.
    pub fn stream_op(&self, id: u32) -> Option<u32> {
        id.checked_sub(self.first_stream)
    }

    /// Member flow `flow` of operation `op` started; when it is the last,
    /// returns the operation's stream id, channels and wire bits x 10^12.
    pub fn member_started(&mut self, op: u32, flow: u32) -> Option<(u32, &[u32], u128)> {
        let o = op as usize;
        self.started[o] += 1;
        debug_assert_eq!(self.op_of[flow as usize], op);
        (self.started[o] as usize == self.members[o].len()).then(|| {
            (
                self.first_stream + op,
                &self.paths[o][..],
                u128::from(self.wire_bytes[o]) * BIT_PS_PER_BYTE,
            )
        })
    }

    /// Member flow `flow` alone on its tree: packet level's ideal.
    pub fn ideal(&self, op: u32, flow: u32) -> SimTime {
        self.members[op as usize][self.member_of[flow as usize] as usize].ideal
    }

    /// Operation `op`'s stream has drained: its members, and the switches'
    /// counters (every chunk aggregated by every tree switch).
    pub fn drained(&mut self, fabric: &Fabric, op: u32) -> &[Member] {
        let o = fabric
            .workload
            .ina_ops
            .get(op as usize)
            .expect("an operation");
        for t in &o.tree {
            let r = &mut self.offload[t.node as usize];
            r.chunks_aggregated += u64::from(o.chunks);
            match o.kind {
                InaKind::Reduce => r.reductions_offloaded += 1,
                InaKind::Barrier => r.barriers_offloaded += 1,
            }
        }
        &self.members[op as usize]
    }

    /// The `switch_offload` rows: every switch that took part or fell back.
    pub fn report(&self, sink: &mut impl TelemetrySink) {
        for r in self.offload.iter().filter(|r| r.is_used()) {
            sink.switch_offload(r.clone());
        }
    }
}

impl<S: TelemetrySink> super::Fluid<'_, S> {
    /// Member flow `flow` of operation `op` starts streaming now; the
    /// operation's stream starts with its last member.
    pub(super) fn ina_member_started(
        &mut self,
        op: u32,
        flow: u32,
        (spec, info): (FlowSpec, Option<FlowInfo>),
    ) {
        let now = self.now;
        let ideal = self.ina.ideal(op, flow);
        self.flows.open(flow, super::FlowState::started(now));
        let f = &mut self.flows[flow as usize];
        (f.ideal_fct, f.spec, f.info) = (ideal, spec, info);
        if let Some(info) = info {
            self.dag.span_started(info.collective, now);
        }
        if let Some((stream, path, wire_bit_ps)) = self.ina.member_started(op, flow) {
            self.flows.open(stream, super::FlowState::started(now));
            let s = &mut self.flows[stream as usize];
            s.left = wire_bit_ps;
            s.share_slot = self.share.add(stream, path);
        }
    }

    /// Operation `op`'s stream has drained now: each member has its last
    /// result after its own tail.
    pub(super) fn ina_drained(&mut self, op: u32) {
        let now = self.now;
        let size_bytes = self.fabric.workload.ina_ops[op as usize].size_bytes;
        let members = self.ina.drained(self.fabric, op);
        for &Member { flow, tail, .. } in members {
            self.stats.sent_payload_bytes += size_bytes;
            self.queue.push(
                now.saturating_add(tail),
                self.next_seq,
                super::Event::Acked { flow },
            );
            self.next_seq += 1;
        }
    }
}
