//! TIMELY's sender (Mittal et al., SIGCOMM'15), as SimAI's ns-3 runs it
//! (`CC_MODE 7`, `UpdateRateTimely`): once per round trip, the RTT of the
//! packet that opened the round sets the rate. Below `TLow` the rate
//! grows; above `THigh` it falls in proportion to how far above; in
//! between, a rising RTT (a positive smoothed gradient, normalised by the
//! minimum RTT) cuts it by `beta` times the gradient and a flat or falling
//! one grows it. Growth is additive, and hyper-additive after five growth
//! rounds in a row.
//!
//! The RTT is measured from the send time of the round's first packet to
//! the ACK that covers it: a packet per round carries the timestamp, where
//! SimAI's stamps every packet and reads it from the covering ACK. With an
//! ACK per packet (SimAI's and netsim's default) the two are the same.

use crate::network::config::TimelyConfig;
use netsim_engine::SimTime;

/// Growth rounds in a row after which TIMELY grows by the hyper step.
const HYPER_AFTER_ROUNDS: u32 = 5;

/// Per-flow state of a TIMELY sender.
#[derive(Clone, Debug)]
pub struct Timely {
    /// The rate the queue pair sends at.
    pub rate_bps: f64,
    /// Growth rounds in a row.
    pub stage: u32,
    /// The smoothed RTT difference between rounds, ps.
    pub rtt_diff_ps: f64,
    /// The previous round's RTT; `None` before the first ACK.
    pub last_rtt: Option<SimTime>,
    /// The round ends with the ACK covering this psn, the round's first packet.
    pub update_psn: u32,
    /// When packet `update_psn` last left.
    pub probe_sent_at: SimTime,
}

impl Timely {
    /// A queue pair at line rate.
    pub fn new(line_rate_bps: u64) -> Timely {
        Timely {
            rate_bps: line_rate_bps as f64,
            stage: 0,
            rtt_diff_ps: 0.0,
            last_rtt: None,
            update_psn: 0,
            probe_sent_at: SimTime::ZERO,
        }
    }

    /// Packet `psn` leaves at `now`: the round's first packet carries the clock.
    #[inline]
    pub fn on_sent(&mut self, psn: u32, now: SimTime) {
        if psn == self.update_psn {
            self.probe_sent_at = now;
        }
    }

    /// An ACK acknowledging every packet below `una` arrived at `now`;
    /// `next_psn` is the next packet the sender will send.
    pub fn on_ack(
        &mut self,
        c: &TimelyConfig,
        now: SimTime,
        una: u32,
        next_psn: u32,
        line_rate_bps: u64,
        min_rate_bps: u64,
    ) {
        if una <= self.update_psn {
            return;
        }
        let rtt = SimTime(now.as_ps().saturating_sub(self.probe_sent_at.as_ps()));
        if let Some(last_rtt) = self.last_rtt {
            let new_diff_ps = rtt.as_ps() as f64 - last_rtt.as_ps() as f64;
            let rtt_diff_ps = (1.0 - c.alpha) * self.rtt_diff_ps + c.alpha * new_diff_ps;
            let gradient = rtt_diff_ps / c.min_rtt.as_ps().max(1) as f64;
            let factor = if rtt < c.t_low {
                None
            } else if rtt > c.t_high {
                Some(1.0 - c.beta * (1.0 - c.t_high.as_ps() as f64 / rtt.as_ps() as f64))
            } else if gradient <= 0.0 {
                None
            } else {
                Some((1.0 - c.beta * gradient).max(0.0))
            };
            match factor {
                None => {
                    let step = if self.stage < HYPER_AFTER_ROUNDS {
                        c.additive_increase_bps
                    } else {
                        c.hyper_increase_bps
                    };
                    self.rate_bps = (self.rate_bps + step as f64).min(line_rate_bps as f64);
                    self.stage += 1;
                }
                Some(factor) => {
                    self.rate_bps = (self.rate_bps * factor).max(min_rate_bps as f64);
                    self.stage = 0;
                }
            }
            self.rtt_diff_ps = rtt_diff_ps;
        }
        if next_psn > self.update_psn {
            self.update_psn = next_psn;
            self.last_rtt = Some(rtt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ns-3's defaults, as netsim's.
    fn config() -> TimelyConfig {
        crate::network::config::NetConfig::default().timely
    }

    const LINE: u64 = 100_000_000_000;
    const MIN: u64 = 100_000_000;

    /// One round: the probe leaves at `sent_us` and its ACK comes `rtt_us` later.
    fn round(t: &mut Timely, sent_us: u64, rtt_us: u64, next_psn: u32) {
        let psn = t.update_psn;
        t.on_sent(psn, SimTime::from_us(sent_us));
        let now = SimTime::from_us(sent_us + rtt_us);
        t.on_ack(&config(), now, psn + 1, next_psn, LINE, MIN);
    }

    #[test]
    fn the_first_round_only_measures() {
        let mut t = Timely::new(LINE);
        round(&mut t, 0, 100, 10);
        assert_eq!(t.rate_bps, LINE as f64);
        assert_eq!(t.last_rtt, Some(SimTime::from_us(100)));
        assert_eq!(t.update_psn, 10);
    }

    #[test]
    fn a_rising_rtt_cuts_by_beta_times_the_gradient() {
        let mut t = Timely::new(LINE);
        round(&mut t, 0, 100, 10);
        // +10 us: the smoothed difference is 0.875 * 10 us, the gradient
        // that over 20 us, the cut 1 - 0.8 * 0.4375 = 0.65.
        round(&mut t, 100, 110, 20);
        assert!(
            (t.rate_bps - 0.65 * LINE as f64).abs() < 1.0,
            "{}",
            t.rate_bps
        );
        assert_eq!(t.stage, 0);
    }

    #[test]
    fn above_t_high_the_cut_follows_the_excess() {
        let mut t = Timely::new(LINE);
        round(&mut t, 0, 1000, 10);
        round(&mut t, 1000, 1000, 20);
        // 1 - 0.8 * (1 - 500/1000) = 0.6, whatever the gradient.
        assert!(
            (t.rate_bps - 0.6 * LINE as f64).abs() < 1.0,
            "{}",
            t.rate_bps
        );
    }

    #[test]
    fn growth_turns_hyper_after_five_rounds() {
        let mut t = Timely::new(LINE);
        t.rate_bps = 1e9;
        round(&mut t, 0, 30, 1);
        for r in 1..=7u32 {
            round(&mut t, u64::from(r) * 100, 30, r + 1);
        }
        // Five additive steps of 50 Mb/s, then two of 100 Mb/s.
        assert!(
            (t.rate_bps - (1e9 + 5.0 * 50e6 + 2.0 * 100e6)).abs() < 1.0,
            "{}",
            t.rate_bps
        );
    }

    #[test]
    fn an_ack_inside_the_round_changes_nothing() {
        let mut t = Timely::new(LINE);
        round(&mut t, 0, 100, 10);
        t.on_ack(&config(), SimTime::from_us(400), 5, 12, LINE, MIN);
        assert_eq!(t.rate_bps, LINE as f64);
        assert_eq!(t.update_psn, 10);
    }
}
