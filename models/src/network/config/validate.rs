//! [`NetConfig::validate`]: every parameter checked, group by group, in the
//! order the first error is reported.

use netsim_engine::SimTime;

use super::{CcKind, ConfigError, DragonflyRouting, EcmpMode, NetConfig, Transport};

impl NetConfig {
    /// Checks every parameter; the error names the flag-style field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_packet()?;
        self.validate_congestion_control()?;
        self.validate_buffers()?;
        self.validate_acks()?;
        self.validate_fast_forward()?;
        self.validate_uec()
    }

    /// The MTU and header: a packet fits in 64 KiB on the wire.
    fn validate_packet(&self) -> Result<(), ConfigError> {
        if !(64..=65_000).contains(&self.mtu_bytes) {
            return invalid(
                "mtu",
                format!("{} bytes is outside 64..=65000", self.mtu_bytes),
            );
        }
        if u64::from(self.mtu_bytes) + u64::from(self.header_bytes) > u64::from(u16::MAX) {
            let field = if self.header_bytes > self.mtu_bytes {
                "header-bytes"
            } else {
                "mtu"
            };
            return invalid(
                field,
                format!(
                    "{} payload + {} header bytes is more than the 65535 a packet may have on \
                     the wire",
                    self.mtu_bytes, self.header_bytes
                ),
            );
        }
        Ok(())
    }

    /// DCQCN's, HPCC's and DCTCP's gains and timers.
    fn validate_congestion_control(&self) -> Result<(), ConfigError> {
        let d = &self.dcqcn;
        if !(d.g > 0.0 && d.g <= 1.0) {
            return invalid("dcqcn-g", format!("{} is outside (0, 1]", d.g));
        }
        for (field, t) in [
            ("dcqcn-alpha-update-us", d.alpha_update),
            ("dcqcn-rate-decrease-us", d.rate_decrease_interval),
            ("dcqcn-rate-increase-us", d.rate_increase_timer),
        ] {
            if t == SimTime::ZERO {
                return invalid(field, "must be positive".into());
            }
        }
        if let Some(f) = d.rate_on_first_cnp {
            if !(f > 0.0 && f <= 1.0) {
                return invalid("dcqcn-rate-on-first-cnp", format!("{f} is outside (0, 1]"));
            }
        }
        if d.min_rate_bps == 0 {
            return invalid("dcqcn-min-rate-mbps", "must be positive".into());
        }
        let h = &self.hpcc;
        if !(h.eta > 0.0 && h.eta <= 1.0) {
            return invalid("hpcc-eta", format!("{} is outside (0, 1]", h.eta));
        }
        if h.base_rtt == SimTime::ZERO {
            return invalid("hpcc-base-rtt-us", "must be positive".into());
        }
        let t = &self.timely;
        if !(t.alpha > 0.0 && t.alpha <= 1.0) {
            return invalid("timely-alpha", format!("{} is outside (0, 1]", t.alpha));
        }
        if !(t.beta > 0.0 && t.beta <= 1.0) {
            return invalid("timely-beta", format!("{} is outside (0, 1]", t.beta));
        }
        if t.min_rtt == SimTime::ZERO {
            return invalid("timely-min-rtt-us", "must be positive".into());
        }
        if t.t_high <= t.t_low {
            return invalid(
                "timely-t-high-us",
                format!(
                    "{} us is not above --timely-t-low-us {} us",
                    t.t_high.as_ps() as f64 / 1e6,
                    t.t_low.as_ps() as f64 / 1e6
                ),
            );
        }
        if !(self.dctcp_g > 0.0 && self.dctcp_g <= 1.0) {
            return invalid("dctcp-g", format!("{} is outside (0, 1]", self.dctcp_g));
        }
        Ok(())
    }

    /// Buffer, PFC and ECN thresholds: each within the buffer.
    fn validate_buffers(&self) -> Result<(), ConfigError> {
        if self.buffer_bytes < 4 * u64::from(self.mtu_bytes + self.header_bytes) {
            return invalid("buffer-kb", "smaller than four packets".into());
        }
        for (field, bytes) in [
            ("pfc-resume-offset-bytes", self.pfc_xon_offset_bytes),
            ("pfc-reserve-bytes", self.pfc_reserve_bytes),
        ] {
            if bytes > self.buffer_bytes {
                return invalid(
                    field,
                    format!(
                        "{bytes} bytes is more than the {}-byte buffer",
                        self.buffer_bytes
                    ),
                );
            }
        }
        for (field, alpha) in [("dt-alpha", self.dt_alpha), ("pfc-alpha", self.pfc_alpha)] {
            if !(alpha.is_finite() && alpha > 0.0) {
                return invalid(field, format!("{alpha} is not a positive number"));
            }
        }
        for p in &self.ecn {
            if !(0.0..=1.0).contains(&p.pmax) {
                return invalid("ecn-pmax", format!("{} is outside [0, 1]", p.pmax));
            }
            if p.kmin_bytes > p.kmax_bytes {
                return invalid(
                    "ecn-kmin-kb",
                    format!(
                        "kmin {} bytes is above kmax {} bytes",
                        p.kmin_bytes, p.kmax_bytes
                    ),
                );
            }
        }
        if self.ecn.is_empty() {
            return invalid("ecn-kmin-kb", "no ECN profile".into());
        }
        Ok(())
    }

    /// The ACK interval and the retransmission timeout.
    fn validate_acks(&self) -> Result<(), ConfigError> {
        if self.ack_interval == 0 || self.ack_interval > 255 {
            return invalid(
                "ack-interval",
                format!("{} is outside 1..=255", self.ack_interval),
            );
        }
        if self.rto == SimTime::ZERO {
            return invalid("rto-us", "must be positive".into());
        }
        Ok(())
    }

    /// Fast-forward's settings, and that memo may record what the run simulates.
    fn validate_fast_forward(&self) -> Result<(), ConfigError> {
        let Some(ff) = &self.fast_forward else {
            return Ok(());
        };
        if self.transport == Transport::Uec {
            return invalid(
                "fast-forward",
                "Ultra Ethernet (--transport uec) is not fast-forwarded yet; run it with \
                 --fast-forward off"
                    .into(),
            );
        }
        if !(ff.tolerance > 0.0 && ff.tolerance < 1.0) {
            return invalid(
                "ff-tolerance",
                format!("{} is outside (0, 1)", ff.tolerance),
            );
        }
        if ff.period == SimTime::ZERO || ff.period > SimTime::from_us(1_000_000) {
            return invalid("ff-period-us", "must be positive and at most 1 s".into());
        }
        if let Some(window) = ff.window {
            let periods = window.as_ps() / ff.period.as_ps();
            if window.as_ps() % ff.period.as_ps() != 0 || !(2..=1000).contains(&periods) {
                return invalid(
                    "ff-window-us",
                    "must be 2 to 1000 whole check periods (--ff-period-us)".into(),
                );
            }
        }
        if ff.max_skip == SimTime::ZERO || ff.max_skip > SimTime::from_us(1_000_000) {
            return invalid("ff-max-skip-us", "must be positive and at most 1 s".into());
        }
        // A memo record is exact only where a wave's outcome is a
        // function of its key: no random draws per packet (spraying,
        // lossy links), no state carried from earlier traffic (HPCC's
        // per-port INT), no routing that reads queues (UGAL).
        let why = if !ff.memo {
            None
        } else if self.ecmp == EcmpMode::Spray {
            Some("per-packet spraying (--ecmp spray)")
        } else if self.cc == CcKind::Hpcc {
            Some("HPCC (--cc hpcc)")
        } else if self.link_error_rate > 0.0 {
            Some("lossy links (--link-error-rate)")
        } else if self.dragonfly_routing != DragonflyRouting::Minimal {
            Some("Valiant or UGAL routing")
        } else {
            None
        };
        if let Some(why) = why {
            return invalid(
                "ff-memo",
                format!("{why} is not memoized; run it with --ff-memo off"),
            );
        }
        // A domain is its flows' static paths: routing that moves packets
        // off them (spraying, Valiant, UGAL) would join domains unseen.
        let off_path =
            self.ecmp == EcmpMode::Spray || self.dragonfly_routing != DragonflyRouting::Minimal;
        if ff.domains && off_path {
            return invalid(
                "ff-scope",
                "domain needs static paths (no --ecmp spray, Valiant or UGAL); \
                 run it with --ff-scope run"
                    .into(),
            );
        }
        Ok(())
    }

    /// Ultra Ethernet, trimming and lossy links.
    fn validate_uec(&self) -> Result<(), ConfigError> {
        let u = &self.uec;
        if !(u.entropies.is_power_of_two() && u.entropies <= 1 << 15) {
            return invalid(
                "uec-entropies",
                format!("{} is not a power of two up to 32768", u.entropies),
            );
        }
        if !(0.01..=100.0).contains(&u.initial_window_bdp) {
            return invalid(
                "uec-initial-window-bdp",
                format!("{} is outside [0.01, 100]", u.initial_window_bdp),
            );
        }
        if u.qa_gate.is_some_and(|g| g > 16) {
            return invalid("uec-qa-gate", "must be at most 16".into());
        }
        if self.port_buffer_bytes == Some(0) {
            return invalid("port-buffer-bytes", "must be positive".into());
        }
        if !(1..=1 << 20).contains(&u.window_pkts) {
            return invalid(
                "uec-window-pkts",
                format!("{} is outside 1..=1048576", u.window_pkts),
            );
        }
        if u.target_qdelay == SimTime::ZERO {
            return invalid("uec-target-qdelay-us", "must be positive".into());
        }
        if !(u.rccc_target_bdp > 0.0 && u.rccc_target_bdp <= 1000.0) {
            return invalid(
                "uec-rccc-target-bdp",
                format!("{} is outside (0, 1000]", u.rccc_target_bdp),
            );
        }
        if !(0.0..=1000.0).contains(&u.rccc_initial_bdp) {
            return invalid(
                "uec-rccc-initial-bdp",
                format!("{} is outside [0, 1000]", u.rccc_initial_bdp),
            );
        }
        if self.trim && self.transport == Transport::Roce {
            return invalid(
                "trim",
                "trimming needs --transport uec (a RoCE receiver cannot NACK a header)".into(),
            );
        }
        if !(0.0..1.0).contains(&self.link_error_rate) {
            return invalid(
                "link-error-rate",
                format!("{} is outside [0, 1)", self.link_error_rate),
            );
        }
        Ok(())
    }
}

/// A [`ConfigError`] for `field`.
fn invalid(field: &'static str, problem: String) -> Result<(), ConfigError> {
    Err(ConfigError { field, problem })
}
