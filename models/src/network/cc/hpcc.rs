//! HPCC's sender (Li et al., SIGCOMM'19; SimAI's `UpdateRateHp` with
//! `MULTI_RATE 0`): a reference rate `rate_c` updated once per RTT and, per
//! ACK (`FAST_REACT`), a rate computed from it: multiplicative toward the
//! target utilisation `eta` when the path is at or above it or after
//! `MI_THRESH` additive steps, additive otherwise.
//!
//! The path utilisation comes from the switches' stamp (the path maximum).
//! With `ewma` the sender smooths it over its path's base RTT `T` (SimAI's
//! per-pair `baseRtt`), weighting each
//! sample by the time `tau` since the previous one:
//! `U = (U (T - tau) + u tau) / T`, starting from `U = 1`, and the first
//! ACK only records its time (SimAI's first RTT only stores the INT).

use crate::network::config::HpccConfig;
use netsim_engine::SimTime;

/// Per-flow state of an HPCC sender.
#[derive(Clone, Debug)]
pub struct Hpcc {
    pub rate_bps: f64,
    pub rate_c_bps: f64,
    /// Additive steps taken since the last multiplicative one.
    pub stage: u32,
    /// The reference rate is next updated by an ACK beyond this psn.
    pub update_psn: u32,
    /// Smoothed path utilisation (1.0 = a full link).
    pub u: f64,
    /// When the previous utilisation sample arrived (`ewma` only).
    pub last_sample: Option<SimTime>,
}

impl Hpcc {
    /// A queue pair at line rate.
    pub fn new(line_rate_bps: u64) -> Hpcc {
        Hpcc {
            rate_bps: line_rate_bps as f64,
            rate_c_bps: line_rate_bps as f64,
            stage: 0,
            update_psn: 0,
            u: 1.0,
            last_sample: None,
        }
    }

    /// Reacts to an ACK arriving `now`, acknowledging up to `una`, that
    /// reports path utilisation `sample` (1.0 = a full link); `next_psn` is
    /// the next packet the sender will send; `base_rtt` is the path's.
    #[allow(clippy::too_many_arguments)]
    pub fn on_ack(
        &mut self,
        c: &HpccConfig,
        base_rtt: SimTime,
        now: SimTime,
        sample: f64,
        una: u32,
        next_psn: u32,
        line_rate_bps: u64,
        min_rate_bps: u64,
    ) {
        let update = una > self.update_psn;
        if c.ewma {
            let Some(last) = self.last_sample.replace(now) else {
                // First RTT: only the sample's time is kept.
                self.update_psn = next_psn;
                return;
            };
            let t = base_rtt.as_ps().max(1) as f64;
            let tau = ((now - last).as_ps() as f64).min(t);
            self.u = (self.u * (t - tau) + sample * tau) / t;
        } else {
            self.u = sample;
        }
        if !update && !c.fast_react {
            return;
        }
        let ai = c.additive_increase_bps as f64;
        let (rate, stage) = if self.u >= c.eta || self.stage >= c.max_stage {
            (self.rate_c_bps * c.eta / self.u.max(1e-3) + ai, 0)
        } else {
            (self.rate_c_bps + ai, self.stage + 1)
        };
        self.rate_bps = rate.clamp(min_rate_bps as f64, line_rate_bps as f64);
        if update {
            self.stage = stage;
            self.rate_c_bps = self.rate_bps;
            self.update_psn = next_psn;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::config::{CcKind, HpccConfig};
    use crate::network::profile::CcProfile;

    const LINE: u64 = 100_000_000_000;
    /// The path's base RTT.
    const T: SimTime = SimTime::from_us(8);

    fn simai() -> HpccConfig {
        CcProfile::Simai.config(CcKind::Hpcc).hpcc
    }

    #[test]
    fn the_ewma_smooths_utilisation_over_one_base_rtt() {
        let c = simai();
        let mut h = Hpcc::new(LINE);
        // First ACK at 10 us: recorded only.
        h.on_ack(&c, T, SimTime::from_us(10), 2.0, 1, 10, LINE, 100_000_000);
        assert_eq!((h.u, h.rate_bps, h.update_psn), (1.0, 100e9, 10));
        // tau = 2 us of T = 8 us: U = (1 * 6 + 2 * 2) / 8 = 1.25.
        h.on_ack(&c, T, SimTime::from_us(12), 2.0, 2, 11, LINE, 100_000_000);
        assert_eq!(h.u, 1.25);
        // Fast react: rate = Rc * eta / U + AI, the reference kept.
        assert_eq!(h.rate_bps, 100e9 * 0.95 / 1.25 + 50e6);
        assert_eq!(h.rate_c_bps, 100e9);
        // tau = 4 us, u = 0.5: U = (1.25 * 4 + 0.5 * 4) / 8 = 0.875.
        h.on_ack(&c, T, SimTime::from_us(16), 0.5, 11, 20, LINE, 100_000_000);
        assert_eq!(h.u, 0.875);
        // MI_THRESH 0: still multiplicative, and past psn 10 the reference
        // moves: Rc = min(line, 100e9 * 0.95 / 0.875 + 50e6).
        assert_eq!(h.rate_bps, 100e9);
        assert_eq!((h.rate_c_bps, h.update_psn), (100e9, 20));
        // A gap longer than T: tau is capped, U is the new sample.
        h.on_ack(&c, T, SimTime::from_us(40), 2.0, 21, 30, LINE, 100_000_000);
        assert_eq!(h.u, 2.0);
        assert_eq!(h.rate_bps, 100e9 * 0.95 / 2.0 + 50e6);
        assert_eq!(h.rate_c_bps, h.rate_bps);
    }

    #[test]
    fn mi_thresh_allows_additive_steps_below_the_target() {
        let c = HpccConfig {
            max_stage: 5,
            ..simai()
        };
        let mut h = Hpcc::new(LINE);
        h.rate_c_bps = 40e9;
        h.last_sample = Some(SimTime::ZERO);
        h.u = 0.5;
        // u stays 0.5 (tau = T); below eta with stage 0 < 5: additive.
        h.on_ack(&c, T, SimTime::from_us(8), 0.5, 1, 2, LINE, 100_000_000);
        assert_eq!((h.rate_bps, h.stage), (40.05e9, 1));
        // Without FAST_REACT an ACK inside the RTT changes nothing.
        let slow = HpccConfig {
            fast_react: false,
            ..c
        };
        h.on_ack(&slow, T, SimTime::from_us(9), 2.0, 2, 3, LINE, 100_000_000);
        assert_eq!(h.rate_bps, 40.05e9);
    }
}
