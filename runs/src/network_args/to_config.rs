//! [`NetworkArgs::config`]: the flags laid over the profile's
//! configuration, each checked and converted to the model's units.

use anyhow::bail;
use netsim_engine::SimTime;
use netsim_models::network::config::{
    CcKind, CnpMode, DragonflyRouting, EcmpEntropy, EcmpMode, EcnProfile, FastForward,
    HpccUtilisation, LoadBalancing, NetConfig, Transport, UecCc, WindowMode,
};
use netsim_models::network::profile::CcProfile;
use netsim_topo::Topology;

use super::NetworkArgs;

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

/// Like [`micros`], but 0 is allowed (and means "no interval").
fn micros_or_zero(field: &str, us: f64) -> anyhow::Result<SimTime> {
    if us == 0.0 {
        Ok(SimTime::ZERO)
    } else {
        micros(field, us)
    }
}

/// `on` or `off` from flag `--field`, `default` when it is not given.
fn on_off_or(field: &str, value: Option<&str>, default: bool) -> anyhow::Result<bool> {
    value.map_or(Ok(default), |v| on_off(field, v))
}

/// `on` or `off` from flag `--field`.
fn on_off(field: &str, value: &str) -> anyhow::Result<bool> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => bail!("--{field}: expected on or off, found `{other}`"),
    }
}

impl NetworkArgs {
    /// The model's configuration: the profile's, with every flag given
    /// laid over it; errors name the flag.
    pub fn config(&self) -> anyhow::Result<NetConfig> {
        let (profile, mut c) = self.profile_config()?;
        self.uec.profile(&mut c);
        c.fast_forward = self.fast_forward()?;
        self.routing(&mut c)?;
        c.ecn = self.ecn(&c.ecn)?;
        self.packets(profile, &mut c)?;
        self.dcqcn(&mut c)?;
        self.hpcc(&mut c)?;
        self.timely(&mut c)?;
        self.buffers(&mut c)?;
        c.sample_period = SimTime::try_from_ns(self.sample_ns)
            .map_err(|e| anyhow::anyhow!("--sample-ns: {e}"))?;
        c.keep_idle_rows = self.telemetry_idle_rows == "keep";
        c.retry_limit = self.retry_limit;
        c.link_error_rate = self.link_error_rate;
        let u = &mut c.uec;
        if let Some(v) = self.uec_target_qdelay_us {
            u.target_qdelay = micros("uec-target-qdelay-us", v)?;
        }
        u.ooo_pkts = self.uec_ooo_pkts;
        u.window_pkts = self.uec_window_pkts;
        u.rccc_target_bdp = self.uec_rccc_target_bdp;
        u.rccc_initial_bdp = self.uec_rccc_initial_bdp;
        self.uec.mechanisms(&mut c, self.uec_entropies)?;
        c.validate()
            .map_err(|e| anyhow::anyhow!("--{}: {}", e.field, e.problem))?;
        Ok(c)
    }

    /// `config` once the topology is known: the fabric's RTT and the UEC
    /// profile's values derived from it, unless a flag set them.
    pub fn for_topology(&self, mut c: NetConfig, topo: &Topology) -> anyhow::Result<NetConfig> {
        let set = super::uec_args::ProfileOverrides {
            ecn: self.ecn_kmin_kb.is_some(),
            ecn_pmax: self.ecn_pmax,
            rto: self.rto_us.is_some(),
            target: self.uec_target_qdelay_us.is_some(),
        };
        self.uec.for_topology(&mut c, topo, set)?;
        Ok(c)
    }

    /// The profile's configuration for the transport and congestion control
    /// chosen, with PFC, trimming and UEC's load balancing and control set.
    fn profile_config(&self) -> anyhow::Result<(CcProfile, NetConfig)> {
        let cc = match self.cc.as_str() {
            "dcqcn" => CcKind::Dcqcn,
            "dctcp" => CcKind::Dctcp,
            "none" => CcKind::None,
            "hpcc" => CcKind::Hpcc,
            "timely" => CcKind::Timely,
            other => bail!(
                "--cc: unknown congestion control `{other}` (dcqcn, dctcp, hpcc, timely, none)"
            ),
        };
        let transport = match self.transport.as_str() {
            "roce" => Transport::Roce,
            "uec" => Transport::Uec,
            other => bail!("--transport: expected roce or uec, found `{other}`"),
        };
        let uec = transport == Transport::Uec;
        let pfc = on_off_or("pfc", self.pfc.as_deref(), !uec)?;
        let trim = on_off_or("trim", self.trim.as_deref(), uec)?;
        let lb = match self.uec_lb.as_str() {
            "oblivious" => LoadBalancing::Oblivious,
            "bitmap" => LoadBalancing::Bitmap,
            "reps" => LoadBalancing::Reps,
            other => bail!("--uec-lb: expected oblivious, bitmap or reps, found `{other}`"),
        };
        let uec_cc = match self.uec_cc.as_str() {
            "nscc" => UecCc::Nscc,
            "rccc" => UecCc::Rccc,
            "both" => UecCc::Both,
            "none" => UecCc::None,
            other => bail!("--uec-cc: expected nscc, rccc, both or none, found `{other}`"),
        };
        // UEC runs its own window (NSCC); RoCE's --cc does not apply.
        let cc = if uec { CcKind::None } else { cc };
        let profile = CcProfile::from_name(&self.cc_profile).ok_or_else(|| {
            anyhow::anyhow!(
                "--cc-profile: unknown profile `{}` (netsim, simai, connectx)",
                self.cc_profile
            )
        })?;
        let mut c = profile.config(cc);
        c.pfc = pfc;
        c.trim = trim;
        c.transport = transport;
        c.uec.lb = lb;
        c.uec.cc = uec_cc;
        Ok((profile, c))
    }

    /// Fast-forward's settings, `None` when it is off.
    fn fast_forward(&self) -> anyhow::Result<Option<FastForward>> {
        // Checked whether fast-forward is on or not: a bad value is a
        // mistake either way.
        if !(self.ff_tolerance > 0.0 && self.ff_tolerance < 1.0) {
            bail!("--ff-tolerance: {} is outside (0, 1)", self.ff_tolerance);
        }
        let period = micros("ff-period-us", self.ff_period_us)?;
        let max_skip = micros("ff-max-skip-us", self.ff_max_skip_us)?;
        let window = micros_or_zero("ff-window-us", self.ff_window_us)?;
        let periods = window.as_ps() / period.as_ps();
        if window != SimTime::ZERO
            && (window.as_ps() % period.as_ps() != 0 || !(2..=1000).contains(&periods))
        {
            bail!("--ff-window-us: must be 2 to 1000 whole check periods (--ff-period-us)");
        }
        let memo = on_off("ff-memo", &self.ff_memo)?;
        let congested = on_off("ff-congested", &self.ff_congested)?;
        let rails = on_off("ff-rails", &self.ff_rails)?;
        let domains = match self.ff_scope.as_str() {
            "run" => false,
            "domain" => true,
            other => bail!("--ff-scope: expected run or domain, found `{other}`"),
        };
        let on = on_off("fast-forward", &self.fast_forward)?;
        Ok(on.then_some(FastForward {
            period,
            tolerance: self.ff_tolerance,
            max_skip,
            memo,
            congested,
            domains,
            window: (window != SimTime::ZERO).then_some(window),
            rails,
        }))
    }

    /// ECMP's mode and entropy and the dragonfly's routing.
    fn routing(&self, c: &mut NetConfig) -> anyhow::Result<()> {
        c.ecmp = match self.ecmp.as_str() {
            "hash" => EcmpMode::Hash,
            "spray" => EcmpMode::Spray,
            other => bail!("--ecmp: expected hash or spray, found `{other}`"),
        };
        c.ecmp_entropy = match self.ecmp_entropy.as_str() {
            "flow" => EcmpEntropy::Flow,
            "connection" => EcmpEntropy::Connection,
            other => bail!("--ecmp-entropy: expected flow or connection, found `{other}`"),
        };
        c.dragonfly_routing = match self.routing.as_str() {
            "minimal" => DragonflyRouting::Minimal,
            "valiant" => DragonflyRouting::Valiant,
            "ugal" => DragonflyRouting::Ugal,
            other => bail!("--routing: expected minimal, valiant or ugal, found `{other}`"),
        };
        Ok(())
    }

    /// The ECN marking profiles: one from --ecn-kmin-kb/--ecn-kmax-kb, or
    /// the profile's (`ecn`) with --ecn-pmax laid over them.
    fn ecn(&self, ecn: &[EcnProfile]) -> anyhow::Result<Vec<EcnProfile>> {
        Ok(match (self.ecn_kmin_kb, self.ecn_kmax_kb) {
            (None, None) => ecn
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
        })
    }

    /// DCTCP's gain, buffer sharing, PFC headroom and reserve, the buffer
    /// and the retransmission timeout.
    fn buffers(&self, c: &mut NetConfig) -> anyhow::Result<()> {
        if let Some(v) = self.dctcp_g {
            c.dctcp_g = v;
        }
        if let Some(v) = self.dt_alpha {
            c.dt_alpha = v;
        }
        if let Some(v) = self.pfc_alpha {
            c.pfc_alpha = v;
        }
        if let Some(v) = self.pfc_headroom_kb {
            c.pfc_headroom_bytes = kilobytes("pfc-headroom-kb", v)?;
        }
        if let Some(v) = self.pfc_headroom_latency_factor {
            c.pfc_headroom_latency_factor = v;
        }
        if let Some(v) = self.pfc_reserve_bytes {
            c.pfc_reserve_bytes = v;
        }
        if let Some(v) = self.buffer_kb {
            c.buffer_bytes = kilobytes("buffer-kb", v)?;
        }
        if let Some(v) = self.rto_us {
            c.rto = micros("rto-us", v)?;
        }
        Ok(())
    }

    /// Packet sizes, acknowledgements, windows, ECN and PFC offsets.
    fn packets(&self, profile: CcProfile, c: &mut NetConfig) -> anyhow::Result<()> {
        if let Some(v) = self.mtu {
            c.mtu_bytes = v;
        }
        if let Some(v) = self.header_bytes {
            c.header_bytes = v;
        }
        if let Some(v) = self.control_bytes {
            if !(1..=u32::from(u16::MAX)).contains(&v) {
                bail!("--control-bytes: {v} is outside 1..=65535");
            }
            c.control_bytes = v;
        }
        if let Some(v) = self.ack_interval {
            c.ack_interval = v;
        }
        c.pfc_xon_offset_bytes = match self.pfc_resume_offset_bytes {
            Some(v) => v,
            // SimAI's MMU has a fixed 3 KB; netsim's is two packets.
            None if profile == CcProfile::Simai => c.pfc_xon_offset_bytes,
            None => 2 * u64::from(c.mtu_bytes.saturating_add(c.header_bytes)),
        };
        if let Some(v) = &self.ecn_at {
            c.ecn_at_dequeue = v == "dequeue";
        }
        c.ecn_draw_rails = self.ecn_draw == "rail";
        if let Some(v) = &self.ack_priority {
            c.ack_high_priority = v == "high";
        }
        if let Some(v) = &self.recv_complete {
            c.recv_complete_at_ack = v == "acked";
        }
        if let Some(v) = &self.qp_round_robin {
            c.qp_round_robin_after_last = v == "after-last";
        }
        if let Some(v) = &self.qp_rate {
            c.qp_rate_kept = v == "kept";
        }
        if let Some(v) = &self.window_scope {
            c.window_fabric_max = v == "fabric";
        }
        if let Some(v) = &self.window {
            c.window = match v.as_str() {
                "off" => WindowMode::Off,
                "bdp" => WindowMode::Bdp,
                _ => WindowMode::VariableBdp,
            };
        }
        Ok(())
    }

    /// DCQCN's flags over the profile's values.
    fn dcqcn(&self, c: &mut NetConfig) -> anyhow::Result<()> {
        let d = &mut c.dcqcn;
        if let Some(v) = self.dcqcn_g {
            d.g = v;
        }
        if let Some(v) = self.dcqcn_alpha_update_us {
            d.alpha_update = micros("dcqcn-alpha-update-us", v)?;
        }
        if let Some(v) = self.dcqcn_rate_decrease_us {
            d.rate_decrease_interval = micros("dcqcn-rate-decrease-us", v)?;
        }
        if let Some(v) = self.dcqcn_rate_increase_us {
            d.rate_increase_timer = micros("dcqcn-rate-increase-us", v)?;
        }
        if let Some(v) = self.dcqcn_byte_counter_bytes {
            d.byte_counter_bytes = v;
        }
        if let Some(v) = self.dcqcn_fast_recovery {
            d.fast_recovery_times = v;
        }
        if let Some(v) = self.dcqcn_ai_mbps {
            d.additive_increase_bps = megabits("dcqcn-ai-mbps", v)?;
        }
        if let Some(v) = self.dcqcn_hai_mbps {
            d.hyper_increase_bps = megabits("dcqcn-hai-mbps", v)?;
        }
        if let Some(v) = self.dcqcn_min_rate_mbps {
            d.min_rate_bps = megabits("dcqcn-min-rate-mbps", v)?;
        }
        if let Some(v) = &self.dcqcn_clamp_target_rate {
            d.clamp_target_rate = on_off("dcqcn-clamp-target-rate", v)?;
        }
        if let Some(v) = &self.dcqcn_rate_on_first_cnp {
            d.rate_on_first_cnp = match v.as_str() {
                "cut" => None,
                number => Some(number.parse::<f64>().map_err(|_| {
                    anyhow::anyhow!(
                        "--dcqcn-rate-on-first-cnp: expected `cut` or a fraction in (0, 1], found `{number}`"
                    )
                })?),
            };
        }
        if let Some(v) = &self.dcqcn_cnp_mode {
            d.cnp_mode = if v == "ack" {
                CnpMode::AckFlag
            } else {
                CnpMode::Packet
            };
        }
        if let Some(v) = self.dcqcn_cnp_interval_us {
            d.cnp_interval = micros_or_zero("dcqcn-cnp-interval-us", v)?;
        }
        Ok(())
    }

    /// TIMELY's flags over the profile's values.
    fn timely(&self, c: &mut NetConfig) -> anyhow::Result<()> {
        let t = &mut c.timely;
        if let Some(v) = self.timely_alpha {
            t.alpha = v;
        }
        if let Some(v) = self.timely_beta {
            t.beta = v;
        }
        if let Some(v) = self.timely_t_low_us {
            t.t_low = micros("timely-t-low-us", v)?;
        }
        if let Some(v) = self.timely_t_high_us {
            t.t_high = micros("timely-t-high-us", v)?;
        }
        if let Some(v) = self.timely_min_rtt_us {
            t.min_rtt = micros("timely-min-rtt-us", v)?;
        }
        if let Some(v) = self.timely_ai_mbps {
            t.additive_increase_bps = megabits("timely-ai-mbps", v)?;
        }
        if let Some(v) = self.timely_hai_mbps {
            t.hyper_increase_bps = megabits("timely-hai-mbps", v)?;
        }
        Ok(())
    }

    /// HPCC's flags over the profile's values.
    fn hpcc(&self, c: &mut NetConfig) -> anyhow::Result<()> {
        let h = &mut c.hpcc;
        if let Some(v) = self.hpcc_eta {
            h.eta = v;
        }
        if let Some(v) = self.hpcc_max_stage {
            h.max_stage = v;
        }
        if let Some(v) = self.hpcc_ai_mbps {
            h.additive_increase_bps = megabits("hpcc-ai-mbps", v)?;
        }
        if let Some(v) = self.hpcc_base_rtt_us {
            h.base_rtt = micros("hpcc-base-rtt-us", v)?;
        }
        if let Some(v) = &self.hpcc_utilisation {
            h.utilisation = if v == "int" {
                HpccUtilisation::IntDelta
            } else {
                HpccUtilisation::WindowRate
            };
        }
        if let Some(v) = &self.hpcc_ewma {
            h.ewma = on_off("hpcc-ewma", v)?;
        }
        if let Some(v) = &self.hpcc_fast_react {
            h.fast_react = on_off("hpcc-fast-react", v)?;
        }
        if let Some(v) = &self.hpcc_retime {
            h.retime_on_rate_change = on_off("hpcc-retime", v)?;
        }
        Ok(())
    }
}
