//! Transports: the per-flow queue-pair state at the NICs, and the
//! reliability logic: RoCE go-back-N behind two small traits, and the
//! Ultra Ethernet transport (`uec/`: spraying, SACK, trimming NACKs, NSCC),
//! and one queue pair's DCQCN state across messages (`queue_pair.rs`).
//!
//! A [`Sender`] is one queue pair at its source host: what the NIC's
//! scheduler reads to pace it (`port`, `next_send`, `cc`), the flow's record,
//! and `qp`, the transport's own sequence state. A [`Receiver`] is the same
//! queue pair at the destination. The network calls the transport only
//! through [`SenderReliability`] and [`ReceiverReliability`], statically:
//! a second transport (Ultra Ethernet's packet-spraying RUD, say) implements
//! both, and `qp` becomes an enum over the implementations, one `match` per
//! call, no `dyn` dispatch and no allocation per packet.

mod queue_pair;
pub(crate) mod roce;
pub(crate) mod uec;

use super::cc::CcState;
use super::config::NetConfig;
use super::config::Transport;
use super::packet::{Packet, PacketKind};
use super::Fabric;
use crate::traffic::FlowSpec;
use crate::workload::{FlowInfo, NONE as NO_TASK};
use hashbrown::{HashMap, HashSet};
use netsim_engine::SimTime;
use netsim_engine::{NodeId, NodeRng};
pub(crate) use queue_pair::ParkedRate;
pub(crate) use roce::{GoBackNReceiver, GoBackNSender};
use uec::sack::SackReceiver;
use uec::UecSender;

/// The sender's side of a reliable transport: which packet goes next, and
/// what an acknowledgement or a timeout changes.
pub(crate) trait SenderReliability {
    /// The psn the next packet carries.
    fn next_psn(&self) -> u32;
    /// Packets acknowledged in order (the first unacknowledged psn).
    fn acked(&self) -> u32;
    /// Packets sent and not acknowledged.
    #[inline]
    fn in_flight(&self) -> u32 {
        self.next_psn() - self.acked()
    }
    /// The packet `next_psn()` left; whether it was a retransmission.
    fn on_send(&mut self) -> bool;
    /// A cumulative acknowledgement up to `psn` (exclusive) arrived; the
    /// number of packets it newly acknowledges.
    fn on_ack(&mut self, psn: u32) -> u32;
    /// The receiver reports `psn` missing.
    fn on_nack(&mut self, psn: u32);
    /// The retransmission timer fired; the message has `packets` packets.
    fn on_timeout(&mut self, packets: u32);
}

/// The receiver's side of a reliable transport.
pub(crate) trait ReceiverReliability {
    /// A data packet arrived; `ack_interval` is how many in-order packets
    /// one ACK covers.
    fn on_data(&mut self, pkt: &Packet, ack_interval: u32) -> RxVerdict;
}

/// What a receiver made of one data packet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxVerdict {
    /// The packet was delivered in order (its payload counts).
    pub in_order: bool,
    /// A control packet to send back: kind, psn, ECN-marked packets covered.
    pub reply: Option<(PacketKind, u32, u8)>,
}

/// Sender-side state of one flow (RoCEv2 queue pair).
#[derive(Debug)]
pub(crate) struct Sender {
    pub flow: u32,
    pub spec: FlowSpec,
    /// When the flow actually started (its dependencies may delay it).
    pub start: SimTime,
    pub packets: u32,
    /// In-network aggregation stream: the operation, and the chunks it may
    /// have outstanding; `NO_TASK` for a host-to-host flow.
    pub ina_op: u32,
    pub ina_window: u32,
    /// The flow ahead of this one on its queue pair ([`FlowInfo::after`]),
    /// `NO_TASK` for none: this one waits while that one has packets left
    /// to send from the same port.
    pub after: u32,
    /// A queued flow took its queue pair's DCQCN state (or found none) at
    /// its first turn to send ([`Transports::take_rate`]).
    pub rate_taken: bool,
    /// The queued flow that took this one's DCQCN state (`NO_TASK`: none):
    /// CNPs for this flow's last packets reach the queue pair's state there.
    pub handed_to: u32,
    /// The flow queued behind this one had its turn to send (took the
    /// state or declined it) or finished: this one parks no state for it.
    pub queued_had_turn: bool,
    /// Local port index at the source host.
    pub port: u16,
    /// Its packets are sent from `port` (not replayed by fast-forward, not
    /// an aggregation stream).
    pub on_port: bool,
    /// UEC plane spraying: the host ports (a bit each) the queue pair is
    /// scheduled on, `port` among them; 0 when it has `port` alone.
    pub spray_ports: u64,
    pub line_rate_bps: u64,
    /// The transport's sequence state.
    pub qp: Qp,
    /// Pacing: the NIC may send this flow's next packet from then on.
    pub next_send: SimTime,
    pub end: Option<SimTime>,
    pub cc: CcState,
    pub cnps: u64,
    pub ecn_marked_pkts: u64,
    pub retransmitted_pkts: u64,
    /// Retransmission timeouts in a row without an acknowledgement, and the
    /// packets acknowledged at the last one ([`Qp::acked_packets`]).
    pub stalled_timeouts: u32,
    pub timeout_acked_packets: u32,
    /// The queue pair ran out of retries and stopped, unfinished.
    pub gave_up: bool,
    pub ideal_fct: SimTime,
    pub path_hash: u64,
    /// Base RTT of the flow's path (a full packet out, its ACK back).
    pub base_rtt: SimTime,
    /// Line rate x base RTT: the sender window's size.
    pub bdp_bytes: u64,
    /// When an ACK last acknowledged new packets (fast-forward measures
    /// rates between such instants, free of the packet quantum).
    pub last_ack: SimTime,
    /// Fast-forward: payload bytes and time this flow jumped over.
    pub skipped_bytes: u64,
    pub skipped: SimTime,
}

/// A sender's sequence state, by transport: one `match` per call, no `dyn`.
#[derive(Debug)]
pub(crate) enum Qp {
    Roce(GoBackNSender),
    /// Boxed: its windows are per flow, and RoCE senders stay small.
    Uec(Box<UecSender>),
}

impl Qp {
    /// The psn that goes next; `packets` (or more) when nothing may.
    #[inline]
    pub(crate) fn next_psn(&mut self, packets: u32) -> u32 {
        match self {
            Qp::Roce(q) => q.next_psn(),
            Qp::Uec(u) => u.next_psn().unwrap_or(packets),
        }
    }

    /// Packets acknowledged in order.
    #[inline]
    pub(crate) fn acked(&self) -> u32 {
        match self {
            Qp::Roce(q) => q.acked(),
            Qp::Uec(u) => u.acked(),
        }
    }

    /// Packets acknowledged so far, cumulatively or selectively: progress,
    /// as the retry counter judges it (a UEC sender whose first missing
    /// packet is late still progresses while later ones are SACKed).
    pub(crate) fn acked_packets(&self) -> u32 {
        match self {
            Qp::Roce(q) => q.acked(),
            Qp::Uec(u) => u.acked_packets(),
        }
    }

    /// UEC: whether a packet sent at least `rto` before `now` is still
    /// outstanding (a timer per packet would fire for it).
    pub(crate) fn uec_expired(&self, now: SimTime, rto: SimTime) -> bool {
        match self {
            Qp::Roce(_) => false,
            Qp::Uec(u) => u.expired(now, rto),
        }
    }

    /// Packets sent and not acknowledged.
    #[inline]
    pub(crate) fn in_flight(&self) -> u32 {
        match self {
            Qp::Roce(q) => q.in_flight(),
            Qp::Uec(u) => u.in_flight(),
        }
    }

    /// The host port a sprayed UEC queue pair last sent on (none for RoCE,
    /// which keeps one port).
    #[inline]
    pub(crate) fn last_port(&self) -> u16 {
        match self {
            Qp::Roce(_) => uec::planes::NO_PLANE,
            Qp::Uec(u) => u.last_plane,
        }
    }

    /// The packet `next_psn` named leaves at `now` on plane `plane` (UEC
    /// plane spraying; else 0): its psn, whether it was a retransmission,
    /// and its entropy (0 for RoCE).
    #[inline]
    pub(crate) fn on_send(
        &mut self,
        now: SimTime,
        rng: &mut NodeRng,
        plane: u16,
    ) -> (u32, bool, u16) {
        match self {
            Qp::Roce(q) => {
                let psn = q.next_psn();
                (psn, q.on_send(), 0)
            }
            Qp::Uec(u) => u.on_send(now, rng, plane),
        }
    }

    /// The `util` field of the data packet `on_send` last named (UEC: it
    /// asks for an ACK at once; 0 otherwise).
    #[inline]
    pub(crate) fn data_util(&self) -> u16 {
        match self {
            Qp::Roce(_) => 0,
            Qp::Uec(u) => u.ack_request(),
        }
    }

    /// The go-back-N state of a RoCE queue pair (aggregation streams).
    pub(crate) fn roce(&mut self) -> &mut GoBackNSender {
        match self {
            Qp::Roce(q) => q,
            Qp::Uec(_) => unreachable!("a RoCE-only path reached a UEC queue pair"),
        }
    }
}

/// A receiver's sequence state, by transport.
#[derive(Debug)]
pub(crate) enum RxQp {
    Roce(GoBackNReceiver),
    Uec(SackReceiver),
}

/// Receiver-side state of one flow.
#[derive(Debug)]
pub(crate) struct Receiver {
    /// The transport's sequence state.
    pub qp: RxQp,
    /// DCQCN notification point: when this flow's last CNP left.
    pub last_cnp: Option<SimTime>,
}

impl Sender {
    /// A queue pair for flow `flow`, not started: `start`, `port`, rate and
    /// congestion control are set when it starts.
    pub fn new(flow: u32, spec: FlowSpec, config: &NetConfig) -> Sender {
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
            after: NO_TASK,
            rate_taken: false,
            handed_to: NO_TASK,
            queued_had_turn: false,
            port: 0,
            on_port: false,
            spray_ports: 0,
            line_rate_bps: 1,
            qp: match config.transport {
                Transport::Roce => Qp::Roce(GoBackNSender::default()),
                Transport::Uec => Qp::Uec(Box::new(UecSender::new(
                    flow,
                    packets as u32,
                    &config.uec,
                    config.mtu_bytes,
                    config.header_bytes,
                ))),
            },
            next_send: SimTime::ZERO,
            end: None,
            cc: CcState::LineRate,
            cnps: 0,
            ecn_marked_pkts: 0,
            retransmitted_pkts: 0,
            stalled_timeouts: 0,
            timeout_acked_packets: 0,
            gave_up: false,
            ideal_fct: SimTime::ZERO,
            path_hash: 0,
            base_rtt: SimTime::ZERO,
            bdp_bytes: 0,
            last_ack: SimTime::ZERO,
            skipped_bytes: 0,
            skipped: SimTime::ZERO,
        }
    }
}

/// `Transports::received_cnp`'s smallest length at which its expired
/// entries are dropped.
const RECEIVED_CNP_PRUNE_LEN: usize = 1024;

/// The queue pairs of one shard: senders of local sources, receivers of
/// local destinations, and UEC's receiver credit state.
///
/// A sender exists only while its flow runs: [`Transports::open`] makes
/// it in a free slot of `senders` when the flow starts, and
/// [`Transports::release`] frees the slot when the flow finishes, so the
/// shard holds what is in flight, never the whole workload. A free slot
/// keeps `start == SimTime::MAX` (the mark every scan of `senders` skips).
#[derive(Debug)]
pub(crate) struct Transports {
    /// Queue pairs of flows started at local sources and not released,
    /// by slot (a local sender index).
    pub senders: Vec<Sender>,
    /// Free slots of `senders`, the last freed on top.
    free: Vec<u32>,
    /// Global flow id -> slot, for the flows that hold one.
    pub sender_of: HashMap<u32, u32>,
    /// Without tasks: the workload's flows whose source is local, grouped
    /// by local node in flow order (node `i`'s are
    /// `traffic[traffic_base[i]..traffic_base[i + 1]]`); empty with tasks.
    pub traffic: Vec<u32>,
    pub traffic_base: Vec<u32>,
    /// Without tasks: one bit per workload flow, set when it starts (a
    /// flow that never started is reported unfinished at the end).
    started: Vec<u64>,
    /// Retransmitted packets of the senders released so far.
    pub released_retransmitted_pkts: u64,
    /// Queue pairs whose destination is local, by global flow id.
    pub receivers: HashMap<u32, Receiver>,
    /// RoCE: one bit per workload flow, set when its destination (local)
    /// has received every packet and its receiver was freed; empty under
    /// UEC, whose receivers stay.
    received: Vec<u64>,
    /// Of those flows, when the last CNP left, kept only while it still
    /// holds the next one back (DCQCN's CNP interval).
    pub received_cnp: HashMap<u32, SimTime>,
    /// `received_cnp`'s length at which the expired entries go next.
    received_cnp_prune_len: usize,
    /// UEC RCCC credit state of local hosts that receive, by node.
    pub credit_issuers: HashMap<u32, uec::rccc::CreditIssuer>,
    /// DCQCN states of queue pairs between messages, by the flow that
    /// finished and left its state for the flow queued behind it
    /// (`queue_pair.rs`): empty again once every queued flow had its turn.
    pub parked: HashMap<u32, ParkedRate>,
    /// Flows ahead that opened before the flow queued behind them started
    /// (`queue_pair.rs`): that start finds them opened and goes ahead.
    pub opened_ahead: HashSet<u32>,
    /// Queued flows whose start waits for their flow ahead to open, by the
    /// flow ahead: a queue pair posts its messages in order.
    pub held: HashMap<u32, u32>,
    /// Queued flows that had their turn and left their queue pair's DCQCN
    /// state (another port, sprayed, not DCQCN).
    pub qp_rates_declined: u64,
}

impl Transports {
    /// No senders yet; without tasks, the local flows to start, grouped by
    /// source node in flow order.
    pub(crate) fn new(fabric: &Fabric, nodes: &[NodeId]) -> Transports {
        let workload = &fabric.workload;
        let mut traffic_base = vec![0u32; nodes.len() + 1];
        let mut traffic = Vec::new();
        let mut started = Vec::new();
        if !workload.has_tasks() {
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
            for &(local, _) in &local_flows {
                traffic_base[local + 1] += 1;
            }
            for i in 0..nodes.len() {
                traffic_base[i + 1] += traffic_base[i];
            }
            traffic = local_flows.into_iter().map(|(_, id)| id).collect();
            started = vec![0u64; workload.flows.len().div_ceil(64)];
        }
        Transports {
            senders: Vec::new(),
            free: Vec::new(),
            sender_of: HashMap::new(),
            traffic,
            traffic_base,
            started,
            released_retransmitted_pkts: 0,
            receivers: HashMap::new(),
            received: match fabric.config.transport {
                Transport::Roce => vec![0u64; workload.flow_count().div_ceil(64)],
                Transport::Uec => Vec::new(),
            },
            received_cnp: HashMap::new(),
            received_cnp_prune_len: RECEIVED_CNP_PRUNE_LEN,
            credit_issuers: HashMap::new(),
            parked: HashMap::new(),
            opened_ahead: HashSet::new(),
            held: HashMap::new(),
            qp_rates_declined: 0,
        }
    }

    /// The next packet sender `i` may send, its packet count (none) while
    /// it is [`Transports::queued_behind`] another.
    #[inline]
    pub(crate) fn sendable_psn(&mut self, i: usize) -> u32 {
        if self.queued_behind(i) {
            return self.senders[i].packets;
        }
        let s = &mut self.senders[i];
        s.qp.next_psn(s.packets)
    }

    /// A sender for flow `flow` in a free slot (the slab grows only when
    /// none is free); returns the slot. Its `start` is the flow's own
    /// (`SimTime::MAX` for a workload task's: it starts when the task does).
    pub(crate) fn open(
        &mut self,
        flow: u32,
        spec: FlowSpec,
        info: Option<FlowInfo>,
        fabric: &Fabric,
    ) -> usize {
        let workload = &fabric.workload;
        let mut sender = Sender::new(flow, spec, &fabric.config);
        if let Some(info) = info {
            sender.start = SimTime::MAX;
            sender.after = info.after;
            if info.ina_op != NO_TASK {
                let op = &workload.ina_ops[info.ina_op as usize];
                sender.ina_op = info.ina_op;
                // Aggregation streams are RoCE go-back-N under either transport.
                sender.qp = Qp::Roce(GoBackNSender::default());
                sender.ina_window = op.slots;
            }
        }
        if !self.started.is_empty() {
            self.started[flow as usize / 64] |= 1 << (flow % 64);
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.senders[slot as usize] = sender;
                slot
            }
            None => {
                self.senders.push(sender);
                u32::try_from(self.senders.len() - 1).expect("fewer than 2^32 flows in flight")
            }
        };
        let old = self.sender_of.insert(flow, slot);
        assert!(old.is_none(), "flow {flow} started twice");
        slot as usize
    }

    /// Frees slot `i` (its flow finished and was recorded): its flow no
    /// longer maps to it and its transport state is dropped.
    pub(crate) fn release(&mut self, i: usize) {
        self.queued_released(i);
        let s = &mut self.senders[i];
        self.released_retransmitted_pkts += s.retransmitted_pkts;
        self.sender_of.remove(&s.flow);
        s.start = SimTime::MAX;
        s.qp = Qp::Roce(GoBackNSender::default());
        self.free.push(i as u32);
    }

    /// RoCE: flow `flow`'s receiver has every packet: it is freed. A late
    /// duplicate finds the flow in `received` and is answered as the
    /// receiver would (the ACK of the whole message; a CNP as its last
    /// one, kept in `received_cnp`, allows).
    pub(crate) fn receiver_done(&mut self, flow: u32, now: SimTime, cnp_interval: SimTime) {
        let rx = self.receivers.remove(&flow).expect("a receiver");
        self.received[flow as usize / 64] |= 1 << (flow % 64);
        if let Some(t) = rx.last_cnp {
            self.keep_cnp(flow, t, now, cnp_interval);
        }
    }

    /// Whether flow `flow`'s receiver was freed, every packet received.
    pub(crate) fn received(&self, flow: u32) -> bool {
        !self.received.is_empty() && self.received[flow as usize / 64] & (1 << (flow % 64)) != 0
    }

    /// A marked duplicate of received flow `flow` arrived at `now`:
    /// whether a CNP goes back (none left in the last `cnp_interval`);
    /// if so it is now the last.
    pub(crate) fn received_cnp_due(&mut self, flow: u32, now: SimTime, interval: SimTime) -> bool {
        let due = self
            .received_cnp
            .get(&flow)
            .is_none_or(|&t| now >= t + interval);
        if due {
            self.keep_cnp(flow, now, now, interval);
        }
        due
    }

    /// Keeps flow `flow`'s last CNP time `t` while it holds the next one
    /// back; forgets, once the map doubled, the entries that no longer do
    /// (the same answer as no entry), so the map holds what is recent.
    fn keep_cnp(&mut self, flow: u32, t: SimTime, now: SimTime, interval: SimTime) {
        if now < t + interval {
            self.received_cnp.insert(flow, t);
        } else {
            self.received_cnp.remove(&flow);
        }
        if self.received_cnp.len() >= self.received_cnp_prune_len {
            self.received_cnp.retain(|_, t| now < *t + interval);
            self.received_cnp_prune_len = (2 * self.received_cnp.len()).max(RECEIVED_CNP_PRUNE_LEN);
        }
    }

    /// Whether flow `flow` (a workload without tasks) has started.
    pub(crate) fn started(&self, flow: u32) -> bool {
        self.started[flow as usize / 64] & (1 << (flow % 64)) != 0
    }
}
