//! Parameters of the network model, with defaults taken from the configurations
//! that RoCE simulation studies use: SimAI's `SimAI.conf` for ECN (KMIN/KMAX/PMAX
//! maps), the shared buffer (32 MB) and DCQCN's gain, alpha update, rate-decrease
//! interval, additive and hyper-additive steps and minimum rate; the DCQCN paper
//! (Zhu et al., SIGCOMM'15) for the CNP interval (50 us), the rate-increase timer
//! (55 us) and five fast-recovery stages, which keep two flows on a 100 Gb/s
//! bottleneck from collapsing to the minimum rate under SimAI's deep thresholds.

mod validate;

use netsim_engine::SimTime;

pub mod uec;
pub use uec::{fabric_rtt, BaseRtt, LoadBalancing, NsccAdjust, Transport, UecCc, UecConfig};

/// Congestion control run by the NICs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcKind {
    /// DCQCN (Zhu et al., SIGCOMM'15), the RoCEv2 default: rate-based, CNP driven.
    Dcqcn,
    /// DCTCP (Alizadeh et al., SIGCOMM'10): ECN-echo window control.
    Dctcp,
    /// HPCC (Li et al., SIGCOMM'19) with PINT-style telemetry: every switch
    /// stamps its egress link's normalised utilisation and a packet carries
    /// the path maximum, which the sender reacts to per ACK.
    Hpcc,
    /// TIMELY (Mittal et al., SIGCOMM'15): rate set once per round trip
    /// from the RTT and its gradient.
    Timely,
    /// Line rate, relying on PFC alone.
    None,
}

/// TIMELY parameters, named as SimAI's ns-3 names them (`TimelyAlpha`,
/// `TimelyBeta`, `TimelyTLow`, `TimelyTHigh`, `TimelyMinRtt`; the steps
/// are `RATE_AI` and `RATE_HAI`, shared with DCQCN there).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelyConfig {
    /// Weight of a new round's RTT difference in the smoothed one.
    pub alpha: f64,
    /// Multiplicative decrease factor.
    pub beta: f64,
    /// Below this RTT the rate always grows.
    pub t_low: SimTime,
    /// Above this RTT the rate always falls.
    pub t_high: SimTime,
    /// The gradient's normaliser.
    pub min_rtt: SimTime,
    pub additive_increase_bps: u64,
    pub hyper_increase_bps: u64,
}

/// HPCC parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpccConfig {
    /// Target utilisation.
    pub eta: f64,
    /// Additive-increase stages before a multiplicative adjustment.
    pub max_stage: u32,
    pub additive_increase_bps: u64,
    /// The base RTT `T` of the utilisation estimate (queue / (B T) + rate / B)
    /// under [`HpccUtilisation::WindowRate`].
    pub base_rtt: SimTime,
    /// How switches measure a link's utilisation for the INT stamp.
    pub utilisation: HpccUtilisation,
    /// The sender smooths the path utilisation over one base RTT,
    /// `U = (U (T - tau) + u tau) / T` with `tau` the time since the last
    /// sample (capped at `T`), as SimAI's `UpdateRateHp` does; off, it reacts
    /// to each sample as it comes.
    pub ewma: bool,
    /// `FAST_REACT`: every ACK adjusts the rate from the reference; off,
    /// only the once-per-RTT update does.
    pub fast_react: bool,
    /// A rate change moves the next paced packet by the difference between
    /// a full packet's sending time at the new rate and at the old (SimAI's
    /// `ChangeRate`); off, the new rate applies from the next packet on.
    pub retime_on_rate_change: bool,
}

/// How an HPCC switch turns its egress port's state into a utilisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpccUtilisation {
    /// Bytes sent over the last full window of one base RTT, plus the queue
    /// over `B T` (netsim's first model).
    WindowRate,
    /// INT deltas, as SimAI's sender computes them from two consecutive
    /// records of the same flow: the bytes the port sent between the flow's
    /// previous packet and this one over the time between them, plus
    /// `min(queue, previous queue) / (B T)` with `T` the flow's own base
    /// RTT (`base_rtt` is not used).
    IntDelta,
}

/// How the sender's window bounds the bytes in flight of a rate-based
/// queue pair (DCQCN, HPCC): SimAI's `HAS_WIN` and `VAR_WIN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowMode {
    /// No window: the rate alone paces the queue pair.
    Off,
    /// At most one bandwidth-delay product (line rate x base RTT) in flight.
    Bdp,
    /// The BDP scaled by the current rate over the line rate (`VAR_WIN 1`).
    VariableBdp,
}

/// How the notification point tells the sender of ECN marks (DCQCN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnpMode {
    /// A CNP packet, at most one per flow per `cnp_interval` (0: one per
    /// marked packet), as ConnectX's `min_time_between_cnps`.
    Packet,
    /// A CNP flag on every ACK that acknowledges a marked packet, as SimAI's
    /// receiver does; no separate CNP packets.
    AckFlag,
}

/// How switches choose among equal-cost next hops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpMode {
    /// Hash of the flow's 5-tuple with a per-switch seed: one path per flow.
    Hash,
    /// A fresh random choice per packet.
    Spray,
}

/// What a RoCEv2 packet's UDP source port, which the ECMP hash covers, is
/// taken from (`--ecmp-entropy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpEntropy {
    /// A new source port per flow, as SimAI's ns-3 gives every flow its own
    /// queue pair: a collective repeated takes new paths.
    Flow,
    /// The connection's: one per (source, destination, communicator), as
    /// NCCL keeps its queue pairs for a communicator's lifetime, so a
    /// collective repeated on one communicator takes the same paths. A
    /// communicator stands for (job, group size, point-to-point or not):
    /// NCCL's all-to-all and sends use p2p connections, the other
    /// collectives their ring/tree channels. Plain traffic (no collective)
    /// keeps one connection per flow.
    Connection,
}

/// How dragonfly routers route between groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DragonflyRouting {
    /// Shortest paths (ECMP among them).
    Minimal,
    /// Through a random intermediate router of a third group, per flow.
    Valiant,
    /// Per packet, minimal or the flow's Valiant path, by local queue occupancy.
    Ugal,
}

/// ECN marking (RED on the egress queue) for links of one rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EcnProfile {
    pub rate_bps: u64,
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
}

/// DCQCN reaction-point and notification-point parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnConfig {
    /// EWMA gain of alpha.
    pub g: f64,
    pub alpha_update: SimTime,
    pub rate_decrease_interval: SimTime,
    /// Rate-increase timer.
    pub rate_increase_timer: SimTime,
    /// Increase stages spent in fast recovery before additive increase.
    pub fast_recovery_times: u32,
    pub additive_increase_bps: u64,
    pub hyper_increase_bps: u64,
    pub min_rate_bps: u64,
    /// A receiver sends at most one CNP per flow per interval (0: one per
    /// marked packet); only for [`CnpMode::Packet`].
    pub cnp_interval: SimTime,
    /// How CNPs reach the sender.
    pub cnp_mode: CnpMode,
    /// `CLAMP_TARGET_RATE` / `clamp_tgt_rate`: a cut always sets the target
    /// to the current rate. Off, a cut that comes before any rate increase
    /// since the previous cut keeps the old target.
    pub clamp_target_rate: bool,
    /// `None`: the first CNP cuts at once by `alpha / 2` (ConnectX with
    /// `rate_to_set_on_first_cnp` 0). `Some(f)`: SimAI's `RateOnFirstCnp`:
    /// the first CNP sets rate and target to `f` x rate and starts the
    /// timers; the first cut comes at the next rate-decrease check.
    pub rate_on_first_cnp: Option<f64>,
    /// `rpg_byte_reset`: a rate-increase event also every this many bytes
    /// sent since the last one (0: the timer alone).
    pub byte_counter_bytes: u64,
}

/// Everything the network model needs besides topology and traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct NetConfig {
    /// Payload bytes per data packet.
    pub mtu_bytes: u32,
    /// Bytes added to every data packet's payload on the wire (netsim:
    /// Ethernet + IPv4 + UDP + BTH + ICRC + FCS; SimAI: its headers, with
    /// HPCC's INT stack).
    pub header_bytes: u32,
    /// Wire size of ACK, NACK and CNP packets.
    pub control_bytes: u32,
    pub cc: CcKind,
    pub dcqcn: DcqcnConfig,
    pub hpcc: HpccConfig,
    pub timely: TimelyConfig,
    /// DCTCP's EWMA gain.
    pub dctcp_g: f64,
    /// PFC on: lossless data class. Off: lossy, tail drop, go-back-N.
    pub pfc: bool,
    pub ecmp: EcmpMode,
    pub ecmp_entropy: EcmpEntropy,
    /// Dragonfly inter-group routing (ignored on other topologies).
    pub dragonfly_routing: DragonflyRouting,
    /// Shared buffer of each switch.
    pub buffer_bytes: u64,
    /// Dynamic threshold of the lossy egress admission: a queue may hold
    /// `alpha * free buffer`.
    pub dt_alpha: f64,
    /// Dynamic PFC threshold: an ingress queue pauses its upstream above
    /// `alpha * (buffer - headroom - used)`.
    pub pfc_alpha: f64,
    /// Hysteresis: resume when the ingress queue is this far below the threshold.
    pub pfc_xon_offset_bytes: u64,
    /// Buffer reserved per port for packets in flight after a pause.
    pub pfc_headroom_bytes: u64,
    /// Plus, per port, this many times the link's rate x latency in bytes
    /// (SimAI reserves 3, its `ConfigHdrm`).
    pub pfc_headroom_latency_factor: u32,
    /// Bytes per ingress port that do not count toward the PFC threshold
    /// (SimAI's MMU `reserve`, 4 KB), taken off the shared buffer.
    pub pfc_reserve_bytes: u64,
    /// Switches mark ECN when a packet leaves the egress queue, against the
    /// queue left behind (SimAI's `SwitchNotifyDequeue`); off, on arrival
    /// against the queue found.
    pub ecn_at_dequeue: bool,
    /// RED's draw names a twin rail's flow and switch where a flow has one
    /// (`--ecn-draw rail`, `fast_forward/twin_draws.rs`); else its own.
    pub ecn_draw_rails: bool,
    /// ACKs and NACKs have strict priority over data at switches; off, they
    /// queue in the data class and PFC pauses them (SimAI's `ACK_HIGH_PRIO 0`).
    pub ack_high_priority: bool,
    /// A RoCE flow's destination sees it complete when its sender has the
    /// last ACK (SimAI's `qp_finish`, which notifies the receiver from the
    /// sender's completion; the sender's event reaches it 1 ps later, so
    /// one shard only); off, when the last byte arrives (`--recv-complete`).
    pub recv_complete_at_ack: bool,
    /// A NIC's round robin over its queue pairs resumes after the one it
    /// served last among those present at the next turn, as SimAI's
    /// `RdmaEgressQueue` (new queue pairs appended since then come first);
    /// off, the next turn's index is fixed when a packet is sent, modulo the
    /// queue pairs then, so it wraps to the oldest (`--qp-round-robin`).
    pub qp_round_robin_after_last: bool,
    /// Every RoCE queue pair's window (and base RTT) is the fabric's
    /// largest bandwidth-delay product (and RTT) over all pairs of hosts,
    /// as in SimAI 1.6, whose `ReadConf` forces `GLOBAL_T` to 1 whatever
    /// `SimAI.conf` says; off, its own path's (`--window-scope`).
    pub window_fabric_max: bool,
    /// A flow queued behind another on its queue pair takes the DCQCN
    /// state the flow ahead leaves (rate, target, alpha, stages), as a
    /// NIC's queue pair keeps its rate from one message to the next; off,
    /// every flow starts at line rate, as SimAI's ns-3 makes a queue pair
    /// per message (`--qp-rate`).
    pub qp_rate_kept: bool,
    /// The sender window of DCQCN and HPCC queue pairs.
    pub window: WindowMode,
    /// ECN profiles by link rate; a link uses the profile of the highest rate not above its own.
    pub ecn: Vec<EcnProfile>,
    /// A receiver acknowledges every this many data packets (and the last).
    pub ack_interval: u32,
    /// Go-back-N retransmission timeout: drops (lossy mode) and reordering (spraying).
    pub rto: SimTime,
    /// Retransmission timeouts in a row without progress after which a
    /// queue pair gives up (a RoCE NIC's retry count: 3 bits, at most 7).
    pub retry_limit: u32,
    /// Probability that a link loses a packet (bit errors), every link.
    pub link_error_rate: f64,
    /// Sampling period of the `queues` and `links` tables; zero disables sampling.
    pub sample_period: SimTime,
    /// Sampling writes a row for every port at every instant; off (the
    /// default), a port with nothing queued, sent, marked, dropped or
    /// paused since its last row writes none (docs: the telemetry schema).
    pub keep_idle_rows: bool,
    /// The NICs' transport: RoCEv2 or Ultra Ethernet.
    pub transport: Transport,
    /// Ultra Ethernet parameters (used when `transport` is `Uec`).
    pub uec: UecConfig,
    /// Lossy switches trim a data packet that would overflow to its header
    /// (sent at control priority) instead of dropping it; UEC only.
    pub trim: bool,
    /// Lossy egress admission. `None`: the shared buffer with dynamic
    /// thresholds (`buffer_bytes`, `dt_alpha`); `Some(b)`: each egress port
    /// holds at most `b` bytes of data, a fixed queue (htsim's).
    pub port_buffer_bytes: Option<u64>,
    /// Trimming: half the time (a coin per overflow) the newest queued data
    /// packet is trimmed and the arriving one queued in its place (htsim's
    /// `CompositeQueue`); off, the arriving one is trimmed.
    pub trim_queued: bool,
    /// Lossy egress admission counts the data packet being serialised
    /// against the limit until its last bit has left, as htsim's queues do (it
    /// leaves the queue at `completeService`); off, a packet leaves the
    /// queue when its transmission starts.
    pub queue_counts_in_service: bool,
    /// A `link-rate` fault scales the port's fixed queue (`port_buffer_bytes`)
    /// and ECN thresholds with the rate, as htsim's `-failed` does; off, a
    /// degraded port keeps them.
    pub degraded_queue_scales: bool,
    /// Fast-forward of steady states (`None`: off, every packet simulated).
    pub fast_forward: Option<FastForward>,
}

/// Fast-forward settings (DESIGN.md §3c).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FastForward {
    /// Period of the check instants; a steady state must hold over
    /// [`FastForward::WINDOW_PERIODS`] of them.
    pub period: SimTime,
    /// Largest relative variation of a rate or queue over the window that
    /// still counts as steady.
    pub tolerance: f64,
    /// Longest single jump.
    pub max_skip: SimTime,
    /// Memoization of repeated collective waves (`--ff-memo`).
    pub memo: bool,
    /// Congested steady states (`--ff-congested`): PFC pauses do not
    /// veto a jump, and rates and queues are judged on their averages over
    /// the window's halves rather than required flat at every check.
    pub congested: bool,
    /// Per-domain jumps (`--ff-scope domain`): a contention domain (flows
    /// and the host ports and switches they share) steady alone jumps
    /// while the rest of the run goes on (docs/design/fast-forward.md).
    pub domains: bool,
    /// Steady window (`--ff-window-us`), a whole number of periods; `None`:
    /// [`FastForward::WINDOW_PERIODS`] periods. At a short period it keeps
    /// the window longer than DCQCN's oscillation.
    pub window: Option<SimTime>,
    /// Rail replay (`--ff-rails`): rail switches carrying the same flows as
    /// a lower one follow it instead of simulating their packets.
    pub rails: bool,
}

impl FastForward {
    /// Check periods a steady state spans by default.
    pub const WINDOW_PERIODS: u32 = 4;

    /// Check periods a steady state must span.
    pub fn window_periods(&self) -> u32 {
        self.window.map_or(Self::WINDOW_PERIODS, |w| {
            (w.as_ps() / self.period.as_ps().max(1)) as u32
        })
    }
}

impl Default for FastForward {
    fn default() -> Self {
        FastForward {
            period: SimTime::from_us(10),
            tolerance: 0.01,
            max_skip: SimTime::from_us(10_000),
            memo: false,
            congested: false,
            domains: false,
            window: None,
            rails: false,
        }
    }
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            mtu_bytes: 4096,
            header_bytes: 62,
            control_bytes: 66,
            cc: CcKind::Dcqcn,
            dcqcn: DcqcnConfig {
                g: 1.0 / 256.0,
                alpha_update: SimTime::from_us(1),
                rate_decrease_interval: SimTime::from_us(4),
                rate_increase_timer: SimTime::from_us(55),
                fast_recovery_times: 5,
                additive_increase_bps: 50_000_000,
                hyper_increase_bps: 100_000_000,
                min_rate_bps: 100_000_000,
                cnp_interval: SimTime::from_us(50),
                cnp_mode: CnpMode::Packet,
                clamp_target_rate: true,
                rate_on_first_cnp: None,
                byte_counter_bytes: 0,
            },
            hpcc: HpccConfig {
                eta: 0.95,
                max_stage: 5,
                additive_increase_bps: 50_000_000,
                base_rtt: SimTime::from_us(10),
                utilisation: HpccUtilisation::WindowRate,
                ewma: false,
                fast_react: true,
                retime_on_rate_change: false,
            },
            timely: TimelyConfig {
                alpha: 0.875,
                beta: 0.8,
                t_low: SimTime::from_us(50),
                t_high: SimTime::from_us(500),
                min_rtt: SimTime::from_us(20),
                additive_increase_bps: 50_000_000,
                hyper_increase_bps: 100_000_000,
            },
            dctcp_g: 1.0 / 16.0,
            pfc: true,
            ecmp: EcmpMode::Hash,
            ecmp_entropy: EcmpEntropy::Flow,
            dragonfly_routing: DragonflyRouting::Minimal,
            buffer_bytes: 32 << 20,
            dt_alpha: 1.0,
            pfc_alpha: 1.0 / 8.0,
            pfc_xon_offset_bytes: 2 * 4158,
            pfc_headroom_bytes: 0,
            pfc_headroom_latency_factor: 0,
            pfc_reserve_bytes: 0,
            ecn_at_dequeue: false,
            ecn_draw_rails: false,
            ack_high_priority: true,
            recv_complete_at_ack: false,
            qp_round_robin_after_last: false,
            window_fabric_max: false,
            qp_rate_kept: true,
            window: WindowMode::Off,
            ecn: default_ecn_profiles(),
            ack_interval: 1,
            rto: SimTime::from_us(500),
            retry_limit: 7,
            link_error_rate: 0.0,
            sample_period: SimTime::from_us(100),
            keep_idle_rows: false,
            fast_forward: None,
            transport: Transport::Roce,
            uec: UecConfig::default(),
            trim: false,
            port_buffer_bytes: None,
            trim_queued: false,
            queue_counts_in_service: false,
            degraded_queue_scales: false,
        }
    }
}

/// SimAI's KMIN/KMAX/PMAX maps (kilobytes), by link rate.
pub fn default_ecn_profiles() -> Vec<EcnProfile> {
    const GBPS: u64 = 1_000_000_000;
    [
        (25, 100, 400, 0.2),
        (50, 200, 800, 0.2),
        (100, 400, 1600, 0.2),
        (200, 300, 1200, 0.8),
        (400, 800, 3200, 0.2),
        (1600, 600, 2400, 0.2),
    ]
    .into_iter()
    .map(|(gbps, kmin_kb, kmax_kb, pmax)| EcnProfile {
        rate_bps: gbps * GBPS,
        kmin_bytes: kmin_kb * 1000,
        kmax_bytes: kmax_kb * 1000,
        pmax,
    })
    .collect()
}

/// A parameter outside the range where the model means anything.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ConfigError {
    pub field: &'static str,
    pub problem: String,
}

impl NetConfig {
    /// The ECN profile of a link of `rate_bps`.
    pub fn ecn_for(&self, rate_bps: u64) -> EcnProfile {
        let mut best = self.ecn[0];
        for p in &self.ecn {
            if p.rate_bps <= rate_bps && p.rate_bps >= best.rate_bps {
                best = *p;
            }
        }
        best
    }
}
