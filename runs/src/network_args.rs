//! Flags of the network model and their translation into `NetConfig`,
//! and the effective values as `run.json` records them.

mod to_config;
mod uec_args;

pub use uec_args::UecArgs;

use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;

/// Network model flags. Those left out take the value of `--cc-profile`.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Network")]
pub struct NetworkArgs {
    /// Congestion control: dcqcn, dctcp, hpcc, timely or none (line rate, PFC only).
    #[arg(long, default_value = "dcqcn")]
    pub cc: String,
    /// Parameter set of the congestion control, NICs and switches; the
    /// flags below override single values. netsim: netsim's defaults;
    /// simai: every value of SimAI's SimAI.conf and the mechanisms of its
    /// ns-3 (rdma-hw.cc, switch-node.cc, its MMU); connectx: NVIDIA's
    /// "DCQCN CC Parameters" firmware defaults (ConnectX-4 and later).
    #[arg(long, default_value = "netsim", value_parser = ["netsim", "simai", "connectx"])]
    pub cc_profile: String,
    /// PFC: on (lossless data class) or off (lossy, tail drop or trimming).
    /// Default: on for roce, off for uec.
    #[arg(long)]
    pub pfc: Option<String>,
    /// Transport: roce (RoCEv2, go-back-N, --cc) or uec (Ultra Ethernet:
    /// packet spraying, SACK, trimming, NSCC).
    #[arg(long, default_value = "roce")]
    pub transport: String,
    /// Switches trim a packet that would overflow to its header (UEC):
    /// on or off (tail drop). Default: on for uec.
    #[arg(long)]
    pub trim: Option<String>,
    /// UEC load balancing over entropies: oblivious, bitmap or reps.
    #[arg(long, default_value = "bitmap")]
    pub uec_lb: String,
    /// UEC congestion control: nscc (sender window), rccc (receiver
    /// credits), both, or none (outstanding-packet limit only).
    #[arg(long, default_value = "nscc")]
    pub uec_cc: String,
    /// UEC: entropy values a flow sprays over (a power of two) [netsim
    /// 256, uet-htsim 64].
    #[arg(long)]
    pub uec_entropies: Option<u32>,
    /// UEC NSCC: target queueing delay in microseconds [netsim 6,
    /// uet-htsim 0.75 x the fabric's RTT].
    #[arg(long)]
    pub uec_target_qdelay_us: Option<f64>,
    /// UEC: a packet overtaken by this many acknowledged psns is resent.
    #[arg(long, default_value_t = 64)]
    pub uec_ooo_pkts: u32,
    /// UEC: most packets a flow has outstanding.
    #[arg(long, default_value_t = 1024)]
    pub uec_window_pkts: u32,
    /// UEC RCCC: credit a receiver keeps outstanding toward it, in BDPs.
    #[arg(long, default_value_t = 1.0)]
    pub uec_rccc_target_bdp: f64,
    /// UEC RCCC: what a sender sends before its first credit, in BDPs.
    #[arg(long, default_value_t = 1.0)]
    pub uec_rccc_initial_bdp: f64,
    #[command(flatten)]
    pub uec: UecArgs,
    /// Payload bytes per data packet [netsim 4096, simai 9000, connectx 4096,
    /// uet-htsim 4086].
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Bytes of headers per data packet [netsim 62, simai 40 (82 with
    /// HPCC's INT), connectx 62].
    #[arg(long)]
    pub header_bytes: Option<u32>,
    /// Wire bytes of an ACK, NACK or CNP [netsim 66, simai 48 (76 with INT)].
    #[arg(long)]
    pub control_bytes: Option<u32>,
    /// ECMP: hash (per flow, 5-tuple) or spray (per packet).
    #[arg(long, default_value = "hash")]
    pub ecmp: String,
    /// ECMP hash's UDP source port: flow (a new one per flow, as SimAI) or
    /// connection (one per source, destination and communicator, as NCCL's
    /// queue pairs: a repeated collective takes the same paths).
    #[arg(long, default_value = "flow")]
    pub ecmp_entropy: String,
    /// Dragonfly routing between groups: minimal, valiant or ugal.
    #[arg(long, default_value = "minimal")]
    pub routing: String,
    /// Shared buffer per switch, in KB [all: 32 MiB].
    #[arg(long)]
    pub buffer_kb: Option<u64>,
    /// ECN: RED minimum threshold in KB for every link (default: SimAI's map by link rate).
    #[arg(long)]
    pub ecn_kmin_kb: Option<u64>,
    /// ECN: RED maximum threshold in KB for every link.
    #[arg(long)]
    pub ecn_kmax_kb: Option<u64>,
    /// ECN: marking probability at the maximum threshold.
    #[arg(long)]
    pub ecn_pmax: Option<f64>,
    /// ECN: switches mark at enqueue (against the queue found) or dequeue
    /// (against the queue left behind) [netsim, connectx enqueue; simai dequeue].
    #[arg(long, value_parser = ["enqueue", "dequeue"])]
    pub ecn_at: Option<String>,
    /// ECN: what RED's draw between the thresholds hashes: packet (its
    /// 5-tuple, PSN, switch and port) or rail (the same, but a flow on a
    /// rail switch whose flows are a lower rail's flow for flow names its
    /// twin there: twin rails mark alike, as `--ff-rails on` assumes).
    #[arg(long, default_value = "packet", value_parser = ["packet", "rail"])]
    pub ecn_draw: String,
    /// ACKs and NACKs at switches: high (strict priority) or data (the
    /// data class, paused by PFC) [netsim high; simai, connectx data].
    #[arg(long, value_parser = ["high", "data"])]
    pub ack_priority: Option<String>,
    /// When a RoCE flow's destination sees it complete, so its dependents
    /// start: delivered (its last byte arrives) or acked (its sender has the
    /// last ACK, as SimAI's ns-3 notifies the receiver; one shard, --threads
    /// 1) [all profiles: delivered].
    #[arg(long, value_parser = ["delivered", "acked"])]
    pub recv_complete: Option<String>,
    /// A NIC's round robin over its queue pairs: fixed (the next turn's
    /// index is set when a packet leaves, modulo the queue pairs then) or
    /// after-last (after the one served last among those present at the next
    /// turn, as SimAI's RdmaEgressQueue) [all profiles: fixed].
    #[arg(long, value_parser = ["fixed", "after-last"])]
    pub qp_round_robin: Option<String>,
    /// DCQCN rate of a flow queued behind another on one queue pair (NCCL's
    /// steps): kept (it takes the state the flow ahead leaves, as a NIC's
    /// queue pair keeps its rate between messages) or fresh (line rate, as
    /// SimAI's ns-3, a queue pair per message) [all profiles: kept].
    #[arg(long, value_parser = ["kept", "fresh"])]
    pub qp_rate: Option<String>,
    /// Sender window of DCQCN and HPCC queue pairs: off, bdp (line rate x
    /// base RTT in flight) or var-bdp (scaled by rate / line rate)
    /// [netsim, connectx off; simai var-bdp].
    #[arg(long, value_parser = ["off", "bdp", "var-bdp"])]
    pub window: Option<String>,
    /// Whose BDP and base RTT the window of a RoCE queue pair covers: its
    /// own path's, or the fabric's largest over all pairs of hosts (SimAI
    /// 1.6, which forces GLOBAL_T to 1) [all profiles: path].
    #[arg(long, value_parser = ["path", "fabric"])]
    pub window_scope: Option<String>,
    /// Receivers acknowledge every this many packets [all: 1].
    #[arg(long)]
    pub ack_interval: Option<u32>,
    /// DCQCN: EWMA gain of alpha [netsim, simai 1/256; connectx 5/1024].
    #[arg(long)]
    pub dcqcn_g: Option<f64>,
    /// DCQCN: alpha update period in microseconds [all: 1].
    #[arg(long)]
    pub dcqcn_alpha_update_us: Option<f64>,
    /// DCQCN: rate-decrease check period in microseconds [all: 4].
    #[arg(long)]
    pub dcqcn_rate_decrease_us: Option<f64>,
    /// DCQCN: rate-increase timer in microseconds [netsim 55, simai 900, connectx 300].
    #[arg(long)]
    pub dcqcn_rate_increase_us: Option<f64>,
    /// DCQCN: a rate-increase event also every this many bytes sent (0: the
    /// timer alone) [netsim, simai 0; connectx 32767].
    #[arg(long)]
    pub dcqcn_byte_counter_bytes: Option<u64>,
    /// DCQCN: fast-recovery stages before additive increase [netsim 5, simai 1, connectx 1].
    #[arg(long)]
    pub dcqcn_fast_recovery: Option<u32>,
    /// DCQCN: additive increase step in Mb/s [netsim, simai 50; connectx 5].
    #[arg(long)]
    pub dcqcn_ai_mbps: Option<u64>,
    /// DCQCN: hyper-additive increase step in Mb/s [netsim, simai 100; connectx 50].
    #[arg(long)]
    pub dcqcn_hai_mbps: Option<u64>,
    /// DCQCN: minimum rate in Mb/s [netsim, simai 100; connectx 1].
    #[arg(long)]
    pub dcqcn_min_rate_mbps: Option<u64>,
    /// DCQCN: a cut always sets the target to the current rate (on), or
    /// keeps it when no increase came since the previous cut (off)
    /// [netsim on; simai, connectx off].
    #[arg(long, value_parser = ["on", "off"])]
    pub dcqcn_clamp_target_rate: Option<String>,
    /// DCQCN: the first CNP cuts at once (cut), or sets the rate to this
    /// fraction of itself and leaves the cut to the next decrease check
    /// (SimAI's RateOnFirstCnp) [netsim, connectx cut; simai 1.0].
    #[arg(long)]
    pub dcqcn_rate_on_first_cnp: Option<String>,
    /// DCQCN: CNPs as packets (at most one per flow per
    /// --dcqcn-cnp-interval-us) or as a flag on the ACK of every marked
    /// packet [netsim, connectx packet; simai ack].
    #[arg(long, value_parser = ["packet", "ack"])]
    pub dcqcn_cnp_mode: Option<String>,
    /// DCQCN: a receiver sends at most one CNP per flow per this many
    /// microseconds; 0: one per marked packet [netsim 50, connectx 4].
    #[arg(long)]
    pub dcqcn_cnp_interval_us: Option<f64>,
    /// HPCC: target utilisation [all: 0.95].
    #[arg(long)]
    pub hpcc_eta: Option<f64>,
    /// HPCC: additive-increase stages before a multiplicative adjustment
    /// (SimAI's MI_THRESH) [netsim 5, simai 0].
    #[arg(long)]
    pub hpcc_max_stage: Option<u32>,
    /// HPCC: additive increase step in Mb/s [all: 50].
    #[arg(long)]
    pub hpcc_ai_mbps: Option<u64>,
    /// HPCC: base RTT of the switches' utilisation estimate, in microseconds [all: 10].
    #[arg(long)]
    pub hpcc_base_rtt_us: Option<f64>,
    /// HPCC: switches measure utilisation over a window of one base RTT
    /// (window) or from INT deltas between consecutive data packets (int)
    /// [netsim window; simai int].
    #[arg(long, value_parser = ["window", "int"])]
    pub hpcc_utilisation: Option<String>,
    /// HPCC: the sender smooths utilisation over its base RTT [netsim off; simai on].
    #[arg(long, value_parser = ["on", "off"])]
    pub hpcc_ewma: Option<String>,
    /// HPCC: every ACK adjusts the rate (FAST_REACT) [all: on].
    #[arg(long, value_parser = ["on", "off"])]
    pub hpcc_fast_react: Option<String>,
    /// HPCC: a rate change re-times the next paced packet (SimAI's ChangeRate) [netsim off; simai on].
    #[arg(long, value_parser = ["on", "off"])]
    pub hpcc_retime: Option<String>,
    /// TIMELY: weight of a round's new RTT difference (TimelyAlpha) [all: 0.875].
    #[arg(long)]
    pub timely_alpha: Option<f64>,
    /// TIMELY: multiplicative decrease factor (TimelyBeta) [all: 0.8].
    #[arg(long)]
    pub timely_beta: Option<f64>,
    /// TIMELY: below this RTT the rate grows, in microseconds (TimelyTLow) [all: 50].
    #[arg(long)]
    pub timely_t_low_us: Option<f64>,
    /// TIMELY: above this RTT the rate falls, in microseconds (TimelyTHigh) [all: 500].
    #[arg(long)]
    pub timely_t_high_us: Option<f64>,
    /// TIMELY: the RTT gradient's normaliser, in microseconds (TimelyMinRtt) [all: 20].
    #[arg(long)]
    pub timely_min_rtt_us: Option<f64>,
    /// TIMELY: additive increase step in Mb/s (RATE_AI) [all: 50].
    #[arg(long)]
    pub timely_ai_mbps: Option<u64>,
    /// TIMELY: hyper increase step after five growth rounds in Mb/s (RATE_HAI) [all: 100].
    #[arg(long)]
    pub timely_hai_mbps: Option<u64>,
    /// Lossy mode: a queue may hold this fraction of the free buffer (dynamic threshold).
    #[arg(long)]
    pub dt_alpha: Option<f64>,
    /// PFC: an ingress queue pauses upstream above this fraction of the free buffer [all: 0.125].
    #[arg(long)]
    pub pfc_alpha: Option<f64>,
    /// PFC: buffer reserved per port for bytes in flight after a pause, in KB [all: 0].
    #[arg(long)]
    pub pfc_headroom_kb: Option<u64>,
    /// PFC: plus, per port, this many times the link's rate x latency [netsim 0, simai 3].
    #[arg(long)]
    pub pfc_headroom_latency_factor: Option<u32>,
    /// PFC: bytes per ingress port below the threshold's count [netsim 0, simai 4096].
    #[arg(long)]
    pub pfc_reserve_bytes: Option<u64>,
    /// PFC: resume when the ingress queue is this many bytes below the
    /// threshold [netsim, connectx two packets; simai 3072].
    #[arg(long)]
    pub pfc_resume_offset_bytes: Option<u64>,
    /// DCTCP: EWMA gain of alpha.
    #[arg(long)]
    pub dctcp_g: Option<f64>,
    /// Go-back-N retransmission timeout in microseconds (drops, or reordering under spray).
    #[arg(long)]
    pub rto_us: Option<f64>,
    /// Retransmission timeouts in a row without progress after which a queue
    /// pair gives up and its flow stays unfinished (a RoCE NIC's retry count).
    #[arg(long, default_value_t = 7)]
    pub retry_limit: u32,
    /// Probability that a link loses a packet (bit errors), on every link.
    #[arg(long, default_value_t = 0.0)]
    pub link_error_rate: f64,
    /// Sampling period of the `queues` and `links` tables in nanoseconds (0: off).
    #[arg(long, default_value_t = 100_000)]
    pub sample_ns: u64,
    /// Rows of idle ports in `queues` and `links`: `skip` leaves out a port
    /// (and priority) with nothing queued, sent or marked since its last
    /// row; `keep` writes every port at every sampling instant.
    #[arg(long, default_value = "skip", value_parser = ["skip", "keep"])]
    pub telemetry_idle_rows: String,
    /// Fast-forward: on jumps over stretches where every flow's rate and
    /// every queue is steady (packet level otherwise), off simulates every packet.
    #[arg(long, default_value = "off", help_heading = "Engine")]
    pub fast_forward: String,
    /// Fast-forward: largest relative variation of a rate or queue that counts as steady.
    #[arg(long, default_value_t = 0.01, help_heading = "Engine")]
    pub ff_tolerance: f64,
    /// Fast-forward: check period in microseconds (steady over --ff-window-us).
    #[arg(long, default_value_t = 10.0, help_heading = "Engine")]
    pub ff_period_us: f64,
    /// Fast-forward: steady window in microseconds, a whole number (2 to
    /// 1000) of check periods; 0: 4 periods. A domain (or run) whose flows'
    /// congestion control never acted (no CNP, no retransmission, DCQCN at
    /// line rate) is judged on its last 4 periods only.
    #[arg(long, default_value_t = 0.0, help_heading = "Engine")]
    pub ff_window_us: f64,
    /// Fast-forward: longest single jump in microseconds.
    #[arg(long, default_value_t = 10_000.0, help_heading = "Engine")]
    pub ff_max_skip_us: f64,
    /// Fast-forward: on replays each contention domain of collectives (the
    /// flows sharing host ports and switches) from a record, made once per
    /// key in a sandbox, when nothing else can reach its resources meanwhile.
    #[arg(long, default_value = "off", help_heading = "Engine")]
    pub ff_memo: String,
    /// Fast-forward: on also jumps congested steady states (DCQCN cutting,
    /// PFC pausing), judging rates and queues on their averages over half
    /// windows; off requires every rate and queue flat and no PFC pause.
    #[arg(long, default_value = "off", help_heading = "Engine")]
    pub ff_congested: String,
    /// Fast-forward: domain also jumps each contention domain (flows and
    /// the ports and switches they share) steady on its own while the rest
    /// of the run goes on; run jumps only when the whole run is steady.
    #[arg(long, default_value = "run", help_heading = "Engine")]
    pub ff_scope: String,
    /// Fast-forward: on lets rail switches whose traffic is the same flow
    /// for flow as a lower one's follow it: their flows end at their
    /// twins' instants, without packets (exact where the leading rail
    /// marks nothing, or with --ecn-draw rail: twin rails mark alike).
    #[arg(long, default_value = "off", help_heading = "Engine")]
    pub ff_rails: String,
}

/// The effective network parameters of a run, for `run.json`: the profile
/// named and every value the model ran with (times in ns, rates in Mb/s).
pub fn config_json(profile: &str, uec_profile: &str, c: &NetConfig) -> serde_json::Value {
    let ns = |t: SimTime| t.as_ps() as f64 / 1e3;
    let mbps = |bps: u64| bps as f64 / 1e6;
    let d = &c.dcqcn;
    let h = &c.hpcc;
    let u = &c.uec;
    let mut v = serde_json::json!({
        "cc_profile": profile,
        "uec_profile": uec_profile,
        "cc": format!("{:?}", c.cc).to_lowercase(),
        "mtu_bytes": c.mtu_bytes,
        "header_bytes": c.header_bytes,
        "control_bytes": c.control_bytes,
        "ack_interval": c.ack_interval,
        "ack_high_priority": c.ack_high_priority,
        "recv_complete_at_ack": c.recv_complete_at_ack,
        "qp_round_robin_after_last": c.qp_round_robin_after_last,
        "qp_rate_kept": c.qp_rate_kept,
        "window": format!("{:?}", c.window),
        "window_fabric_max": c.window_fabric_max,
        "ecn_at_dequeue": c.ecn_at_dequeue,
        "ecn_draw_rails": c.ecn_draw_rails,
        "ecn": c.ecn.iter().map(|p| serde_json::json!({
            "rate_mbps": mbps(p.rate_bps),
            "kmin_bytes": p.kmin_bytes,
            "kmax_bytes": p.kmax_bytes,
            "pmax": p.pmax,
        })).collect::<Vec<_>>(),
        "pfc": c.pfc,
        "buffer_bytes": c.buffer_bytes,
        "pfc_alpha": c.pfc_alpha,
        "pfc_resume_offset_bytes": c.pfc_xon_offset_bytes,
        "pfc_headroom_bytes": c.pfc_headroom_bytes,
        "pfc_headroom_latency_factor": c.pfc_headroom_latency_factor,
        "pfc_reserve_bytes": c.pfc_reserve_bytes,
        "dcqcn": {
            "g": d.g,
            "alpha_update_ns": ns(d.alpha_update),
            "rate_decrease_ns": ns(d.rate_decrease_interval),
            "rate_increase_ns": ns(d.rate_increase_timer),
            "byte_counter_bytes": d.byte_counter_bytes,
            "fast_recovery": d.fast_recovery_times,
            "ai_mbps": mbps(d.additive_increase_bps),
            "hai_mbps": mbps(d.hyper_increase_bps),
            "min_rate_mbps": mbps(d.min_rate_bps),
            "clamp_target_rate": d.clamp_target_rate,
            "rate_on_first_cnp": d.rate_on_first_cnp,
            "cnp_mode": format!("{:?}", d.cnp_mode),
            "cnp_interval_ns": ns(d.cnp_interval),
        },
        "hpcc": {
            "eta": h.eta,
            "max_stage": h.max_stage,
            "ai_mbps": mbps(h.additive_increase_bps),
            "base_rtt_ns": ns(h.base_rtt),
            "utilisation": format!("{:?}", h.utilisation),
            "ewma": h.ewma,
            "fast_react": h.fast_react,
            "retime_on_rate_change": h.retime_on_rate_change,
        },
        "dctcp_g": c.dctcp_g,
        "rto_ns": ns(c.rto),
    });
    let t = &c.timely;
    v["timely"] = serde_json::json!({
        "alpha": t.alpha,
        "beta": t.beta,
        "t_low_ns": ns(t.t_low),
        "t_high_ns": ns(t.t_high),
        "min_rtt_ns": ns(t.min_rtt),
        "ai_mbps": mbps(t.additive_increase_bps),
        "hai_mbps": mbps(t.hyper_increase_bps),
    });
    // Apart from the literal above, which is at the json! macro's recursion limit.
    v["transport"] = format!("{:?}", c.transport).to_lowercase().into();
    v["trim"] = c.trim.into();
    v["uec"] = serde_json::json!({
        "lb": format!("{:?}", u.lb).to_lowercase(),
        "entropies": u.entropies,
        "entropy_redraw": u.entropy_redraw,
        "rto_per_packet": u.rto_per_packet,
        "window_fit": u.window_fit,
        "nack_ignore": u.nack_ignore,
        "sleek": u.sleek,
        "bitmap_scores": u.bitmap_scores,
        "fair_above_target": u.fair_above_target,
        "rtx_lowest_first": u.rtx_lowest_first,
        "nack_base_rtt": u.nack_base_rtt,
        "plane_spray": u.plane_spray,
        "plane_window_per_port": u.plane_window_per_port,
        "window_wire_bytes": u.window_wire_bytes,
        "cc": format!("{:?}", u.cc).to_lowercase(),
        "target_qdelay_ns": ns(u.target_qdelay),
        "ooo_pkts": u.ooo_pkts,
        "window_pkts": u.window_pkts,
        "rccc_target_bdp": u.rccc_target_bdp,
        "rccc_initial_bdp": u.rccc_initial_bdp,
        "ack_bytes": u.ack_bytes,
        "initial_window_bdp": u.initial_window_bdp,
        "qa_gate": u.qa_gate,
        "adjust": format!("{:?}", u.adjust).to_lowercase(),
        "delay_decay": u.delay_decay,
        "base_rtt": format!("{:?}", u.base_rtt).to_lowercase(),
        "fabric_rtt_ns": ns(u.fabric_rtt),
    });
    v["port_buffer_bytes"] = c.port_buffer_bytes.into();
    v["trim_queued"] = c.trim_queued.into();
    v["queue_counts_in_service"] = c.queue_counts_in_service.into();
    v["degraded_queue_scales"] = c.degraded_queue_scales.into();
    v
}
