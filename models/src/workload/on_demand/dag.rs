//! [`LazyDag`]: one shard's progress through a workload whose collectives
//! are expanded when a local member's entry is first met and freed once
//! every completion of theirs that a local host sees has been seen. It
//! releases the same tasks, in the same order, as the eager build's
//! [`DagProgress`](super::super::progress::DagProgress).

use super::super::build::lazy::Expanded;
use super::super::progress::{CollectiveSpan, Start};
use super::super::spans::Spans;
use super::super::{FlowInfo, Task, TaskKind, Workload, NONE};
use super::{LazyPlan, Place, Source};
use crate::traffic::FlowSpec;
use hashbrown::HashMap;
use netsim_engine::SimTime;
use std::sync::Arc;

/// One shard's view of a lazily expanded workload.
#[derive(Debug)]
pub struct LazyDag {
    plan: Arc<LazyPlan>,
    /// This shard's hosts, sorted.
    local: Vec<u32>,
    /// Per kept task, the dependencies its host has not yet seen complete.
    kept_left: Counts,
    spans: Spans,
    /// Plan -> slot of the collectives expanded here.
    live: HashMap<u32, u32>,
    slots: Vec<Live>,
    /// Slots free for the next expansion (their vectors kept: pooled).
    free: Vec<u32>,
    /// Collectives expanded, and the most live at once.
    pub expansions: u64,
    pub peak_live: u64,
}

/// One expanded collective, by local index from its plan's first ids.
#[derive(Debug, Default)]
struct Live {
    tasks: Vec<(Task, TaskKind)>,
    flows: Vec<FlowSpec>,
    /// Per flow, its task (global id).
    flow_task: Vec<u32>,
    /// Per task, the dependencies its host has not yet seen complete.
    left: Vec<u32>,
    /// Tasks inside that depend on task `i`: `inside[inside_base[i]..inside_base[i + 1]]`.
    inside_base: Vec<u32>,
    inside: Vec<u32>,
    /// `(task outside, task inside)` it waits for, sorted.
    outside: Vec<(u32, u32)>,
    /// Completions a local host will still see of its tasks.
    pending: u32,
    /// Its flows queued behind another, sorted (global ids).
    queued: Vec<(u32, u32)>,
    /// The flows ahead of those, sorted.
    heads: Vec<u32>,
}

impl LazyDag {
    /// The shard of hosts `local` (sorted); returns its root tasks as
    /// `(host, task)`, the plans of which a local member waits for
    /// nothing expanded.
    pub fn new(
        src: Source<'_>,
        plan: Arc<LazyPlan>,
        local: Vec<u32>,
    ) -> (LazyDag, Vec<(u32, u32)>) {
        let spans = Spans::whole(src.workload.collectives.len());
        Self::with_spans(src, plan, local, spans)
    }

    /// [`LazyDag::new`], the collectives' spans held in `spans`.
    pub fn with_spans(
        src: Source<'_>,
        plan: Arc<LazyPlan>,
        local: Vec<u32>,
        spans: Spans,
    ) -> (LazyDag, Vec<(u32, u32)>) {
        let kept_left = Counts::new(plan.kept.tasks.iter().map(|t| t.deps));
        let mut roots: Vec<(u32, u32)> = plan
            .kept
            .task_gaps
            .ids(plan.kept.tasks.len() as u32)
            .zip(&plan.kept.tasks)
            .filter(|(_, t)| t.deps == 0)
            .map(|(id, t)| (t.host, id))
            .collect();
        let mut dag = LazyDag {
            plan: plan.clone(),
            local,
            kept_left,
            spans,
            live: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            expansions: 0,
            peak_live: 0,
        };
        for &p in plan.root_plans() {
            if plan.has_member_in(p, &dag.local) {
                let slot = dag.slot(src, p);
                let live = &dag.slots[slot as usize];
                let base = plan.base(p).task;
                let before = roots.len();
                for (i, (t, _)) in live.tasks.iter().enumerate() {
                    if t.deps == 0 && dag.local.binary_search(&t.host).is_ok() {
                        roots.push((t.host, base + i as u32));
                    }
                }
                if roots.len() == before && dag.live.contains_key(&p) {
                    // A member that waits for nothing but starts nothing
                    // (a send's receiver): expanded again when it is ready.
                    dag.release(p, slot);
                }
            }
        }
        roots.retain(|(h, _)| dag.local.binary_search(h).is_ok());
        (dag, roots)
    }

    /// The slot of plan `p`, expanded now if it is not live.
    fn slot(&mut self, src: Source<'_>, p: u32) -> u32 {
        if let Some(&s) = self.live.get(&p) {
            return s;
        }
        let e = self.plan.expand(src, p);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Live::default());
            self.slots.len() as u32 - 1
        });
        let base = self.plan.base(p);
        let live = &mut self.slots[slot as usize];
        fill(live, base.task, base.flow, e, &self.local);
        self.live.insert(p, slot);
        self.expansions += 1;
        self.peak_live = self.peak_live.max(self.live.len() as u64);
        if self.slots[slot as usize].pending == 0 {
            // Nothing of it happens here: it is expanded for nothing.
            self.release(p, slot);
        }
        slot
    }

    fn release(&mut self, p: u32, slot: u32) {
        self.live.remove(&p);
        self.free.push(slot);
    }

    /// Task `task` and what it does (its collective live here, if any).
    fn task(&self, src: Source<'_>, task: u32) -> (Task, TaskKind) {
        match self.plan.task_place(task) {
            Place::Kept(i) => self.plan.kept_task(src.workload, i),
            Place::Plan(p) => {
                let slot = self.live[&p];
                self.slots[slot as usize].tasks[(task - self.plan.base(p).task) as usize]
            }
        }
    }

    /// The host of task `task` (its collective live here, if it has one).
    pub fn task_host(&self, src: Source<'_>, task: u32) -> u32 {
        self.task(src, task).0.host
    }

    /// A task of `collective` (or [`NONE`]) started at `now`.
    pub fn span_started(&mut self, collective: u32, now: SimTime) {
        if collective != NONE {
            self.spans.started(collective, now);
        }
    }

    /// Task `task` starts at `now` on its host: what to schedule.
    pub fn start(&mut self, src: Source<'_>, task: u32, now: SimTime) -> Start {
        let (t, kind) = self.task(src, task);
        match kind {
            TaskKind::Flow(flow) => Start::Flow {
                flow,
                after: src.workload.flow_overhead(flow),
            },
            TaskKind::Compute(after) => {
                self.span_started(t.collective, now);
                Start::Compute { task, after }
            }
        }
    }

    /// [`DagProgress::seen_complete`](super::super::progress::DagProgress::seen_complete):
    /// the same tasks appended to `ready`, in the same (ascending) order.
    pub fn seen_complete(
        &mut self,
        src: Source<'_>,
        task: u32,
        host: u32,
        at_source: bool,
        now: SimTime,
        ready: &mut Vec<u32>,
    ) {
        let first = ready.len();
        let plan = self.plan.clone();
        // Expanded here if it is not: a destination that waits for nothing
        // (a send's receiver) sees its flow complete without an entry.
        let mine = match plan.task_place(task) {
            Place::Plan(p) => Some((p, self.slot(src, p))),
            Place::Kept(_) => None,
        };
        let (t, _) = self.task(src, task);
        if t.collective != NONE {
            self.spans.completed(t.collective, now, at_source);
        }

        if let Some((p, slot)) = mine {
            let live = &mut self.slots[slot as usize];
            let i = (task - plan.base(p).task) as usize;
            let (from, to) = (live.inside_base[i], live.inside_base[i + 1]);
            for k in from..to {
                let d = live.inside[k as usize] as usize;
                if live.tasks[d].0.host == host {
                    live.left[d] -= 1;
                    if live.left[d] == 0 {
                        ready.push(plan.base(p).task + d as u32);
                    }
                }
            }
        }
        for d in plan.kept_dependents(task) {
            let Place::Kept(i) = plan.task_place(d) else {
                unreachable!("a kept dependent is kept")
            };
            if plan.kept.tasks[i as usize].host == host && self.kept_left.seen(i) {
                ready.push(d);
            }
        }
        for (p, member) in plan.entry_waiters(task) {
            if member != host {
                continue;
            }
            let slot = self.slot(src, p);
            let base = plan.base(p).task;
            let live = &mut self.slots[slot as usize];
            let at = live.outside.partition_point(|&(o, _)| o < task);
            for &(o, d) in &live.outside[at..] {
                if o != task {
                    break;
                }
                let d = d as usize;
                if live.tasks[d].0.host == host {
                    live.left[d] -= 1;
                    if live.left[d] == 0 {
                        ready.push(base + d as u32);
                    }
                }
            }
        }
        ready[first..].sort_unstable();
        if let Some((p, slot)) = mine {
            let live = &mut self.slots[slot as usize];
            live.pending -= 1;
            if live.pending == 0 {
                self.release(p, slot);
            }
        }
    }

    /// What flow `flow` belongs to (its collective expanded again, apart,
    /// if it was freed here).
    pub fn flow_info(&self, src: Source<'_>, flow: u32) -> FlowInfo {
        self.flow(src, flow).1
    }

    /// Whether a flow is queued behind flow `flow` on its queue pair.
    pub fn flow_has_queued_behind(&self, src: Source<'_>, flow: u32) -> bool {
        match self.plan.flow_place(flow) {
            Place::Kept(_) => src.workload.flow_has_queued_behind(flow),
            Place::Plan(p) => match self.live.get(&p) {
                Some(&slot) => self.slots[slot as usize].heads.binary_search(&flow).is_ok(),
                // A late finish of a collective freed here: rare.
                None => {
                    let queued = self.plan.expand(src, p).queued;
                    queued.iter().any(|&(_, ahead)| ahead == flow)
                }
            },
        }
    }

    /// Flow `flow`'s spec.
    pub fn flow_spec(&self, src: Source<'_>, flow: u32) -> FlowSpec {
        self.flow(src, flow).0
    }

    /// Flow `flow`'s spec and what it belongs to, in one look-up.
    pub fn flow_spec_info(&self, src: Source<'_>, flow: u32) -> (FlowSpec, FlowInfo) {
        self.flow(src, flow)
    }

    /// Flow `flow`'s spec, task, collective and the flow ahead of it.
    fn flow(&self, src: Source<'_>, flow: u32) -> (FlowSpec, FlowInfo) {
        let info = |task, collective, queued: &[(u32, u32)]| FlowInfo {
            task,
            collective,
            ina_op: NONE,
            after: queued
                .binary_search_by_key(&flow, |&(f, _)| f)
                .map_or(NONE, |i| queued[i].1),
        };
        match self.plan.flow_place(flow) {
            Place::Kept(i) => {
                let (spec, task) = self.plan.kept_flow(i);
                let collective = match self.plan.task_place(task) {
                    Place::Kept(k) if task != NONE => self.plan.kept.tasks[k as usize].collective,
                    _ => NONE,
                };
                let mut kept = info(task, collective, &[]);
                kept.after = src.workload.flow_queued_after(flow);
                (spec, kept)
            }
            Place::Plan(p) => {
                let base = self.plan.base(p);
                let i = (flow - base.flow) as usize;
                let at = |tasks: &[(Task, TaskKind)], task: u32| {
                    tasks[(task - base.task) as usize].0.collective
                };
                match self.live.get(&p) {
                    Some(&slot) => {
                        let live = &self.slots[slot as usize];
                        let task = live.flow_task[i];
                        let c = at(&live.tasks, task);
                        (live.flows[i], info(task, c, &live.queued))
                    }
                    None => {
                        // A late packet of a collective freed here: rare.
                        let e = self.plan.expand(src, p);
                        let task = task_of(&e, base.task, flow);
                        (e.flows[i], info(task, at(&e.tasks, task), &e.queued))
                    }
                }
            }
        }
    }

    /// Collectives live here now.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// The collectives' spans.
    pub fn spans_mut(&mut self) -> &mut Spans {
        &mut self.spans
    }

    /// Per collective, what this shard saw of it (none once streamed out).
    pub fn into_spans(self) -> Vec<CollectiveSpan> {
        self.spans.into_vec()
    }
}

/// Per task, one byte: the dependencies left, or [`MANY`] for a task that
/// waits for more (an iteration's end gathers hundreds), counted in `many`:
/// a run holds one per kept task of the whole workload.
#[derive(Debug)]
struct Counts {
    left: Vec<u8>,
    many: HashMap<u32, u32>,
}

const MANY: u8 = u8::MAX;

impl Counts {
    fn new(deps: impl Iterator<Item = u32>) -> Counts {
        let mut many = HashMap::new();
        let left = deps
            .enumerate()
            .map(|(i, d)| {
                u8::try_from(d)
                    .ok()
                    .filter(|&d| d != MANY)
                    .unwrap_or_else(|| {
                        many.insert(i as u32, d);
                        MANY
                    })
            })
            .collect();
        Counts { left, many }
    }

    /// One of task `i`'s dependencies seen: whether it was the last.
    fn seen(&mut self, i: u32) -> bool {
        let left = &mut self.left[i as usize];
        if *left == MANY {
            let many = self.many.get_mut(&i).expect("a task waiting for many");
            *many -= 1;
            *many == 0
        } else {
            *left -= 1;
            *left == 0
        }
    }
}

/// The task (global id) of flow `flow` in `e`, expanded from `base`.
fn task_of(e: &Expanded, base: u32, flow: u32) -> u32 {
    let i = e
        .tasks
        .iter()
        .position(|(_, k)| *k == TaskKind::Flow(flow))
        .expect("a flow is a task of its collective");
    base + i as u32
}

/// `live` holds a plan expanded (`e`, from tasks `task0` and flows
/// `flow0`), its vectors reused.
fn fill(live: &mut Live, task0: u32, flow0: u32, e: Expanded, local: &[u32]) {
    let n = e.tasks.len();
    let is_local = |h: u32| local.binary_search(&h).is_ok();
    live.tasks.clear();
    live.tasks.extend_from_slice(&e.tasks);
    live.flows.clear();
    live.flows.extend_from_slice(&e.flows);
    live.queued.clear();
    live.queued.extend_from_slice(&e.queued);
    live.heads = Workload::heads_of(&e.queued);
    live.flow_task.clear();
    live.flow_task.resize(e.flows.len(), NONE);
    live.left.clear();
    live.outside.clear();
    live.inside_base.clear();
    live.inside_base.resize(n + 2, 0);
    live.pending = 0;
    for (i, (t, kind)) in e.tasks.iter().enumerate() {
        live.left.push(t.deps);
        match *kind {
            TaskKind::Flow(f) => {
                live.flow_task[(f - flow0) as usize] = task0 + i as u32;
                let spec = e.flows[(f - flow0) as usize];
                live.pending += u32::from(is_local(spec.src)) + u32::from(is_local(spec.dst));
            }
            TaskKind::Compute(_) => live.pending += u32::from(is_local(t.host)),
        }
        for &d in &e.deps[i] {
            if d >= task0 {
                live.inside_base[(d - task0) as usize + 2] += 1;
            } else {
                live.outside.push((d, i as u32));
            }
        }
    }
    live.outside.sort_unstable();
    for i in 0..n {
        live.inside_base[i + 2] += live.inside_base[i + 1];
    }
    live.inside.clear();
    live.inside.resize(live.inside_base[n + 1] as usize, 0);
    // Filled in task order, so each list comes out ascending.
    for (i, deps) in e.deps.iter().enumerate() {
        for &d in deps.iter().filter(|&&d| d >= task0) {
            let at = &mut live.inside_base[(d - task0) as usize + 1];
            live.inside[*at as usize] = i as u32;
            *at += 1;
        }
    }
    live.inside_base.pop();
}
