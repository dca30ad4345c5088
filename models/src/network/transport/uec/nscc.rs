//! NSCC, UET's network-signal sender congestion control: a window driven by
//! the queueing delay an ACK measured (its RTT less the path's base RTT) and
//! whether it was ECN-marked.
//!
//! | ACK                     | delay < target           | delay >= target            |
//! |-------------------------|--------------------------|----------------------------|
//! | unmarked                | proportional increase (fast increase near zero delay) | fair increase |
//! | ECN-marked              | none (the load balancer moves away) | multiplicative decrease (once per base RTT, by the average delay) |
//!
//! Increases accumulate and are applied every base RTT or every few
//! kilobytes acknowledged; a small additive step `eta` is added per period.
//! Quick adapt: once per base RTT + target, if a NACK came or the delay is
//! above four targets, the window drops to what was acknowledged in the last
//! period. Constants follow htsim's `initNsccParams`, scaled from a 100 Gb/s,
//! 12 us reference network to the flow's own BDP and the target.

//!
//! The mechanisms where the UET specification and htsim differ from
//! netsim's first reading are switches of [`UecConfig`]: the first window,
//! quick adapt's gate, the adjust period, the delay average's decay and
//! where the base RTT comes from.

use crate::network::config::uec::{
    BaseRtt, NsccAdjust, UecConfig, NSCC_REFERENCE_BPS, NSCC_REFERENCE_RTT_PS,
};
use netsim_engine::SimTime;

/// Decrease factor per unit of relative excess delay (htsim `_gamma`).
const GAMMA: f64 = 0.8;
/// EWMA gain of the average delay (htsim `_delay_alpha`).
const DELAY_EWMA: f64 = 0.0125;
/// Below this delay, increases turn fast (htsim `fast_increase`: 1 us).
const FAST_INCREASE_DELAY_PS: u64 = 1_000_000;

/// One flow's NSCC state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Nscc {
    pub cwnd_bytes: f64,
    max_cwnd_bytes: f64,
    /// One packet as the window counts it.
    min_cwnd_bytes: f64,
    /// One packet's payload: the unit of the per-packet constants
    /// (htsim's `_mss`).
    mtu_bytes: f64,
    base_rtt: SimTime,
    target: SimTime,
    qa_threshold: SimTime,
    /// Quick adapt only below the largest window / 2^gate (`None`: when
    /// the window is at least what was achieved).
    qa_gate: Option<u32>,
    /// Whether one quick-adapt period has passed (htsim never adapts in
    /// the first).
    qa_armed: bool,
    adjust: NsccAdjust,
    delay_decay: bool,
    /// NACKs inside quick adapt's ignore window leave the window as is.
    nack_ignore: bool,
    /// Below the target, the proportional increase alone (htsim's
    /// `proportional_increase`); off, the fair increase is added too.
    fair_above_target: bool,
    /// Fabric base RTT: lowered to the smallest RTT measured, the largest
    /// window with it.
    track_min_rtt: bool,
    /// NACKs' round trips count among those measured.
    nack_base_rtt: bool,
    line_rate_bps: f64,
    /// The fabric's RTT, the delay a NACK stands for (delay decay).
    network_rtt: SimTime,
    /// Proportional-increase gain, bytes per ps of delay headroom per byte.
    alpha: f64,
    fair_increase: f64,
    eta_bytes: f64,
    fast_increase_scale: f64,
    adjust_bytes: f64,
    adjust_period: SimTime,
    avg_delay_ps: f64,
    inc_bytes: f64,
    received_bytes: f64,
    achieved_bytes: f64,
    fi_count_bytes: f64,
    fast: bool,
    trigger_qa: bool,
    bytes_to_ignore: f64,
    bytes_ignored: f64,
    qa_end: SimTime,
    last_adjust: SimTime,
    last_eta: SimTime,
    last_decrease: SimTime,
}

impl Nscc {
    /// NSCC for a flow whose path has `base_rtt` at `line_rate_bps`, sending
    /// packets of `mtu_bytes` payload that its window counts as `pkt_bytes`
    /// each (the payload or the packet on the wire), as `config` sets it
    /// (target queueing delay, first window, the mechanisms' variants).
    pub(crate) fn new(
        line_rate_bps: u64,
        base_rtt: SimTime,
        mtu_bytes: u32,
        pkt_bytes: u32,
        config: &UecConfig,
        now: SimTime,
    ) -> Nscc {
        let target = config.target_qdelay;
        let fabric = config.base_rtt == BaseRtt::Fabric && config.fabric_rtt > SimTime::ZERO;
        let base_rtt = if fabric { config.fabric_rtt } else { base_rtt };
        let network_rtt = if config.fabric_rtt > SimTime::ZERO {
            config.fabric_rtt
        } else {
            base_rtt
        };
        let mtu = f64::from(mtu_bytes);
        let pkt = f64::from(pkt_bytes);
        let bdp = (line_rate_bps as f64 * base_rtt.as_ps() as f64 / 8e12).max(pkt);
        let reference_bdp = NSCC_REFERENCE_BPS * NSCC_REFERENCE_RTT_PS / 8e12;
        let a = bdp / reference_bdp;
        let b = target.as_ps() as f64 / NSCC_REFERENCE_RTT_PS;
        let (adjust_bytes, adjust_period) = match config.adjust {
            NsccAdjust::Reference => (16_000.0 * b, SimTime(NSCC_REFERENCE_RTT_PS as u64)),
            NsccAdjust::Network => (8.0 * pkt, network_rtt),
        };
        Nscc {
            cwnd_bytes: (config.initial_window_bdp * bdp).clamp(pkt, 1.5 * bdp),
            max_cwnd_bytes: 1.5 * bdp,
            min_cwnd_bytes: pkt,
            mtu_bytes: mtu,
            base_rtt,
            target,
            qa_threshold: SimTime(target.as_ps().saturating_mul(4)),
            qa_gate: config.qa_gate,
            qa_armed: false,
            adjust: config.adjust,
            delay_decay: config.delay_decay,
            nack_ignore: config.nack_ignore,
            fair_above_target: config.fair_above_target,
            track_min_rtt: fabric,
            nack_base_rtt: config.nack_base_rtt,
            line_rate_bps: line_rate_bps as f64,
            network_rtt,
            alpha: 4.0 * a * b * mtu / target.as_ps() as f64,
            fair_increase: 5.0 * a,
            eta_bytes: 0.15 * mtu * a,
            fast_increase_scale: 0.25 * a,
            adjust_bytes,
            adjust_period,
            avg_delay_ps: 0.0,
            inc_bytes: 0.0,
            received_bytes: 0.0,
            achieved_bytes: 0.0,
            fi_count_bytes: 0.0,
            fast: false,
            trigger_qa: false,
            bytes_to_ignore: 0.0,
            bytes_ignored: 0.0,
            qa_end: now,
            last_adjust: now,
            last_eta: now,
            last_decrease: now,
        }
    }

    fn bound(&mut self) {
        self.cwnd_bytes = self
            .cwnd_bytes
            .clamp(self.min_cwnd_bytes, self.max_cwnd_bytes);
    }

    /// Quick adapt: at most once per base RTT + target, after a NACK or a
    /// delay past the threshold, the window becomes what the last period
    /// achieved. Whether it fired.
    fn quick_adapt(
        &mut self,
        now: SimTime,
        loss: bool,
        delay: SimTime,
        in_flight_bytes: f64,
    ) -> bool {
        if now <= self.qa_end {
            return false;
        }
        let room = match self.qa_gate {
            None => self.cwnd_bytes >= self.achieved_bytes,
            Some(g) => {
                self.qa_armed && self.achieved_bytes < self.max_cwnd_bytes / f64::from(1 << g)
            }
        };
        let fire = (self.trigger_qa || loss || delay > self.qa_threshold) && room;
        self.qa_armed = true;
        if fire {
            self.cwnd_bytes = self.achieved_bytes.max(self.min_cwnd_bytes);
            self.bytes_to_ignore = in_flight_bytes;
            self.bytes_ignored = 0.0;
            self.trigger_qa = false;
            if self.qa_gate.is_some() {
                self.inc_bytes = 0.0;
                self.received_bytes = 0.0;
            }
        }
        self.achieved_bytes = 0.0;
        self.qa_end = now + self.base_rtt + self.target;
        fire
    }

    /// With htsim's quick adapt (`qa_gate`), as its `quick_adapt` does:
    /// `bytes` acknowledged or NACKed count toward what quick adapt
    /// ignores, then a marked ACK or a NACK (`skip`) inside it is ignored,
    /// and drops the increase accumulated so far as a firing does (the
    /// increase gathered before a cut is not folded in after it). Whether
    /// it was ignored.
    fn htsim_ignores(&mut self, bytes: f64, skip: bool) -> bool {
        self.bytes_ignored += bytes;
        let ignored = skip && self.bytes_ignored < self.bytes_to_ignore;
        if ignored {
            self.inc_bytes = 0.0;
            self.received_bytes = 0.0;
        }
        ignored
    }

    /// An ACK newly acknowledged `acked_bytes`; it measured round-trip
    /// `rtt` and was ECN-marked or not; `in_flight_bytes` are outstanding.
    pub(crate) fn on_ack(
        &mut self,
        now: SimTime,
        rtt: SimTime,
        ce: bool,
        acked_bytes: f64,
        in_flight_bytes: f64,
    ) {
        if self.track_min_rtt && rtt > SimTime::ZERO && rtt < self.base_rtt {
            self.lower_base_rtt(rtt);
        }
        let delay = SimTime(rtt.as_ps().saturating_sub(self.base_rtt.as_ps()));
        self.average_delay(delay, ce);
        self.achieved_bytes += acked_bytes;
        self.received_bytes += acked_bytes;
        if self.qa_gate.is_some() {
            if self.htsim_ignores(acked_bytes, ce) {
                return;
            }
        } else if self.bytes_ignored < self.bytes_to_ignore {
            // Quick adapt already accounted for what was in flight then.
            self.bytes_ignored += acked_bytes;
            if ce {
                return;
            }
        }
        if self.quick_adapt(now, false, delay, in_flight_bytes) {
            return;
        }
        match (ce, delay >= self.target) {
            (false, true) => self.inc_bytes += self.fair_increase * self.mtu_bytes * acked_bytes,
            (false, false) => {
                if delay.as_ps() < FAST_INCREASE_DELAY_PS {
                    self.fi_count_bytes += acked_bytes;
                    if self.fi_count_bytes > self.cwnd_bytes || self.fast {
                        self.cwnd_bytes += acked_bytes * self.fast_increase_scale;
                        self.fast = true;
                    }
                } else {
                    self.fi_count_bytes = 0.0;
                    self.fast = false;
                }
                if !self.fast {
                    let headroom_ps = (self.target - delay).as_ps() as f64;
                    self.inc_bytes += self.alpha * headroom_ps * acked_bytes;
                    if !self.fair_above_target {
                        self.inc_bytes += self.fair_increase * self.mtu_bytes * acked_bytes;
                    }
                }
            }
            (true, true) => {
                self.fast = false;
                self.fi_count_bytes = 0.0;
                let avg = self.avg_delay_ps;
                let target = self.target.as_ps() as f64;
                if avg > target && now - self.last_decrease > self.base_rtt {
                    self.cwnd_bytes *= (1.0 - GAMMA * (avg - target) / avg).max(0.5);
                    self.last_decrease = now;
                }
            }
            // Marked below the target: a hot path, not a full network; the
            // load balancer steers away from it.
            (true, false) => {}
        }
        self.bound();
        match self.adjust {
            NsccAdjust::Reference => self.adjust_reference(now),
            NsccAdjust::Network => self.adjust_network(now),
        }
        self.bound();
    }

    /// netsim's first reading: the increase, capped at the bytes
    /// acknowledged, every `adjust_bytes` or period; `eta` every period.
    fn adjust_reference(&mut self, now: SimTime) {
        if self.received_bytes > self.adjust_bytes || now - self.last_adjust > self.adjust_period {
            self.cwnd_bytes += self.received_bytes.min(self.inc_bytes / self.cwnd_bytes);
            self.inc_bytes = 0.0;
            self.received_bytes = 0.0;
            self.last_adjust = now;
        }
        if now - self.last_eta > self.adjust_period {
            self.cwnd_bytes += self.eta_bytes;
            self.last_eta = now;
        }
    }

    /// htsim's `fulfill_adjustment`: the whole increase every 8 MTUs or
    /// network RTT, and `eta` with it once a period has passed.
    fn adjust_network(&mut self, now: SimTime) {
        if self.received_bytes > self.adjust_bytes || now - self.last_eta > self.adjust_period {
            self.cwnd_bytes += self.inc_bytes / self.cwnd_bytes;
            if now - self.last_eta >= self.adjust_period {
                self.cwnd_bytes += self.eta_bytes;
                self.last_eta = now;
            }
            self.inc_bytes = 0.0;
            self.received_bytes = 0.0;
        }
    }

    /// A smaller RTT than the base: the base and the largest window follow it.
    fn lower_base_rtt(&mut self, rtt: SimTime) {
        self.base_rtt = rtt;
        let bdp = (self.line_rate_bps * rtt.as_ps() as f64 / 8e12).max(self.min_cwnd_bytes);
        self.max_cwnd_bytes = 1.5 * bdp;
    }

    /// A NACK that came `rtt` after its packet was sent (if known): the
    /// trimmed packet's bytes leave the window, and quick adapt is due.
    pub(crate) fn on_nack(
        &mut self,
        now: SimTime,
        rtt: Option<SimTime>,
        nacked_bytes: f64,
        in_flight_bytes: f64,
    ) {
        if let Some(rtt) = rtt.filter(|&r| {
            self.track_min_rtt && self.nack_base_rtt && r > SimTime::ZERO && r < self.base_rtt
        }) {
            self.lower_base_rtt(rtt);
        }
        if self.delay_decay {
            // A trim stands for a full queue: about one network RTT of delay.
            self.avg_delay_ps = (1.0 - DELAY_EWMA) * self.avg_delay_ps
                + DELAY_EWMA * self.network_rtt.as_ps() as f64;
        }
        if self.nack_ignore {
            // htsim's `updateCwndOnNack_NSCC`: the NACKed bytes count toward
            // what quick adapt ignores; inside that, or when quick adapt
            // fires, the window is not cut.
            self.trigger_qa = true;
            let ignored = if self.qa_gate.is_some() {
                self.htsim_ignores(nacked_bytes, true)
            } else {
                self.bytes_ignored += nacked_bytes;
                self.bytes_ignored < self.bytes_to_ignore
            };
            if ignored {
                return;
            }
            let avg = SimTime(self.avg_delay_ps as u64);
            if !self.quick_adapt(now, true, avg, in_flight_bytes) {
                self.cwnd_bytes -= nacked_bytes;
                self.bound();
            }
            return;
        }
        self.cwnd_bytes -= nacked_bytes;
        self.bound();
        self.trigger_qa = true;
        if self.bytes_ignored >= self.bytes_to_ignore {
            let avg = SimTime(self.avg_delay_ps as u64);
            self.quick_adapt(now, true, avg, in_flight_bytes);
        }
    }

    /// Folds a queueing delay sample into the average (htsim's `update_delay`).
    fn average_delay(&mut self, delay: SimTime, ce: bool) {
        let sample_ps = if self.delay_decay && !ce && delay > self.target {
            // Unmarked yet late: the queue is draining elsewhere; decay.
            self.base_rtt.as_ps() as f64 / 4.0
        } else {
            delay.as_ps() as f64
        };
        self.avg_delay_ps = (1.0 - DELAY_EWMA) * self.avg_delay_ps + DELAY_EWMA * sample_ps;
    }

    /// SLEEK: a probe came back after `rtt`: its queueing delay, folded
    /// into the average unless below the base RTT (then 0; htsim's
    /// `processAck` for a probe ACK).
    pub(crate) fn on_probe_rtt(&mut self, rtt: SimTime, ce: bool) -> SimTime {
        if rtt < self.base_rtt {
            return SimTime::ZERO;
        }
        let delay = rtt - self.base_rtt;
        self.average_delay(delay, ce);
        delay
    }

    /// The average queueing delay (htsim's `get_avg_delay`).
    pub(crate) fn average_delay_now(&self) -> SimTime {
        SimTime(self.avg_delay_ps as u64)
    }

    /// The base RTT, the target delay and the largest window (bytes).
    pub(crate) fn limits(&self) -> (SimTime, SimTime, f64) {
        (self.base_rtt, self.target, self.max_cwnd_bytes)
    }

    /// The base RTT plus the average queueing delay: what an ACK without
    /// an RTT sample of its own stands for (htsim's `get_avg_delay`).
    pub(crate) fn average_rtt(&self) -> SimTime {
        self.base_rtt + SimTime(self.avg_delay_ps as u64)
    }

    /// Packets declared lost (reordering or timeout) leave the window.
    pub(crate) fn on_loss(&mut self, lost_bytes: f64) {
        self.cwnd_bytes = (self.cwnd_bytes - lost_bytes).max(self.min_cwnd_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nscc() -> Nscc {
        Nscc::new(
            100_000_000_000,
            SimTime::from_us(12),
            4096,
            4096,
            &UecConfig::default(),
            SimTime::ZERO,
        )
    }

    /// htsim's `update_base_rtt_on_nack`: a trimmed header skips the
    /// queues, so its NACK's round trip is the path's unloaded one; with
    /// the fabric's base RTT it lowers the base (and the largest window)
    /// as an ACK's would. Off, NACKs leave it.
    #[test]
    fn a_nack_lowers_the_fabric_base_rtt_when_asked() {
        for on in [false, true] {
            let config = UecConfig {
                base_rtt: BaseRtt::Fabric,
                fabric_rtt: SimTime::from_us(14),
                nack_base_rtt: on,
                ..UecConfig::default()
            };
            let mut n = Nscc::new(
                100_000_000_000,
                SimTime::from_us(9),
                4096,
                4096,
                &config,
                SimTime::ZERO,
            );
            assert_eq!(n.limits().0, SimTime::from_us(14));
            n.on_nack(SimTime::from_us(20), Some(SimTime::from_us(9)), 4096.0, 0.0);
            let base_us = if on { 9 } else { 14 };
            let (base, _, max_cwnd) = n.limits();
            assert_eq!(base, SimTime::from_us(base_us), "on: {on}");
            let bdp = 100e9 / 8.0 * base_us as f64 * 1e-6;
            assert!((max_cwnd - 1.5 * bdp).abs() < 1.0, "on: {on}: {max_cwnd}");
        }
    }

    #[test]
    fn starts_at_one_bdp_and_grows_without_queueing() {
        let mut n = nscc();
        assert!((n.cwnd_bytes - 150_000.0).abs() < 1.0);
        let mut now = SimTime::ZERO;
        for _ in 0..200 {
            now += SimTime::from_ns(330);
            n.on_ack(now, SimTime::from_us(12), false, 4096.0, 100_000.0);
        }
        assert!(n.cwnd_bytes > 150_000.0, "cwnd {}", n.cwnd_bytes);
        assert!(n.cwnd_bytes <= 225_000.0, "bounded by 1.5 BDP");
    }

    #[test]
    fn marked_acks_past_the_target_cut_the_window() {
        let mut n = nscc();
        let mut now = SimTime::ZERO;
        for _ in 0..400 {
            now += SimTime::from_ns(330);
            // 20 us of queueing, marked: below quick adapt's 24 us.
            n.on_ack(now, SimTime::from_us(32), true, 4096.0, 100_000.0);
        }
        assert!(n.cwnd_bytes < 100_000.0, "cwnd {}", n.cwnd_bytes);
    }

    #[test]
    fn quick_adapt_drops_to_what_was_achieved() {
        let mut n = nscc();
        let mut now = SimTime::from_ns(1);
        // One period with a few ACKs, then a huge delay.
        n.on_ack(now, SimTime::from_us(12), false, 4096.0, 100_000.0);
        for _ in 0..3 {
            now += SimTime::from_us(1);
            n.on_ack(now, SimTime::from_us(12), false, 4096.0, 100_000.0);
        }
        now += SimTime::from_us(30);
        n.on_ack(now, SimTime::from_us(60), false, 4096.0, 100_000.0);
        assert!(n.cwnd_bytes <= 5.0 * 4096.0, "cwnd {}", n.cwnd_bytes);
    }

    fn with(config: UecConfig) -> Nscc {
        Nscc::new(
            100_000_000_000,
            SimTime::from_us(12),
            4096,
            4096,
            &config,
            SimTime::ZERO,
        )
    }

    /// Eight ACKs in one period (32 KB achieved), then a delay past the
    /// quick-adapt threshold; the window after it.
    fn window_after_a_busy_period(mut n: Nscc) -> f64 {
        let mut now = SimTime::from_ns(1);
        n.on_ack(now, SimTime::from_us(12), false, 4096.0, 100_000.0);
        for _ in 0..8 {
            now += SimTime::from_us(1);
            n.on_ack(now, SimTime::from_us(12), false, 4096.0, 100_000.0);
        }
        now += SimTime::from_us(30);
        n.on_ack(now, SimTime::from_us(60), false, 4096.0, 100_000.0);
        n.cwnd_bytes
    }

    #[test]
    fn htsims_gate_keeps_quick_adapt_off_a_flow_that_achieved_enough() {
        // 36 KB achieved: above the largest window (225 KB) / 8.
        let gated = with(UecConfig {
            qa_gate: Some(3),
            ..UecConfig::default()
        });
        assert!(window_after_a_busy_period(gated) > 100_000.0);
        assert!(window_after_a_busy_period(nscc()) <= 10.0 * 4096.0);
    }

    /// htsim's `quick_adapt` returns "done or ignore" for a marked ACK or
    /// a NACK inside the bytes it ignores after firing, and its caller
    /// then drops the increase accumulated so far; netsim's first reading
    /// keeps it for the next adjustment.
    #[test]
    fn htsims_quick_adapt_drops_the_increase_on_feedback_it_ignores() {
        for gate in [None, Some(3)] {
            let mut n = with(UecConfig {
                qa_gate: gate,
                adjust: NsccAdjust::Network,
                nack_ignore: true,
                ..UecConfig::default()
            });
            let now = SimTime::from_ns(1);
            // Below the target, unmarked: an increase accumulates (one
            // packet, short of the 8-MTU adjustment).
            n.on_ack(now, SimTime::from_us(13), false, 4096.0, 100_000.0);
            assert!(n.inc_bytes > 0.0);
            // Quick adapt fired with 100 KB in flight: ignore that much.
            n.bytes_to_ignore = 100_000.0;
            n.bytes_ignored = 0.0;
            let before = n.inc_bytes;
            n.on_ack(now, SimTime::from_us(30), true, 4096.0, 100_000.0);
            let after_marked = n.inc_bytes;
            n.inc_bytes = before;
            n.on_nack(now, None, 4096.0, 100_000.0);
            let after_nack = n.inc_bytes;
            if gate.is_some() {
                assert_eq!((after_marked, after_nack), (0.0, 0.0));
            } else {
                assert_eq!((after_marked, after_nack), (before, before));
            }
        }
    }

    #[test]
    fn the_initial_window_is_in_bdps_up_to_the_largest() {
        let n = with(UecConfig {
            initial_window_bdp: 1.5,
            ..UecConfig::default()
        });
        assert!((n.cwnd_bytes - 225_000.0).abs() < 1.0);
    }

    #[test]
    fn delay_decay_pulls_the_average_down_on_late_unmarked_acks() {
        let mut plain = nscc();
        let mut decayed = with(UecConfig {
            delay_decay: true,
            ..UecConfig::default()
        });
        let mut now = SimTime::ZERO;
        for _ in 0..200 {
            now += SimTime::from_ns(330);
            // 20 us of queueing, unmarked: past the 6 us target.
            plain.on_ack(now, SimTime::from_us(32), false, 4096.0, 100_000.0);
            decayed.on_ack(now, SimTime::from_us(32), false, 4096.0, 100_000.0);
        }
        assert!(decayed.avg_delay_ps < 4e6, "{}", decayed.avg_delay_ps);
        assert!(plain.avg_delay_ps > 10e6, "{}", plain.avg_delay_ps);
    }

    #[test]
    fn the_fabric_base_rtt_falls_to_the_smallest_measured() {
        let mut n = with(UecConfig {
            base_rtt: BaseRtt::Fabric,
            fabric_rtt: SimTime::from_us(14),
            ..UecConfig::default()
        });
        assert_eq!(n.base_rtt, SimTime::from_us(14));
        n.on_ack(SimTime::from_us(1), SimTime::from_us(8), false, 4096.0, 0.0);
        assert_eq!(n.base_rtt, SimTime::from_us(8));
        assert!((n.max_cwnd_bytes - 150_000.0).abs() < 1.0);
    }
}
