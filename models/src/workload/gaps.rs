//! Id gaps: the task and flow ids a plan-only build hands out to
//! collectives it does not keep, and what it keeps ([`Kept`]).

use super::builder::IdBase;
use super::chunked::Chunked;
use super::Task;
use crate::traffic::FlowSpec;

/// Id ranges handed out to tasks or flows that a builder does not keep.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gaps {
    /// Per gap: its first id, its end, and the ids skipped up to its end.
    list: Vec<(u32, u32, u32)>,
}

impl Gaps {
    pub(crate) fn skipped(&self) -> u32 {
        self.list.last().map_or(0, |g| g.2)
    }

    pub(crate) fn push(&mut self, first: u32, len: u32) {
        if len == 0 {
            return;
        }
        match self.list.last_mut() {
            // Right after the last gap (the groups of one phase, built one
            // after another): one gap, so that there are about as many
            // as phases, not as collectives (issue 32: 12.6 M of them).
            Some(last) if last.1 == first => {
                last.1 += len;
                last.2 += len;
            }
            _ => self.list.push((first, first + len, self.skipped() + len)),
        }
    }

    /// Where id `id` is kept, or `None` for an id in a gap.
    pub(crate) fn index(&self, id: u32) -> Option<u32> {
        // Most ids asked for lie past the last gap (a build reads the
        // tasks it has just added): no search for those.
        let k = match self.list.last() {
            Some(last) if last.0 <= id => self.list.len(),
            _ => self.list.partition_point(|g| g.0 <= id),
        };
        self.at(id, k)
    }

    /// [`Gaps::index`], `hint` the gaps starting at or before the id
    /// asked before (updated): ids asked in increasing order (a task's
    /// dependencies) find theirs without a search.
    pub(crate) fn index_near(&self, id: u32, hint: &mut usize) -> Option<u32> {
        // `k` is right when the gaps before it start at or before `id`
        // and the others after it.
        let right = |k: usize| {
            k <= self.list.len()
                && (k == 0 || self.list[k - 1].0 <= id)
                && self.list.get(k).is_none_or(|g| g.0 > id)
        };
        let near = [*hint, hint.wrapping_add(1), hint.wrapping_sub(1)];
        let k = near
            .into_iter()
            .find(|&k| right(k))
            .unwrap_or_else(|| self.list.partition_point(|g| g.0 <= id));
        *hint = k;
        self.at(id, k)
    }

    /// How many gaps there are: the hint for ids past the last one, where
    /// a new task's dependencies mostly are.
    pub(crate) fn count(&self) -> usize {
        self.list.len()
    }

    /// Where `id` is kept, `k` the gaps starting at or before it.
    fn at(&self, id: u32, k: usize) -> Option<u32> {
        match k.checked_sub(1).map(|k| self.list[k]) {
            Some((_, end, _)) if id < end => None,
            Some((_, _, skipped)) => Some(id - skipped),
            None => Some(id),
        }
    }

    /// The ids of the first `n` kept indices, in order.
    pub(crate) fn ids(&self, n: u32) -> impl Iterator<Item = u32> + '_ {
        let (mut gap, mut skipped) = (0, 0);
        (0..n).map(move |i| {
            while gap < self.list.len() && self.list[gap].0 <= i + skipped {
                skipped = self.list[gap].2;
                gap += 1;
            }
            i + skipped
        })
    }

    pub(crate) fn bytes(&self) -> u64 {
        (self.list.len() * std::mem::size_of::<(u32, u32, u32)>()) as u64
    }
}

/// The tasks and flows a plan-only build kept (those outside collectives),
/// by kept index; a global id maps to one through the gaps.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// The ids the whole workload hands out.
    pub ids: IdBase,
    pub tasks: Vec<Task>,
    pub flows: Vec<FlowSpec>,
    pub flow_task: Vec<u32>,
    /// Every kept task's dependencies (global ids), task after task (a
    /// run keeps them as its dependents' lists instead, read block by
    /// block and each block freed once read: never held beside them).
    pub deps: Chunked<u32>,
    pub task_gaps: Gaps,
    pub flow_gaps: Gaps,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hinted look-up finds what a search finds, whatever the hint and
    /// the order of the ids asked.
    #[test]
    fn a_hinted_index_is_the_searched_one() {
        let mut gaps = Gaps::default();
        for (first, len) in [(3, 2), (5, 1), (9, 4), (20, 1), (30, 5)] {
            gaps.push(first, len);
        }
        let ids: Vec<u32> = (0..40)
            .chain((0..40).rev())
            .chain([7, 31, 2, 33, 9])
            .collect();
        for start in (0..8).chain([usize::MAX]) {
            let mut hint = start;
            for &id in &ids {
                assert_eq!(gaps.index_near(id, &mut hint), gaps.index(id), "id {id}");
            }
        }
        assert_eq!(gaps.index(4), None);
        assert_eq!(gaps.index(8), Some(5));
    }
}
