//! The guard's walk queue: a radix heap of (time, task). A walk follows
//! tasks in time order and never reaches one earlier than the last it
//! took out (a completion follows its start), so a monotone queue
//! serves: an entry moves down a bucket at most once per bit of time,
//! instead of a binary heap's sift per pop. Entries come out in the
//! order of a min-heap of (time, task).

use netsim_engine::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug)]
pub(super) struct RadixHeap {
    /// The time of the entries in `zero`; every entry is at or after it.
    last: u64,
    /// The entries at `last`, by task.
    zero: BinaryHeap<Reverse<u32>>,
    /// Bucket `i` (1 to 64): the entries whose time first differs from
    /// `last` at bit `i - 1` (above it, so every entry of a bucket is
    /// earlier than every entry of a higher one), and their least time.
    buckets: Vec<Vec<(u64, u32)>>,
    least: [u64; 65],
    /// Bit `i`: bucket `i` is not empty.
    full: u128,
    /// A bucket's entries while they move down.
    moving: Vec<(u64, u32)>,
}

impl RadixHeap {
    pub(super) fn new() -> RadixHeap {
        RadixHeap {
            last: 0,
            zero: BinaryHeap::new(),
            buckets: vec![Vec::new(); 65],
            least: [u64::MAX; 65],
            full: 0,
            moving: Vec::new(),
        }
    }

    pub(super) fn clear(&mut self) {
        self.last = 0;
        self.zero.clear();
        while self.full != 0 {
            let i = self.full.trailing_zeros() as usize;
            self.buckets[i].clear();
            self.least[i] = u64::MAX;
            self.full &= !(1 << i);
        }
    }

    /// Adds task `task` at `at`, no earlier than the last entry taken out.
    pub(super) fn push(&mut self, at: SimTime, task: u32) {
        let at = at.as_ps();
        debug_assert!(
            at >= self.last,
            "a walk's queue is monotone: {at} < {}",
            self.last
        );
        if at == self.last {
            self.zero.push(Reverse(task));
        } else {
            let i = 64 - (at ^ self.last).leading_zeros() as usize;
            self.buckets[i].push((at, task));
            self.least[i] = self.least[i].min(at);
            self.full |= 1 << i;
        }
    }

    /// The earliest entry's time.
    fn least_time(&self) -> Option<u64> {
        if !self.zero.is_empty() {
            Some(self.last)
        } else if self.full == 0 {
            None
        } else {
            Some(self.least[self.full.trailing_zeros() as usize])
        }
    }

    /// Moves the earliest bucket's entries into `zero` and lower buckets,
    /// `last` becoming their least time (when `zero` is empty).
    fn refill(&mut self) {
        if !self.zero.is_empty() || self.full == 0 {
            return;
        }
        let i = self.full.trailing_zeros() as usize;
        self.last = self.least[i];
        std::mem::swap(&mut self.moving, &mut self.buckets[i]);
        self.least[i] = u64::MAX;
        self.full &= !(1 << i);
        for k in 0..self.moving.len() {
            let (at, task) = self.moving[k];
            self.push(SimTime(at), task);
        }
        self.moving.clear();
    }

    /// Takes out the earliest entry, (time, task) the least.
    pub(super) fn pop(&mut self) -> Option<(SimTime, u32)> {
        self.refill();
        let Reverse(task) = self.zero.pop()?;
        Some((SimTime(self.last), task))
    }

    /// Takes out the earliest entry if it is before `bound` (by time, then
    /// task), leaving the queue so that entries at or after `bound` can
    /// still be pushed when it is not.
    pub(super) fn pop_before(&mut self, bound: (SimTime, u32)) -> Option<(SimTime, u32)> {
        let least = self.least_time()?;
        if least > bound.0.as_ps() {
            return None;
        }
        // `last` becomes at most `bound`'s time.
        self.refill();
        let &Reverse(task) = self.zero.peek()?;
        if (SimTime(self.last), task) < bound {
            self.pop()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RadixHeap;
    use netsim_engine::SimTime;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn takes_entries_out_as_a_min_heap_of_time_and_task() {
        // Monotone pushes (each at or after the last taken out), with
        // ties in time, against a binary heap.
        let mut radix = RadixHeap::new();
        let mut heap = BinaryHeap::new();
        let mut state = 7u64;
        let mut last = 0u64;
        for round in 0..2000u32 {
            for k in 0..3 {
                let step = netsim_engine::splitmix64(&mut state) % [1, 1000, 1 << 40][k];
                let at = last + step;
                let task = (netsim_engine::splitmix64(&mut state) % 50) as u32;
                radix.push(SimTime(at), task);
                heap.push(Reverse((SimTime(at), task)));
            }
            let popped = if round % 3 == 0 {
                // Against a bound between the two earliest.
                let bound = (SimTime(last + 500), 25);
                let expect = heap.peek().filter(|&&Reverse(h)| h < bound).copied();
                let got = radix.pop_before(bound);
                assert_eq!(got, expect.map(|Reverse(h)| h));
                if got.is_some() {
                    heap.pop();
                    got
                } else {
                    // The walk takes the bound's entry instead.
                    Some(bound)
                }
            } else {
                let got = radix.pop();
                assert_eq!(got, heap.pop().map(|Reverse(h)| h));
                got
            };
            if let Some((at, _)) = popped {
                last = at.as_ps();
            }
        }
        while let Some(Reverse(h)) = heap.pop() {
            assert_eq!(radix.pop(), Some(h));
            last = h.0.as_ps();
        }
        assert_eq!(radix.pop(), None);
        radix.push(SimTime(last + 3), 1);
        radix.clear();
        assert_eq!(radix.pop(), None);
    }
}
