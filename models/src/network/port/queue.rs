//! A port's egress queues: each priority's FIFO, its front packet in the
//! port's own line, and the bits on the port's first line that say which
//! queues hold packets.

use super::Port;
use crate::network::common::prefetch;
use crate::network::packet::Packet;
use std::collections::VecDeque;

/// A FIFO of packets whose front packet lives in the port itself, the
/// rest in a ring buffer. A port's next `TxDone` reads its front: kept
/// apart, that read was a second cache miss after the port's own, on a
/// line last touched a whole queue of serialisation times earlier (half of
/// `switch_try_send`'s time on k=16). The packet behind is moved into the
/// front as the front leaves, while its port is being worked on anyway.
/// A queue fills one cache line of its port.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct PacketQueue {
    /// The front packet; `None` only when `rest` is empty too.
    front: Option<Packet>,
    rest: VecDeque<Packet>,
}

impl PacketQueue {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.front.is_none()
    }

    #[inline]
    pub fn back(&self) -> Option<&Packet> {
        self.rest.back().or(self.front.as_ref())
    }

    #[inline]
    pub fn push_back(&mut self, pkt: Packet) {
        if self.front.is_none() {
            self.front = Some(pkt);
        } else {
            self.rest.push_back(pkt);
        }
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<Packet> {
        let pkt = self.front.take()?;
        self.front = self.rest.pop_front();
        Some(pkt)
    }

    /// Takes the front packet out and asks for the line of the one behind
    /// it; its place stays empty (the queue reads as empty if it was alone)
    /// until [`PacketQueue::refill_front`], which the caller makes before
    /// anything else reads the queue: a transmit later, the line is in.
    #[inline]
    pub fn take_front(&mut self) -> Option<Packet> {
        let pkt = self.front.take()?;
        if let Some(next) = self.rest.front() {
            prefetch(next);
        }
        Some(pkt)
    }

    /// Moves the packet behind into the place [`PacketQueue::take_front`] emptied.
    #[inline]
    pub fn refill_front(&mut self) {
        if self.front.is_none() {
            self.front = self.rest.pop_front();
        }
    }

    #[inline]
    pub fn pop_back(&mut self) -> Option<Packet> {
        self.rest.pop_back().or_else(|| self.front.take())
    }

    /// The packets, front first.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Packet> {
        self.front.iter_mut().chain(self.rest.iter_mut())
    }
}

impl Port {
    /// Whether priority `prio`'s queue holds a packet (from the first line).
    #[inline]
    pub(crate) fn has_queued(&self, prio: usize) -> bool {
        self.egress.nonempty & 1 << prio != 0
    }

    /// Whether any queue holds a packet (from the first line).
    #[inline]
    pub(crate) fn any_queued(&self) -> bool {
        self.egress.nonempty != 0
    }

    /// Keeps `nonempty`'s bit for `prio` in step with its queue.
    #[inline]
    fn note_queue(&mut self, prio: usize) {
        let bit = 1 << prio;
        if self.queues[prio].is_empty() {
            self.egress.nonempty &= !bit;
        } else {
            self.egress.nonempty |= bit;
        }
    }

    /// Queues `pkt` at the back of priority `prio`.
    #[inline]
    pub(crate) fn push_back(&mut self, prio: usize, pkt: Packet) {
        self.queues[prio].push_back(pkt);
        self.egress.nonempty |= 1 << prio;
    }

    /// The front packet of priority `prio`, taken out.
    #[inline]
    pub(crate) fn pop_front(&mut self, prio: usize) -> Option<Packet> {
        let pkt = self.queues[prio].pop_front();
        self.note_queue(prio);
        pkt
    }

    /// The newest packet of priority `prio`, taken out.
    #[inline]
    pub(crate) fn pop_back(&mut self, prio: usize) -> Option<Packet> {
        let pkt = self.queues[prio].pop_back();
        self.note_queue(prio);
        pkt
    }

    /// [`PacketQueue::take_front`] of priority `prio`; the queue's bit
    /// stays until [`Port::refill_front`].
    #[inline]
    pub(crate) fn take_front(&mut self, prio: usize) -> Option<Packet> {
        self.queues[prio].take_front()
    }

    /// [`PacketQueue::refill_front`] of priority `prio`.
    #[inline]
    pub(crate) fn refill_front(&mut self, prio: usize) {
        self.queues[prio].refill_front();
        self.note_queue(prio);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_engine::{NodeId, NodeRng, SimTime};

    /// A port's `nonempty` bits, which switch senders read instead of the
    /// queues' lines, say exactly which of its queues hold packets through
    /// seeded random pushes and pops at both priorities.
    #[test]
    fn port_bits_follow_its_queues() {
        for seed in 0..10 {
            let mut rng = NodeRng::new(seed, NodeId(5));
            let mut port = Port::new(NodeId(1), 0, 100_000_000_000, SimTime(1_000));
            let mut reference = [VecDeque::new(), VecDeque::new()];
            for psn in 0..5_000 {
                let prio = rng.below(2) as usize;
                match rng.below(8) {
                    0..=3 => {
                        port.push_back(prio, Packet::test_data(1, psn));
                        reference[prio].push_back(Packet::test_data(1, psn));
                    }
                    4 => assert_eq!(port.pop_front(prio), reference[prio].pop_front()),
                    5 | 6 => {
                        assert_eq!(port.take_front(prio), reference[prio].pop_front());
                        port.refill_front(prio);
                    }
                    _ => assert_eq!(port.pop_back(prio), reference[prio].pop_back()),
                }
                for (prio, queue) in reference.iter().enumerate() {
                    assert_eq!(port.has_queued(prio), !queue.is_empty());
                }
                assert_eq!(port.any_queued(), reference.iter().any(|q| !q.is_empty()));
            }
        }
    }

    /// Seeded random pushes, pops from either end and the switch's
    /// take-then-refill against a `VecDeque`: the same packets in the same
    /// order, the same emptiness, through fills and drains.
    #[test]
    fn packet_queue_matches_a_vecdeque() {
        for seed in 0..10 {
            let mut rng = NodeRng::new(seed, NodeId(3));
            let mut queue = PacketQueue::default();
            let mut reference = VecDeque::new();
            for psn in 0..5_000 {
                match rng.below(8) {
                    0..=3 => {
                        queue.push_back(Packet::test_data(1, psn));
                        reference.push_back(Packet::test_data(1, psn));
                    }
                    4 | 5 => assert_eq!(queue.pop_front(), reference.pop_front()),
                    6 => {
                        assert_eq!(queue.take_front(), reference.pop_front());
                        queue.refill_front();
                    }
                    _ => assert_eq!(queue.pop_back(), reference.pop_back()),
                }
                assert_eq!(queue.is_empty(), reference.is_empty());
                assert_eq!(queue.back(), reference.back());
                let psns: Vec<u32> = queue.iter_mut().map(|p| p.psn).collect();
                let expected: Vec<u32> = reference.iter().map(|p| p.psn).collect();
                assert_eq!(psns, expected);
            }
        }
    }
}
