//! UET reliable unordered delivery: the sequence state of a sender (which
//! psns are acknowledged, outstanding or waiting for retransmission) and of
//! a receiver (which psns arrived), acknowledged selectively.
//!
//! Packets may arrive in any order (spraying). The receiver acknowledges
//! each new packet by its psn (a SACK) and answers a duplicate with its
//! cumulative point. The sender retransmits only what is missing: a psn a
//! NACK names (its packet was trimmed), a psn overtaken by `ooo` later
//! acknowledged psns, and, when the retransmission timer finds no progress,
//! everything outstanding.

use netsim_engine::SimTime;
use std::collections::VecDeque;

const ACKED: u8 = 1;
const OUTSTANDING: u8 = 2;
const QUEUED: u8 = 4;
/// SLEEK: this transmission of the psn is a retransmission.
const RESENT: u8 = 8;
/// SLEEK: the retransmission timer no longer watches this transmission
/// (htsim drops its send time and leaves the psn to loss recovery).
const UNTIMED: u8 = 16;

/// Sender side: a ring of `window` slots over psns `[una, una + window)`.
#[derive(Debug)]
pub(crate) struct SackSender {
    packets: u32,
    /// First unacknowledged psn.
    una: u32,
    /// Next psn never sent.
    next_new: u32,
    /// Highest acknowledged psn + 1.
    sacked_end: u32,
    /// Psns below this were checked for loss by reordering.
    ooo_scan: u32,
    flags: Vec<u8>,
    sent_at: Vec<SimTime>,
    /// Psns to send again: oldest loss first, or lowest psn first.
    rtx: VecDeque<u32>,
    rtx_lowest_first: bool,
    outstanding: u32,
    acked_count: u32,
    /// `acked_count` when the retransmission timer last fired.
    rto_progress: u32,
}

impl SackSender {
    /// A sender of `packets` packets with at most `window` outstanding.
    pub(crate) fn new(packets: u32, window: u32) -> SackSender {
        let slots = window.min(packets).max(1) as usize;
        SackSender {
            packets,
            una: 0,
            next_new: 0,
            sacked_end: 0,
            ooo_scan: 0,
            flags: vec![0; slots],
            sent_at: vec![SimTime::ZERO; slots],
            rtx: VecDeque::new(),
            rtx_lowest_first: false,
            outstanding: 0,
            acked_count: 0,
            rto_progress: 0,
        }
    }

    /// Resends go lowest psn first (htsim's order) rather than oldest loss
    /// first.
    pub(crate) fn with_lowest_first(mut self, on: bool) -> SackSender {
        self.rtx_lowest_first = on;
        self
    }

    #[inline]
    fn slot(&self, psn: u32) -> usize {
        psn as usize % self.flags.len()
    }

    /// Packets sent and neither acknowledged nor declared lost.
    #[inline]
    pub(crate) fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// First unacknowledged psn.
    #[inline]
    pub(crate) fn una(&self) -> u32 {
        self.una
    }

    /// Packets acknowledged, cumulatively or selectively.
    #[inline]
    pub(crate) fn acked_count(&self) -> u32 {
        self.acked_count
    }

    /// Every packet acknowledged.
    #[inline]
    pub(crate) fn done(&self) -> bool {
        self.acked_count == self.packets
    }

    /// The psn that goes next, if any may: a retransmission first, then a
    /// new psn inside the window.
    pub(crate) fn next_psn(&mut self) -> Option<u32> {
        while let Some(&q) = self.rtx.front() {
            let s = self.slot(q);
            if q >= self.una && self.flags[s] & ACKED == 0 {
                return Some(q);
            }
            // Acknowledged after all (a late SACK): nothing to resend.
            self.rtx.pop_front();
            if q >= self.una {
                self.flags[s] &= !QUEUED;
            }
        }
        let window = self.flags.len() as u32;
        (self.next_new < self.packets && self.next_new < self.una + window).then_some(self.next_new)
    }

    /// Every psn was sent at least once.
    #[inline]
    pub(crate) fn all_sent(&self) -> bool {
        self.next_new == self.packets
    }

    /// Whether `psn` was sent before (sending it again is a retransmission).
    #[inline]
    pub(crate) fn is_retransmission(&self, psn: u32) -> bool {
        psn < self.next_new
    }

    /// The packet `next_psn()` named leaves at `now`; whether it was a
    /// retransmission. Panics if nothing may be sent.
    pub(crate) fn on_send(&mut self, now: SimTime) -> (u32, bool) {
        let psn = self.next_psn().expect("on_send without a psn to send");
        let s = self.slot(psn);
        let retransmission = psn < self.next_new;
        if retransmission {
            self.rtx.pop_front();
            self.flags[s] = OUTSTANDING | RESENT;
        } else {
            self.flags[s] = OUTSTANDING;
            self.next_new += 1;
        }
        self.sent_at[s] = now;
        self.outstanding += 1;
        (psn, retransmission)
    }

    /// A SACK for `psn` arrived at `now`: the round-trip time of its last
    /// transmission if it newly acknowledges a packet.
    pub(crate) fn on_sack(&mut self, psn: u32, now: SimTime) -> Option<SimTime> {
        if psn < self.una || psn >= self.next_new {
            return None;
        }
        let s = self.slot(psn);
        if self.flags[s] & ACKED != 0 {
            return None;
        }
        self.ack_slot(s);
        self.sacked_end = self.sacked_end.max(psn + 1);
        self.advance_una();
        Some(now - self.sent_at[s])
    }

    /// A cumulative acknowledgement: every psn before `psn` arrived. The
    /// number of packets it newly acknowledges.
    pub(crate) fn on_cumulative(&mut self, psn: u32) -> u32 {
        let end = psn.min(self.next_new);
        let mut acked = 0;
        for q in self.una..end {
            let s = self.slot(q);
            if self.flags[s] & ACKED == 0 {
                self.ack_slot(s);
                acked += 1;
            }
        }
        self.sacked_end = self.sacked_end.max(end);
        self.advance_una();
        acked
    }

    fn ack_slot(&mut self, s: usize) {
        if self.flags[s] & OUTSTANDING != 0 {
            self.outstanding -= 1;
        }
        // QUEUED stays until the retransmission queue drops the psn.
        self.flags[s] = (self.flags[s] & QUEUED) | ACKED;
        self.acked_count += 1;
    }

    fn advance_una(&mut self) {
        while self.una < self.next_new && self.flags[self.slot(self.una)] & ACKED != 0 {
            let s = self.slot(self.una);
            if self.flags[s] & QUEUED != 0 {
                // Still in the retransmission queue: `next_psn` skips it.
                self.flags[s] &= !QUEUED;
            }
            self.una += 1;
        }
    }

    /// Marks `psn` lost and queues it for retransmission; false if it was
    /// not outstanding (acknowledged, or already queued).
    fn lose(&mut self, psn: u32) -> bool {
        let s = self.slot(psn);
        if self.flags[s] & (ACKED | OUTSTANDING) != OUTSTANDING {
            return false;
        }
        self.flags[s] = QUEUED;
        self.outstanding -= 1;
        if self.rtx_lowest_first {
            // The queue stays sorted; it holds at most a window.
            let at = self.rtx.partition_point(|&q| q < psn);
            self.rtx.insert(at, psn);
        } else {
            self.rtx.push_back(psn);
        }
        true
    }

    /// When `psn`'s last transmission left, if it is outstanding.
    pub(crate) fn sent_at(&self, psn: u32) -> Option<SimTime> {
        let s = self.slot(psn);
        (psn >= self.una
            && psn < self.next_new
            && self.flags[s] & (ACKED | OUTSTANDING) == OUTSTANDING)
            .then(|| self.sent_at[s])
    }

    /// The receiver NACKed `psn` (its packet was trimmed): resend it.
    pub(crate) fn on_nack(&mut self, psn: u32) -> bool {
        psn >= self.una && psn < self.next_new && self.lose(psn)
    }

    /// Declares lost every outstanding psn that `ooo` acknowledged psns
    /// overtook; how many.
    pub(crate) fn detect_reordering_losses(&mut self, ooo: u32) -> u32 {
        let mut lost = 0;
        let mut q = self.ooo_scan.max(self.una);
        while q.saturating_add(ooo) < self.sacked_end {
            lost += u32::from(self.lose(q));
            q += 1;
        }
        self.ooo_scan = q;
        lost
    }

    /// Psns acknowledged above the first missing one: the receiver's
    /// out-of-order count as the sender knows it.
    #[inline]
    pub(crate) fn out_of_order(&self) -> u32 {
        self.acked_count - self.una
    }

    /// Whether `psn`'s last transmission was a resend.
    pub(crate) fn was_resent(&self, psn: u32) -> bool {
        psn >= self.una && psn < self.next_new && self.flags[self.slot(psn)] & RESENT != 0
    }

    /// Next psn never sent (htsim's `_highest_sent`).
    #[inline]
    pub(crate) fn next_new(&self) -> u32 {
        self.next_new
    }

    /// Whether a psn waits to be resent.
    pub(crate) fn resend_pending(&self) -> bool {
        self.rtx
            .iter()
            .any(|&q| q >= self.una && self.flags[self.slot(q)] & ACKED == 0)
    }

    /// SLEEK: marks lost every outstanding psn in `[from, end)`; how many,
    /// and the highest.
    pub(crate) fn lose_range(&mut self, from: u32, end: u32) -> (u32, Option<u32>) {
        let (mut lost, mut highest) = (0, None);
        for q in from..end.min(self.next_new) {
            if self.lose(q) {
                lost += 1;
                highest = Some(q);
            }
        }
        (lost, highest)
    }

    /// When the oldest outstanding packet was sent.
    pub(crate) fn oldest_outstanding(&self) -> Option<SimTime> {
        (self.una..self.next_new)
            .map(|q| self.slot(q))
            .filter(|&s| self.flags[s] & (ACKED | OUTSTANDING | UNTIMED) == OUTSTANDING)
            .map(|s| self.sent_at[s])
            .min()
    }

    /// The retransmission timer fired at `now` with timers per packet
    /// (htsim's): each outstanding packet sent at least `rto` ago is lost,
    /// progress or not. How many packets that is, and when the oldest
    /// still outstanding expires (`None`: nothing is).
    /// In SLEEK's loss recovery (`recovering`), an expired packet is not
    /// resent: it leaves the timer's watch, and the lowest expired one that
    /// was itself a resend is returned for recovery to send again
    /// (htsim's `rtxTimerExpired` under `-sleek`).
    pub(crate) fn on_packet_timeout(
        &mut self,
        now: SimTime,
        rto: SimTime,
        recovering: bool,
    ) -> (u32, Option<SimTime>, Option<u32>) {
        let (mut lost, mut next, mut rewind) = (0, None::<SimTime>, None);
        for q in self.una..self.next_new {
            let s = self.slot(q);
            if self.flags[s] & (ACKED | OUTSTANDING | UNTIMED) != OUTSTANDING {
                continue;
            }
            let expiry = self.sent_at[s] + rto;
            if expiry <= now && recovering {
                self.flags[s] |= UNTIMED;
                if self.flags[s] & RESENT != 0 {
                    rewind = rewind.or(Some(q));
                }
            } else if expiry <= now {
                lost += u32::from(self.lose(q));
            } else {
                next = Some(next.map_or(expiry, |n| n.min(expiry)));
            }
        }
        (lost, next, rewind)
    }

    /// The retransmission timer fired: without progress since it last
    /// fired, everything outstanding is lost. How many packets that is.
    pub(crate) fn on_timeout(&mut self) -> u32 {
        let mut lost = 0;
        if self.acked_count == self.rto_progress && self.outstanding > 0 {
            for q in self.una..self.next_new {
                lost += u32::from(self.lose(q));
            }
        }
        self.rto_progress = self.acked_count;
        lost
    }
}

/// What a receiver made of one data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SackVerdict {
    /// A packet not seen before; `complete`: it was the message's last missing one.
    New { complete: bool },
    /// A duplicate: answer with the cumulative point `cumulative`.
    Duplicate { cumulative: u32 },
}

/// Receiver side: one bit per psn of the message.
#[derive(Debug)]
pub(crate) struct SackReceiver {
    packets: u32,
    /// Every psn before it arrived.
    cumulative: u32,
    received: Vec<u64>,
    /// ACK coalescing: psns arrived and not yet acknowledged.
    pending: Vec<u32>,
    /// ACK coalescing: wire bytes arrived since the last ACK.
    pub pending_bytes: u32,
    /// ACK coalescing: whether any data packet arrived yet.
    pub started: bool,
    /// ACK coalescing: a packet asked for an ACK while psns below it were
    /// missing; another ACK is owed once they arrive (htsim's sink
    /// `_ack_request`).
    ack_request: bool,
    /// Highest psn arrived + 1: psns between `cumulative` and it are
    /// out of order.
    received_end: u32,
}

/// Psns one ACK's mask (a packet's `sack_mask`) spans: bit `i` names psn
/// `base + i`, as uet-htsim's SACK bitmap does with 64. 48 keeps a packet
/// at 32 bytes (`Packet::sack_mask`); measured against htsim, the ACK
/// counts stay within 7% either way.
pub(crate) const ACK_MASK_PSNS: u32 = 48;

/// One coalesced ACK: the psn that triggered it (its RTT sample and ECN
/// echo), where its mask's window starts and the held psns it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoalescedAck {
    pub psn: u32,
    pub base: u32,
    pub mask: u64,
}

impl SackReceiver {
    /// A receiver of a message of `packets` packets.
    pub(crate) fn new(packets: u32) -> SackReceiver {
        SackReceiver {
            packets,
            cumulative: 0,
            received: vec![0; packets.div_ceil(64) as usize],
            pending: Vec::new(),
            pending_bytes: 0,
            started: false,
            ack_request: false,
            received_end: 0,
        }
    }

    /// ACK coalescing: whether the new packet just arrived (`asked`: its
    /// sender asked for an ACK) is acknowledged at once. An asked packet
    /// is, and if psns below it are still missing the receiver owes one
    /// more ACK when they have all arrived: the packets that fill the
    /// holes may not ask, and without that ACK they wait for the
    /// retransmission timer (htsim's sink forces it the same way).
    pub(crate) fn ack_now_for_request(&mut self, asked: bool) -> bool {
        self.ack_request |= asked;
        if self.ack_request && self.cumulative == self.received_end {
            self.ack_request = false;
            return true;
        }
        asked
    }

    /// ACK coalescing: `psn` arrived and waits for an ACK.
    pub(crate) fn hold(&mut self, psn: u32, wire_bytes: u32) {
        self.pending.push(psn);
        self.pending_bytes += wire_bytes;
        self.started = true;
    }

    /// ACK coalescing: the next ACK of what is held, if any, which takes
    /// what it names. It is for `first` if still held, else the highest
    /// held psn; its window of [`ACK_MASK_PSNS`] psns starts at the lowest
    /// held psn at most 47 below that one, so one ACK names every held psn
    /// when they span no more than the window (uet-htsim sends one ACK per
    /// trigger; its cumulative point covers what its bitmap leaves out).
    pub(crate) fn take_ack(&mut self, first: u32) -> Option<CoalescedAck> {
        let psn = if self.pending.contains(&first) {
            first
        } else {
            *self.pending.iter().max()?
        };
        let span = ACK_MASK_PSNS - 1;
        let base = self
            .pending
            .iter()
            .copied()
            .filter(|&q| q <= psn && psn - q <= span)
            .min()
            .unwrap_or(psn);
        let mut mask = 0u64;
        self.pending.retain(|&q| {
            if q >= base && q - base <= span {
                mask |= 1 << (q - base);
                false
            } else {
                true
            }
        });
        if self.pending.is_empty() {
            self.pending_bytes = 0;
        }
        Some(CoalescedAck { psn, base, mask })
    }

    /// Every psn before it arrived.
    #[inline]
    pub(crate) fn cumulative(&self) -> u32 {
        self.cumulative
    }

    /// Data packet `psn` arrived.
    pub(crate) fn on_data(&mut self, psn: u32) -> SackVerdict {
        let (word, bit) = ((psn / 64) as usize, 1u64 << (psn % 64));
        if psn >= self.packets || self.received[word] & bit != 0 {
            return SackVerdict::Duplicate {
                cumulative: self.cumulative,
            };
        }
        self.received[word] |= bit;
        self.received_end = self.received_end.max(psn + 1);
        while self.cumulative < self.packets
            && self.received[(self.cumulative / 64) as usize] & (1 << (self.cumulative % 64)) != 0
        {
            self.cumulative += 1;
        }
        SackVerdict::New {
            complete: self.cumulative == self.packets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> SimTime {
        SimTime::from_ns(ns)
    }

    #[test]
    fn coalesced_acks_name_every_held_psn_once() {
        let mut r = SackReceiver::new(100);
        for psn in [3, 1, 2, 40, 0, 90] {
            r.on_data(psn);
            r.hold(psn, 100);
        }
        let ack = |psn, base, mask| Some(CoalescedAck { psn, base, mask });
        // The window starts at 0, the lowest held psn, and reaches 40.
        assert_eq!(r.take_ack(2), ack(2, 0, 0b1111 | 1 << 40));
        // 90 is 50 above 40 (beyond a 16-bit mask): named alone now.
        assert_eq!(r.take_ack(2), ack(90, 90, 1));
        assert_eq!(r.take_ack(2), None);
        assert_eq!(r.take_ack(2), None);
        assert_eq!(r.pending_bytes, 0);
    }

    #[test]
    fn an_asked_ack_is_owed_again_when_the_holes_below_fill() {
        let mut r = SackReceiver::new(6);
        let arrive = |r: &mut SackReceiver, psn, asked| {
            r.on_data(psn);
            r.ack_now_for_request(asked)
        };
        assert!(!arrive(&mut r, 0, false));
        // 3 asks while 1 and 2 are missing: acknowledged now, and again
        // when 2 (which does not ask) fills the last hole.
        assert!(arrive(&mut r, 3, true));
        assert!(!arrive(&mut r, 1, false));
        assert!(arrive(&mut r, 2, false), "the owed ACK");
        assert!(!arrive(&mut r, 4, false), "owed once");
        // Asking in order is acknowledged once.
        assert!(arrive(&mut r, 5, true));
    }

    #[test]
    fn selective_acks_retransmit_only_the_hole() {
        let mut s = SackSender::new(6, 16);
        for i in 0..6 {
            assert_eq!(s.on_send(t(i)), (i as u32, false));
        }
        assert_eq!(s.next_psn(), None);
        // psn 1 is lost; 0 and 2..6 arrive out of order.
        for psn in [0, 3, 2, 5, 4] {
            assert!(s.on_sack(psn, t(100)).is_some());
        }
        assert_eq!(s.una(), 1);
        assert_eq!(s.outstanding(), 1);
        // psn 5, four after it, is acknowledged: lost with ooo = 4, not 5.
        assert_eq!(s.detect_reordering_losses(5), 0);
        assert_eq!(s.detect_reordering_losses(4), 1);
        assert_eq!(s.next_psn(), Some(1));
        assert_eq!(s.on_send(t(200)), (1, true));
        assert_eq!(s.next_psn(), None, "only the hole is resent");
        assert_eq!(s.on_sack(1, t(250)), Some(t(50)));
        assert!(s.done());
    }

    #[test]
    fn nack_and_timeout_requeue_and_late_sacks_cancel() {
        let mut s = SackSender::new(4, 2);
        s.on_send(t(0));
        s.on_send(t(0));
        assert_eq!(s.next_psn(), None, "window of two");
        assert!(s.on_nack(1));
        assert!(!s.on_nack(1), "already queued");
        assert_eq!(s.on_send(t(5)), (1, true));
        // No progress between two timer firings: both outstanding are lost.
        assert_eq!(s.on_timeout(), 2);
        // A late SACK for 0 cancels its retransmission.
        assert!(s.on_sack(0, t(9)).is_some());
        assert_eq!(s.next_psn(), Some(1));
        assert_eq!(s.on_cumulative(2), 1);
        assert_eq!(s.next_psn(), Some(2));
        assert_eq!(s.on_timeout(), 0, "progress since the last firing");
    }

    #[test]
    fn a_packet_timer_spares_a_resend_younger_than_the_rto() {
        let mut s = SackSender::new(4, 4);
        s.on_send(t(0));
        s.on_send(t(0));
        assert!(s.on_nack(1));
        assert_eq!(s.on_send(t(90)), (1, true));
        // At 100 ns with a 100 ns RTO: psn 0 expired, the resend of 1 (sent
        // at 90) did not; the timer comes back when it would.
        assert_eq!(
            s.on_packet_timeout(t(100), t(100), false),
            (1, Some(t(190)), None)
        );
        assert_eq!(s.next_psn(), Some(0));
        // The flow's timer instead loses both: no progress since it started.
        let mut f = SackSender::new(4, 4);
        f.on_send(t(0));
        f.on_send(t(0));
        assert!(f.on_nack(1));
        assert_eq!(f.on_send(t(90)), (1, true));
        assert_eq!(f.on_timeout(), 2);
    }

    #[test]
    fn receiver_acknowledges_new_psns_and_repeats_its_cumulative_point() {
        let mut r = SackReceiver::new(3);
        assert_eq!(r.on_data(2), SackVerdict::New { complete: false });
        assert_eq!(r.on_data(2), SackVerdict::Duplicate { cumulative: 0 });
        assert_eq!(r.on_data(0), SackVerdict::New { complete: false });
        assert_eq!(r.on_data(1), SackVerdict::New { complete: true });
        assert_eq!(r.on_data(1), SackVerdict::Duplicate { cumulative: 3 });
    }
}
