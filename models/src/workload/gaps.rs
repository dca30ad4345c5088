//! Id gaps: the task and flow ids a plan-only build hands out to
//! collectives it does not keep, and what it keeps ([`Kept`]).

use super::builder::IdBase;
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
    /// run keeps them as its dependents' lists instead).
    pub deps: Vec<u32>,
    pub task_gaps: Gaps,
    pub flow_gaps: Gaps,
}
