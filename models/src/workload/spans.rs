//! [`Spans`]: per collective, what a run saw of it, held whole (a shard's
//! view, merged with the other shards' after the run) or streamed: only the
//! collectives started and not yet handed out, each handed out once its row
//! can no longer change, in the `collectives` table's order
//! ([`crate::network::collective_order`]).

use super::progress::CollectiveSpan;
use hashbrown::hash_map::Entry;
use hashbrown::HashMap;
use netsim_engine::SimTime;

/// What a streamed run holds per collective of the workload: its task
/// count (4 B) and its bit, rounded up; the spans in flight come on top.
pub const BYTES_PER_STREAMED_COLLECTIVE: u64 = 5;

/// The spans of a run's collectives.
///
/// Whole ([`Spans::whole`]): every collective's, from the start, as a
/// packet-level shard needs them (a collective's tasks run on several
/// shards; its row is known only once they are merged). Streamed
/// ([`Spans::streamed`]): a sequential run hands each finished collective's
/// span out at the first instant after it finished ([`Spans::take_final`]),
/// those of one instant by id, so in the order of their ends and ids; the
/// others at the end, by id ([`Spans::take_rest`]). What is held is the
/// collectives in flight, a bit per collective and its task count, not a
/// span per collective of the iteration.
#[derive(Clone, Debug)]
pub struct Spans {
    /// Whole: every collective's span, by id; empty when streamed.
    whole: Vec<CollectiveSpan>,
    /// Streamed: per collective, its tasks; empty when whole.
    tasks: Vec<u32>,
    /// Streamed: the spans of collectives started and not handed out.
    live: HashMap<u32, CollectiveSpan>,
    /// Streamed: collectives whose last task completed, not handed out.
    done: Vec<(SimTime, u32)>,
    /// Streamed: a bit per collective handed out.
    written: Vec<u64>,
    /// The most spans held at once.
    peak: usize,
}

impl Spans {
    /// Every one of `count` collectives' spans, unseen.
    pub fn whole(count: usize) -> Spans {
        Spans {
            whole: vec![CollectiveSpan::UNSEEN; count],
            tasks: Vec::new(),
            live: HashMap::new(),
            done: Vec::new(),
            written: Vec::new(),
            peak: count,
        }
    }

    /// None held yet, for collectives of `tasks` tasks each (by id).
    pub fn streamed(tasks: Vec<u32>) -> Spans {
        Spans {
            whole: Vec::new(),
            written: vec![0; tasks.len().div_ceil(64)],
            tasks,
            live: HashMap::new(),
            done: Vec::new(),
            peak: 0,
        }
    }

    fn is_streamed(&self) -> bool {
        !self.written.is_empty()
    }

    fn is_written(&self, c: u32) -> bool {
        self.written[c as usize / 64] >> (c % 64) & 1 == 1
    }

    /// The span of collective `c`, held from now on.
    ///
    /// # Panics
    /// If `c` is not a collective, or its row was handed out already (a run
    /// that touches a collective after its last completion is a bug).
    fn at(&mut self, c: u32) -> &mut CollectiveSpan {
        if !self.is_streamed() {
            return &mut self.whole[c as usize];
        }
        assert!(!self.is_written(c), "collective {c} touched after its row");
        let held = self.live.len() + 1;
        match self.live.entry(c) {
            Entry::Occupied(span) => span.into_mut(),
            Entry::Vacant(slot) => {
                self.peak = self.peak.max(held);
                slot.insert(CollectiveSpan::UNSEEN)
            }
        }
    }

    /// A task of collective `c` started at `now`.
    pub fn started(&mut self, c: u32, now: SimTime) {
        let span = self.at(c);
        span.start = span.start.min(now);
    }

    /// A task of collective `c` was seen complete at `now`; counted once,
    /// where it started (`at_source`).
    pub fn completed(&mut self, c: u32, now: SimTime, at_source: bool) {
        let tasks = self.tasks.get(c as usize).copied();
        let span = self.at(c);
        span.end = span.end.max(now);
        span.tasks_done += u32::from(at_source);
        let span = *span;
        let started = span.start != SimTime::MAX;
        if at_source && started && Some(span.tasks_done) == tasks {
            self.done.push((span.end, c));
        }
    }

    /// Hands out the spans of the collectives that finished before `now`,
    /// by end then id. Called at every instant, before its events, it hands
    /// each out at the first instant after its last completion (no
    /// completion of that instant, at a destination, is still to come), so
    /// across the run every finished collective comes out by end then id.
    pub fn take_final(&mut self, now: SimTime, mut out: impl FnMut(u32, &CollectiveSpan)) {
        if self.done.is_empty() {
            return;
        }
        for (end, c) in &mut self.done {
            *end = self.live[c].end;
        }
        self.done.sort_unstable();
        let ready = self.done.partition_point(|&(end, _)| end < now);
        for i in 0..ready {
            let c = self.done[i].1;
            let span = self.live.remove(&c).expect("a finished collective is live");
            self.written[c as usize / 64] |= 1 << (c % 64);
            out(c, &span);
        }
        self.done.drain(..ready);
    }

    /// Hands out every span not yet handed out, by id (unseen for the
    /// collectives never touched): the end of a streamed run, after
    /// [`Spans::take_final`] at [`SimTime::MAX`].
    pub fn take_rest(&mut self, mut out: impl FnMut(u32, &CollectiveSpan)) {
        for c in 0..self.tasks.len() as u32 {
            if !self.is_written(c) {
                let span = self.live.remove(&c).unwrap_or(CollectiveSpan::UNSEEN);
                out(c, &span);
            }
        }
        self.written.fill(u64::MAX);
    }

    /// The spans of every collective (whole), or of none once streamed.
    pub fn into_vec(self) -> Vec<CollectiveSpan> {
        self.whole
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
    /// Streamed, each span leaves at the next instant with the span the
    /// whole run keeps, and 2 spans at most are held however long the
    /// chain.
    #[test]
    fn a_chain_streams_its_spans_holding_two() {
        for len in [10u32, 1000] {
            let mut whole = Spans::whole(len as usize);
            let mut streamed = Spans::streamed(vec![2; len as usize]);
            let mut rows = Vec::new();
            for c in 0..len {
                streamed.take_final(ns(u64::from(c)), |id, s| rows.push((id, *s)));
                for spans in [&mut whole, &mut streamed] {
                    spans.started(c, ns(u64::from(c)));
                    spans.completed(c, ns(u64::from(c) + 1), false);
                    spans.completed(c, ns(u64::from(c) + 1), true);
                    spans.completed(c, ns(u64::from(c) + 1), true);
                }
                assert_eq!(rows.len(), c.saturating_sub(1) as usize, "rows before {c}");
            }
            streamed.take_final(SimTime::MAX, |id, s| rows.push((id, *s)));
            streamed.take_rest(|id, s| rows.push((id, *s)));
            let whole = whole.into_vec();
            let ids: Vec<u32> = rows.iter().map(|r| r.0).collect();
            assert_eq!(ids, (0..len).collect::<Vec<_>>());
            assert!(rows.iter().all(|(id, s)| *s == whole[*id as usize]));
            assert_eq!(streamed.peak(), 2);
            assert!(streamed.into_vec().is_empty());
        }
    }

    /// Collectives come out by end then id once an instant after their end
    /// is reached; the unfinished ones, and those of no tasks, last by id.
    #[test]
    fn finished_spans_leave_by_end_then_id_and_the_rest_by_id() {
        let mut s = Spans::streamed(vec![1, 0, 1, 2, 1, 1]);
        let mut rows = Vec::new();
        for c in [0, 2, 3, 4] {
            s.started(c, ns(1));
        }
        s.completed(4, ns(2), true);
        s.completed(2, ns(2), true);
        s.take_final(ns(2), |id, _| rows.push(id));
        assert!(rows.is_empty(), "they ended at this instant");
        s.completed(0, ns(3), true);
        s.completed(3, ns(3), true);
        s.take_final(ns(4), |id, _| rows.push(id));
        assert_eq!(rows, [2, 4, 0]);
        s.take_final(SimTime::MAX, |id, _| rows.push(id));
        let mut rest = Vec::new();
        s.take_rest(|id, span| rest.push((id, span.tasks_done)));
        assert_eq!(rest, [(1, 0), (3, 1), (5, 0)]);
    }

    #[test]
    #[should_panic(expected = "touched after its row")]
    fn touching_a_written_collective_is_a_bug() {
        let mut s = Spans::streamed(vec![1, 1]);
        s.started(0, ns(1));
        s.completed(0, ns(1), true);
        s.take_final(ns(2), |_, _| {});
        s.completed(0, ns(2), false);
    }
}
