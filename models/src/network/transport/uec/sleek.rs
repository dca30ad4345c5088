//! SLEEK, uet-htsim's sender-side loss recovery (`htsim_uec -sleek`:
//! `UecSrc::runSleek`, its probes and its hook in the retransmission
//! timer), for a lossy fabric where a dropped packet sends no NACK.
//!
//! - **Detection.** On every ACK, once the receiver holds at least
//!   `max(min(1.5 x cwnd, largest window), 5 packets)` out of order, the
//!   sender enters loss recovery up to the highest psn sent so far.
//! - **Recovery.** On every ACK while recovering, each psn still
//!   outstanding from the cumulative point up to that psn (at most a
//!   window of psns past the cumulative point) is resent once; resends go
//!   whether or not the window has room. Recovery ends when the cumulative
//!   point passes that psn.
//! - **Probes.** Each ACK re-arms a timer while data is outstanding: the
//!   base RTT plus the target delay once all was sent, three base RTTs
//!   before. When it fires the sender sends a header-sized probe through
//!   the data queues (again every five base RTTs); a probe's ACK whose
//!   delay is below the target (the queues are empty, so what is still
//!   missing was lost) starts recovery from the cumulative point.
//! - **Timer.** While recovering, the per-packet timer resends nothing: an
//!   expired packet leaves its watch, and an expired resend is handed back
//!   to recovery to send again.
//! - **RTT samples.** A SACK or NACK of a psn whose last transmission was
//!   a resend may answer the first copy, so it gives no RTT sample (htsim
//!   checks SACKs so, not NACKs: `UecSender::on_feedback`).
//!
//! The receiver's out-of-order count is taken as the sender knows it (psns
//! acknowledged above the first missing one); htsim carries it in each
//! ACK, and the two differ only while ACKs cross each other.

use super::sack::SackSender;
use netsim_engine::SimTime;

/// Recovery starts at this many windows out of order (htsim's
/// `loss_retx_factor`).
const LOSS_RETX_FACTOR: f64 = 1.5;
/// ... and at no fewer packets than this (`min_retx_config`).
const MIN_RETX_PKTS: f64 = 5.0;
/// The first probe waits this many base RTTs while new data waits to go
/// (`probe_first_trial_time`).
const PROBE_FIRST_RTTS: u64 = 3;
/// Later probes, this many (`probe_retry_time`).
const PROBE_RETRY_RTTS: u64 = 5;

/// One sender's SLEEK state.
#[derive(Debug, Default)]
pub(crate) struct Sleek {
    recovering: bool,
    /// Recovery ends once the cumulative point reaches it.
    recovery_end: u32,
    /// Psns below it were resent in this recovery.
    resent_below: u32,
    /// When the probe is due, if one is.
    probe_at: Option<SimTime>,
    /// When the pending probe timer event fires, if one is pending.
    timer_at: Option<SimTime>,
    /// The last probe's number and when it left.
    probe_seq: u16,
    probe_sent_at: SimTime,
    /// Probes sent.
    probes: u64,
}

/// The window a SLEEK decision reads, in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub cwnd_bytes: f64,
    pub max_cwnd_bytes: f64,
    pub mtu_bytes: f64,
    pub base_rtt: SimTime,
    pub target: SimTime,
}

impl Sleek {
    /// Whether loss recovery runs (its resends ignore the window).
    #[inline]
    pub(crate) fn recovering(&self) -> bool {
        self.recovering
    }

    /// An ACK arrived at `now` (after `seq` took it): re-arm the probe and
    /// run detection and recovery. How many psns it declared lost.
    pub(crate) fn on_ack(&mut self, seq: &mut SackSender, w: Window, now: SimTime) -> u32 {
        let una = seq.una();
        self.probe_at = if !seq.all_sent() {
            Some(now + SimTime(PROBE_FIRST_RTTS * w.base_rtt.as_ps()))
        } else if una < seq.next_new() {
            Some(now + w.base_rtt + w.target)
        } else {
            None
        };
        if self.recovering && una >= self.recovery_end {
            self.recovering = false;
        }
        let threshold = (LOSS_RETX_FACTOR * w.cwnd_bytes)
            .min(w.max_cwnd_bytes)
            .max(MIN_RETX_PKTS * w.mtu_bytes);
        if !self.recovering && seq.out_of_order() < (threshold / w.mtu_bytes) as u32 {
            return 0;
        }
        if !self.recovering && !seq.resend_pending() {
            self.recovering = true;
            self.recovery_end = seq.next_new();
        }
        let end = self
            .recovery_end
            .min(una.saturating_add((w.cwnd_bytes / w.mtu_bytes) as u32));
        let (lost, highest) = seq.lose_range(una.max(self.resent_below), end);
        if let Some(h) = highest {
            self.resent_below = h + 1;
        }
        lost
    }

    /// A probe's ACK: `probe` is the probe it answers, `delay` the queueing
    /// delay it measured if it answers the last probe (else the average).
    /// Below `target`, recovery starts from the cumulative point.
    pub(crate) fn on_probe_ack(&mut self, seq: &SackSender, delay: SimTime, target: SimTime) {
        if delay < target {
            self.recovering = true;
            self.recovery_end = seq.next_new();
            self.resent_below = seq.una();
        }
    }

    /// Whether the ACK of probe `probe` answers the last one sent, and when
    /// that one left.
    pub(crate) fn last_probe(&self, probe: u16) -> Option<SimTime> {
        (self.probes > 0 && probe == self.probe_seq).then_some(self.probe_sent_at)
    }

    /// When a probe timer event must be scheduled, if one must: the probe
    /// is due before any pending event.
    pub(crate) fn timer_request(&mut self) -> Option<SimTime> {
        let at = self.probe_at?;
        if self.timer_at.is_some_and(|t| t <= at) {
            return None;
        }
        self.timer_at = Some(at);
        Some(at)
    }

    /// The probe timer fired at `now`: `None` if the event was superseded
    /// or no probe is due; else whether to send a probe now (its number)
    /// and when the timer must fire next.
    pub(crate) fn on_timer(
        &mut self,
        now: SimTime,
        base_rtt: SimTime,
    ) -> Option<(Option<u16>, SimTime)> {
        if self.timer_at != Some(now) {
            return None;
        }
        self.timer_at = None;
        let at = self.probe_at?;
        if at > now {
            self.timer_at = Some(at);
            return Some((None, at));
        }
        self.probe_seq = self.probe_seq.wrapping_add(1);
        self.probe_sent_at = now;
        self.probes += 1;
        let next = now + SimTime(PROBE_RETRY_RTTS * base_rtt.as_ps());
        self.probe_at = Some(next);
        self.timer_at = Some(next);
        Some((Some(self.probe_seq), next))
    }

    /// The per-packet timer, while recovering, found an expired resend of
    /// `psn`: recovery sends it again.
    pub(crate) fn rewind(&mut self, psn: u32) {
        self.resent_below = self.resent_below.min(psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> SimTime {
        SimTime::from_us(us)
    }

    const W: Window = Window {
        cwnd_bytes: 3.0 * 1000.0,
        max_cwnd_bytes: 30.0 * 1000.0,
        mtu_bytes: 1000.0,
        base_rtt: SimTime(10_000_000),
        target: SimTime(5_000_000),
    };

    #[test]
    fn recovery_starts_at_five_out_of_order_and_resends_each_psn_once() {
        let mut s = SackSender::new(20, 20);
        let mut k = Sleek::default();
        for _ in 0..10 {
            s.on_send(t(0));
        }
        // psn 0 is missing; 1-4 arrived: below the 5-packet floor.
        for q in 1..5 {
            s.on_sack(q, t(1));
            assert_eq!(k.on_ack(&mut s, W, t(1)), 0);
        }
        assert!(!k.recovering());
        s.on_sack(5, t(1));
        // Five out of order (1.5 x 3 packets, floored, is below the floor):
        // recovery to psn 10, at most a window (3) past una.
        assert_eq!(
            k.on_ack(&mut s, W, t(1)),
            1,
            "only psn 0 is outstanding below 3"
        );
        assert!(k.recovering());
        assert_eq!(s.next_psn(), Some(0));
        s.on_send(t(2));
        s.on_sack(6, t(2));
        assert_eq!(k.on_ack(&mut s, W, t(2)), 0, "psn 0 is not resent twice");
        // The resend arrives: una moves to 7, recovery resends 7-9 (a window
        // of psns past the cumulative point, below psn 10).
        s.on_sack(0, t(3));
        assert_eq!(s.una(), 7);
        assert_eq!(k.on_ack(&mut s, W, t(3)), 3);
        for q in 7..10 {
            s.on_send(t(4));
            s.on_sack(q, t(5));
        }
        k.on_ack(&mut s, W, t(5));
        assert!(!k.recovering(), "the cumulative point passed psn 10");
    }

    /// htsim resends the lowest psn first: the first resend fills the hole
    /// at the cumulative point, so the out-of-order count SLEEK reads falls
    /// (in loss order it grows).
    #[test]
    fn lowest_first_resends_fill_the_cumulative_hole_first() {
        for (lowest, first, ooo_after) in [(false, 5, 11), (true, 0, 6)] {
            let mut s = SackSender::new(12, 12).with_lowest_first(lowest);
            for _ in 0..12 {
                s.on_send(t(0));
            }
            assert!(s.on_nack(5) && s.on_nack(0));
            for q in (1..12).filter(|&q| q != 5) {
                s.on_sack(q, t(1));
            }
            assert_eq!(s.out_of_order(), 10);
            assert_eq!(s.on_send(t(2)), (first, true));
            s.on_sack(first, t(3));
            assert_eq!(s.out_of_order(), ooo_after, "lowest first: {lowest}");
        }
    }

    #[test]
    fn a_probe_goes_when_acks_stop_and_an_empty_path_starts_recovery() {
        let mut s = SackSender::new(2, 2);
        let mut k = Sleek::default();
        s.on_send(t(0));
        s.on_send(t(0));
        s.on_sack(1, t(12));
        k.on_ack(&mut s, W, t(12));
        // All sent, psn 0 outstanding: a probe at base RTT + target.
        assert_eq!(k.timer_request(), Some(t(27)));
        assert_eq!(k.timer_request(), None, "already pending");
        assert_eq!(k.on_timer(t(26), W.base_rtt), None, "a superseded event");
        assert_eq!(k.on_timer(t(27), W.base_rtt), Some((Some(1), t(77))));
        let sent = k.last_probe(1).unwrap();
        assert_eq!(sent, t(27));
        k.on_probe_ack(&s, SimTime::ZERO, W.target);
        assert_eq!(k.on_ack(&mut s, W, t(38)), 1, "psn 0 is resent");
    }
}
