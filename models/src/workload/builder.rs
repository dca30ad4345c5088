//! [`Builder`]: a [`Workload`] built task by task within a memory budget,
//! and the dependents' lists it ends with.

use super::build::lazy::{comparable, Expanded, Skeleton};
use super::chunked::Chunked;
use super::gaps::{Gaps, Kept};
use super::memory;
use super::offload::{InaKind, InaOp};
use super::{kind, Collective, FallbackCount, Fold, Task, TaskKind, Workload, COMPUTE, NONE};
use crate::traffic::FlowSpec;
use netsim_engine::SimTime;
use netsim_topo::NodeIndex;
use std::collections::HashMap;
use std::sync::Arc;

/// Builds a [`Workload`] task by task; dependencies must already exist, so
/// the DAG is acyclic by construction.
///
/// The builder counts what the finished workload will hold and what a run
/// of it adds at least ([`memory`]); past what this process may use it adds
/// nothing more and [`Builder::over`] turns true, so that a workload too
/// large for memory ends in an error rather than an abort.
#[derive(Debug)]
pub struct Builder {
    /// The workload's small structures; its large ones are built apart, in
    /// blocks that never copy what they hold, and moved in by
    /// [`Builder::finish`].
    w: Workload,
    tasks: Chunked<Task>,
    flows: Chunked<FlowSpec>,
    flow_task: Chunked<u32>,
    /// The rows of collectives that may still change (tasks are counted as
    /// they are added); those before them are sealed in `w.collectives`,
    /// each distinct row held once ([`Builder::seal`]).
    collectives: Chunked<Collective>,
    /// Every task's dependencies, task after task (`Task::deps` of them
    /// each): turned into the dependents' lists by [`Builder::finish`].
    deps: Chunked<u32>,
    /// Index of each distinct compute duration in `Workload::durations`.
    duration_ids: HashMap<SimTime, u32>,
    max_tasks: u64,
    /// What the workload holds so far and a run of it adds at least
    /// ([`memory::needed_bytes`]), and the most it may.
    bytes: u64,
    budget_bytes: u64,
    over: bool,
    /// The first ids this builder hands out: zero, or a collective's
    /// reserved ranges when it is expanded alone ([`Builder::at`]).
    base: IdBase,
    /// The task and flow ids of collectives planned but not kept
    /// ([`Builder::skip_collective`]).
    task_gaps: Gaps,
    flow_gaps: Gaps,
    /// Under `--reduce-overhead-ns`: the extra delay and each flow's
    /// channel ([`super::membus`]); `channel` is the one flows get now.
    reduce: Option<(SimTime, Chunked<u8>)>,
    channel: u8,
}

/// The first task, flow and collective ids a [`Builder`] hands out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdBase {
    pub task: u32,
    pub flow: u32,
    pub collective: u32,
}

/// What one flow of plain traffic costs while it is run (its spec and the
/// sender state it has during a packet-level run), a generous estimate for
/// the memory check of `--traffic`.
pub const BYTES_PER_TASK: u64 = 256;

impl Builder {
    /// A builder with room for as many tasks as ids allow (2^31) and for
    /// what [`memory::build_budget_bytes`] allows.
    pub fn new(host_overhead: SimTime) -> Builder {
        Builder::within(host_overhead, memory::build_budget_bytes())
    }

    /// A builder that refuses a workload needing more than `budget_bytes`.
    pub fn within(host_overhead: SimTime, budget_bytes: u64) -> Builder {
        let by_memory = budget_bytes / memory::TASK_BYTES;
        Builder {
            w: Workload {
                host_overhead,
                ..Workload::default()
            },
            tasks: Chunked::default(),
            flows: Chunked::default(),
            flow_task: Chunked::default(),
            collectives: Chunked::default(),
            deps: Chunked::default(),
            duration_ids: HashMap::new(),
            max_tasks: by_memory.min(u64::from(COMPUTE - 1)),
            bytes: 0,
            budget_bytes,
            over: false,
            base: IdBase::default(),
            task_gaps: Gaps::default(),
            flow_gaps: Gaps::default(),
            reduce: None,
            channel: 0,
        }
    }

    /// Marks each flow with its channel from now on, for SimAI's extra
    /// delay of `extra` on the flows it marks ([`super::membus`]).
    pub fn track_channels(&mut self, extra: SimTime) {
        self.reduce = Some((extra, Chunked::default()));
    }

    /// The channel of the flows added next (rings set it; 0 otherwise).
    pub fn set_channel(&mut self, channel: usize) {
        self.channel = u8::try_from(channel).unwrap_or(u8::MAX);
    }

    /// A builder for one collective expanded alone: its ids start at
    /// `base` (the ranges the whole build reserved for it), and the tasks
    /// below `base.task` it depends on were checked when it was planned.
    pub fn at(host_overhead: SimTime, base: IdBase) -> Builder {
        Builder {
            base,
            ..Builder::within(host_overhead, u64::MAX)
        }
    }

    /// The most tasks this builder holds.
    pub fn max_tasks(&self) -> u64 {
        self.max_tasks
    }

    /// What the workload holds so far and a run of it adds at least.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The most [`Builder::bytes`] may reach.
    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    /// Counts `bytes` more; past the budget, refuses every further task.
    pub(crate) fn charge(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.budget_bytes {
            self.over = true;
        }
    }

    /// Refuses every further task: what is being added would not fit.
    pub fn refuse(&mut self) {
        self.over = true;
    }

    /// Whether a task was refused for lack of room: the workload is incomplete.
    pub fn over(&self) -> bool {
        self.over
    }

    /// Registers a collective and returns its id.
    pub fn collective(&mut self, c: Collective) -> u32 {
        self.charge(memory::collective_bytes(&c));
        self.collectives.push(c);
        self.collective_count() - 1
    }

    /// The rows so far are final: moved into the workload's rows, where
    /// each distinct one is held once.
    fn seal(&mut self) {
        for c in std::mem::take(&mut self.collectives)
            .into_blocks()
            .flatten()
        {
            self.w.collectives.push(c);
        }
    }

    /// Every row, in id order.
    fn rows(&self) -> impl Iterator<Item = &Collective> {
        self.w.collectives.iter().chain(self.collectives.iter())
    }

    /// Records a folded job.
    pub fn fold(&mut self, fold: Fold) {
        self.w.folds.push(fold);
    }

    /// Registers a job and returns its id.
    pub fn job(&mut self, name: String) -> u32 {
        self.w.jobs.push(name.into());
        (self.w.jobs.len() - 1) as u32
    }

    /// # Panics
    /// If collective `id`'s row was sealed: a plan-only build seals the
    /// rows before each collective it plans, once those before are built.
    pub fn collective_mut(&mut self, id: u32) -> &mut Collective {
        let sealed = self.w.collectives.len();
        let at = (id - self.base.collective) as usize;
        assert!(at >= sealed, "collective {id} changed once sealed");
        &mut self.collectives[at - sealed]
    }

    pub fn ina_op(&mut self, op: InaOp) -> u32 {
        self.w.ina_ops.push(op);
        (self.w.ina_ops.len() - 1) as u32
    }

    pub fn count_fallback(&mut self, node: NodeIndex, kind: InaKind) {
        let i = match self.w.fallbacks.binary_search_by_key(&node, |f| f.0) {
            Ok(i) => i,
            Err(i) => {
                self.w.fallbacks.insert(i, (node, FallbackCount::default()));
                i
            }
        };
        match kind {
            InaKind::Reduce => self.w.fallbacks[i].1.reductions += 1,
            InaKind::Barrier => self.w.fallbacks[i].1.barriers += 1,
        }
    }

    /// A flow of `size_bytes` from `src` to `dst` after `deps`.
    pub fn flow(
        &mut self,
        src: NodeIndex,
        dst: NodeIndex,
        size_bytes: u64,
        collective: u32,
        deps: &[u32],
    ) -> u32 {
        self.flow_into(src, dst, size_bytes, collective, NONE, deps)
    }

    /// A flow; `ina_op` names the aggregation tree it streams into (then
    /// `dst` is the host's leaf switch).
    pub fn flow_into(
        &mut self,
        src: NodeIndex,
        dst: NodeIndex,
        size_bytes: u64,
        collective: u32,
        ina_op: u32,
        deps: &[u32],
    ) -> u32 {
        assert!(size_bytes > 0, "a flow carries at least one byte");
        let flow = self.base.flow + self.flows.len() as u32;
        let task = self.task(src, TaskKind::Flow(flow), collective, deps);
        if self.over {
            return task;
        }
        self.charge(memory::FLOW_BYTES);
        self.flows.push(FlowSpec {
            src,
            dst,
            size_bytes,
            start: SimTime::ZERO,
        });
        self.flow_task.push(task);
        if let Some((_, channels)) = &mut self.reduce {
            channels.push(self.channel);
        }
        if ina_op != NONE {
            self.charge(memory::INA_FLOW_BYTES);
            // Flows are added in id order: the list stays sorted.
            self.w.ina_flows.push((flow, ina_op));
        }
        task
    }

    /// Queues flow task `task` behind flow task `ahead` on one queue pair
    /// (same source and destination; `ahead` added first): it sends no
    /// packet while `ahead` still has packets to send from its port. What
    /// NCCL's steps on one connection do: posted in order, they leave the
    /// NIC back to back, each at the link's rate, rather than sharing it.
    pub fn queue_after(&mut self, task: u32, ahead: u32) {
        if self.over {
            return;
        }
        let flow_of = |b: &Builder, t: u32| match b.kind(&b.task_at(t)) {
            TaskKind::Flow(f) => f,
            TaskKind::Compute(_) => panic!("task {t} is not a flow"),
        };
        let (flow, prev) = (flow_of(self, task), flow_of(self, ahead));
        assert!(prev < flow, "a flow queues behind an earlier one");
        let (a, b) = (self.flow_spec(prev), self.flow_spec(flow));
        assert_eq!((a.src, a.dst), (b.src, b.dst), "one queue pair, one peer");
        assert!(
            self.w.queued_flows.last().is_none_or(|&(f, _)| f < flow),
            "flows are queued in id order"
        );
        self.charge(memory::INA_FLOW_BYTES + memory::QUEUE_HEAD_BYTES);
        self.w.queued_flows.push((flow, prev));
    }

    /// `duration` of compute on `host` after `deps`.
    pub fn compute(
        &mut self,
        host: NodeIndex,
        duration: SimTime,
        collective: u32,
        deps: &[u32],
    ) -> u32 {
        self.task(host, TaskKind::Compute(duration), collective, deps)
    }

    /// A zero-length task on `host` completing when all `deps` have.
    pub fn join(&mut self, host: NodeIndex, collective: u32, deps: &[u32]) -> u32 {
        self.compute(host, SimTime::ZERO, collective, deps)
    }

    fn task(&mut self, host: NodeIndex, kind: TaskKind, collective: u32, deps: &[u32]) -> u32 {
        if self.over || u64::from(self.task_count()) >= self.max_tasks {
            // Ids handed out from here on are never used: the build fails.
            self.over = true;
            return 0;
        }
        let id = self.task_count();
        let mut gap = self.task_gaps.count();
        for &d in deps {
            assert!(d < id, "task {id} depends on a later task {d}");
            assert!(
                self.observed_at(d, host, &mut gap),
                "task {id} on host {host} depends on task {d}, whose completion host {host} cannot see"
            );
        }
        self.charge(memory::TASK_BYTES + memory::EDGE_BYTES * deps.len() as u64);
        if self.over {
            return 0;
        }
        self.deps.extend_from_slice(deps);
        let what = match kind {
            TaskKind::Flow(flow) => flow,
            TaskKind::Compute(duration) => {
                let durations = &mut self.w.durations;
                let i = *self.duration_ids.entry(duration).or_insert_with(|| {
                    durations.push(duration);
                    durations.len() as u32 - 1
                });
                COMPUTE | i
            }
        };
        self.tasks.push(Task {
            host,
            deps: deps.len() as u32,
            collective,
            what,
        });
        if collective != NONE {
            self.collective_mut(collective).tasks += 1;
        }
        id
    }

    /// Whether `host` sees task `task` complete (`gap`: [`Gaps::index_near`]'s hint).
    fn observed_at(&self, task: u32, host: NodeIndex, gap: &mut usize) -> bool {
        let at = task.checked_sub(self.base.task);
        let Some(at) = at.and_then(|at| self.task_gaps.index_near(at, gap)) else {
            // Before a collective expanded alone, or a planned collective's
            // exit: checked when planned.
            return true;
        };
        let t = self.tasks[at as usize];
        match self.kind(&t) {
            TaskKind::Compute(_) => t.host == host,
            TaskKind::Flow(f) => {
                let f = self.flow_spec(f);
                f.src == host || f.dst == host
            }
        }
    }

    /// The ids the next task, flow and collective get.
    pub fn next_ids(&self) -> IdBase {
        IdBase {
            task: self.task_count(),
            flow: self.flow_count(),
            collective: self.collective_count(),
        }
    }

    /// The id the next task gets: the number of tasks so far.
    pub fn task_count(&self) -> u32 {
        self.base.task + self.tasks.len() as u32 + self.task_gaps.skipped()
    }

    /// The id the next flow gets.
    pub fn flow_count(&self) -> u32 {
        self.base.flow + self.flows.len() as u32 + self.flow_gaps.skipped()
    }

    /// The id the next collective gets.
    pub fn collective_count(&self) -> u32 {
        self.base.collective + (self.w.collectives.len() + self.collectives.len()) as u32
    }

    /// Task `task` as added.
    pub fn task_at(&self, task: u32) -> Task {
        let at = self.task_gaps.index(task - self.base.task);
        self.tasks[at.expect("a task this builder keeps") as usize]
    }

    /// What `task` does.
    pub fn kind(&self, task: &Task) -> TaskKind {
        kind(&self.w.durations, task)
    }

    /// Flow `flow` as added.
    pub fn flow_spec(&self, flow: u32) -> FlowSpec {
        let at = self.flow_gaps.index(flow - self.base.flow);
        self.flows[at.expect("a flow this builder keeps") as usize]
    }

    /// The per-message host overhead of the workload being built.
    pub fn host_overhead(&self) -> SimTime {
        self.w.host_overhead
    }

    /// Keeps of `scratch`, one collective built alone from this builder's
    /// next ids, only its rows and fallbacks, and reserves its task and
    /// flow ids: a plan-only build. Its aggregation trees are not kept
    /// (the caller refuses an offloaded collective).
    pub(crate) fn skip_collective(&mut self, scratch: Builder) {
        let (base, next) = (self.next_ids(), scratch.next_ids());
        assert_eq!(
            scratch.base, base,
            "a collective built from this builder's next ids"
        );
        self.skip_ids(IdBase {
            task: next.task - base.task,
            flow: next.flow - base.flow,
            collective: 0,
        });
        // Kept so that a lazy build can refuse them (their flows stream into switches).
        self.w.ina_ops.extend_from_slice(&scratch.w.ina_ops);
        for (node, count) in &scratch.w.fallbacks {
            for _ in 0..count.reductions {
                self.count_fallback(*node, InaKind::Reduce);
            }
            for _ in 0..count.barriers {
                self.count_fallback(*node, InaKind::Barrier);
            }
        }
        self.seal();
        for c in scratch.w.collectives.iter().cloned() {
            self.charge(memory::collective_bytes(&c));
            self.w.collectives.push(c);
        }
        for c in scratch.collectives.into_blocks().flatten() {
            self.charge(memory::collective_bytes(&c));
            self.w.collectives.push(c);
        }
    }

    /// [`Builder::skip_collective`] of a collective whose shape was built
    /// before (issue 32): `count` ids skipped, `rows` kept under `name`.
    pub(crate) fn skip_shape(&mut self, count: IdBase, rows: &[Collective], name: &Arc<str>) {
        self.skip_ids(count);
        self.seal();
        for c in rows {
            self.charge(memory::collective_bytes(c));
            self.w.collectives.push(Collective {
                name: name.clone(),
                ..c.clone()
            });
        }
    }

    /// This scratch builder's rows, when what it built can stand for every
    /// collective of its shape: within bounds, no flow into a switch and no
    /// offload fallback counted.
    pub(crate) fn shape_rows(&self) -> Option<Vec<Collective>> {
        let plain = !self.over && self.w.ina_ops.is_empty() && self.w.fallbacks.is_empty();
        plain.then(|| self.rows().cloned().collect())
    }

    /// Skips `count`'s tasks and flows (its collectives are pushed apart).
    fn skip_ids(&mut self, count: IdBase) {
        let base = self.next_ids();
        self.task_gaps.push(base.task - self.base.task, count.task);
        self.flow_gaps.push(base.flow - self.base.flow, count.flow);
        self.charge(2 * std::mem::size_of::<(u32, u32, u32)>() as u64);
    }

    /// The first collective kept whose aggregation tree a plan-only build
    /// would have dropped.
    pub(crate) fn offloaded_collective(&self) -> Option<u32> {
        let at = self.rows().position(|c| c.offloaded)?;
        Some(self.base.collective + at as u32)
    }

    /// What a plan-only build kept: the tasks outside collectives, their
    /// dependencies, the collectives' rows, and the id ranges.
    pub(crate) fn into_skeleton(self) -> Skeleton {
        let next = self.next_ids();
        let bytes = (self.tasks.len() * std::mem::size_of::<Task>()
            + self.deps.len() * 4
            + self.flows.len() * std::mem::size_of::<FlowSpec>()
            + self.collectives.len() * std::mem::size_of::<Collective>())
            as u64
            + self.w.collectives.bytes()
            + self.task_gaps.bytes()
            + self.flow_gaps.bytes();
        Skeleton {
            ids: next,
            kept_tasks: self.tasks.len() as u64,
            kept_flows: self.flows.len() as u64,
            edges: self.deps.len() as u64,
            collectives: self.rows().cloned().collect(),
            bytes,
        }
    }

    /// What a plan-only build kept, for a run that expands collectives
    /// as they become ready: the workload's small structures (jobs,
    /// durations, fallbacks, the collectives' rows), and the tasks and
    /// flows outside collectives with their dependencies and id gaps.
    pub(crate) fn into_kept(self) -> (Workload, Kept) {
        let ids = self.next_ids();
        let p = self.into_parts();
        let kept = Kept {
            ids,
            tasks: p.tasks,
            flows: p.flows,
            flow_task: p.flow_task,
            deps: p.deps,
            task_gaps: p.task_gaps,
            flow_gaps: p.flow_gaps,
        };
        (p.w, kept)
    }

    /// The workload's small structures with the collectives' rows moved
    /// in, and its large ones apart, each moved into a vector of its exact
    /// length but the dependencies, which a caller may free as it reads.
    fn into_parts(self) -> Parts {
        let Builder {
            mut w,
            tasks,
            flows,
            flow_task,
            collectives,
            deps,
            task_gaps,
            flow_gaps,
            ..
        } = self;
        for c in collectives.into_blocks().flatten() {
            w.collectives.push(c);
        }
        w.queue_heads = Workload::heads_of(&w.queued_flows);
        Parts {
            w,
            tasks: tasks.into_vec(),
            flows: flows.into_vec(),
            flow_task: flow_task.into_vec(),
            deps,
            task_gaps,
            flow_gaps,
        }
    }

    /// What this builder added, as one collective expanded alone.
    pub(crate) fn into_expanded(self) -> Expanded {
        let queued = self.w.queued_flows.clone();
        let mut deps = self.deps.iter().copied();
        let tasks: Vec<(Task, TaskKind)> = self
            .tasks
            .iter()
            .map(|t| comparable(*t, kind(&self.w.durations, t)))
            .collect();
        let deps = tasks
            .iter()
            .map(|(t, _)| {
                let mut d: Vec<u32> = deps.by_ref().take(t.deps as usize).collect();
                d.sort_unstable();
                d
            })
            .collect();
        Expanded {
            tasks,
            flows: self.flows.iter().copied().collect(),
            deps,
            collectives: self.rows().cloned().collect(),
            queued,
        }
    }

    /// The workload, every structure moved into a vector of its exact
    /// length, and its dependents' lists counted then filled from the
    /// dependencies, which are freed block by block as they are read: the
    /// peak is what the workload holds and a block or two, not a vector's
    /// spare half or the dependencies twice.
    pub fn finish(mut self) -> Workload {
        let reduce = self.reduce.take();
        let p = self.into_parts();
        let mut w = p.w;
        w.flows = p.flows;
        w.flow_task = p.flow_task;
        w.tasks = p.tasks;
        let base = dependent_starts(w.tasks.len(), p.deps.iter().copied());
        let (dependents, base) = dependents_csr(&w.tasks, base, p.deps.into_blocks().flatten());
        w.dependents = dependents;
        w.dependent_base = base;
        if let Some((extra, channels)) = reduce {
            let plan = super::membus::ReducePlan::new(&w, &channels.into_vec(), extra);
            w.reduce = Some(std::sync::Arc::new(plan));
        }
        w
    }
}

/// A finished [`Builder`]'s structures ([`Builder::into_parts`]).
struct Parts {
    w: Workload,
    tasks: Vec<Task>,
    flows: Vec<FlowSpec>,
    flow_task: Vec<u32>,
    deps: Chunked<u32>,
    task_gaps: Gaps,
    flow_gaps: Gaps,
}

/// Where each of `n` tasks' dependents' list starts (and, last, their
/// total), from every task's dependencies in any order.
pub(crate) fn dependent_starts(n: usize, deps: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut base = vec![0u32; n + 1];
    for d in deps {
        base[d as usize + 1] += 1;
    }
    for i in 0..n {
        base[i + 1] += base[i];
    }
    base
}

/// The dependents' lists of `tasks` (task `d`'s are
/// `dependents[base[d]..base[d + 1]]`, sorted), from `base`
/// ([`dependent_starts`]) and their dependencies listed task by task in
/// id order (`task.deps` each) by `fill`, which a caller may free as it
/// reads them.
pub(crate) fn dependents_csr(
    tasks: &[Task],
    mut base: Vec<u32>,
    mut fill: impl Iterator<Item = u32>,
) -> (Vec<u32>, Vec<u32>) {
    let total = base[tasks.len()] as usize;
    let mut dependents = vec![0u32; total];
    // Tasks are visited in id order, so each list comes out sorted; a
    // task's slots are filled from its base upwards, `base[d]` standing
    // for the next free one until all are filled.
    for (t, task) in tasks.iter().enumerate() {
        for d in fill.by_ref().take(task.deps as usize) {
            dependents[base[d as usize] as usize] = t as u32;
            base[d as usize] += 1;
        }
    }
    // Each base now holds the next task's start: shift them back.
    base.rotate_right(1);
    base[0] = 0;
    (dependents, base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependents_are_grouped_per_task() {
        let mut b = Builder::new(SimTime::ZERO);
        let a = b.flow(0, 1, 10, NONE, &[]);
        let c = b.flow(1, 2, 10, NONE, &[a]);
        let d = b.compute(0, SimTime(5), NONE, &[a]);
        let w = b.finish();
        assert_eq!(w.dependents(a), &[c, d]);
        assert!(w.dependents(c).is_empty());
        assert_eq!(w.tasks[c as usize].deps, 1);
    }

    #[test]
    #[should_panic(expected = "cannot see")]
    fn a_dependency_must_be_visible_to_the_host() {
        let mut b = Builder::new(SimTime::ZERO);
        let a = b.flow(0, 1, 10, NONE, &[]);
        b.flow(2, 3, 10, NONE, &[a]);
    }
}
