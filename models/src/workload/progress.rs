//! How far a run has got through a workload's DAG: which dependencies each
//! task still waits for, and what each collective's hosts saw of it. Packet
//! level (per shard) and flow level drive it alike.

use super::membus::ReduceState;
use super::spans::Spans;
use super::{TaskKind, Workload, NONE};
use hashbrown::HashMap;
use netsim_engine::SimTime;

/// What one shard saw of one collective: when its hosts started the first
/// task and completed the last, and how many tasks completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveSpan {
    pub start: SimTime,
    pub end: SimTime,
    pub tasks_done: u32,
}

impl CollectiveSpan {
    pub const UNSEEN: CollectiveSpan = CollectiveSpan {
        start: SimTime::MAX,
        end: SimTime::ZERO,
        tasks_done: 0,
    };

    /// Combines what two shards saw.
    pub fn merge(&mut self, o: &CollectiveSpan) {
        self.start = self.start.min(o.start);
        self.end = self.end.max(o.end);
        self.tasks_done += o.tasks_done;
    }
}

/// What a task does once its host may start it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Flow `flow` starts sending after the per-message host overhead.
    Flow { flow: u32, after: SimTime },
    /// The task is busy on its host until `after` has passed.
    Compute { task: u32, after: SimTime },
}

/// Per task, the dependencies not yet seen complete by its host; per
/// collective, its span.
#[derive(Clone, Debug)]
pub struct DagProgress {
    /// Per task, one byte: the count, or [`MANY`] for a task that waits
    /// for more (an iteration's end gathers hundreds), counted in `many`.
    remaining: Vec<u8>,
    many: HashMap<u32, u32>,
    spans: Spans,
    /// SimAI's marks so far ([`super::membus`]), when the workload has them.
    reduce: Option<ReduceState>,
}

/// In [`DagProgress::remaining`]: the count is in `many`.
const MANY: u8 = u8::MAX;

/// What a run's [`DagProgress`] holds per task.
pub const BYTES_PER_TASK: u64 = 1;
/// What a run's [`DagProgress`] holds per collective (its span).
pub const BYTES_PER_COLLECTIVE: u64 = std::mem::size_of::<CollectiveSpan>() as u64;

impl DagProgress {
    pub fn new(workload: &Workload) -> DagProgress {
        Self::with_spans(workload, Spans::whole(workload.collectives.len()))
    }

    /// [`DagProgress::new`], the collectives' spans held in `spans`.
    pub fn with_spans(workload: &Workload, spans: Spans) -> DagProgress {
        let many = (0..workload.tasks.len() as u32)
            .map(|t| (t, workload.tasks[t as usize].deps))
            .filter(|&(_, deps)| deps >= u32::from(MANY))
            .collect();
        DagProgress {
            remaining: workload
                .tasks
                .iter()
                .map(|t| u8::try_from(t.deps).unwrap_or(MANY))
                .collect(),
            many,
            spans,
            reduce: workload.reduce.as_ref().map(|p| p.state()),
        }
    }

    /// Dependencies of `task` its host has not yet seen complete.
    pub fn remaining(&self, task: u32) -> u32 {
        match self.remaining[task as usize] {
            MANY => self.many[&task],
            left => u32::from(left),
        }
    }

    /// A task of `collective` (or [`NONE`]) started at `now`.
    pub fn span_started(&mut self, collective: u32, now: SimTime) {
        if collective != NONE {
            self.spans.started(collective, now);
        }
    }

    /// Task `task` starts at `now` on its host: what to schedule.
    pub fn start(&mut self, workload: &Workload, task: u32, now: SimTime) -> Start {
        let t = workload.tasks[task as usize];
        match workload.kind(&t) {
            TaskKind::Flow(flow) => {
                let mut after = workload.flow_overhead(flow);
                if let (Some(plan), Some(state)) = (&workload.reduce, &mut self.reduce) {
                    after = after.saturating_add(plan.extra_for(state, flow));
                }
                Start::Flow { flow, after }
            }
            TaskKind::Compute(duration) => {
                self.span_started(t.collective, now);
                Start::Compute {
                    task,
                    after: duration,
                }
            }
        }
    }

    /// Host `host` saw task `task` complete at `now`: at a flow's source
    /// (`at_source`, every byte acknowledged), at its destination (every
    /// byte delivered), or where a compute task ran. Appends to `ready` the
    /// tasks on `host` that were waiting only for it.
    pub fn seen_complete(
        &mut self,
        workload: &Workload,
        task: u32,
        host: u32,
        at_source: bool,
        now: SimTime,
        ready: &mut Vec<u32>,
    ) {
        let t = workload.tasks[task as usize];
        if t.collective != NONE {
            // Counted once, where the task started.
            self.spans.completed(t.collective, now, at_source);
        }
        for &d in workload.dependents(task) {
            if workload.tasks[d as usize].host != host {
                continue;
            }
            let left = &mut self.remaining[d as usize];
            let done = if *left == MANY {
                let many = self.many.get_mut(&d).expect("a task waiting for many");
                *many -= 1;
                *many == 0
            } else {
                *left -= 1;
                *left == 0
            };
            if done {
                ready.push(d);
            }
        }
    }

    /// The collectives' spans.
    pub fn spans_mut(&mut self) -> &mut Spans {
        &mut self.spans
    }

    /// Per collective, what was seen of it (none once streamed out).
    pub fn into_spans(self) -> Vec<CollectiveSpan> {
        self.spans.into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Builder;

    #[test]
    fn a_task_waiting_for_hundreds_starts_after_the_last() {
        let mut b = Builder::new(SimTime::ZERO);
        let firsts: Vec<u32> = (0..300)
            .map(|_| b.compute(0, SimTime(1), NONE, &[]))
            .collect();
        let join = b.join(0, NONE, &firsts);
        let pair = b.join(0, NONE, &firsts[..2]);
        let w = b.finish();
        let mut dag = DagProgress::new(&w);
        assert_eq!((dag.remaining(join), dag.remaining(pair)), (300, 2));
        let mut ready = Vec::new();
        for (i, &t) in firsts.iter().enumerate() {
            dag.seen_complete(&w, t, 0, true, SimTime(1), &mut ready);
            assert_eq!(dag.remaining(join), 299 - i as u32);
            let expected: &[u32] = match i {
                0 => &[],
                1..=298 => &[pair],
                _ => &[pair, join],
            };
            assert_eq!(ready, expected, "after {}", i + 1);
        }
        // One byte a task, and a map entry for the one waiting for many.
        assert_eq!((dag.remaining.len(), dag.many.len()), (302, 1));
    }
}
