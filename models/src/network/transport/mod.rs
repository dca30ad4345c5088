//! Transports: the per-flow queue-pair state at the NICs, and the
//! reliability logic: RoCE go-back-N behind two small traits, and the
//! Ultra Ethernet transport (`uec/`: spraying, SACK, trimming NACKs, NSCC).
//!
//! A [`Sender`] is one queue pair at its source host: what the NIC's
//! scheduler reads to pace it (`port`, `next_send`, `cc`), the flow's record,
//! and `qp`, the transport's own sequence state. A [`Receiver`] is the same
//! queue pair at the destination. The network calls the transport only
//! through [`SenderReliability`] and [`ReceiverReliability`], statically:
//! a second transport (Ultra Ethernet's packet-spraying RUD, say) implements
//! both, and `qp` becomes an enum over the implementations, one `match` per
//! call, no `dyn` dispatch and no allocation per packet.

pub(crate) mod roce;
pub(crate) mod uec;

use super::cc::CcState;
use super::config::NetConfig;
use super::config::Transport;
use super::packet::{Packet, PacketKind};
use super::Fabric;
use crate::traffic::FlowSpec;
use crate::workload::NONE as NO_TASK;
use hashbrown::HashMap;
use netsim_engine::SimTime;
use netsim_engine::{NodeId, NodeRng};
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
    /// Local port index at the source host.
    pub port: u16,
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

    /// Packets sent and not acknowledged.
    #[inline]
    pub(crate) fn in_flight(&self) -> u32 {
        match self {
            Qp::Roce(q) => q.in_flight(),
            Qp::Uec(u) => u.in_flight(),
        }
    }

    /// The packet `next_psn` named leaves at `now`: its psn, whether it was
    /// a retransmission, and its entropy (0 for RoCE).
    #[inline]
    pub(crate) fn on_send(&mut self, now: SimTime, rng: &mut NodeRng) -> (u32, bool, u16) {
        match self {
            Qp::Roce(q) => {
                let psn = q.next_psn();
                (psn, q.on_send(), 0)
            }
            Qp::Uec(u) => u.on_send(now, rng),
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
            port: 0,
            line_rate_bps: 1,
            qp: match config.transport {
                Transport::Roce => Qp::Roce(GoBackNSender::default()),
                Transport::Uec => Qp::Uec(Box::new(UecSender::new(
                    flow,
                    packets as u32,
                    &config.uec,
                    config.mtu_bytes,
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

/// The queue pairs of one shard: senders of local sources, receivers of
/// local destinations, and UEC's receiver credit state.
#[derive(Debug)]
pub(crate) struct Transports {
    /// Queue pairs whose source is local, grouped by node.
    pub senders: Vec<Sender>,
    /// Senders of local node `i` are `senders[sender_base[i]..sender_base[i + 1]]`.
    pub sender_base: Vec<u32>,
    /// Global flow id -> local sender index, for flows whose source is local.
    pub sender_of: HashMap<u32, u32>,
    /// Queue pairs whose destination is local, by global flow id.
    pub receivers: HashMap<u32, Receiver>,
    /// UEC RCCC credit state of local hosts that receive, by node.
    pub credit_issuers: HashMap<u32, uec::rccc::CreditIssuer>,
}

impl Transports {
    /// A sender for every flow whose source is among `nodes` (increasing
    /// ids), grouped by source node in flow order; no receivers yet.
    pub(crate) fn new(fabric: &Fabric, nodes: &[NodeId]) -> Transports {
        let config = &fabric.config;
        // Senders grouped by source node, in flow order within a node.
        let workload = &fabric.workload;
        let mut local_flows: Vec<(usize, u32)> = workload
            .flows
            .iter()
            .enumerate()
            .filter_map(|(id, spec)| {
                // A flow that is no task's never starts: a memo sandbox's
                // workload keeps the run's flows (their ids hash ECMP) but
                // only its domain's tasks, and needs no sender for the rest.
                if workload
                    .flow_info(id as u32)
                    .is_some_and(|i| i.task == NO_TASK)
                {
                    return None;
                }
                let local = nodes.binary_search(&NodeId(spec.src)).ok()?;
                Some((local, id as u32))
            })
            .collect();
        local_flows.sort_unstable();
        let mut sender_of = HashMap::with_capacity(local_flows.len());
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
                    sender.qp = Qp::Roce(GoBackNSender::default());
                    sender.ina_window = op.slots;
                }
            }
            sender_of.insert(id, senders.len() as u32);
            senders.push(sender);
            sender_base[local + 1] += 1;
        }
        for i in 0..nodes.len() {
            sender_base[i + 1] += sender_base[i];
        }
        Transports {
            senders,
            sender_base,
            sender_of,
            receivers: HashMap::new(),
            credit_issuers: HashMap::new(),
        }
    }
}
