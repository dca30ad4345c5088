//! [`Spans`]: per collective, what a run saw of it, held whole (a shard's
//! view, merged with the other shards' after the run) or streamed: only the
//! collectives from the first whose row is not yet written to the last one
//! touched, each handed out, in id order, once its row can no longer change.

use super::progress::CollectiveSpan;
use netsim_engine::SimTime;
use std::collections::VecDeque;

/// The spans of a run's collectives, `first..first + window.len()` held.
///
/// Whole ([`Spans::whole`]): every collective's, from the start, as a
/// packet-level shard needs them (a collective's tasks run on several
/// shards; its row is known only once they are merged). Streamed
/// ([`Spans::streamed`]): a sequential run hands each row out as soon as it
/// is final ([`Spans::take_final`]), in the order of the ids, which is the
/// order the whole table has; so the written table is the same bytes, and
/// what is held is the collectives between the first unfinished one and
/// the last one started, not the iteration.
#[derive(Clone, Debug)]
pub struct Spans {
    /// The id of `window[0]`: every collective before it was handed out.
    first: u32,
    window: VecDeque<CollectiveSpan>,
    /// Collectives in the workload.
    count: u32,
    /// The most spans held at once.
    peak: usize,
}

impl Spans {
    /// Every one of `count` collectives' spans, unseen.
    pub fn whole(count: usize) -> Spans {
        Spans {
            first: 0,
            window: VecDeque::from(vec![CollectiveSpan::UNSEEN; count]),
            count: u32::try_from(count).expect("collective ids are u32"),
            peak: count,
        }
    }

    /// None held yet; a span is held from the first time its collective
    /// (or a later one) is touched until [`Spans::take_final`] hands it out.
    pub fn streamed(count: usize) -> Spans {
        Spans {
            first: 0,
            window: VecDeque::new(),
            count: u32::try_from(count).expect("collective ids are u32"),
            peak: 0,
        }
    }

    /// The span of collective `c`, held from now on.
    ///
    /// # Panics
    /// If `c`'s row was handed out already (a run that touches a
    /// collective after its last completion is a bug), or `c` is not a
    /// collective of the workload.
    fn at(&mut self, c: u32) -> &mut CollectiveSpan {
        assert!(c < self.count, "collective {c} of {}", self.count);
        assert!(c >= self.first, "collective {c} touched after its row");
        let i = (c - self.first) as usize;
        if i >= self.window.len() {
            self.window.resize(i + 1, CollectiveSpan::UNSEEN);
            self.peak = self.peak.max(self.window.len());
        }
        &mut self.window[i]
    }

    /// A task of collective `c` started at `now`.
    pub fn started(&mut self, c: u32, now: SimTime) {
        let span = self.at(c);
        span.start = span.start.min(now);
    }

    /// A task of collective `c` was seen complete at `now`; counted once,
    /// where it started (`at_source`).
    pub fn completed(&mut self, c: u32, now: SimTime, at_source: bool) {
        let span = self.at(c);
        span.end = span.end.max(now);
        span.tasks_done += u32::from(at_source);
    }

    /// Hands out, in id order, the spans of the collectives before the
    /// first one whose row may still change: with `tasks(c)` tasks, a
    /// collective is final once every task of it completed at an instant
    /// before `now` (the run has handled every event before `now`, so no
    /// completion at its last instant, at a destination, is still to come).
    /// A collective of no tasks is never touched: it is final at once.
    pub fn take_final(
        &mut self,
        now: SimTime,
        tasks: impl Fn(u32) -> u32,
        mut out: impl FnMut(u32, &CollectiveSpan),
    ) {
        while self.first < self.count {
            let c = self.first;
            let n = tasks(c);
            let span = self.window.front().copied();
            let done = match span {
                _ if n == 0 => true,
                None => false,
                Some(s) => s.start != SimTime::MAX && s.tasks_done == n && s.end < now,
            };
            if !done {
                return;
            }
            out(c, &span.unwrap_or(CollectiveSpan::UNSEEN));
            self.window.pop_front();
            self.first += 1;
        }
    }

    /// Hands out every span not yet handed out, in id order (unseen past
    /// the last collective touched): the end of a streamed run.
    pub fn take_rest(&mut self, mut out: impl FnMut(u32, &CollectiveSpan)) {
        for c in self.first..self.count {
            let span = self.window.pop_front();
            out(c, &span.unwrap_or(CollectiveSpan::UNSEEN));
        }
        self.first = self.count;
    }

    /// The spans of collectives `0..count` (whole), or of none once a
    /// streamed run handed them out.
    ///
    /// # Panics
    /// If some were handed out and others not.
    pub fn into_vec(self) -> Vec<CollectiveSpan> {
        if self.first == self.count {
            return Vec::new();
        }
        assert_eq!(self.first, 0, "a streamed run hands out every span");
        let mut all = Vec::from(self.window);
        all.resize(self.count as usize, CollectiveSpan::UNSEEN);
        all
    }

    /// The most spans held at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(t: u64) -> SimTime {
        SimTime::from_ns(t)
    }

    /// A chain: collective `c` of 2 tasks runs from `c` to `c + 1` ns.
    /// Streamed, each row leaves at the next instant, in id order, with
    /// the span the whole run keeps, and 2 spans at most are held however
    /// long the chain.
    #[test]
    fn a_chain_streams_its_rows_holding_two_spans() {
        for len in [10u32, 1000] {
            let (mut whole, mut streamed) =
                (Spans::whole(len as usize), Spans::streamed(len as usize));
            let mut rows = Vec::new();
            for c in 0..len {
                streamed.take_final(ns(u64::from(c)), |_| 2, |id, s| rows.push((id, *s)));
                for spans in [&mut whole, &mut streamed] {
                    spans.started(c, ns(u64::from(c)));
                    spans.completed(c, ns(u64::from(c) + 1), false);
                    spans.completed(c, ns(u64::from(c) + 1), true);
                    spans.completed(c, ns(u64::from(c) + 1), true);
                }
                assert_eq!(rows.len(), c.saturating_sub(1) as usize, "rows before {c}");
            }
            streamed.take_rest(|id, s| rows.push((id, *s)));
            let whole = whole.into_vec();
            let ids: Vec<u32> = rows.iter().map(|r| r.0).collect();
            assert_eq!(ids, (0..len).collect::<Vec<_>>());
            assert!(rows.iter().all(|(id, s)| *s == whole[*id as usize]));
            assert_eq!(streamed.peak(), 2);
            assert!(streamed.into_vec().is_empty());
        }
    }

    /// A collective still waiting for a task, or that ended at the instant
    /// now, holds back every later row; one of no tasks does not; the rest
    /// of a run comes out unseen past what was touched.
    #[test]
    fn rows_wait_for_the_first_unfinished_collective() {
        let mut s = Spans::streamed(5);
        let tasks = |c: u32| if c == 1 { 0 } else { 1 };
        let mut rows = Vec::new();
        s.started(0, ns(1));
        s.started(2, ns(1));
        s.completed(2, ns(2), true);
        s.take_final(ns(3), tasks, |id, _| rows.push(id));
        assert!(rows.is_empty(), "collective 0 is unfinished");
        s.completed(0, ns(3), true);
        s.take_final(ns(3), tasks, |id, _| rows.push(id));
        assert!(rows.is_empty(), "collective 0 ended at this instant");
        s.take_final(ns(4), tasks, |id, _| rows.push(id));
        assert_eq!(rows, [0, 1, 2]);
        let mut rest = Vec::new();
        s.take_rest(|id, span| rest.push((id, *span)));
        assert_eq!(
            rest,
            [(3, CollectiveSpan::UNSEEN), (4, CollectiveSpan::UNSEEN)]
        );
    }

    #[test]
    #[should_panic(expected = "touched after its row")]
    fn touching_a_written_collective_is_a_bug() {
        let mut s = Spans::streamed(2);
        s.started(0, ns(1));
        s.completed(0, ns(1), true);
        s.take_final(ns(2), |_| 1, |_, _| {});
        s.completed(0, ns(2), false);
    }
}
