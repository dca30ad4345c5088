//! Congestion control at the sending NIC: DCQCN's reaction point and DCTCP.

use super::config::{CcKind, DcqcnConfig, HpccConfig};

/// Per-flow congestion-control state.
#[derive(Clone, Debug)]
pub enum CcState {
    Dcqcn(Dcqcn),
    Dctcp(Dctcp),
    Hpcc(Hpcc),
    LineRate,
}

/// HPCC's sender: a reference rate `rate_c` updated once per RTT, and per
/// ACK either a multiplicative step towards the target utilisation or an
/// additive one (Algorithm 1 of the HPCC paper, in the rate domain).
#[derive(Clone, Debug)]
pub struct Hpcc {
    pub rate_bps: f64,
    pub rate_c_bps: f64,
    pub stage: u32,
    /// The reference rate is next updated by an ACK beyond this psn.
    pub update_psn: u32,
}

impl Hpcc {
    pub fn new(line_rate_bps: u64) -> Hpcc {
        Hpcc {
            rate_bps: line_rate_bps as f64,
            rate_c_bps: line_rate_bps as f64,
            stage: 0,
            update_psn: 0,
        }
    }

    /// Reacts to an ACK acknowledging up to `una` that reports path
    /// utilisation `u` (1.0 = a full link).
    pub fn on_ack(
        &mut self,
        c: &HpccConfig,
        u: f64,
        una: u32,
        next_psn: u32,
        line_rate_bps: u64,
        min_rate_bps: u64,
    ) {
        let update = una > self.update_psn;
        let ai = c.additive_increase_bps as f64;
        let rate = if u >= c.eta || self.stage >= c.max_stage {
            let rate = self.rate_c_bps * c.eta / u.max(1e-3) + ai;
            if update {
                self.stage = 0;
            }
            rate
        } else {
            if update {
                self.stage += 1;
            }
            self.rate_c_bps + ai
        };
        self.rate_bps = rate.clamp(min_rate_bps as f64, line_rate_bps as f64);
        if update {
            self.rate_c_bps = self.rate_bps;
            self.update_psn = next_psn;
        }
    }
}

/// DCQCN reaction point, as in the Mellanox-style model SimAI inherits from
/// the HPCC ns-3 code: alpha decays every `alpha_update`, the rate is cut at
/// most once per `rate_decrease_interval` when CNPs arrived, and a timer
/// raises it through fast recovery, additive and hyper-additive stages.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    pub rate_bps: f64,
    pub target_bps: f64,
    pub alpha: f64,
    /// A CNP arrived since the last alpha update.
    pub cnp_since_alpha: bool,
    /// A CNP arrived since the last decrease check.
    pub cnp_since_decrease: bool,
    pub stage: u32,
    /// Timers run from the first CNP on.
    pub timers_running: bool,
    /// Generation of the rate-increase timer; a decrease restarts it.
    pub increase_generation: u32,
}

impl Dcqcn {
    pub fn new(line_rate_bps: u64) -> Dcqcn {
        Dcqcn {
            rate_bps: line_rate_bps as f64,
            target_bps: line_rate_bps as f64,
            alpha: 1.0,
            cnp_since_alpha: false,
            cnp_since_decrease: false,
            stage: 0,
            timers_running: false,
            increase_generation: 0,
        }
    }

    pub fn update_alpha(&mut self, c: &DcqcnConfig) {
        let hit = if self.cnp_since_alpha { c.g } else { 0.0 };
        self.alpha = (1.0 - c.g) * self.alpha + hit;
        self.cnp_since_alpha = false;
    }

    /// Cuts the rate if CNPs arrived since the last check; true if it did.
    pub fn check_decrease(&mut self, c: &DcqcnConfig) -> bool {
        if !self.cnp_since_decrease {
            return false;
        }
        self.cnp_since_decrease = false;
        self.target_bps = self.rate_bps;
        self.rate_bps = (self.rate_bps * (1.0 - self.alpha / 2.0)).max(c.min_rate_bps as f64);
        self.stage = 0;
        self.increase_generation = self.increase_generation.wrapping_add(1);
        true
    }

    pub fn increase(&mut self, c: &DcqcnConfig, line_rate_bps: u64) {
        self.stage += 1;
        let line = line_rate_bps as f64;
        if self.stage > c.fast_recovery_times {
            let step = if self.stage == c.fast_recovery_times + 1 {
                c.additive_increase_bps
            } else {
                c.hyper_increase_bps
            };
            self.target_bps = (self.target_bps + step as f64).min(line);
        }
        self.rate_bps = ((self.rate_bps + self.target_bps) / 2.0).min(line);
    }
}

/// DCTCP: a congestion window cut by `alpha / 2` once per window with marks,
/// grown by one packet per window without.
#[derive(Clone, Debug)]
pub struct Dctcp {
    pub cwnd_bytes: f64,
    pub alpha: f64,
    /// The current observation window ends when this psn is acknowledged.
    pub window_end_psn: u32,
    pub acked_in_window: u32,
    pub marked_in_window: u32,
    pub cut_in_window: bool,
}

impl Dctcp {
    pub fn new(initial_cwnd_bytes: f64) -> Dctcp {
        Dctcp {
            cwnd_bytes: initial_cwnd_bytes,
            alpha: 1.0,
            window_end_psn: 0,
            acked_in_window: 0,
            marked_in_window: 0,
            cut_in_window: false,
        }
    }

    /// `acked` packets newly acknowledged up to `una`, `marked` of them CE;
    /// `next_psn` is the next packet the sender will send.
    pub fn on_ack(&mut self, g: f64, mss: f64, acked: u32, marked: u32, una: u32, next_psn: u32) {
        self.acked_in_window += acked;
        self.marked_in_window += marked;
        if marked > 0 && !self.cut_in_window {
            self.cwnd_bytes = (self.cwnd_bytes * (1.0 - self.alpha / 2.0)).max(mss);
            self.cut_in_window = true;
        } else if marked == 0 {
            self.cwnd_bytes += mss * mss * f64::from(acked) / self.cwnd_bytes;
        }
        if una >= self.window_end_psn {
            let fraction = if self.acked_in_window == 0 {
                0.0
            } else {
                f64::from(self.marked_in_window) / f64::from(self.acked_in_window)
            };
            self.alpha = (1.0 - g) * self.alpha + g * fraction;
            self.window_end_psn = next_psn;
            self.acked_in_window = 0;
            self.marked_in_window = 0;
            self.cut_in_window = false;
        }
    }
}

impl CcState {
    pub fn new(kind: CcKind, line_rate_bps: u64, bdp_bytes: f64) -> CcState {
        match kind {
            CcKind::Dcqcn => CcState::Dcqcn(Dcqcn::new(line_rate_bps)),
            CcKind::Dctcp => CcState::Dctcp(Dctcp::new(bdp_bytes)),
            CcKind::Hpcc => CcState::Hpcc(Hpcc::new(line_rate_bps)),
            CcKind::None => CcState::LineRate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::config::NetConfig;

    #[test]
    fn dcqcn_cuts_by_half_alpha_and_recovers_towards_target() {
        let c = NetConfig::default().dcqcn;
        let mut d = Dcqcn::new(100_000_000_000);
        d.cnp_since_decrease = true;
        assert!(d.check_decrease(&c));
        // alpha starts at 1: the first cut halves the rate.
        assert_eq!(d.rate_bps, 50e9);
        assert_eq!(d.target_bps, 100e9);
        d.increase(&c, 100_000_000_000); // fast recovery
        assert_eq!(d.rate_bps, 75e9);
        d.increase(&c, 100_000_000_000); // additive: target capped at line rate
        assert_eq!(d.rate_bps, 87.5e9);
        // Without CNPs alpha decays geometrically with gain g.
        d.update_alpha(&c);
        assert!((d.alpha - (1.0 - c.g)).abs() < 1e-12);
    }

    #[test]
    fn dctcp_cuts_once_per_window_by_alpha() {
        let mut d = Dctcp::new(100_000.0);
        d.window_end_psn = 10;
        d.on_ack(1.0 / 16.0, 1000.0, 1, 1, 1, 20);
        assert_eq!(d.cwnd_bytes, 50_000.0); // alpha = 1 initially
        d.on_ack(1.0 / 16.0, 1000.0, 1, 1, 2, 20);
        assert_eq!(d.cwnd_bytes, 50_000.0); // at most one cut per window
        d.on_ack(1.0 / 16.0, 1000.0, 8, 0, 10, 20);
        // Window ended: alpha = 15/16 + 1/16 * 2/10.
        assert!((d.alpha - (15.0 / 16.0 + 0.2 / 16.0)).abs() < 1e-12);
    }
}
