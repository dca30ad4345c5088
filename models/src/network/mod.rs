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
//! | part           | holds (its state in `Network`)                     |
//! |----------------|----------------------------------------------------|
//! | `port`         | the ports (`Port`, three cache lines: link, serialiser, PFC pause, egress queues), and by port `tx_bytes`, `port_side` (counters, HPCC meter) |
//! | `switch`       | buffer admission, ECN, PFC thresholds, egress scheduling (`buffers`, `ingress`, `ecn`) |
//! | `forwarding`   | ECMP hash, per-packet spray, dragonfly routing (`Forwarding`) |
//! | `nic`          | host port scheduling over queue pairs, pacing, CC driver (`hosts`) |
//! | `transport`    | queue pairs; RoCE go-back-N; UEC spraying, SACK, NSCC (`Transports`) |
//! | `cc`           | congestion-control algorithms (pure state machines) |
//! | `aggregation`  | in-network aggregation at switches and members (`Aggregation`) |
//! | `tasks`        | the workload's task DAG and collective spans (`Tasks`) |
//! | `faults`       | link failures, slow links, bit errors (`node_faults`, `health`, `Port::down_causes`) |
//! | `telemetry`    | queue and link samples, flow records (`next_sample`) |
//! | `fast_forward` | jumps and memoization, behind hooks (`FastForwarding`) |
//! | `fabric`, `run`| shared read-only description; running the shards   |
//! | `common`, `config`, `packet` | ids, pure formulas, parameters, packets: leaves every part may use |
//! | `wire`         | how events cross MPI ranks (bytes of a `NetEvent`) |
//!
//! The parts import each other one way (`port` builds the switch's and
//! the faults' per-port state; neither reaches back into `port`). Each
//! struct is defined beside the behaviour that owns it; its fields are
//! visible within the network (the switch and the NIC fill a port's egress
//! queues), except fast-forward's, which stay behind its hooks.
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
mod external;
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
pub use external::{host_mac, mac_host, ExternalPorts};
pub use fabric::{host_classes, ideal_fct, Fabric, MAX_FABRIC_WINDOW_WALKS};
pub use fast_forward::rail_classes;

/// What a packet-level run holds per flow in flight at its source, a
/// generous estimate for the memory check: the sender in its slot, its
/// entry in the map from flows to slots (up to twice 9 B at the map's
/// load), its entry in its port's list of queue pairs (4 B) and under UEC
/// its boxed window state (the windows' own vectors not counted).
pub fn bytes_per_sender(transport: config::Transport) -> u64 {
    let uec = match transport {
        config::Transport::Roce => 0,
        config::Transport::Uec => std::mem::size_of::<transport::uec::UecSender>() as u64,
    };
    std::mem::size_of::<transport::Sender>() as u64 + 18 + 4 + uec
}

/// What fast-forward's sample rings hold per port and per flow in flight
/// at its source (0 when it is off), for the memory check: each keeps one
/// sample per check period of the steady window (`--ff-window-us`).
pub fn fast_forward_bytes_per_port_and_sender(ff: Option<config::FastForward>) -> (u64, u64) {
    fast_forward::bytes_per_port_and_sender(ff)
}

/// What a packet-level run holds per flow in flight at its destination:
/// the receiver and its entry in the map from flows to receivers, up to
/// twice at the map's load. A RoCE receiver is freed when its message is
/// whole, leaving a bit per workload flow; a UEC receiver stays.
pub const BYTES_PER_RECEIVER: u64 =
    2 * (std::mem::size_of::<(u32, transport::Receiver)>() as u64 + 1);
pub use common::five_tuple_hash;
pub(crate) use common::{ecmp_pick, serialization, NO_NODE};
pub(crate) use fabric::PathTiming;
pub use faults::{dead_links, FaultPlan};
pub use run::{
    collective_order, collective_record, collective_records, merge_spans, simulate, simulate_on,
    NetRun, NetStats, ShardOutcome,
};
pub use telemetry::link_tier;

use crate::telemetry::TelemetrySink;
use aggregation::Aggregation;
use forwarding::Forwarding;
use netsim_engine::{Context, Model, NodeId, SimTime};
use packet::Packet;
use port::Port;
use switch::{Ingress, SharedBuffer};
use tasks::Tasks;
use transport::Transports;

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
    /// its destination; or any RoCE flow at its destination once its
    /// sender has the last ACK (`recv_complete_at_ack`).
    MemoEnd { flow: u32, at_source: bool },
    /// A flow following its twin on a leading rail (`--ff-rails`) ends at
    /// its source or destination, at its twin's instant.
    RailEnd { flow: u32, at_source: bool },
    /// The twin of follower `flow`, started at `start_ps` (high, low
    /// words: an event stays 4-aligned), finished with these counters
    /// (retransmitted, ECN-marked, CNPs): the follower's row is written.
    RailDone {
        flow: u32,
        start_ps: [u32; 2],
        counters: [u32; 3],
    },
    /// A frame from the handling host's SimBricks peer enters the fabric.
    ExternalSend { pkt: Packet },
}

/// Per-flow timers of the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowTimer {
    DcqcnAlpha,
    DcqcnDecrease,
    DcqcnIncrease {
        generation: u32,
    },
    Retransmit,
    /// UEC SLEEK: a probe may be due.
    Probe,
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
    /// port: per port (as `ports`), what no per-packet step reads.
    port_side: Vec<port::PortSide>,
    /// port: per port, the bytes it sent per priority, less those still
    /// counted in the port (`Port::tx_unflushed`; `tx_bytes` adds both).
    tx_flushed: Vec<[u64; packet::PRIORITIES]>,
    /// switch: the distinct ECN markings of this shard's ports, by
    /// `Port::ecn_class` (every data packet a switch queues reads one).
    ecn: Vec<switch::EcnMarking>,
    /// nic: per port, the queue pairs on it (hosts; empty at switches).
    hosts: Vec<nic::HostQueue>,
    /// faults: per port, its link's health besides `Port::down_causes`.
    health: Vec<faults::LinkHealth>,
    /// faults: some port of this shard loses packets to bit errors.
    lossy_links: bool,
    /// switch: per port (as `ports`), the PFC ingress accounting of its
    /// link: dense, as every switch hop reads its in-port's.
    ingress: Vec<Ingress>,
    /// switch: per local node, its shared buffer (unused at hosts).
    buffers: Vec<SharedBuffer>,
    /// forwarding: ECMP seeds and UGAL's choices.
    forwarding: Forwarding,
    /// transport: the queue pairs of local sources and destinations.
    transport: Transports,
    /// tasks: the workload's DAG as this shard's hosts see it.
    tasks: Tasks,
    /// faults: the faults each local node sees, `(local, fault)`, sorted.
    node_faults: Vec<(u32, u32)>,
    /// aggregation: in-network aggregation state and counters.
    aggregation: Aggregation,
    /// telemetry: per local node, when its next queue and link samples are due.
    next_sample: Vec<SimTime>,
    /// telemetry: what leaves idle ports' rows out.
    idle_rows: telemetry::IdleRows,
    stats: NetStats,
    /// Fast-forward: jumps and memoization (`fast_forward/`).
    ff: fast_forward::FastForwarding,
    /// Time of the last event that changed anything.
    last_activity: SimTime,
    /// SimBricks links of this shard's hosts (`external`).
    external: external::Links,
}

impl<'f, S: TelemetrySink> Network<'f, S> {
    /// State for the nodes `nodes` (increasing ids) of one shard.
    pub fn new(fabric: &'f Fabric, nodes: &[NodeId], sink: S) -> Network<'f, S> {
        let config = &fabric.config;
        let port::ShardPorts {
            port_base,
            ports,
            buffers,
            ecn,
            health,
            lossy,
        } = port::shard_ports(fabric, nodes);
        let transport = Transports::new(fabric, nodes);
        let aggregation = Aggregation::new(fabric, nodes);
        let ff = fast_forward::FastForwarding::new(config.fast_forward, fabric, ports.len());
        let first_sample = if config.sample_period != SimTime::ZERO {
            SimTime::ZERO
        } else {
            SimTime::MAX
        };
        Network {
            ff,
            forwarding: Forwarding::new(fabric, nodes),
            next_sample: vec![first_sample; nodes.len()],
            // Only sampling reads the last rows.
            idle_rows: telemetry::IdleRows::new(
                config.keep_idle_rows,
                config.fast_forward.is_some(),
                nodes.len(),
                if first_sample == SimTime::MAX {
                    0
                } else {
                    ports.len()
                },
            ),
            buffers,
            nodes: nodes.to_vec(),
            port_base,
            ingress: vec![Ingress::default(); ports.len()],
            port_side: (0..ports.len())
                .map(|_| port::PortSide::default())
                .collect(),
            tx_flushed: vec![[0; packet::PRIORITIES]; ports.len()],
            hosts: (0..ports.len()).map(|_| nic::HostQueue::new()).collect(),
            ecn,
            health,
            lossy_links: lossy,
            ports,
            transport,
            stats: NetStats::default(),
            tasks: Tasks::new(fabric, nodes),
            node_faults: fabric.faults.seen_by(&fabric.topo, nodes),
            aggregation,
            last_activity: SimTime::ZERO,
            external: external::Links::take(&fabric.external, nodes),
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
        self.external_finish(end);
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
        self.stats.sender_slots = self.transport.senders.len() as u64;
        self.stats.qp_rates_declined = self.transport.qp_rates_declined;
        self.stats.qp_rates_parked_left = self.transport.hand_overs_left() as u64;
        self.record_unfinished();
        self.stats.dropped_pkts = self
            .port_side
            .iter()
            .map(|p| p.counters.dropped_pkts.iter().sum::<u64>() + p.counters.error_dropped_pkts)
            .sum();
        self.stats.retransmitted_pkts = self.transport.released_retransmitted_pkts
            + self
                .transport
                .senders
                .iter()
                .filter(|s| s.start != SimTime::MAX)
                .map(|s| s.retransmitted_pkts)
                .sum::<u64>();
        for record in std::mem::take(&mut self.aggregation.offload) {
            if record.is_used() {
                self.sink.switch_offload(record);
            }
        }
        (self.sink, self.stats, self.tasks.into_spans())
    }

    #[inline]
    fn is_host(&self, node: NodeId) -> bool {
        node.0 < self.fabric.topo.host_count()
    }

    /// Whether flow `flow`'s source host is one of this shard's nodes.
    fn source_is_local(&self, flow: u32) -> bool {
        let src = self.fabric.workload.flows[flow as usize].src;
        self.nodes.binary_search(&NodeId(src)).is_ok()
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
                .tasks
                .root_tasks
                .partition_point(|&(l, _)| (l as usize) < local);
            let roots = self.tasks.root_tasks[first..]
                .iter()
                .take_while(|&&(l, _)| l as usize == local)
                .map(|&(_, t)| t);
            for task in roots.collect::<Vec<_>>() {
                self.start_task(ctx, task);
            }
            return;
        }
        let range = self.transport.traffic_base[local] as usize
            ..self.transport.traffic_base[local + 1] as usize;
        for &flow in &self.transport.traffic[range] {
            let at = self.fabric.workload.flows[flow as usize].start;
            ctx.schedule_self(at, NetEvent::FlowStart { flow });
        }
    }

    #[inline]
    fn handle(&mut self, ctx: &mut Context<'_, NetEvent>, event: NetEvent) {
        let local = ctx.local_index();
        if let NetEvent::Timer { flow, .. } = event {
            // The engine cannot cancel events: a finished flow's last timer
            // still fires (its sender is gone), and changes nothing (not
            // even the run's end).
            let Some(&i) = self.transport.sender_of.get(&flow) else {
                return;
            };
            let s = &self.transport.senders[i as usize];
            if s.end.is_some() || s.gave_up {
                return;
            }
        }
        self.last_activity = ctx.now();
        if self.next_sample[local] <= ctx.now() {
            self.sample_until(local, ctx.now());
        }
        self.idle_rows.touched(local);
        // Each event goes to the part it concerns: packets to the host's NIC
        // or the switch, port events to the port, timers to the transport or
        // the congestion control, workload events to the task driver.
        match event {
            NetEvent::Arrive { port, pkt } => {
                let gport = self.port_index(local, port);
                if self.link_ever_down(gport) && self.lost_on_dead_link(gport, &pkt, ctx.now()) {
                    self.port_side[gport].counters.dropped_pkts[pkt.priority()] += 1;
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
                let i = self.transport.sender_of[&flow] as usize;
                match timer {
                    FlowTimer::Retransmit => self.retransmit_timer(ctx, i),
                    FlowTimer::Probe => self.uec_probe_timer(ctx, i),
                    _ => self.cc_timer(ctx, i, timer),
                }
            }
            NetEvent::TaskDone { task } => self.task_seen_complete(ctx, task, true),
            NetEvent::InaEmit { op, chunk, in_port } => self.ina_emit(ctx, op, chunk, in_port),
            NetEvent::Fault { fault } => self.apply_fault(ctx, fault),
            NetEvent::MemoEnd { flow, at_source } => self.memo_end(ctx, flow, at_source),
            NetEvent::RailEnd { flow, at_source } => self.rail_end(ctx, flow, at_source),
            NetEvent::RailDone {
                flow,
                start_ps: [hi, lo],
                counters,
            } => self.rail_done(flow, SimTime(u64::from(hi) << 32 | u64::from(lo)), counters),
            NetEvent::ExternalSend { pkt } => self.external_send(ctx, pkt),
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
        self.memo_agree(now, all_max)?;
        self.ff_agree_quiet(all_max)
    }

    fn skip_parts(
        &mut self,
        now: SimTime,
        end: SimTime,
        pending: &mut dyn Iterator<Item = (SimTime, NetEvent)>,
        all_max: netsim_engine::AllMax<'_>,
    ) -> Result<(u64, SimTime), netsim_engine::Aborted> {
        self.ff_domain_jumps(now, end, pending, all_max)
    }

    fn skip_part_event(&self, target: NodeId, event: &mut NetEvent) -> SimTime {
        self.ff_domain_event(target, event)
    }

    fn skip_parts_done(&mut self, now: SimTime) {
        self.ff_domain_advance(now);
    }

    fn external(
        &mut self,
        done: SimTime,
        inject: &mut netsim_engine::Inject<'_, NetEvent>,
    ) -> Result<SimTime, netsim_engine::Aborted> {
        self.external_step(done, inject)
    }
}
