//! The packet-level network: ports, switches, NICs and their transports.
//!
//! ```text
//!  host NIC ──port──link──port── switch ──port──link──port── host NIC
//!  (flows pulled     (egress queues per priority,
//!   when the port     shared buffer, ECN, PFC, ECMP)
//!   is free)
//! ```
//!
//! A packet put on the wire becomes one event, its `Arrive` at the peer
//! after serialisation plus link latency: the only way nodes affect each
//! other (PFC frames travel the same way). Queued packets wait in the port's
//! FIFOs and are not events; a busy port with a queue keeps exactly one
//! pending `TxDone` for when it frees up, so an uncongested hop costs one
//! event per packet. A host port does not queue data:
//! when it is free it pulls the next packet from its flows, round robin,
//! honouring each flow's rate (DCQCN) or window (DCTCP).
//!
//! Queue samples for the `queues` table (switches) and link samples for the
//! `links` table (every node's egress ports, see `links.rs`) are taken
//! without events: a node's ports change only when it handles an event, so
//! before handling one at time `t` the node writes the samples due up to
//! `t`, and `finish` writes the rest.

mod aggregation;
pub mod cc;
pub mod config;
mod links;
pub mod packet;
mod wire;

use crate::telemetry::{
    CollectiveRecord, FlowRecord, PfcEvent, PfcRecord, QueueSample, SwitchOffloadRecord,
    TelemetrySink,
};
use crate::traffic::FlowSpec;
use crate::workload::{TaskKind, Workload, NONE as NO_TASK};
use aggregation::Aggregator;
use cc::CcState;
use config::{CcKind, DragonflyRouting, EcmpMode, NetConfig};
use hashbrown::HashMap;
pub use links::link_tier;
use netsim_engine::{
    splitmix64, Context, Executor, Layout, Model, NodeId, Progress, ShardId, SimTime, Threads,
};
use netsim_topo::{DragonflyIndex, Routing, Topology};
use packet::{Packet, PacketKind, PRIORITIES, PRIO_CONTROL, PRIO_DATA};
use std::collections::VecDeque;

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
    /// Dragonflies: routers by group, for Valiant and UGAL.
    dragonfly: Option<DragonflyIndex>,
    /// Per node: a host attached to it (routing toward that host reaches
    /// the node minimally), `NO_NODE` for nodes without hosts.
    proxy_host: Vec<u32>,
}

const NO_NODE: u32 = u32::MAX;

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
        let proxy_host = (0..topo.node_count())
            .map(|n| {
                topo.ports(n)
                    .iter()
                    .map(|p| p.peer)
                    .find(|&peer| topo.is_host(peer))
                    .unwrap_or(NO_NODE)
            })
            .collect();
        Fabric {
            dragonfly: DragonflyIndex::new(&topo),
            topo,
            routing,
            workload,
            config,
            seed,
            proxy_host,
        }
    }

    /// Dragonfly group of `node`, if it has one.
    #[inline]
    fn group(&self, node: u32) -> Option<u32> {
        self.topo.node(node).coords.group
    }
}

/// Events of the network model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NetEvent {
    /// `pkt` has fully arrived on the handling node's port `port`.
    Arrive { port: u16, pkt: Packet },
    /// Port `port` finished serialising its packet.
    TxDone { port: u16 },
    /// A PFC frame for the data class arrived on port `port`.
    Pfc { port: u16, pause: bool },
    /// Flow `flow` (global id) starts at its source host.
    FlowStart { flow: u32 },
    /// A host port may send again (a flow's rate allows it); stale if the
    /// generation moved on.
    Wake { port: u16, generation: u32 },
    /// A per-flow timer at the sender.
    Timer { flow: u32, timer: FlowTimer },
    /// A workload compute task finished on the handling host.
    TaskDone { task: u32 },
    /// A switch finished aggregating chunk `chunk` of in-network operation
    /// `op` (the last copy arrived on `in_port`) and sends the result on.
    InaEmit { op: u32, chunk: u32, in_port: u16 },
}

/// Per-flow timers of the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowTimer {
    DcqcnAlpha,
    DcqcnDecrease,
    DcqcnIncrease { generation: u32 },
    Retransmit,
}

/// One egress port of a node, and the ingress accounting of the same link.
#[derive(Debug)]
struct Port {
    peer: NodeId,
    peer_port: u16,
    rate_bps: u64,
    latency: SimTime,
    ecn_kmin_bytes: u64,
    ecn_kmax_bytes: u64,
    ecn_pmax: f64,
    queues: [VecDeque<Packet>; PRIORITIES],
    queued_bytes: [u64; PRIORITIES],
    /// The port is serialising until then.
    busy_until: SimTime,
    /// A `TxDone` is scheduled for `busy_until`.
    tx_pending: bool,
    /// HPCC: bytes sent since `rate_window_start`, and the rate measured
    /// over the last full window of one base RTT.
    rate_window_start: SimTime,
    rate_window_bytes: u64,
    measured_rate_bps: f64,
    /// The data class is paused by the peer's PFC.
    paused: bool,
    paused_since: SimTime,
    tx_bytes: [u64; PRIORITIES],
    ecn_marked_pkts: [u64; PRIORITIES],
    dropped_pkts: [u64; PRIORITIES],
    /// Bytes on the wire by the last link sample.
    sampled_tx_bytes: u64,
    /// Switches: data bytes buffered that entered through this port.
    ingress_bytes: u64,
    /// Switches: this port's upstream is paused by us.
    pause_sent: bool,
    /// Hosts: flows (local sender indices) sending through this port.
    flows: Vec<u32>,
    round_robin: usize,
    wake_generation: u32,
    wake_at: SimTime,
}

impl Port {
    /// Serialisation time of `bytes` at `rate_bps`.
    #[inline]
    fn serialization(bytes: u64, rate_bps: u64) -> SimTime {
        SimTime(((u128::from(bytes) * 8_000_000_000_000) / u128::from(rate_bps)).max(1) as u64)
    }
}

/// Sender-side state of one flow (RoCEv2 queue pair).
#[derive(Debug)]
struct Sender {
    flow: u32,
    spec: FlowSpec,
    /// When the flow actually started (its dependencies may delay it).
    start: SimTime,
    packets: u32,
    /// In-network aggregation stream: the operation, and the chunks it may
    /// have outstanding; `NO_TASK` for a host-to-host flow.
    ina_op: u32,
    ina_window: u32,
    /// Local port index at the source host.
    port: u16,
    line_rate_bps: u64,
    next_psn: u32,
    /// First unacknowledged psn.
    una: u32,
    /// Highest psn sent + 1 (retransmissions are sends below it).
    max_sent: u32,
    next_send: SimTime,
    end: Option<SimTime>,
    cc: CcState,
    cnps: u64,
    ecn_marked_pkts: u64,
    retransmitted_pkts: u64,
    ideal_fct: SimTime,
    path_hash: u64,
    /// `una` when the retransmission timer last fired.
    rto_una: u32,
}

/// Receiver-side state of one flow.
#[derive(Debug, Default)]
struct Receiver {
    expected_psn: u32,
    since_ack: u32,
    ce_since_ack: u32,
    last_cnp: Option<SimTime>,
    nacked_psn: Option<u32>,
}

/// The network nodes owned by one shard.
pub struct Network<'f, S> {
    fabric: &'f Fabric,
    sink: S,
    nodes: Vec<NodeId>,
    /// Ports of local node `i` are `ports[port_base[i]..port_base[i + 1]]`.
    port_base: Vec<u32>,
    ports: Vec<Port>,
    /// Switches: buffer bytes in use; hosts: unused.
    used_bytes: Vec<u64>,
    headroom_bytes: Vec<u64>,
    ecmp_seed: Vec<u64>,
    next_sample: Vec<SimTime>,
    senders: Vec<Sender>,
    /// Senders of local node `i` are `senders[sender_base[i]..sender_base[i + 1]]`.
    sender_base: Vec<u32>,
    /// Global flow id -> local sender index, for flows whose source is local.
    sender_of: HashMap<u32, u32>,
    receivers: HashMap<u32, Receiver>,
    /// UGAL: the path (intermediate router or `NO_NODE`) each flow took at
    /// its source router `(router, flow)`.
    ugal_choice: HashMap<(u32, u32), u32>,
    stats: NetStats,
    /// Workload: per task, dependencies not yet seen complete (only the
    /// entries of this shard's hosts are used).
    remaining: Vec<u32>,
    /// Workload tasks without dependencies, per local node: `(local, task)`, sorted.
    root_tasks: Vec<(u32, u32)>,
    /// Per collective: what this shard's hosts saw of it.
    spans: Vec<CollectiveSpan>,
    /// In-network aggregation: local sender of `(op, host)`.
    ina_sender_of: HashMap<(u32, u32), u32>,
    /// In-network aggregation: the state of `(op, switch)` for local switches.
    aggregators: HashMap<(u32, u32), Aggregator>,
    /// Per local node: in-network computing counters (switches).
    offload: Vec<SwitchOffloadRecord>,
    /// Time of the last event that changed anything.
    last_activity: SimTime,
}

/// What one shard saw of one collective: when its hosts started the first
/// task and completed the last, and how many tasks completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveSpan {
    pub start: SimTime,
    pub end: SimTime,
    pub tasks_done: u32,
}

impl CollectiveSpan {
    const UNSEEN: CollectiveSpan = CollectiveSpan {
        start: SimTime::MAX,
        end: SimTime::ZERO,
        tasks_done: 0,
    };

    /// Combines what two shards saw.
    pub fn merge(&mut self, o: &CollectiveSpan) {
        self.start = self.start.min(o.start);
        self.end = self.end.max(o.end);
        self.tasks_done += o.tasks_done;
    }
}

/// Byte and packet counts of one shard, for conservation checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Payload bytes sent for the first time by this shard's hosts.
    pub sent_payload_bytes: u64,
    /// Payload bytes delivered in order to this shard's hosts.
    pub delivered_payload_bytes: u64,
    pub dropped_pkts: u64,
    pub pfc_pauses: u64,
    pub flows_finished: u64,
}

impl std::ops::AddAssign for NetStats {
    fn add_assign(&mut self, o: NetStats) {
        self.sent_payload_bytes += o.sent_payload_bytes;
        self.delivered_payload_bytes += o.delivered_payload_bytes;
        self.dropped_pkts += o.dropped_pkts;
        self.pfc_pauses += o.pfc_pauses;
        self.flows_finished += o.flows_finished;
    }
}

const NO_WAKE: SimTime = SimTime::MAX;

impl<'f, S: TelemetrySink> Network<'f, S> {
    /// State for the nodes `nodes` (increasing ids) of one shard.
    pub fn new(fabric: &'f Fabric, nodes: &[NodeId], sink: S) -> Network<'f, S> {
        let topo = &fabric.topo;
        let config = &fabric.config;
        let mut port_base = Vec::with_capacity(nodes.len() + 1);
        let mut ports = Vec::new();
        let mut headroom_bytes = Vec::with_capacity(nodes.len());
        for &node in nodes {
            port_base.push(ports.len() as u32);
            let mut headroom = 0;
            for p in topo.ports(node.0) {
                let link = topo.link(p.link);
                let ecn = config.ecn_for(link.bandwidth_bps);
                headroom += config.pfc_headroom_bytes;
                ports.push(Port {
                    peer: NodeId(p.peer),
                    peer_port: p.peer_port,
                    rate_bps: link.bandwidth_bps,
                    latency: SimTime(link.latency_ps),
                    ecn_kmin_bytes: ecn.kmin_bytes,
                    ecn_kmax_bytes: ecn.kmax_bytes,
                    ecn_pmax: ecn.pmax,
                    queues: Default::default(),
                    queued_bytes: [0; PRIORITIES],
                    busy_until: SimTime::ZERO,
                    tx_pending: false,
                    rate_window_start: SimTime::ZERO,
                    rate_window_bytes: 0,
                    measured_rate_bps: 0.0,
                    paused: false,
                    paused_since: SimTime::ZERO,
                    tx_bytes: [0; PRIORITIES],
                    ecn_marked_pkts: [0; PRIORITIES],
                    dropped_pkts: [0; PRIORITIES],
                    sampled_tx_bytes: 0,
                    ingress_bytes: 0,
                    pause_sent: false,
                    flows: Vec::new(),
                    round_robin: 0,
                    wake_generation: 0,
                    wake_at: NO_WAKE,
                });
            }
            headroom_bytes.push(headroom);
        }
        port_base.push(ports.len() as u32);
        // Senders grouped by source node, in flow order within a node.
        let workload = &fabric.workload;
        let mut local_flows: Vec<(usize, u32)> = workload
            .flows
            .iter()
            .enumerate()
            .filter_map(|(id, spec)| {
                let local = nodes.binary_search(&NodeId(spec.src)).ok()?;
                Some((local, id as u32))
            })
            .collect();
        local_flows.sort_unstable();
        let mut sender_of = HashMap::with_capacity(local_flows.len());
        let mut ina_sender_of = HashMap::new();
        let mut senders = Vec::with_capacity(local_flows.len());
        let mut sender_base = vec![0u32; nodes.len() + 1];
        for &(local, id) in &local_flows {
            let spec = workload.flows[id as usize];
            let mut sender = Sender::new(id, spec, config);
            if let Some(info) = workload.flow_info.get(id as usize) {
                // Starts when its task does.
                sender.start = SimTime::MAX;
                if info.ina_op != NO_TASK {
                    let op = &workload.ina_ops[info.ina_op as usize];
                    sender.ina_op = info.ina_op;
                    sender.ina_window = op.slots;
                    ina_sender_of.insert((info.ina_op, spec.src), senders.len() as u32);
                }
            }
            sender_of.insert(id, senders.len() as u32);
            senders.push(sender);
            sender_base[local + 1] += 1;
        }
        let mut root_tasks = Vec::new();
        for (t, task) in workload.tasks.iter().enumerate() {
            if task.deps == 0 {
                if let Ok(local) = nodes.binary_search(&NodeId(task.host)) {
                    root_tasks.push((local as u32, t as u32));
                }
            }
        }
        root_tasks.sort_unstable();
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
        for i in 0..nodes.len() {
            sender_base[i + 1] += sender_base[i];
        }
        let sampling = config.sample_period != SimTime::ZERO;
        Network {
            ecmp_seed: nodes
                .iter()
                .map(|n| {
                    let mut s = fabric.seed ^ (u64::from(n.0) << 20) ^ 0xEC3F;
                    splitmix64(&mut s)
                })
                .collect(),
            next_sample: vec![
                if sampling {
                    SimTime::ZERO
                } else {
                    SimTime::MAX
                };
                nodes.len()
            ],
            sender_base,
            used_bytes: vec![0; nodes.len()],
            headroom_bytes,
            nodes: nodes.to_vec(),
            port_base,
            ports,
            senders,
            sender_of,
            receivers: HashMap::new(),
            ugal_choice: HashMap::new(),
            stats: NetStats::default(),
            remaining: workload.tasks.iter().map(|t| t.deps).collect(),
            root_tasks,
            spans: vec![CollectiveSpan::UNSEEN; workload.collectives.len()],
            ina_sender_of,
            aggregators,
            offload,
            last_activity: SimTime::ZERO,
            fabric,
            sink,
        }
    }

    /// Writes the samples due up to `end` and the links' last, shorter
    /// interval up to `end` (rounded up to whole nanoseconds), every flow of
    /// this shard that did not finish and the in-network computing counters,
    /// then hands back the sink, the counts and what this shard saw of each
    /// collective.
    pub fn finish(mut self, end: SimTime) -> (S, NetStats, Vec<CollectiveSpan>) {
        let last = SimTime::from_ns(end.as_ps().div_ceil(1_000));
        for local in 0..self.nodes.len() {
            self.sample_until(local, end);
            if self.next_sample[local] != SimTime::MAX {
                let sampled = self.next_sample[local] - self.fabric.config.sample_period;
                if sampled < last {
                    self.sample_links(local, sampled, last);
                }
            }
        }
        // Workload flows whose dependencies never completed did not exist yet.
        let unfinished: Vec<usize> = (0..self.senders.len())
            .filter(|&i| self.senders[i].end.is_none() && self.senders[i].start != SimTime::MAX)
            .collect();
        for i in unfinished {
            self.record_flow(i);
        }
        self.stats.dropped_pkts = self
            .ports
            .iter()
            .map(|p| p.dropped_pkts.iter().sum::<u64>())
            .sum();
        for record in std::mem::take(&mut self.offload) {
            let used = record.reductions_offloaded
                + record.reductions_fallback
                + record.barriers_offloaded
                + record.barriers_fallback
                + record.chunks_aggregated;
            if used > 0 {
                self.sink.switch_offload(record);
            }
        }
        (self.sink, self.stats, self.spans)
    }

    #[inline]
    fn is_host(&self, node: NodeId) -> bool {
        node.0 < self.fabric.topo.host_count()
    }

    #[inline]
    fn port_index(&self, local: usize, port: u16) -> usize {
        self.port_base[local] as usize + port as usize
    }

    /// ECMP choice of `node` among `n` next hops for `pkt`.
    #[inline]
    fn ecmp_choice(&self, ctx: &mut Context<'_, NetEvent>, pkt: &Packet, n: usize) -> usize {
        if n == 1 {
            return 0;
        }
        match self.fabric.config.ecmp {
            EcmpMode::Hash => {
                let mut h =
                    self.ecmp_seed[ctx.local_index()] ^ five_tuple_hash(pkt.flow, pkt.src, pkt.dst);
                (splitmix64(&mut h) % n as u64) as usize
            }
            EcmpMode::Spray => ctx.rng().below(n as u64) as usize,
        }
    }

    /// Writes the samples of local node `local` due at or before `now`:
    /// queues of switches, links of every node.
    fn sample_until(&mut self, local: usize, now: SimTime) {
        let period = self.fabric.config.sample_period;
        let node = self.nodes[local].0;
        let (lo, hi) = (
            self.port_base[local] as usize,
            self.port_base[local + 1] as usize,
        );
        // Queues are sampled at switches only: a host's data waits in its
        // flows, not in a port queue.
        let queue_ports = if self.is_host(NodeId(node)) {
            lo..lo
        } else {
            lo..hi
        };
        while self.next_sample[local] <= now {
            let at = self.next_sample[local];
            if at > SimTime::ZERO {
                self.sample_links(local, at - period, at);
            }
            let time_ns = at.as_ns();
            for (port, p) in self.ports[queue_ports.clone()].iter().enumerate() {
                for prio in 0..PRIORITIES {
                    self.sink.queue(QueueSample {
                        time_ns,
                        node,
                        port: port as u32,
                        priority: prio as u8,
                        qlen_bytes: p.queued_bytes[prio],
                        tx_bytes: p.tx_bytes[prio],
                        ecn_marked_pkts: p.ecn_marked_pkts[prio],
                        dropped_pkts: p.dropped_pkts[prio],
                        paused: prio == PRIO_DATA && p.paused,
                    });
                }
            }
            self.next_sample[local] += period;
        }
    }

    // ---- ports ------------------------------------------------------------

    /// Whether port `port` can start a packet now. When it is still
    /// serialising, makes sure one `TxDone` will call again when it is free.
    #[inline]
    fn port_ready(&mut self, ctx: &mut Context<'_, NetEvent>, gport: usize, port: u16) -> bool {
        let p = &mut self.ports[gport];
        if p.tx_pending {
            return false;
        }
        if ctx.now() >= p.busy_until {
            return true;
        }
        p.tx_pending = true;
        ctx.schedule_self(p.busy_until - ctx.now(), NetEvent::TxDone { port });
        false
    }

    /// Serialises `pkt` on port `gport` from now on. The packet's arrival at
    /// the peer is the only event it needs: serialisation plus latency.
    #[inline]
    fn transmit(&mut self, ctx: &mut Context<'_, NetEvent>, gport: usize, mut pkt: Packet) {
        let config = &self.fabric.config;
        let stamp = config.cc == CcKind::Hpcc && !self.is_host(ctx.node());
        let p = &mut self.ports[gport];
        debug_assert!(ctx.now() >= p.busy_until && !p.tx_pending);
        if stamp {
            let now = ctx.now();
            let t = config.hpcc.base_rtt;
            let elapsed = now - p.rate_window_start;
            if elapsed >= t {
                p.measured_rate_bps = p.rate_window_bytes as f64 * 8e12 / elapsed.as_ps() as f64;
                p.rate_window_start = now;
                p.rate_window_bytes = 0;
            }
            p.rate_window_bytes += u64::from(pkt.wire_bytes);
            if pkt.kind == PacketKind::Data {
                let rate = p.rate_bps as f64;
                let queue_bits = (p.queued_bytes[PRIO_DATA] * 8) as f64;
                let u = queue_bits * 1e12 / (rate * t.as_ps() as f64) + p.measured_rate_bps / rate;
                let util = (u * packet::UTIL_ONE).min(f64::from(u16::MAX)) as u16;
                pkt.util = pkt.util.max(util);
            }
        }
        p.tx_bytes[pkt.priority()] += u64::from(pkt.wire_bytes);
        let serialization = Port::serialization(u64::from(pkt.wire_bytes), p.rate_bps);
        p.busy_until = ctx.now() + serialization;
        ctx.send(
            p.peer,
            serialization + p.latency,
            NetEvent::Arrive {
                port: p.peer_port,
                pkt,
            },
        );
    }

    fn tx_done(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let gport = self.port_index(ctx.local_index(), port);
        self.ports[gport].tx_pending = false;
        if self.is_host(ctx.node()) {
            self.host_try_send(ctx, port);
        } else {
            self.switch_try_send(ctx, port);
        }
    }

    fn pfc_frame(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16, pause: bool) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let now = ctx.now();
        let p = &mut self.ports[gport];
        if p.paused == pause {
            return;
        }
        p.paused = pause;
        self.stats.pfc_pauses += u64::from(pause);
        let duration_ns = if pause {
            p.paused_since = now;
            None
        } else {
            Some((now - p.paused_since).as_ns())
        };
        self.sink.pfc(PfcRecord {
            time_ns: now.as_ns(),
            node: ctx.node().0,
            port: u32::from(port),
            priority: PRIO_DATA as u8,
            event: if pause {
                PfcEvent::Pause
            } else {
                PfcEvent::Resume
            },
            duration_ns,
        });
        if !pause {
            if self.is_host(ctx.node()) {
                self.host_try_send(ctx, port);
            } else {
                self.switch_try_send(ctx, port);
            }
        }
    }

    // ---- switches ---------------------------------------------------------

    /// Dynamic PFC threshold of the current switch.
    #[inline]
    fn pfc_xoff(&self, local: usize) -> u64 {
        let config = &self.fabric.config;
        let free = config
            .buffer_bytes
            .saturating_sub(self.headroom_bytes[local])
            .saturating_sub(self.used_bytes[local]);
        (free as f64 * config.pfc_alpha) as u64
    }

    fn switch_receive(&mut self, ctx: &mut Context<'_, NetEvent>, in_port: u16, mut pkt: Packet) {
        match pkt.kind {
            PacketKind::InaUp => return self.ina_aggregate(ctx, in_port, pkt),
            PacketKind::InaDown => return self.ina_down(ctx, in_port, pkt),
            _ => {}
        }
        let out = self.route(ctx, in_port, &mut pkt);
        self.switch_enqueue(ctx, in_port, out, pkt);
    }

    /// Queues `pkt`, which entered on `in_port`, on egress port `out`: tail
    /// drop (lossy), ECN marking, buffer and PFC ingress accounting.
    fn switch_enqueue(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        in_port: u16,
        out: u16,
        mut pkt: Packet,
    ) {
        let local = ctx.local_index();
        let fabric = self.fabric;
        let config = &fabric.config;
        let gout = self.port_index(local, out);
        let prio = pkt.priority();
        let wire = u64::from(pkt.wire_bytes);
        if prio == PRIO_DATA {
            if !config.pfc {
                let free = config.buffer_bytes.saturating_sub(self.used_bytes[local]);
                let limit = (free as f64 * config.dt_alpha) as u64;
                if self.ports[gout].queued_bytes[prio] + wire > limit {
                    self.ports[gout].dropped_pkts[prio] += 1;
                    return;
                }
            }
            let p = &self.ports[gout];
            let q = p.queued_bytes[prio];
            let mark = if q >= p.ecn_kmax_bytes {
                true
            } else if q > p.ecn_kmin_bytes {
                let probability = p.ecn_pmax * (q - p.ecn_kmin_bytes) as f64
                    / (p.ecn_kmax_bytes - p.ecn_kmin_bytes) as f64;
                ctx.rng().next_f64() < probability
            } else {
                false
            };
            if mark {
                pkt.ce = 1;
                self.ports[gout].ecn_marked_pkts[prio] += 1;
            }
            let gin = self.port_index(local, in_port);
            self.ports[gin].ingress_bytes += wire;
        }
        pkt.in_port = in_port;
        self.used_bytes[local] += wire;
        let p = &mut self.ports[gout];
        p.queues[prio].push_back(pkt);
        p.queued_bytes[prio] += wire;
        if prio == PRIO_DATA && config.pfc {
            let gin = self.port_index(local, in_port);
            let xoff = self.pfc_xoff(local);
            let ingress = &mut self.ports[gin];
            if !ingress.pause_sent && ingress.ingress_bytes > xoff {
                ingress.pause_sent = true;
                ctx.send(
                    ingress.peer,
                    ingress.latency,
                    NetEvent::Pfc {
                        port: ingress.peer_port,
                        pause: true,
                    },
                );
            }
        }
        self.switch_try_send(ctx, out);
    }

    /// The output port of the current switch for `pkt`, which arrived on
    /// `in_port`. Dragonfly Valiant and UGAL decide at the source router and
    /// steer the packet through an intermediate router (`pkt.via`).
    fn route(&mut self, ctx: &mut Context<'_, NetEvent>, in_port: u16, pkt: &mut Packet) -> u16 {
        let fabric = self.fabric;
        let node = ctx.node().0;
        if pkt.via == node {
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
        let toward = if pkt.via == NO_NODE {
            pkt.dst
        } else {
            fabric.proxy_host[pkt.via as usize]
        };
        let hops = fabric.routing.switch_next_hops(node, toward);
        assert!(
            !hops.is_empty(),
            "switch {node} has no route to host {toward}"
        );
        hops[self.ecmp_choice(ctx, pkt, hops.len())]
    }

    /// Valiant: every packet of a flow crosses the same random intermediate
    /// router of a third group (per flow, so a queue pair is not reordered).
    /// UGAL (local): when a flow's first packet reaches its source router,
    /// take that Valiant path if the minimal output queue is more than twice
    /// as long as the Valiant one (the usual estimate of the Valiant path's
    /// extra hops), and keep the choice for the whole flow: deciding per
    /// packet reorders a RoCE queue pair into go-back-N storms.
    fn choose_intermediate(
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
        let Some(intermediate) =
            index.intermediate_router(here, there, five_tuple_hash(pkt.flow, pkt.src, pkt.dst))
        else {
            return;
        };
        if fabric.config.dragonfly_routing == DragonflyRouting::Ugal {
            let key = (node, pkt.flow);
            if let Some(&via) = self.ugal_choice.get(&key) {
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
                    .map(|&p| this.ports[this.port_index(local, p)].queued_bytes[PRIO_DATA])
                    .min()
                    .unwrap_or(0)
            };
            let (q_minimal, q_valiant) = (queue(minimal, self), queue(valiant, self));
            let via = if q_minimal > 2 * q_valiant + u64::from(fabric.config.mtu_bytes) {
                intermediate
            } else {
                NO_NODE
            };
            self.ugal_choice.insert(key, via);
            pkt.via = via;
            return;
        }
        pkt.via = intermediate;
    }

    fn switch_try_send(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        if !self.port_ready(ctx, gport, port) {
            return;
        }
        let p = &mut self.ports[gport];
        let prio = if !p.queues[PRIO_CONTROL].is_empty() {
            PRIO_CONTROL
        } else if !p.paused && !p.queues[PRIO_DATA].is_empty() {
            PRIO_DATA
        } else {
            return;
        };
        let pkt = p.queues[prio].pop_front().expect("queue checked non-empty");
        let wire = u64::from(pkt.wire_bytes);
        p.queued_bytes[prio] -= wire;
        self.used_bytes[local] -= wire;
        if prio == PRIO_DATA {
            let gin = self.port_index(local, pkt.in_port);
            self.ports[gin].ingress_bytes -= wire;
            if self.ports[gin].pause_sent {
                let xoff = self.pfc_xoff(local);
                let offset = self.fabric.config.pfc_xon_offset_bytes;
                let ingress = &mut self.ports[gin];
                if ingress.ingress_bytes + offset <= xoff || ingress.ingress_bytes <= offset {
                    ingress.pause_sent = false;
                    ctx.send(
                        ingress.peer,
                        ingress.latency,
                        NetEvent::Pfc {
                            port: ingress.peer_port,
                            pause: false,
                        },
                    );
                }
            }
        }
        self.transmit(ctx, gport, pkt);
        let p = &self.ports[gport];
        if !(p.queues[PRIO_CONTROL].is_empty() && p.queues[PRIO_DATA].is_empty()) {
            self.port_ready(ctx, gport, port);
        }
    }

    // ---- hosts: sending ---------------------------------------------------

    fn flow_start(&mut self, ctx: &mut Context<'_, NetEvent>, flow: u32) {
        let i = self.sender_of[&flow] as usize;
        let fabric = self.fabric;
        self.senders[i].start = ctx.now();
        if let Some(info) = fabric.workload.flow_info.get(flow as usize) {
            self.span_started(info.collective, ctx.now());
        }
        if self.senders[i].ina_op != NO_TASK {
            return self.ina_stream_start(ctx, i);
        }
        let (src, dst) = (self.senders[i].spec.src, self.senders[i].spec.dst);
        let probe = Packet {
            flow,
            src,
            dst,
            psn: 0,
            wire_bytes: 0,
            in_port: 0,
            kind: PacketKind::Data,
            ce: 0,
            last: false,
            via: NO_NODE,
            util: 0,
        };
        let hops = fabric.routing.next_hops(src, dst);
        assert!(!hops.is_empty(), "host {src} has no route to host {dst}");
        let port = hops.get(self.ecmp_choice(ctx, &probe, hops.len()));
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let line_rate_bps = self.ports[gport].rate_bps;
        let (ideal_fct, base_rtt) = ideal_fct(fabric, &self.senders[i].spec, port);
        let s = &mut self.senders[i];
        s.port = port;
        s.line_rate_bps = line_rate_bps;
        s.next_send = ctx.now();
        s.ideal_fct = ideal_fct;
        s.path_hash = five_tuple_hash(flow, src, dst);
        let bdp_bytes = line_rate_bps as f64 * base_rtt.as_ps() as f64 / 8e12;
        s.cc = CcState::new(
            fabric.config.cc,
            line_rate_bps,
            bdp_bytes.max(f64::from(fabric.config.mtu_bytes)),
        );
        self.ports[gport].flows.push(i as u32);
        // Even lossless fabrics reorder under spraying: every queue pair
        // keeps the NIC's retransmission timer.
        ctx.schedule_self(
            fabric.config.rto,
            NetEvent::Timer {
                flow,
                timer: FlowTimer::Retransmit,
            },
        );
        self.host_try_send(ctx, port);
    }

    /// Sends the next packet on a free host port: control first, then data
    /// from the flows round robin, as their rate or window allows.
    fn host_try_send(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let now = ctx.now();
        if !self.port_ready(ctx, gport, port) {
            return;
        }
        let p = &mut self.ports[gport];
        if let Some(pkt) = p.queues[PRIO_CONTROL].pop_front() {
            p.queued_bytes[PRIO_CONTROL] -= u64::from(pkt.wire_bytes);
            self.transmit(ctx, gport, pkt);
            self.host_continue(ctx, gport, port);
            return;
        }
        if p.paused || p.flows.is_empty() {
            return;
        }
        let config = &self.fabric.config;
        let mss = f64::from(config.mtu_bytes);
        let n = p.flows.len();
        let mut earliest = NO_WAKE;
        for k in 0..n {
            let slot = (p.round_robin + k) % n;
            let s = &mut self.senders[p.flows[slot] as usize];
            if s.next_psn >= s.packets {
                continue;
            }
            let ina = s.ina_op != NO_TASK;
            if ina && s.next_psn >= s.una + s.ina_window {
                // Every aggregation slot of the operation is in use.
                continue;
            }
            let rate_bps = match &s.cc {
                CcState::Dcqcn(d) => d.rate_bps as u64,
                CcState::Hpcc(h) => h.rate_bps as u64,
                CcState::Dctcp(d) => {
                    let in_flight_bytes = f64::from(s.next_psn - s.una) * mss;
                    if in_flight_bytes >= d.cwnd_bytes {
                        continue;
                    }
                    s.line_rate_bps
                }
                CcState::LineRate => s.line_rate_bps,
            };
            if s.next_send > now {
                earliest = earliest.min(s.next_send);
                continue;
            }
            let psn = s.next_psn;
            let payload = (s.spec.size_bytes - u64::from(psn) * u64::from(config.mtu_bytes))
                .min(u64::from(config.mtu_bytes));
            let wire_bytes = (payload + u64::from(config.header_bytes)) as u16;
            let pkt = Packet {
                flow: if ina { s.ina_op } else { s.flow },
                src: s.spec.src,
                dst: s.spec.dst,
                psn,
                wire_bytes,
                in_port: 0,
                kind: if ina {
                    PacketKind::InaUp
                } else {
                    PacketKind::Data
                },
                ce: 0,
                last: psn + 1 == s.packets,
                via: NO_NODE,
                util: 0,
            };
            if psn < s.max_sent {
                s.retransmitted_pkts += 1;
            } else {
                self.stats.sent_payload_bytes += payload;
            }
            s.next_psn += 1;
            s.max_sent = s.max_sent.max(s.next_psn);
            s.next_send = now + Port::serialization(u64::from(wire_bytes), rate_bps.max(1));
            p.round_robin = (slot + 1) % n;
            self.transmit(ctx, gport, pkt);
            self.host_continue(ctx, gport, port);
            return;
        }
        if earliest != NO_WAKE && earliest < p.wake_at {
            p.wake_generation = p.wake_generation.wrapping_add(1);
            p.wake_at = earliest;
            let generation = p.wake_generation;
            ctx.schedule_self(earliest - now, NetEvent::Wake { port, generation });
        }
    }

    /// After a host port started a packet: if it has more to send, come back
    /// when the port is free.
    #[inline]
    fn host_continue(&mut self, ctx: &mut Context<'_, NetEvent>, gport: usize, port: u16) {
        let p = &self.ports[gport];
        if !(p.queues[PRIO_CONTROL].is_empty() && p.flows.is_empty()) {
            self.port_ready(ctx, gport, port);
        }
    }

    /// Queues a control packet at the current host toward `pkt.dst`.
    fn host_send_control(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let fabric = self.fabric;
        let hops = fabric.routing.next_hops(ctx.node().0, pkt.dst);
        assert!(
            !hops.is_empty(),
            "host {} has no route to host {}",
            ctx.node(),
            pkt.dst
        );
        let port = hops.get(self.ecmp_choice(ctx, &pkt, hops.len()));
        let gport = self.port_index(ctx.local_index(), port);
        let p = &mut self.ports[gport];
        p.queued_bytes[PRIO_CONTROL] += u64::from(pkt.wire_bytes);
        p.queues[PRIO_CONTROL].push_back(pkt);
        self.host_try_send(ctx, port);
    }

    // ---- hosts: receiving -------------------------------------------------

    fn host_receive(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        debug_assert_eq!(pkt.dst, ctx.node().0);
        match pkt.kind {
            PacketKind::Data => self.receive_data(ctx, pkt),
            PacketKind::Ack | PacketKind::Nack => self.receive_ack(ctx, pkt),
            PacketKind::Cnp => self.receive_cnp(ctx, pkt),
            PacketKind::InaDown => self.ina_result(ctx, pkt),
            PacketKind::InaUp => unreachable!("aggregation packets go up to switches"),
        }
    }

    fn receive_data(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let config = &self.fabric.config;
        let (header_bytes, ack_interval, cnp_interval, control_bytes, dcqcn) = (
            config.header_bytes,
            config.ack_interval,
            config.dcqcn.cnp_interval,
            config.control_bytes as u16,
            config.cc == CcKind::Dcqcn,
        );
        let now = ctx.now();
        let rx = self.receivers.entry(pkt.flow).or_default();
        let reply = |kind, psn, ce| Packet {
            flow: pkt.flow,
            src: pkt.dst,
            dst: pkt.src,
            psn,
            wire_bytes: control_bytes,
            in_port: 0,
            kind,
            ce,
            last: false,
            via: NO_NODE,
            util: pkt.util,
        };
        let mut out: [Option<Packet>; 2] = [None, None];
        let mut delivered = false;
        if pkt.psn == rx.expected_psn {
            self.stats.delivered_payload_bytes +=
                u64::from(pkt.wire_bytes) - u64::from(header_bytes);
            rx.expected_psn += 1;
            delivered = pkt.last;
            rx.since_ack += 1;
            rx.ce_since_ack += u32::from(pkt.ce);
            rx.nacked_psn = None;
            if rx.since_ack >= ack_interval || pkt.last {
                out[0] = Some(reply(
                    PacketKind::Ack,
                    rx.expected_psn,
                    rx.ce_since_ack.min(255) as u8,
                ));
                rx.since_ack = 0;
                rx.ce_since_ack = 0;
            }
        } else if pkt.psn > rx.expected_psn {
            // A gap: packets were dropped or overtaken (spraying).
            if rx.nacked_psn != Some(rx.expected_psn) {
                rx.nacked_psn = Some(rx.expected_psn);
                out[0] = Some(reply(PacketKind::Nack, rx.expected_psn, 0));
            }
        } else {
            // A duplicate after go-back-N: repeat the cumulative ACK.
            out[0] = Some(reply(PacketKind::Ack, rx.expected_psn, 0));
        }
        if dcqcn && pkt.ce != 0 && rx.last_cnp.is_none_or(|t| now >= t + cnp_interval) {
            rx.last_cnp = Some(now);
            out[1] = Some(reply(PacketKind::Cnp, pkt.psn, 0));
        }
        for reply in out.into_iter().flatten() {
            self.host_send_control(ctx, reply);
        }
        if delivered {
            // The destination has the whole message: its dependents may start.
            if let Some(info) = self.fabric.workload.flow_info.get(pkt.flow as usize) {
                self.task_seen_complete(ctx, info.task, false);
            }
        }
    }

    fn receive_ack(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let Some(&i) = self.sender_of.get(&pkt.flow) else {
            return;
        };
        let i = i as usize;
        let config = &self.fabric.config;
        let (g, mss) = (config.dctcp_g, f64::from(config.mtu_bytes));
        let s = &mut self.senders[i];
        if s.end.is_some() {
            return;
        }
        let port = s.port;
        if pkt.psn > s.una {
            let acked = pkt.psn - s.una;
            s.una = pkt.psn;
            // After a go-back, ACKs for packets sent before it can overtake.
            s.next_psn = s.next_psn.max(s.una);
            s.ecn_marked_pkts += u64::from(pkt.ce);
            match &mut s.cc {
                CcState::Dctcp(d) => d.on_ack(g, mss, acked, u32::from(pkt.ce), s.una, s.next_psn),
                CcState::Hpcc(h) => h.on_ack(
                    &config.hpcc,
                    f64::from(pkt.util) / packet::UTIL_ONE,
                    s.una,
                    s.next_psn,
                    s.line_rate_bps,
                    config.dcqcn.min_rate_bps,
                ),
                _ => {}
            }
        }
        if pkt.kind == PacketKind::Nack && pkt.psn >= s.una && pkt.psn < s.next_psn {
            // Go back N: resend everything from the first missing packet.
            s.next_psn = pkt.psn;
        }
        if s.una >= s.packets {
            self.sender_finished(ctx, i);
        }
        self.host_try_send(ctx, port);
    }

    /// Sender `i` has every packet acknowledged (or every aggregation
    /// result back): record it and let the tasks waiting for it go.
    fn sender_finished(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let s = &mut self.senders[i];
        s.end = Some(ctx.now());
        let (flow, port) = (s.flow, s.port);
        self.stats.flows_finished += 1;
        let gport = self.port_index(ctx.local_index(), port);
        self.ports[gport].flows.retain(|&f| f as usize != i);
        self.record_flow(i);
        if let Some(info) = self.fabric.workload.flow_info.get(flow as usize) {
            self.task_seen_complete(ctx, info.task, true);
        }
    }

    fn receive_cnp(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let Some(&i) = self.sender_of.get(&pkt.flow) else {
            return;
        };
        let s = &mut self.senders[i as usize];
        if s.end.is_some() {
            return;
        }
        s.cnps += 1;
        let flow = s.flow;
        if let CcState::Dcqcn(d) = &mut s.cc {
            d.cnp_since_alpha = true;
            d.cnp_since_decrease = true;
            if !d.timers_running {
                // The first CNP cuts at once and starts the timers.
                d.timers_running = true;
                let c = &self.fabric.config.dcqcn;
                d.check_decrease(c);
                let generation = d.increase_generation;
                ctx.schedule_self(
                    c.alpha_update,
                    NetEvent::Timer {
                        flow,
                        timer: FlowTimer::DcqcnAlpha,
                    },
                );
                ctx.schedule_self(
                    c.rate_decrease_interval,
                    NetEvent::Timer {
                        flow,
                        timer: FlowTimer::DcqcnDecrease,
                    },
                );
                ctx.schedule_self(
                    c.rate_increase_timer,
                    NetEvent::Timer {
                        flow,
                        timer: FlowTimer::DcqcnIncrease { generation },
                    },
                );
            }
        }
    }

    fn flow_timer(&mut self, ctx: &mut Context<'_, NetEvent>, flow: u32, timer: FlowTimer) {
        let i = self.sender_of[&flow] as usize;
        let fabric = self.fabric;
        let c = &fabric.config.dcqcn;
        let s = &mut self.senders[i];
        if s.end.is_some() {
            return;
        }
        let line_rate_bps = s.line_rate_bps;
        match (timer, &mut s.cc) {
            (FlowTimer::DcqcnAlpha, CcState::Dcqcn(d)) => {
                d.update_alpha(c);
                ctx.schedule_self(c.alpha_update, NetEvent::Timer { flow, timer });
            }
            (FlowTimer::DcqcnDecrease, CcState::Dcqcn(d)) => {
                if d.check_decrease(c) {
                    let generation = d.increase_generation;
                    ctx.schedule_self(
                        c.rate_increase_timer,
                        NetEvent::Timer {
                            flow,
                            timer: FlowTimer::DcqcnIncrease { generation },
                        },
                    );
                }
                ctx.schedule_self(c.rate_decrease_interval, NetEvent::Timer { flow, timer });
            }
            (FlowTimer::DcqcnIncrease { generation }, CcState::Dcqcn(d)) => {
                if generation == d.increase_generation {
                    d.increase(c, line_rate_bps);
                    ctx.schedule_self(c.rate_increase_timer, NetEvent::Timer { flow, timer });
                    let port = s.port;
                    self.host_try_send(ctx, port);
                }
            }
            (FlowTimer::Retransmit, _) => {
                if s.una == s.rto_una && s.una < s.packets && s.next_psn > s.una {
                    s.next_psn = s.una;
                }
                s.rto_una = s.una;
                ctx.schedule_self(fabric.config.rto, NetEvent::Timer { flow, timer });
                let port = s.port;
                self.host_try_send(ctx, port);
            }
            _ => unreachable!("timer {timer:?} for a flow without that congestion control"),
        }
    }

    // ---- workload tasks ---------------------------------------------------

    /// Task `task` starts on the current host: a flow after the per-message
    /// host overhead, a compute task for its duration.
    fn start_task(&mut self, ctx: &mut Context<'_, NetEvent>, task: u32) {
        let workload = &self.fabric.workload;
        let t = workload.tasks[task as usize];
        debug_assert_eq!(t.host, ctx.node().0);
        match t.kind {
            TaskKind::Flow(flow) => {
                ctx.schedule_self(workload.host_overhead, NetEvent::FlowStart { flow })
            }
            TaskKind::Compute(duration) => {
                self.span_started(t.collective, ctx.now());
                ctx.schedule_self(duration, NetEvent::TaskDone { task });
            }
        }
    }

    /// The current host saw task `task` complete: at a flow's source
    /// (`at_source`, every byte acknowledged), at its destination (every
    /// byte delivered), or where a compute task ran. Starts the tasks on
    /// this host that were waiting only for it.
    fn task_seen_complete(&mut self, ctx: &mut Context<'_, NetEvent>, task: u32, at_source: bool) {
        let workload = &self.fabric.workload;
        let host = ctx.node().0;
        let t = workload.tasks[task as usize];
        if t.collective != NO_TASK {
            let span = &mut self.spans[t.collective as usize];
            span.end = span.end.max(ctx.now());
            // Counted once, where the task started.
            span.tasks_done += u32::from(at_source);
        }
        for &d in workload.dependents(task) {
            if workload.tasks[d as usize].host != host {
                continue;
            }
            let left = &mut self.remaining[d as usize];
            *left -= 1;
            if *left == 0 {
                self.start_task(ctx, d);
            }
        }
    }

    fn span_started(&mut self, collective: u32, now: SimTime) {
        if collective != NO_TASK {
            let span = &mut self.spans[collective as usize];
            span.start = span.start.min(now);
        }
    }

    fn record_flow(&mut self, i: usize) {
        let s = &self.senders[i];
        let start_ns = s.start.as_ns();
        let end_ns = s.end.map(SimTime::as_ns);
        let fct_ns = s.end.map(|e| (e - s.start).as_ns());
        let ideal_fct_ns = s.ideal_fct.as_ns();
        self.sink.flow(FlowRecord {
            flow_id: s.flow,
            src: s.spec.src,
            dst: s.spec.dst,
            size_bytes: s.spec.size_bytes,
            start_ns,
            end_ns,
            fct_ns,
            ideal_fct_ns,
            slowdown: fct_ns
                .filter(|_| ideal_fct_ns > 0)
                .map(|f| f as f64 / ideal_fct_ns as f64),
            ecmp_path: s.path_hash,
            ecn_marked_pkts: s.ecn_marked_pkts,
            cnps: s.cnps,
            retransmitted_pkts: s.retransmitted_pkts,
            finished: s.end.is_some(),
            collective_id: self.fabric.workload.flow_collective(s.flow),
            job: self.fabric.workload.flow_job(s.flow).cloned(),
        });
    }
}

impl Sender {
    fn new(flow: u32, spec: FlowSpec, config: &NetConfig) -> Sender {
        let packets = spec.size_bytes.div_ceil(u64::from(config.mtu_bytes));
        assert!(
            packets <= u64::from(u32::MAX),
            "flow {flow} has too many packets"
        );
        Sender {
            flow,
            spec,
            start: spec.start,
            packets: packets as u32,
            ina_op: NO_TASK,
            ina_window: 0,
            port: 0,
            line_rate_bps: 1,
            next_psn: 0,
            una: 0,
            max_sent: 0,
            next_send: SimTime::ZERO,
            end: None,
            cc: CcState::LineRate,
            cnps: 0,
            ecn_marked_pkts: 0,
            retransmitted_pkts: 0,
            ideal_fct: SimTime::ZERO,
            path_hash: 0,
            rto_una: 0,
        }
    }
}

/// Hash of a flow's 5-tuple (source and destination address, the flow's
/// source port, RoCEv2's UDP port 4791, UDP): the same for every packet of a
/// flow in one direction.
#[inline]
pub fn five_tuple_hash(flow: u32, src: u32, dst: u32) -> u64 {
    let mut h =
        (u64::from(src) << 32 | u64::from(dst)) ^ (u64::from(flow) << 16) ^ 4791 ^ (17 << 56);
    splitmix64(&mut h)
}

/// Ideal completion time of a flow alone in the network, as the sender sees
/// it (last ACK received), and the round-trip time of a full packet and its
/// ACK (what a window must cover to keep the path busy).
///
/// Along a minimum-latency path the flow's bytes cross the bottleneck link
/// back to back; every other hop adds one store-and-forward of the last
/// packet; the ACK returns over the same links.
pub fn ideal_fct(fabric: &Fabric, spec: &FlowSpec, first_port: u16) -> (SimTime, SimTime) {
    let topo = &fabric.topo;
    let config = &fabric.config;
    let mtu = u64::from(config.mtu_bytes);
    let packets = spec.size_bytes.div_ceil(mtu);
    let wire_total = spec.size_bytes + packets * u64::from(config.header_bytes);
    let last_wire = spec.size_bytes - (packets - 1) * mtu + u64::from(config.header_bytes);
    let control = u64::from(config.control_bytes);
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
    let bottleneck = hops.iter().map(|h| h.0).min().expect("a path has a link");
    let mut fct = Port::serialization(wire_total, bottleneck);
    let mut rtt = SimTime::ZERO;
    let mut bottleneck_counted = false;
    for &(rate, latency) in &hops {
        fct += SimTime(latency);
        if rate == bottleneck && !bottleneck_counted {
            bottleneck_counted = true;
        } else {
            fct += Port::serialization(last_wire, rate);
        }
        let back = SimTime(latency) + Port::serialization(control, rate);
        fct += back;
        // A full-size packet out and its ACK back, store-and-forward at every hop.
        rtt += SimTime(latency)
            + Port::serialization(mtu + u64::from(config.header_bytes), rate)
            + back;
    }
    (fct, rtt)
}

/// What one shard of a network run hands back.
#[derive(Debug)]
pub struct ShardOutcome<S> {
    pub sink: S,
    pub stats: NetStats,
    pub handled_events: u64,
    /// Per collective of the workload, what this shard's hosts saw.
    pub spans: Vec<CollectiveSpan>,
}

/// Result of [`simulate`].
#[derive(Debug)]
pub struct NetRun<S> {
    /// Per shard run by this process, in shard order.
    pub shards: Vec<ShardOutcome<S>>,
    /// Time of the last event that changed anything, anywhere.
    pub sim_end: SimTime,
    pub windows: u64,
}

impl<S> NetRun<S> {
    pub fn events(&self) -> u64 {
        self.shards.iter().map(|s| s.handled_events).sum()
    }

    pub fn stats(&self) -> NetStats {
        let mut total = NetStats::default();
        for s in &self.shards {
            total += s.stats;
        }
        total
    }

    /// Per collective, what all shards saw together.
    pub fn spans(&self) -> Vec<CollectiveSpan> {
        merge_spans(self.shards.iter().map(|s| s.spans.as_slice()))
    }
}

/// The `collectives` table: each collective of `workload` with its span.
pub fn collective_records(workload: &Workload, spans: &[CollectiveSpan]) -> Vec<CollectiveRecord> {
    workload
        .collectives
        .iter()
        .zip(spans)
        .enumerate()
        .map(|(id, (c, span))| {
            let started = span.start != SimTime::MAX;
            let complete = started && span.tasks_done == c.tasks;
            let start_ns = started.then(|| span.start.as_ns());
            let end_ns = complete.then(|| span.end.as_ns());
            CollectiveRecord {
                collective_id: id as u32,
                name: c.name.clone(),
                op: c.op.name(),
                algorithm: c.algorithm.clone(),
                group_size: c.group_size,
                size_bytes: c.size_bytes,
                start_ns,
                end_ns,
                duration_ns: start_ns.zip(end_ns).map(|(s, e)| e - s),
                offloaded: c.offloaded,
                fallback_reason: c.fallback_reason.clone(),
                job: workload.collective_job(id as u32).cloned(),
            }
        })
        .collect()
}

/// Per collective, the union of what several shards (or ranks) saw.
pub fn merge_spans<'a>(parts: impl Iterator<Item = &'a [CollectiveSpan]>) -> Vec<CollectiveSpan> {
    let mut total: Vec<CollectiveSpan> = Vec::new();
    for part in parts {
        if total.is_empty() {
            total = vec![CollectiveSpan::UNSEEN; part.len()];
        }
        for (t, p) in total.iter_mut().zip(part) {
            t.merge(p);
        }
    }
    total
}

/// Runs the network of `fabric` on the shards of `layout`, one worker
/// thread each, until every flow has finished or `end` is reached.
/// `make_sink(shard)` gives each shard its telemetry sink; `progress`, if
/// given, follows the run (for a progress display).
pub fn simulate<S, F>(
    fabric: &Fabric,
    layout: &Layout,
    end: SimTime,
    progress: Option<&Progress>,
    make_sink: F,
) -> NetRun<S>
where
    S: TelemetrySink,
    F: Fn(ShardId) -> S + Sync,
{
    simulate_on(&Threads, fabric, layout, end, progress, make_sink)
}

/// [`simulate`] on the shards `executor` runs in this process (all of them
/// on threads; this rank's under MPI). The outcome holds those shards only;
/// `sim_end` and `windows` are the run's.
pub fn simulate_on<E, S, F>(
    executor: &E,
    fabric: &Fabric,
    layout: &Layout,
    end: SimTime,
    progress: Option<&Progress>,
    make_sink: F,
) -> NetRun<S>
where
    E: Executor,
    S: TelemetrySink,
    F: Fn(ShardId) -> S + Sync,
{
    let reports = executor.run(layout, fabric.seed, end, progress, |shard, nodes| {
        Network::new(fabric, nodes, make_sink(shard))
    });
    // Samples and links rows run to the end of the whole run, on every rank alike.
    let last_activity = reports
        .iter()
        .map(|r| r.model.last_activity.as_ps())
        .max()
        .unwrap_or(0);
    let sim_end = SimTime(executor.max_over_processes(last_activity));
    let windows = reports.first().map_or(0, |r| r.windows);
    // Finishing writes telemetry: do it for all shards in parallel.
    let shards = std::thread::scope(|scope| {
        let handles: Vec<_> = reports
            .into_iter()
            .map(|r| {
                scope.spawn(move || {
                    let (sink, stats, spans) = r.model.finish(sim_end);
                    ShardOutcome {
                        sink,
                        stats,
                        handled_events: r.handled_events,
                        spans,
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("finishing a shard panicked"))
            .collect()
    });
    NetRun {
        shards,
        sim_end,
        windows,
    }
}

impl<S: TelemetrySink> Model for Network<'_, S> {
    type Payload = NetEvent;

    fn start(&mut self, ctx: &mut Context<'_, NetEvent>) {
        let local = ctx.local_index();
        if self.fabric.workload.has_tasks() {
            let first = self
                .root_tasks
                .partition_point(|&(l, _)| (l as usize) < local);
            let roots = self.root_tasks[first..]
                .iter()
                .take_while(|&&(l, _)| l as usize == local)
                .map(|&(_, t)| t);
            for task in roots.collect::<Vec<_>>() {
                self.start_task(ctx, task);
            }
            return;
        }
        let range = self.sender_base[local] as usize..self.sender_base[local + 1] as usize;
        for s in &self.senders[range] {
            ctx.schedule_self(s.spec.start, NetEvent::FlowStart { flow: s.flow });
        }
    }

    #[inline]
    fn handle(&mut self, ctx: &mut Context<'_, NetEvent>, event: NetEvent) {
        let local = ctx.local_index();
        if let NetEvent::Timer { flow, .. } = event {
            // The engine cannot cancel events: a finished flow's last timer
            // still fires, and changes nothing (not even the run's end).
            if self.senders[self.sender_of[&flow] as usize].end.is_some() {
                return;
            }
        }
        self.last_activity = ctx.now();
        if self.next_sample[local] <= ctx.now() {
            self.sample_until(local, ctx.now());
        }
        match event {
            NetEvent::Arrive { port, pkt } => {
                if self.is_host(ctx.node()) {
                    self.host_receive(ctx, pkt);
                } else {
                    self.switch_receive(ctx, port, pkt);
                }
            }
            NetEvent::TxDone { port } => self.tx_done(ctx, port),
            NetEvent::Pfc { port, pause } => self.pfc_frame(ctx, port, pause),
            NetEvent::FlowStart { flow } => self.flow_start(ctx, flow),
            NetEvent::Wake { port, generation } => {
                let gport = self.port_index(local, port);
                if self.ports[gport].wake_generation == generation {
                    self.ports[gport].wake_at = NO_WAKE;
                    self.host_try_send(ctx, port);
                }
            }
            NetEvent::Timer { flow, timer } => self.flow_timer(ctx, flow, timer),
            NetEvent::TaskDone { task } => self.task_seen_complete(ctx, task, true),
            NetEvent::InaEmit { op, chunk, in_port } => self.ina_emit(ctx, op, chunk, in_port),
        }
    }
}
