//! The packet-level network: a thin [`Network`] that owns each shard's
//! per-node state and dispatches every event to the part it concerns.
//!
//! ```text
//!  host: nic ──port──link──port── switch ──port──link──port── nic :host
//!        │                          │
//!   transport (RoCE go-back-N,   forwarding (ECMP + entropy, spray, Valiant/UGAL)
//!    UEC spraying/SACK/NSCC)
//!   cc (DCQCN, DCTCP, HPCC)      aggregation (in-network reduce, barrier)
//!   tasks (workload DAG)
//! ```
//!
//! | part           | holds                                              |
//! |----------------|----------------------------------------------------|
//! | `port`         | egress queues per priority, serialisation, PFC pause state |
//! | `switch`       | buffer admission, ECN, PFC thresholds, egress scheduling |
//! | `forwarding`   | ECMP hash, per-packet spray, dragonfly routing     |
//! | `nic`          | host port scheduling over queue pairs, pacing, CC driver |
//! | `transport`    | queue pairs; RoCE go-back-N; UEC spraying, SACK, NSCC |
//! | `cc`           | congestion-control algorithms (pure state machines) |
//! | `aggregation`  | in-network aggregation at switches and members     |
//! | `tasks`        | the workload's task DAG and collective spans       |
//! | `telemetry`    | queue and link samples, flow records               |
//! | `fabric`, `run`| shared read-only description; running the shards   |
//!
//! A packet put on the wire becomes one event, its `Arrive` at the peer
//! after serialisation plus link latency: the only way nodes affect each
//! other (PFC frames travel the same way). Queued packets wait in the port's
//! FIFOs and are not events; a busy port with a queue keeps exactly one
//! pending `TxDone`, so an uncongested hop costs one event per packet.

mod aggregation;
pub mod cc;
mod common;
pub mod config;
mod fabric;
mod fast_forward;
mod faults;
mod forwarding;
mod nic;
pub mod packet;
mod port;
pub mod profile;
mod run;
mod switch;
mod tasks;
mod telemetry;
mod transport;
mod wire;

pub use crate::workload::progress::CollectiveSpan;
pub(crate) use aggregation::{chunk_tail, ideal_stream};
pub use fabric::{ideal_fct, Fabric};

/// What a packet-level run holds per flow of its shard, a generous estimate
/// for the memory check: the sender, its entry in the map from flows to
/// senders (up to twice 9 B at the map's load), and the entry that sorts
/// senders by node while they are made (16 B).
pub const BYTES_PER_SENDER: u64 = std::mem::size_of::<transport::Sender>() as u64 + 18 + 16;
pub use common::five_tuple_hash;
pub(crate) use common::{ecmp_pick, serialization, NO_NODE};
pub(crate) use fabric::PathTiming;
pub use faults::{dead_links, FaultPlan};
pub use run::{
    collective_record, collective_records, merge_spans, simulate, simulate_on, NetRun, NetStats,
    ShardOutcome,
};
pub use telemetry::link_tier;

use crate::telemetry::{SwitchOffloadRecord, TelemetrySink};
use crate::workload::progress::DagProgress;
use crate::workload::NONE as NO_TASK;
use aggregation::Aggregator;
use hashbrown::HashMap;
use netsim_engine::{Context, Model, NodeId, SimTime};
use packet::Packet;
pub(crate) use port::Port;
use switch::SharedBuffer;
use transport::{Receiver, Sender};

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
    /// Fault `fault` of the fabric's plan happens at the handling node.
    Fault { fault: u32 },
    /// A replayed flow (DESIGN.md §3c, memoization) ends at its source or
    /// its destination.
    MemoEnd { flow: u32, at_source: bool },
}

/// Per-flow timers of the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowTimer {
    DcqcnAlpha,
    DcqcnDecrease,
    DcqcnIncrease { generation: u32 },
    Retransmit,
}

/// The network nodes owned by one shard: every part's per-node state, in
/// plain vectors indexed by local node, port, or sender index. The parts
/// (`port`, `switch`, `forwarding`, `nic`, `transport`, `aggregation`,
/// `tasks`, `telemetry`) are `impl Network` blocks over these fields.
pub struct Network<'f, S> {
    fabric: &'f Fabric,
    sink: S,
    nodes: Vec<NodeId>,
    /// port: ports of local node `i` are `ports[port_base[i]..port_base[i + 1]]`.
    port_base: Vec<u32>,
    ports: Vec<Port>,
    /// switch: per local node, its shared buffer (unused at hosts).
    buffers: Vec<SharedBuffer>,
    /// forwarding: per local node, the seed of its ECMP hash.
    ecmp_seed: Vec<u64>,
    /// UGAL: the path (intermediate router or `NO_NODE`) each flow took at
    /// its source router `(router, flow)`.
    ugal_choice: HashMap<(u32, u32), u32>,
    /// transport: queue pairs whose source is local, grouped by node.
    senders: Vec<Sender>,
    /// Senders of local node `i` are `senders[sender_base[i]..sender_base[i + 1]]`.
    sender_base: Vec<u32>,
    /// Global flow id -> local sender index, for flows whose source is local.
    sender_of: HashMap<u32, u32>,
    /// transport: queue pairs whose destination is local, by global flow id.
    receivers: HashMap<u32, Receiver>,
    /// transport: UEC RCCC credit state of local hosts that receive, by node.
    credit_issuers: HashMap<u32, transport::uec::rccc::CreditIssuer>,
    /// tasks: the DAG as this shard's hosts saw it (dependencies not yet
    /// complete, only this shard's hosts' entries used; collective spans).
    dag: DagProgress,
    /// tasks: scratch for the tasks a completion releases.
    ready: Vec<u32>,
    /// Workload tasks without dependencies, per local node: `(local, task)`, sorted.
    root_tasks: Vec<(u32, u32)>,
    /// faults: the faults each local node sees, `(local, fault)`, sorted.
    node_faults: Vec<(u32, u32)>,
    /// aggregation: local sender of `(op, host)`.
    ina_sender_of: HashMap<(u32, u32), u32>,
    /// aggregation: the state of `(op, switch)` for local switches.
    aggregators: HashMap<(u32, u32), Aggregator>,
    /// aggregation: per local node, in-network computing counters (switches).
    offload: Vec<SwitchOffloadRecord>,
    /// telemetry: per local node, when its next queue and link samples are due.
    next_sample: Vec<SimTime>,
    stats: NetStats,
    /// Fast-forward: jumps and memoization (`fast_forward/`).
    ff: fast_forward::FastForwarding,
    /// Time of the last event that changed anything.
    last_activity: SimTime,
}

impl<'f, S: TelemetrySink> Network<'f, S> {
    /// State for the nodes `nodes` (increasing ids) of one shard.
    pub fn new(fabric: &'f Fabric, nodes: &[NodeId], sink: S) -> Network<'f, S> {
        let topo = &fabric.topo;
        let config = &fabric.config;
        let mut port_base = Vec::with_capacity(nodes.len() + 1);
        let mut ports = Vec::new();
        let mut buffers = Vec::with_capacity(nodes.len());
        for &node in nodes {
            port_base.push(ports.len() as u32);
            let mut headroom = 0;
            for p in topo.ports(node.0) {
                let link = topo.link(p.link);
                let ecn = config.ecn_for(link.bandwidth_bps);
                // Fixed headroom, rate x latency headroom (SimAI: 3 x) and
                // the ingress reserve, all off the shared pool.
                let in_flight_bytes = u128::from(link.bandwidth_bps) * u128::from(link.latency_ps)
                    / 8_000_000_000_000;
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
                    ecn,
                );
                // Bit errors on every link (the flag) and on this one (a SimAI
                // file's error_rate column), independent of each other.
                let loss =
                    1.0 - (1.0 - config.link_error_rate) * (1.0 - topo.link_error_rate(p.link));
                if loss > 0.0 {
                    // Each link direction draws from its own stream.
                    let direction = u64::from(link.a != node.0);
                    let mut seed =
                        fabric.seed ^ (u64::from(p.link) << 1 | direction) ^ 0x1055_E7E5 << 32;
                    port.health.error_rng = netsim_engine::splitmix64(&mut seed);
                    port.health.error_threshold = (loss * 18_446_744_073_709_551_616.0) as u64;
                }
                ports.push(port);
            }
            buffers.push(SharedBuffer {
                used_bytes: 0,
                headroom_bytes: headroom,
            });
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
            if let Some(info) = workload.flow_info(id) {
                // Starts when its task does.
                sender.start = SimTime::MAX;
                if info.ina_op != NO_TASK {
                    let op = &workload.ina_ops[info.ina_op as usize];
                    sender.ina_op = info.ina_op;
                    // Aggregation streams are RoCE go-back-N under either transport.
                    sender.qp = transport::Qp::Roce(transport::GoBackNSender::default());
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
        let mut node_faults = Vec::new();
        for (f, fault) in fabric.faults.faults.iter().enumerate() {
            for (local, &node) in nodes.iter().enumerate() {
                let seen = topo
                    .ports(node.0)
                    .iter()
                    .any(|p| fault.touches(node.0, p.peer));
                if seen {
                    node_faults.push((local as u32, f as u32));
                }
            }
        }
        node_faults.sort_unstable();
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
        let ff = fast_forward::FastForwarding::new(
            config.fast_forward,
            fabric,
            senders.len(),
            ports.len(),
        );
        Network {
            ff,
            ecmp_seed: nodes.iter().map(|n| fabric.ecmp_seed(n.0)).collect(),
            next_sample: vec![
                if sampling {
                    SimTime::ZERO
                } else {
                    SimTime::MAX
                };
                nodes.len()
            ],
            sender_base,
            buffers,
            nodes: nodes.to_vec(),
            port_base,
            ports,
            senders,
            sender_of,
            receivers: HashMap::new(),
            credit_issuers: HashMap::new(),
            ugal_choice: HashMap::new(),
            stats: NetStats::default(),
            dag: DagProgress::new(workload),
            ready: Vec::new(),
            root_tasks,
            node_faults,
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
            .map(|p| p.counters.dropped_pkts.iter().sum::<u64>() + p.counters.error_dropped_pkts)
            .sum();
        self.stats.retransmitted_pkts = self.senders.iter().map(|s| s.retransmitted_pkts).sum();
        for record in std::mem::take(&mut self.offload) {
            if record.is_used() {
                self.sink.switch_offload(record);
            }
        }
        (self.sink, self.stats, self.dag.into_spans())
    }

    #[inline]
    fn is_host(&self, node: NodeId) -> bool {
        node.0 < self.fabric.topo.host_count()
    }

    #[inline]
    fn port_index(&self, local: usize, port: u16) -> usize {
        self.port_base[local] as usize + port as usize
    }
}

impl<S: TelemetrySink> Model for Network<'_, S> {
    type Payload = NetEvent;

    fn start(&mut self, ctx: &mut Context<'_, NetEvent>) {
        let local = ctx.local_index();
        let first = self
            .node_faults
            .partition_point(|&(l, _)| (l as usize) < local);
        for &(l, fault) in &self.node_faults[first..] {
            if l as usize != local {
                break;
            }
            let at = self.fabric.faults.faults[fault as usize].time;
            ctx.schedule_self(at, NetEvent::Fault { fault });
        }
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
            let s = &self.senders[self.sender_of[&flow] as usize];
            if s.end.is_some() || s.gave_up {
                return;
            }
        }
        self.last_activity = ctx.now();
        if self.next_sample[local] <= ctx.now() {
            self.sample_until(local, ctx.now());
        }
        // Each event goes to the part it concerns: packets to the host's NIC
        // or the switch, port events to the port, timers to the transport or
        // the congestion control, workload events to the task driver.
        match event {
            NetEvent::Arrive { port, pkt } => {
                let gport = self.port_index(local, port);
                let p = &self.ports[gport];
                if (p.health.down_causes != 0 || p.health.last_down != SimTime::ZERO)
                    && self.lost_on_dead_link(gport, &pkt, ctx.now())
                {
                    self.ports[gport].counters.dropped_pkts[pkt.priority()] += 1;
                    return;
                }
                if self.is_host(ctx.node()) {
                    self.host_receive(ctx, pkt);
                } else {
                    self.switch_receive(ctx, port, pkt);
                }
            }
            NetEvent::TxDone { port } => self.tx_done(ctx, port),
            NetEvent::Pfc { port, pause } => self.pfc_frame(ctx, port, pause),
            NetEvent::FlowStart { flow } => self.flow_start(ctx, flow),
            NetEvent::Wake { port, generation } => self.host_wake(ctx, port, generation),
            NetEvent::Timer { flow, timer } => {
                let i = self.sender_of[&flow] as usize;
                match timer {
                    FlowTimer::Retransmit => self.retransmit_timer(ctx, i),
                    _ => self.cc_timer(ctx, i, timer),
                }
            }
            NetEvent::TaskDone { task } => self.task_seen_complete(ctx, task, true),
            NetEvent::InaEmit { op, chunk, in_port } => self.ina_emit(ctx, op, chunk, in_port),
            NetEvent::Fault { fault } => self.apply_fault(ctx, fault),
            NetEvent::MemoEnd { flow, at_source } => self.memo_end(ctx, flow, at_source),
        }
    }

    fn skip_period(&self) -> SimTime {
        self.ff_period()
    }

    fn skip_proposal(&mut self, now: SimTime) -> netsim_engine::SkipProposal {
        self.ff_proposal(now)
    }

    fn skip_pinned(&self, event: &NetEvent) -> bool {
        Self::ff_pinned(event)
    }

    fn skip_votes(&mut self, _now: SimTime, delta: SimTime, votes: &mut Vec<u64>) {
        self.ff_votes(delta, votes);
    }

    fn skip_event(&self, event: &mut NetEvent, votes: &[u64]) {
        self.ff_event(event, votes);
    }

    fn skip(&mut self, now: SimTime, delta: SimTime, votes: &[u64]) {
        self.ff_skip(now, delta, votes);
    }

    fn skip_agree(
        &mut self,
        now: SimTime,
        all_max: netsim_engine::AllMax<'_>,
    ) -> Result<(), netsim_engine::Aborted> {
        self.memo_agree(now, all_max)
    }
}
