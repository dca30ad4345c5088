//! The local event queue: a radix heap ordered by `(time, source node, source seq)`.
//!
//! A shard's events leave in time order and most are scheduled a link delay
//! or a serialisation time ahead, so a monotone radix heap over integer
//! picoseconds serves: a push appends to a bucket, and an event moves down
//! a few buckets before it leaves, where a heap walked a cache-missing path
//! per pop (the 8-ary heap's sift took a quarter of a packet-level run).
//! Buckets move 24-byte keys; targets and payloads stay in a slab with a
//! free list. The vectors only grow, so once a run has reached its
//! steady-state population, pushing and popping never allocate.

use crate::{NodeId, SimTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An event: when, who created it (the ordering key), who handles it, and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<P> {
    pub time: SimTime,
    /// `source node << SEQ_BITS | source seq`: the tie-breakers packed so
    /// that the whole key compares as one `u128`.
    order: u64,
    /// Node that handles the event.
    pub target: NodeId,
    pub payload: P,
}

/// Bits of the per-source sequence number in an event key; the node id takes
/// the remaining `64 - SEQ_BITS` bits.
pub const SEQ_BITS: u32 = 40;
/// Nodes a run may have: node ids must fit beside the sequence number.
pub const MAX_NODES: u64 = 1 << (64 - SEQ_BITS);

impl<P> Event<P> {
    /// # Panics
    /// If `seq` does not fit in [`SEQ_BITS`] bits (a node creating 10^12
    /// events) or `src` is not below [`MAX_NODES`].
    #[inline]
    pub fn new(time: SimTime, src: NodeId, seq: u64, target: NodeId, payload: P) -> Event<P> {
        assert!(
            seq < 1 << SEQ_BITS,
            "node {src} exhausted its event sequence numbers"
        );
        assert!(
            u64::from(src.0) < MAX_NODES,
            "node id {src} beyond {MAX_NODES}"
        );
        Event {
            time,
            order: (u64::from(src.0) << SEQ_BITS) | seq,
            target,
            payload,
        }
    }

    /// The packed `(source node, source seq)`, as [`crate::wire`] sends it.
    #[inline]
    pub(crate) fn order(&self) -> u64 {
        self.order
    }

    /// An event from the fields [`Event::order`] and the others give back.
    #[inline]
    pub(crate) fn from_parts(time: SimTime, order: u64, target: NodeId, payload: P) -> Event<P> {
        Event {
            time,
            order,
            target,
            payload,
        }
    }

    /// Node that created the event; first tie-breaker.
    #[inline]
    pub fn src(&self) -> NodeId {
        NodeId((self.order >> SEQ_BITS) as u32)
    }

    /// Per-source sequence number; second tie-breaker.
    #[inline]
    pub fn seq(&self) -> u64 {
        self.order & ((1 << SEQ_BITS) - 1)
    }

    /// The total-order key `(time, source node, source seq)` as one number.
    #[inline]
    pub fn key(&self) -> u128 {
        (u128::from(self.time.0) << 64) | u128::from(self.order)
    }
}

/// Buckets of a queue: one per bit of a time in picoseconds.
const BUCKETS: usize = 64;

/// Events by key, taken out earliest first. Keys are unique by construction
/// (a source never reuses a sequence number), so the order is total and the
/// order events leave in is fully determined by the set pushed.
///
/// A radix heap over the time in picoseconds: a shard never schedules an
/// event before the one it is handling, and events from other shards land at
/// or after the window's end, so no event is pushed earlier than the last
/// one taken out (asserted). Bucket `b` holds the events whose time first
/// differs from that last time at bit `b`; every event of a bucket is
/// earlier than every event of a higher one. Pushing appends to a bucket;
/// taking out, when the events at the last time are spent, empties the
/// lowest bucket into `current` (its earliest time) and lower buckets. An
/// event moves down at most once per bit, and in practice a few times: most
/// are scheduled a link delay or a serialisation time (2^19 to 2^21 ps)
/// ahead. Events at one time are sorted by their `(source node, source
/// seq)`. Each bucket keeps the capacity of its largest fill, several times
/// the pending events in all: chains of pooled blocks saved that memory but
/// cost a sixth of PHOLD's speed (docs/perf/2026-11-28-event-queue.md).
#[derive(Debug, Clone)]
pub struct EventQueue<P> {
    /// Time of the events in `current`, or of the last event taken out;
    /// every pending event is at or after it.
    last: u64,
    /// The events at `last` as `(order, slot)`, sorted greatest order
    /// first when their bucket empties, so that the next leaves from the
    /// end (a packet-level GPU run takes out batches of 128 to 256 at one
    /// instant; popping them from a binary heap was a fifth of its time).
    current: Vec<(u64, u32)>,
    /// Events pushed at `last` while `current` was not empty, least order
    /// on top: a heap, since a shard can schedule a million events at one
    /// instant (every flow of a large traffic matrix at time zero), where
    /// inserting each into a sorted vector costs the square of that.
    late: BinaryHeap<Reverse<(u64, u32)>>,
    buckets: [Vec<Entry>; BUCKETS],
    /// The earliest time in each bucket (`u64::MAX` when empty).
    least: [u64; BUCKETS],
    /// Bit `b`: bucket `b` is not empty.
    full: u64,
    /// Target and payload of each pending event, by slot; free slots.
    bodies: Vec<(NodeId, P)>,
    free: Vec<u32>,
}

/// A pending event's key and where its body is: what the buckets move.
#[derive(Clone, Copy, Debug)]
struct Entry {
    time: u64,
    order: u64,
    slot: u32,
}

impl<P> Default for EventQueue<P> {
    fn default() -> Self {
        EventQueue {
            last: 0,
            current: Vec::new(),
            late: BinaryHeap::new(),
            buckets: std::array::from_fn(|_| Vec::new()),
            least: [u64::MAX; BUCKETS],
            full: 0,
            bodies: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<P: Copy> EventQueue<P> {
    #[inline]
    pub fn len(&self) -> usize {
        self.bodies.len() - self.free.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Time of the earliest event, or `SimTime::MAX` when empty.
    #[inline]
    pub fn next_time(&self) -> SimTime {
        if !(self.current.is_empty() && self.late.is_empty()) {
            SimTime(self.last)
        } else if self.full == 0 {
            SimTime::MAX
        } else {
            SimTime(self.least[self.full.trailing_zeros() as usize])
        }
    }

    /// # Panics
    /// If `event` is earlier than the last event taken out: a shard's
    /// events never go back in time.
    #[inline]
    pub fn push(&mut self, event: Event<P>) {
        let at = event.time.0;
        assert!(
            at >= self.last,
            "event at {} pushed after one at {} was taken out",
            event.time,
            SimTime(self.last)
        );
        let body = (event.target, event.payload);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.bodies[slot as usize] = body;
                slot
            }
            None => {
                self.bodies.push(body);
                (self.bodies.len() - 1) as u32
            }
        };
        let entry = Entry {
            time: at,
            order: event.order,
            slot,
        };
        if at == self.last {
            self.push_current(entry.order, entry.slot);
        } else {
            self.push_bucket(entry);
        }
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<Event<P>> {
        if self.current.is_empty() && self.late.is_empty() {
            if self.full == 0 {
                return None;
            }
            self.refill();
        }
        let from_late = match (self.current.last(), self.late.peek()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(&(order, _)), Some(&Reverse((late, _)))) => late < order,
        };
        let (order, slot) = if from_late {
            self.late.pop().expect("peeked").0
        } else {
            self.current.pop().expect("current checked non-empty")
        };
        self.free.push(slot);
        let (target, payload) = self.bodies[slot as usize];
        Some(Event::from_parts(
            SimTime(self.last),
            order,
            target,
            payload,
        ))
    }

    /// Removes and returns the earliest event if it is earlier than
    /// `bound`. When it is not, the queue still accepts events at or after
    /// `bound` (as the next window's from other shards are).
    #[inline]
    pub fn pop_before(&mut self, bound: SimTime) -> Option<Event<P>> {
        if self.next_time() >= bound {
            return None;
        }
        self.pop()
    }

    /// Applies `f` to every pending event (it may move times later, never
    /// earlier than the last event taken out, and change payloads, never
    /// the key's tie-breakers), then files them again. A fast-forward's
    /// shift: rare.
    pub fn retime(&mut self, mut f: impl FnMut(&mut Event<P>)) {
        let last = self.last;
        let mut entries: Vec<Entry> = std::mem::take(&mut self.current)
            .into_iter()
            .chain(std::mem::take(&mut self.late).into_iter().map(|r| r.0))
            .map(|(order, slot)| Entry {
                time: last,
                order,
                slot,
            })
            .collect();
        for bucket in &mut self.buckets {
            entries.append(bucket);
        }
        self.least = [u64::MAX; BUCKETS];
        self.full = 0;
        for mut entry in entries {
            let (target, payload) = self.bodies[entry.slot as usize];
            let mut event = Event::from_parts(SimTime(entry.time), entry.order, target, payload);
            f(&mut event);
            assert!(event.time.0 >= self.last, "retimed before the last event");
            self.bodies[entry.slot as usize] = (event.target, event.payload);
            entry.time = event.time.0;
            if entry.time == self.last {
                self.late.push(Reverse((entry.order, entry.slot)));
            } else {
                self.push_bucket(entry);
            }
        }
    }

    /// Every pending event, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = Event<P>> + '_ {
        let last = self.last;
        self.current
            .iter()
            .chain(self.late.iter().map(|r| &r.0))
            .map(move |&(order, slot)| Entry {
                time: last,
                order,
                slot,
            })
            .chain(self.buckets.iter().flatten().copied())
            .map(|entry| {
                let (target, payload) = self.bodies[entry.slot as usize];
                Event::from_parts(SimTime(entry.time), entry.order, target, payload)
            })
    }

    /// Files an event at `last`: into `current` while that is sorted
    /// trivially, else into `late`.
    #[inline]
    fn push_current(&mut self, order: u64, slot: u32) {
        if self.current.is_empty() && self.late.is_empty() {
            self.current.push((order, slot));
        } else {
            self.late.push(Reverse((order, slot)));
        }
    }

    /// Files an entry later than `last`.
    #[inline]
    fn push_bucket(&mut self, entry: Entry) {
        let bucket = 63 - (entry.time ^ self.last).leading_zeros() as usize;
        self.buckets[bucket].push(entry);
        self.least[bucket] = self.least[bucket].min(entry.time);
        self.full |= 1 << bucket;
    }

    /// `current` is empty: moves the lowest bucket's events into `current`
    /// (those at its earliest time, which becomes `last`) and lower buckets.
    /// They all agree with the new `last` above the bucket's bit, so none
    /// stays in it.
    fn refill(&mut self) {
        let bucket = self.full.trailing_zeros() as usize;
        self.last = self.least[bucket];
        self.least[bucket] = u64::MAX;
        self.full &= !(1 << bucket);
        let mut moving = std::mem::take(&mut self.buckets[bucket]);
        for &entry in &moving {
            if entry.time == self.last {
                self.current.push((entry.order, entry.slot));
                prefetch(&self.bodies[entry.slot as usize]);
            } else {
                self.push_bucket(entry);
            }
        }
        moving.clear();
        if self.current.len() > 1 {
            self.current
                .sort_unstable_by_key(|&(order, _)| Reverse(order));
        }
        // Keep the bucket's capacity for its next fill.
        self.buckets[bucket] = moving;
    }
}

/// A hint to bring `value`'s cache line in (no effect where the target has
/// no prefetch instruction): the bodies of a batch, read one per pop, miss
/// one after another on a fat-tree run, where their lines could come in
/// together.
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing the program sees.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::NodeRng;
    use std::collections::BTreeMap;

    fn event(time: u64, src: u32, seq: u64) -> Event<u32> {
        Event::new(
            SimTime(time),
            NodeId(src),
            seq,
            NodeId(0),
            (time as u32) ^ src,
        )
    }

    /// Seeded random pushes (never before the last event taken out, as in a
    /// shard), pops and bounded pops against a BTreeMap, with many equal
    /// times so that the tie-breakers are exercised and with delays from
    /// zero to 2^48 ps so that most buckets fill.
    #[test]
    fn matches_btreemap_reference() {
        for seed in 0..20 {
            let mut rng = NodeRng::new(seed, NodeId(7));
            let mut queue = EventQueue::default();
            let mut reference = BTreeMap::new();
            let mut next_seq = [0u64; 16];
            let mut now = 0u64;
            for _ in 0..20_000 {
                let op = rng.below(10);
                let src = rng.below(16) as u32;
                let delay = match rng.below(5) {
                    0 => 0,
                    1 => rng.below(64),
                    2 => rng.below(1 << 21),
                    3 => rng.below(1 << 40),
                    _ => rng.below(1 << 48),
                };
                if op < 5 {
                    let fresh = event(now + delay, src, next_seq[src as usize]);
                    next_seq[src as usize] += 1;
                    queue.push(fresh);
                    reference.insert(fresh.key(), fresh);
                } else if op < 8 {
                    let expected = reference.pop_first().map(|(_, e)| e);
                    assert_eq!(queue.pop(), expected);
                    now = expected.map_or(now, |e| e.time.0);
                } else {
                    let bound = SimTime(now + delay);
                    let expected = match reference.first_key_value() {
                        Some((_, e)) if e.time < bound => reference.pop_first().map(|(_, e)| e),
                        _ => None,
                    };
                    assert_eq!(queue.pop_before(bound), expected);
                    now = expected.map_or(now, |e| e.time.0);
                }
                assert_eq!(queue.len(), reference.len());
                let expected_next = reference
                    .keys()
                    .next()
                    .map_or(SimTime::MAX, |k| SimTime((k >> 64) as u64));
                assert_eq!(queue.next_time(), expected_next);
            }
            while let Some((_, expected)) = reference.pop_first() {
                assert_eq!(queue.pop(), Some(expected));
            }
            assert!(queue.pop().is_none());
        }
    }

    /// A bounded pop that finds nothing early enough leaves the queue open
    /// to events between the bound and its earliest event.
    #[test]
    fn pop_before_does_not_advance_past_the_bound() {
        let mut queue = EventQueue::default();
        queue.push(event(1_000, 1, 0));
        assert_eq!(queue.pop_before(SimTime(10)), None);
        queue.push(event(10, 2, 0));
        assert_eq!(queue.pop().map(|e| e.time), Some(SimTime(10)));
        assert_eq!(queue.pop().map(|e| e.time), Some(SimTime(1_000)));
    }

    /// Retiming moves events later and files them again in key order.
    #[test]
    fn retime_keeps_key_order() {
        let mut queue = EventQueue::default();
        for (i, time) in [5u64, 9, 5, 300, 70].into_iter().enumerate() {
            queue.push(event(time, i as u32, 0));
        }
        assert_eq!(queue.pop().map(|e| e.src()), Some(NodeId(0)));
        queue.retime(|e| {
            if e.time.0 != 5 {
                e.time.0 += 1_000;
            }
        });
        let order: Vec<_> = std::iter::from_fn(|| queue.pop())
            .map(|e| (e.time.0, e.src().0))
            .collect();
        assert_eq!(order, [(5, 2), (1_009, 1), (1_070, 4), (1_300, 3)]);
    }

    #[test]
    #[should_panic(expected = "taken out")]
    fn an_event_before_the_last_taken_out_is_a_bug() {
        let mut queue = EventQueue::default();
        queue.push(event(10, 1, 0));
        queue.pop();
        queue.push(event(9, 1, 1));
    }
}
