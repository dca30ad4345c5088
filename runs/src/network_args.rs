//! Flags of the network model and of the traffic, and their translation
//! into `NetConfig` and flows.

use anyhow::{bail, Context as _};
use netsim_engine::SimTime;
use netsim_models::network::config::{
    CcKind, DragonflyRouting, EcmpMode, EcnProfile, HpccConfig, NetConfig,
};
use netsim_models::traffic::{self, FlowSpec, TrafficPattern};
use std::path::Path;

/// Network model flags.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Network")]
pub struct NetworkArgs {
    /// Congestion control: dcqcn, dctcp, hpcc or none (line rate, PFC only).
    #[arg(long, default_value = "dcqcn")]
    pub cc: String,
    /// PFC: on (lossless data class) or off (lossy, tail drop, go-back-N).
    #[arg(long, default_value = "on")]
    pub pfc: String,
    /// Payload bytes per data packet.
    #[arg(long, default_value_t = 4096)]
    pub mtu: u32,
    /// ECMP: hash (per flow, 5-tuple) or spray (per packet).
    #[arg(long, default_value = "hash")]
    pub ecmp: String,
    /// Dragonfly routing between groups: minimal, valiant or ugal.
    #[arg(long, default_value = "minimal")]
    pub routing: String,
    /// Shared buffer per switch, in KB.
    #[arg(long, default_value_t = 32 * 1024)]
    pub buffer_kb: u64,
    /// ECN: RED minimum threshold in KB for every link (default: SimAI's map by link rate).
    #[arg(long)]
    pub ecn_kmin_kb: Option<u64>,
    /// ECN: RED maximum threshold in KB for every link.
    #[arg(long)]
    pub ecn_kmax_kb: Option<u64>,
    /// ECN: marking probability at the maximum threshold.
    #[arg(long)]
    pub ecn_pmax: Option<f64>,
    /// Receivers acknowledge every this many packets.
    #[arg(long, default_value_t = 1)]
    pub ack_interval: u32,
    /// DCQCN: EWMA gain of alpha.
    #[arg(long, default_value_t = 1.0 / 256.0)]
    pub dcqcn_g: f64,
    /// DCQCN: alpha update period in microseconds.
    #[arg(long, default_value_t = 1.0)]
    pub dcqcn_alpha_update_us: f64,
    /// DCQCN: rate-decrease check period in microseconds.
    #[arg(long, default_value_t = 4.0)]
    pub dcqcn_rate_decrease_us: f64,
    /// DCQCN: rate-increase timer in microseconds.
    #[arg(long, default_value_t = 55.0)]
    pub dcqcn_rate_increase_us: f64,
    /// DCQCN: fast-recovery stages before additive increase.
    #[arg(long, default_value_t = 5)]
    pub dcqcn_fast_recovery: u32,
    /// DCQCN: additive increase step in Mb/s.
    #[arg(long, default_value_t = 50)]
    pub dcqcn_ai_mbps: u64,
    /// DCQCN: hyper-additive increase step in Mb/s.
    #[arg(long, default_value_t = 100)]
    pub dcqcn_hai_mbps: u64,
    /// DCQCN: minimum rate in Mb/s.
    #[arg(long, default_value_t = 100)]
    pub dcqcn_min_rate_mbps: u64,
    /// DCQCN: a receiver sends at most one CNP per flow per this many microseconds.
    #[arg(long, default_value_t = 50.0)]
    pub dcqcn_cnp_interval_us: f64,
    /// HPCC: target utilisation.
    #[arg(long, default_value_t = 0.95)]
    pub hpcc_eta: f64,
    /// HPCC: additive-increase stages before a multiplicative adjustment.
    #[arg(long, default_value_t = 5)]
    pub hpcc_max_stage: u32,
    /// HPCC: additive increase step in Mb/s.
    #[arg(long, default_value_t = 50)]
    pub hpcc_ai_mbps: u64,
    /// HPCC: base RTT of the utilisation estimate, in microseconds.
    #[arg(long, default_value_t = 10.0)]
    pub hpcc_base_rtt_us: f64,
    /// Lossy mode: a queue may hold this fraction of the free buffer (dynamic threshold).
    #[arg(long, default_value_t = 1.0)]
    pub dt_alpha: f64,
    /// PFC: an ingress queue pauses upstream above this fraction of the free buffer.
    #[arg(long, default_value_t = 0.125)]
    pub pfc_alpha: f64,
    /// PFC: buffer reserved per port for bytes in flight after a pause, in KB.
    #[arg(long, default_value_t = 0)]
    pub pfc_headroom_kb: u64,
    /// DCTCP: EWMA gain of alpha.
    #[arg(long, default_value_t = 1.0 / 16.0)]
    pub dctcp_g: f64,
    /// Go-back-N retransmission timeout in microseconds (drops, or reordering under spray).
    #[arg(long, default_value_t = 500.0)]
    pub rto_us: f64,
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
}

/// Traffic flags.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Traffic")]
pub struct TrafficArgs {
    /// permutation (default), uniform, incast, alltoall, or tm:FILE (htsim
    /// connection matrix); with --workload or --job, background flows on top.
    #[arg(long)]
    pub traffic: Option<String>,
    /// Bytes per flow for the generated patterns.
    #[arg(long, default_value_t = 1 << 20)]
    pub flow_size: u64,
    /// Flows per host for `uniform`.
    #[arg(long, default_value_t = 1)]
    pub flows_per_host: u32,
    /// Senders for `incast` (hosts 1..=N send to host 0).
    #[arg(long, default_value_t = 16)]
    pub incast_degree: u32,
}

/// `kb` kilobytes from flag `--field` in bytes, checked to fit.
fn kilobytes(field: &str, kb: u64) -> anyhow::Result<u64> {
    kb.checked_mul(1000)
        .ok_or_else(|| anyhow::anyhow!("--{field}: {kb} KB is more bytes than fit in 64 bits"))
}

/// `mbps` Mb/s from flag `--field` in bits per second, checked to fit.
fn megabits(field: &str, mbps: u64) -> anyhow::Result<u64> {
    mbps.checked_mul(1_000_000)
        .ok_or_else(|| anyhow::anyhow!("--{field}: {mbps} Mb/s is more than fits in 64 bits"))
}

/// The longest timer or period of the network model a flag may set, 1 s:
/// the model's timers run for as long as flows do, and the samples written
/// up to the last event grow with it.
const MAX_PERIOD_US: f64 = 1e6;

/// A positive number of microseconds, at most [`MAX_PERIOD_US`], from flag `--field`.
fn micros(field: &str, us: f64) -> anyhow::Result<SimTime> {
    if !(us.is_finite() && us > 0.0) {
        bail!("--{field}: {us} is not a positive number of microseconds");
    }
    if us > MAX_PERIOD_US {
        bail!("--{field}: {us} us is above 1 s, the longest period supported");
    }
    let t = SimTime::try_from_f64(us, 1e6, "us").map_err(|e| anyhow::anyhow!("--{field}: {e}"))?;
    if t == SimTime::ZERO {
        bail!("--{field}: {us} us rounds to 0 ps");
    }
    Ok(t)
}

impl NetworkArgs {
    /// The model's configuration; errors name the flag.
    pub fn config(&self) -> anyhow::Result<NetConfig> {
        let defaults = NetConfig::default();
        let cc = match self.cc.as_str() {
            "dcqcn" => CcKind::Dcqcn,
            "dctcp" => CcKind::Dctcp,
            "none" => CcKind::None,
            "hpcc" => CcKind::Hpcc,
            other => bail!("--cc: unknown congestion control `{other}` (dcqcn, dctcp, hpcc, none)"),
        };
        let pfc = match self.pfc.as_str() {
            "on" => true,
            "off" => false,
            other => bail!("--pfc: expected on or off, found `{other}`"),
        };
        let ecmp = match self.ecmp.as_str() {
            "hash" => EcmpMode::Hash,
            "spray" => EcmpMode::Spray,
            other => bail!("--ecmp: expected hash or spray, found `{other}`"),
        };
        let dragonfly_routing = match self.routing.as_str() {
            "minimal" => DragonflyRouting::Minimal,
            "valiant" => DragonflyRouting::Valiant,
            "ugal" => DragonflyRouting::Ugal,
            other => bail!("--routing: expected minimal, valiant or ugal, found `{other}`"),
        };
        let ecn = match (self.ecn_kmin_kb, self.ecn_kmax_kb) {
            // --ecn-pmax alone sets the probability of SimAI's profiles.
            (None, None) => defaults
                .ecn
                .iter()
                .map(|p| EcnProfile {
                    pmax: self.ecn_pmax.unwrap_or(p.pmax),
                    ..*p
                })
                .collect(),
            (Some(kmin), Some(kmax)) => vec![EcnProfile {
                rate_bps: 0,
                kmin_bytes: kilobytes("ecn-kmin-kb", kmin)?,
                kmax_bytes: kilobytes("ecn-kmax-kb", kmax)?,
                pmax: self.ecn_pmax.unwrap_or(0.2),
            }],
            (Some(_), None) => bail!("--ecn-kmin-kb: needs --ecn-kmax-kb too"),
            (None, Some(_)) => bail!("--ecn-kmax-kb: needs --ecn-kmin-kb too"),
        };
        let config = NetConfig {
            mtu_bytes: self.mtu,
            cc,
            dcqcn: netsim_models::network::config::DcqcnConfig {
                g: self.dcqcn_g,
                alpha_update: micros("dcqcn-alpha-update-us", self.dcqcn_alpha_update_us)?,
                rate_decrease_interval: micros(
                    "dcqcn-rate-decrease-us",
                    self.dcqcn_rate_decrease_us,
                )?,
                rate_increase_timer: micros("dcqcn-rate-increase-us", self.dcqcn_rate_increase_us)?,
                fast_recovery_times: self.dcqcn_fast_recovery,
                additive_increase_bps: megabits("dcqcn-ai-mbps", self.dcqcn_ai_mbps)?,
                hyper_increase_bps: megabits("dcqcn-hai-mbps", self.dcqcn_hai_mbps)?,
                min_rate_bps: megabits("dcqcn-min-rate-mbps", self.dcqcn_min_rate_mbps)?,
                cnp_interval: micros("dcqcn-cnp-interval-us", self.dcqcn_cnp_interval_us)?,
            },
            hpcc: HpccConfig {
                eta: self.hpcc_eta,
                max_stage: self.hpcc_max_stage,
                additive_increase_bps: megabits("hpcc-ai-mbps", self.hpcc_ai_mbps)?,
                base_rtt: micros("hpcc-base-rtt-us", self.hpcc_base_rtt_us)?,
            },
            dctcp_g: self.dctcp_g,
            dt_alpha: self.dt_alpha,
            pfc_alpha: self.pfc_alpha,
            pfc_headroom_bytes: kilobytes("pfc-headroom-kb", self.pfc_headroom_kb)?,
            pfc,
            ecmp,
            dragonfly_routing,
            buffer_bytes: kilobytes("buffer-kb", self.buffer_kb)?,
            pfc_xon_offset_bytes: 2 * u64::from(self.mtu.saturating_add(defaults.header_bytes)),
            ecn,
            ack_interval: self.ack_interval,
            rto: micros("rto-us", self.rto_us)?,
            retry_limit: self.retry_limit,
            link_error_rate: self.link_error_rate,
            sample_period: SimTime::try_from_ns(self.sample_ns)
                .map_err(|e| anyhow::anyhow!("--sample-ns: {e}"))?,
            ..defaults
        };
        config
            .validate()
            .map_err(|e| anyhow::anyhow!("--{}: {}", e.field, e.problem))?;
        Ok(config)
    }
}

/// Fails when `flows` flows (and the sender state of each during the run)
/// would not fit in the memory this process may use, or in `u32` ids.
pub fn check_flow_count(flag: &str, flows: u64) -> anyhow::Result<()> {
    use netsim_engine::process::{human_bytes, memory_limit_bytes};
    use netsim_models::workload::BYTES_PER_TASK;
    let bytes = flows.saturating_mul(BYTES_PER_TASK);
    let limit = memory_limit_bytes();
    if bytes > limit || flows >= u64::from(u32::MAX) {
        bail!(
            "{flag}: {flows} flows need ~{} at {BYTES_PER_TASK} B each; this process may use {} \
             (and at most {} flows are supported)",
            human_bytes(bytes),
            human_bytes(limit),
            u32::MAX - 1
        );
    }
    Ok(())
}

impl TrafficArgs {
    /// The pattern asked for, `permutation` by default.
    pub fn pattern(&self) -> &str {
        self.traffic.as_deref().unwrap_or("permutation")
    }

    /// The flows to simulate over `hosts` hosts.
    pub fn flows(&self, hosts: u32, seed: u64) -> anyhow::Result<Vec<FlowSpec>> {
        if let Some(path) = self.pattern().strip_prefix("tm:") {
            return traffic::read_connection_matrix(Path::new(path), hosts)
                .with_context(|| "--traffic".to_string());
        }
        let pattern = match self.pattern() {
            "permutation" => TrafficPattern::Permutation,
            "uniform" => TrafficPattern::Uniform {
                flows_per_host: self.flows_per_host,
            },
            "incast" => TrafficPattern::Incast {
                degree: self.incast_degree.min(hosts.saturating_sub(1)),
            },
            "alltoall" => TrafficPattern::AllToAll,
            other => bail!(
                "--traffic: unknown pattern `{other}` (permutation, uniform, incast, alltoall, tm:FILE)"
            ),
        };
        // Counted before the flows are drawn, so that too many is an error
        // rather than an abort.
        let (flag, flows) = match &pattern {
            TrafficPattern::Uniform { flows_per_host } => (
                "--flows-per-host",
                u64::from(hosts) * u64::from(*flows_per_host),
            ),
            TrafficPattern::AllToAll => ("--traffic alltoall", u64::from(hosts) * u64::from(hosts)),
            _ => ("--traffic", u64::from(hosts)),
        };
        check_flow_count(flag, flows)?;
        Ok(traffic::generate(&pattern, hosts, self.flow_size, seed)?)
    }
}
