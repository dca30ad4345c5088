//! DCQCN's reaction point at the sender, in the Mellanox form SimAI's ns-3
//! inherits from the HPCC code (`rdma-hw.cc`, `*Mlx`): alpha decays every
//! `alpha_update`; the rate is cut at most once per `rate_decrease_interval`
//! when CNPs arrived; rate-increase events, from a timer and (ConnectX's
//! `rpg_byte_reset`) a byte counter, raise it through fast recovery,
//! additive and hyper-additive increase.
//!
//! ```text
//!   CNP ──► flags ──► decrease check (every 4 us): target := rate (unless
//!                     clamping is off and no increase came since the last
//!                     cut), rate := rate (1 - alpha / 2), stages := 0
//!   timer / bytes ──► increase event: fast recovery  rate := (rate + target) / 2
//!                                     additive       target += AI, then the same
//!                                     hyper          target += HAI, then the same
//! ```

use crate::network::config::DcqcnConfig;
use netsim_engine::SimTime;

/// What raised a rate-increase event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncreaseSource {
    /// The rate-increase timer (`rpg_time_reset`, SimAI's `RP_TIMER`).
    Timer,
    /// The byte counter (`rpg_byte_reset`).
    Bytes,
}

/// The phase a rate-increase event runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncreasePhase {
    /// Halfway back to the target.
    FastRecovery,
    /// The target grows by the additive step first.
    Additive,
    /// The target grows by the hyper-additive step first.
    Hyper,
}

/// Per-flow state of DCQCN's reaction point.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    pub rate_bps: f64,
    pub target_bps: f64,
    pub alpha: f64,
    /// A CNP arrived since the last alpha update.
    pub cnp_since_alpha: bool,
    /// A CNP arrived since the last decrease check.
    pub cnp_since_decrease: bool,
    /// Increase events since the last cut, by the timer and by the byte counter.
    pub timer_stage: u32,
    pub byte_stage: u32,
    /// Bytes sent since the byte counter last fired (or the last cut).
    pub bytes_since_increase: u64,
    /// Timers run from the first CNP on.
    pub timers_running: bool,
    /// The rate was cut at least once: increase events are armed.
    pub increasing: bool,
    /// Generation of the rate-increase timer; a cut restarts it.
    pub increase_generation: u32,
}

impl Dcqcn {
    /// A queue pair at line rate, no CNP seen.
    pub fn new(line_rate_bps: u64) -> Dcqcn {
        Dcqcn {
            rate_bps: line_rate_bps as f64,
            target_bps: line_rate_bps as f64,
            alpha: 1.0,
            cnp_since_alpha: false,
            cnp_since_decrease: false,
            timer_stage: 0,
            byte_stage: 0,
            bytes_since_increase: 0,
            timers_running: false,
            increasing: false,
            increase_generation: 0,
        }
    }

    /// A CNP (or an ACK flagged as one) arrived. Returns true for the
    /// first: the caller starts the timers. The first either cuts at once
    /// or, with `rate_on_first_cnp`, sets the rate and leaves the first cut
    /// to the next decrease check (SimAI's `cnp_received_mlx`).
    pub fn on_cnp(&mut self, c: &DcqcnConfig) -> bool {
        self.cnp_since_alpha = true;
        self.cnp_since_decrease = true;
        if self.timers_running {
            return false;
        }
        self.timers_running = true;
        match c.rate_on_first_cnp {
            None => {
                self.check_decrease(c);
            }
            Some(fraction) => {
                self.alpha = 1.0;
                self.cnp_since_alpha = false;
                self.rate_bps = (self.rate_bps * fraction).max(c.min_rate_bps as f64);
                self.target_bps = self.rate_bps;
            }
        }
        true
    }

    /// The alpha timer fired.
    pub fn update_alpha(&mut self, c: &DcqcnConfig) {
        let hit = if self.cnp_since_alpha { c.g } else { 0.0 };
        self.alpha = (1.0 - c.g) * self.alpha + hit;
        self.cnp_since_alpha = false;
    }

    /// Cuts the rate if CNPs arrived since the last check; true if it did
    /// (the caller restarts the increase timer).
    pub fn check_decrease(&mut self, c: &DcqcnConfig) -> bool {
        if !self.cnp_since_decrease {
            return false;
        }
        self.cnp_since_decrease = false;
        let increased_since_cut = self.timer_stage + self.byte_stage > 0;
        if c.clamp_target_rate || increased_since_cut {
            self.target_bps = self.rate_bps;
        }
        self.rate_bps = (self.rate_bps * (1.0 - self.alpha / 2.0)).max(c.min_rate_bps as f64);
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes_since_increase = 0;
        self.increasing = true;
        self.increase_generation = self.increase_generation.wrapping_add(1);
        true
    }

    /// The phase the next increase event runs in. With the timer alone it
    /// follows the timer's stage (SimAI); with a byte counter, DCQCN's rule:
    /// fast recovery until either count reaches `F`, hyper once both pass it.
    pub fn phase(&self, c: &DcqcnConfig) -> IncreasePhase {
        let f = c.fast_recovery_times;
        let (low, high) = if c.byte_counter_bytes == 0 {
            (self.timer_stage, self.timer_stage)
        } else {
            (
                self.timer_stage.min(self.byte_stage),
                self.timer_stage.max(self.byte_stage),
            )
        };
        if high < f {
            IncreasePhase::FastRecovery
        } else if low > f {
            IncreasePhase::Hyper
        } else {
            IncreasePhase::Additive
        }
    }

    /// One rate-increase event from `source`.
    pub fn increase(&mut self, c: &DcqcnConfig, line_rate_bps: u64, source: IncreaseSource) {
        let line = line_rate_bps as f64;
        let step = match self.phase(c) {
            IncreasePhase::FastRecovery => None,
            IncreasePhase::Additive => Some(c.additive_increase_bps),
            IncreasePhase::Hyper => Some(c.hyper_increase_bps),
        };
        if let Some(step) = step {
            self.target_bps = (self.target_bps + step as f64).min(line);
        }
        self.rate_bps = ((self.rate_bps + self.target_bps) / 2.0).min(line);
        match source {
            IncreaseSource::Timer => self.timer_stage += 1,
            IncreaseSource::Bytes => self.byte_stage += 1,
        }
    }

    /// `bytes` left the NIC: true when the byte counter fires an increase
    /// event (which the caller then runs).
    pub fn on_sent(&mut self, c: &DcqcnConfig, bytes: u64) -> bool {
        if c.byte_counter_bytes == 0 || !self.increasing {
            return false;
        }
        self.bytes_since_increase += bytes;
        if self.bytes_since_increase < c.byte_counter_bytes {
            return false;
        }
        self.bytes_since_increase -= c.byte_counter_bytes;
        true
    }
}

impl Dcqcn {
    /// The queue pair sat idle for `idle` (its last message done, the next
    /// not yet sending): the reaction point's timers that would have fired
    /// meanwhile fire now, in time order, their phases counted from the
    /// start of the idle time. A queue pair keeps its rate between
    /// messages; the timers raise it back toward the line rate meanwhile.
    pub fn idle(&mut self, c: &DcqcnConfig, line_rate_bps: u64, idle: SimTime) {
        let (a, d, r) = (
            c.alpha_update.as_ps(),
            c.rate_decrease_interval.as_ps(),
            c.rate_increase_timer.as_ps(),
        );
        if !self.timers_running || a == 0 || d == 0 || r == 0 {
            return;
        }
        let end = idle.as_ps();
        let line = line_rate_bps as f64;
        let (mut next_alpha, mut next_decrease, mut next_increase) = (a, d, r);
        loop {
            let increase_at = if self.increasing {
                next_increase
            } else {
                u64::MAX
            };
            let next = next_alpha.min(next_decrease).min(increase_at);
            if next > end {
                return;
            }
            let at_rest = !self.cnp_since_alpha
                && !self.cnp_since_decrease
                && self.rate_bps >= line
                && self.target_bps >= line;
            if at_rest {
                // Only alpha moves now: the updates left decay it at once.
                if next_alpha <= end {
                    let left = (end - next_alpha) / a + 1;
                    self.alpha *= (1.0 - c.g).powf(left as f64);
                }
                return;
            }
            if next == next_alpha {
                self.update_alpha(c);
                next_alpha += a;
            } else if next == next_decrease {
                if self.check_decrease(c) {
                    next_increase = next_decrease + r;
                }
                next_decrease += d;
            } else {
                self.increase(c, line_rate_bps, IncreaseSource::Timer);
                next_increase += r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::config::NetConfig;
    use crate::network::profile::CcProfile;

    const LINE: u64 = 100_000_000_000;

    #[test]
    fn netsim_cuts_at_the_first_cnp_and_recovers_towards_the_target() {
        let c = NetConfig::default().dcqcn;
        let mut d = Dcqcn::new(LINE);
        assert!(d.on_cnp(&c));
        // alpha starts at 1: the first cut halves the rate.
        assert_eq!(d.rate_bps, 50e9);
        assert_eq!(d.target_bps, 100e9);
        d.increase(&c, LINE, IncreaseSource::Timer); // fast recovery
        assert_eq!(d.rate_bps, 75e9);
        // The CNP keeps alpha at 1 for one period; then, without CNPs, it
        // decays geometrically with gain g.
        d.update_alpha(&c);
        assert_eq!(d.alpha, 1.0);
        d.update_alpha(&c);
        assert!((d.alpha - (1.0 - c.g)).abs() < 1e-12);
    }

    #[test]
    fn a_stage_0_cut_with_clamping_off_keeps_the_target() {
        let c = CcProfile::Simai
            .config(crate::network::config::CcKind::Dcqcn)
            .dcqcn;
        assert!(!c.clamp_target_rate);
        let mut d = Dcqcn::new(LINE);
        // RateOnFirstCnp 1.0: the first CNP changes no rate.
        assert!(d.on_cnp(&c));
        assert_eq!((d.rate_bps, d.target_bps, d.alpha), (100e9, 100e9, 1.0));
        // Its cut comes at the decrease check: alpha 1 halves the rate.
        assert!(d.check_decrease(&c));
        assert_eq!((d.rate_bps, d.target_bps), (50e9, 100e9));
        // Another CNP before any increase: the target stays at 100 Gb/s.
        d.update_alpha(&c); // no CNP since: alpha = 255/256
        assert!(!d.on_cnp(&c));
        assert!(d.check_decrease(&c));
        assert_eq!(d.target_bps, 100e9);
        assert_eq!(d.rate_bps, 50e9 * (1.0 - 0.99609375 / 2.0));
        assert_eq!(d.rate_bps, 25_097_656_250.0);
        // Fast recovery (FAST_RECOVERY_TIMES 1) climbs halfway back to it.
        d.increase(&c, LINE, IncreaseSource::Timer);
        assert_eq!(d.rate_bps, (25_097_656_250.0 + 100e9) / 2.0);
        // After an increase, a cut clamps the target to the rate.
        let before = d.rate_bps;
        d.on_cnp(&c);
        d.check_decrease(&c);
        assert_eq!(d.target_bps, before);
        // With clamping on, the stage-0 cut would have set the target.
        let clamped = DcqcnConfig {
            clamp_target_rate: true,
            ..c
        };
        let mut e = Dcqcn::new(LINE);
        e.on_cnp(&clamped);
        e.check_decrease(&clamped);
        e.update_alpha(&clamped);
        e.on_cnp(&clamped);
        e.check_decrease(&clamped);
        assert_eq!(e.target_bps, 50e9);
    }

    #[test]
    fn an_idle_queue_pair_recovers_as_its_timers_would_have_raised_it() {
        let c = DcqcnConfig {
            fast_recovery_times: 5,
            ..NetConfig::default().dcqcn
        };
        let mut d = Dcqcn::new(LINE);
        d.on_cnp(&c); // cuts at once: 50 Gb/s, target 100
        let mut idle = d.clone();
        // Three increase periods and a bit: three fast-recovery steps, each
        // halfway to the target; the decrease checks find no CNP.
        let span = SimTime(3 * c.rate_increase_timer.as_ps() + 1);
        idle.idle(&c, LINE, span);
        assert_eq!(idle.rate_bps, 100e9 - 50e9 / 8.0);
        assert_eq!(idle.target_bps, 100e9);
        assert_eq!(idle.timer_stage, 3);
        // Alpha: the CNP's period keeps it at 1, each later one decays it.
        let updates = span.as_ps() / c.alpha_update.as_ps();
        let alpha = (1.0 - c.g).powi(updates as i32 - 1);
        assert!((idle.alpha - alpha).abs() < 1e-12, "{} {alpha}", idle.alpha);
        // Long enough, it is back at the line rate; a state whose timers
        // never ran (no CNP) does not move.
        idle.idle(&c, LINE, SimTime::from_ns(100_000_000));
        assert_eq!(idle.rate_bps, 100e9);
        let mut fresh = Dcqcn::new(LINE);
        fresh.idle(&c, LINE, SimTime::from_ns(1_000_000));
        assert_eq!((fresh.rate_bps, fresh.alpha), (100e9, 1.0));
    }

    #[test]
    fn the_byte_counter_raises_the_rate_between_timer_events() {
        let c = DcqcnConfig {
            clamp_target_rate: true,
            fast_recovery_times: 1,
            additive_increase_bps: 5_000_000,
            byte_counter_bytes: 1000,
            ..NetConfig::default().dcqcn
        };
        let mut d = Dcqcn::new(LINE);
        assert!(!d.on_sent(&c, 5000), "no increase before the first cut");
        d.on_cnp(&c); // cuts at once: 50 Gb/s, target 100
        d.update_alpha(&c); // the CNP's period: alpha stays 1
        d.update_alpha(&c); // alpha = 255/256
        d.on_cnp(&c);
        d.check_decrease(&c); // clamp: target 50, rate 50 (1 - 255/512)
        assert_eq!((d.rate_bps, d.target_bps), (25_097_656_250.0, 50e9));
        assert!(!d.on_sent(&c, 999));
        assert!(d.on_sent(&c, 1));
        assert_eq!(d.phase(&c), IncreasePhase::FastRecovery);
        d.increase(&c, LINE, IncreaseSource::Bytes);
        assert_eq!(d.rate_bps, 37_548_828_125.0);
        // One byte-counter stage reaches F = 1: additive increase.
        assert!(d.on_sent(&c, 1000));
        assert_eq!(d.phase(&c), IncreasePhase::Additive);
        d.increase(&c, LINE, IncreaseSource::Bytes);
        assert_eq!(d.target_bps, 50.005e9);
        assert_eq!(d.rate_bps, 43_776_914_062.5);
        // Hyper increase needs both counters past F.
        d.increase(&c, LINE, IncreaseSource::Timer);
        d.increase(&c, LINE, IncreaseSource::Timer);
        assert_eq!((d.timer_stage, d.byte_stage), (2, 2));
        assert_eq!(d.phase(&c), IncreasePhase::Hyper);
    }
}
