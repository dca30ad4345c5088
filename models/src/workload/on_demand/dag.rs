//! [`LazyDag`]: one shard's progress through a workload whose collectives
//! are expanded when a local member's entry is first met and freed once
//! every completion of theirs that a local host sees has been seen. It
//! releases the same tasks, in the same order, as the eager build's
//! [`DagProgress`](super::super::progress::DagProgress).

use super::super::build::lazy::Expanded;
use super::super::build::shape::ShapeKey;
use super::super::progress::{CollectiveSpan, Start};
use super::super::spans::Spans;
use super::super::spec::OpSpec;
use super::super::{FlowInfo, Task, TaskKind, NONE};
use super::counts::Counts;
use super::template::{Entries, Template};
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
    /// Slots free for the next expansion (their small vectors kept: pooled).
    free: Vec<u32>,
    /// The live collectives' shared templates (boxed: a run holds one).
    shared: Box<Shared>,
    /// Tasks in the templates held now, each template once.
    held_tasks: u64,
    /// Collectives expanded, the most live at once, and the most tasks
    /// their templates held at once.
    pub expansions: u64,
    pub peak_live: u64,
    pub peak_held_tasks: u64,
}

/// The templates of the live collectives' shapes, by shape and operation:
/// a collective of a shape live here shares its template.
#[derive(Debug, Default)]
struct Shared {
    templates: HashMap<ShapeKey, Vec<(OpSpec, Arc<Template>)>>,
    /// The entries of the collective being expanded (scratch).
    entries: Entries,
}

/// One expanded collective: its template and its own progress.
#[derive(Debug, Default)]
struct Live {
    template: Option<Arc<Template>>,
    /// Its shape, when it shares its template with others of it.
    shape: Option<ShapeKey>,
    /// Per task, the dependencies its host has not yet seen complete.
    left: Counts,
    /// `(task outside, task inside)` it waits for, sorted.
    outside: Vec<(u32, u32)>,
    /// Completions a local host will still see of its tasks.
    pending: u32,
}

/// A freed slot keeps its vectors for the next expansion up to this many
/// tasks; past it they go back to the allocator (a pool that kept the
/// largest collective each slot held grew to gigabytes, issue 32).
const POOLED_TASKS: usize = 1 << 12;

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
            shared: Box::default(),
            held_tasks: 0,
            expansions: 0,
            peak_live: 0,
            peak_held_tasks: 0,
        };
        for &p in plan.root_plans() {
            if plan.has_member_in(p, &dag.local) {
                let slot = dag.slot(src, p);
                let (base, group) = (ids(&plan, p), plan.plans.group(p as usize));
                let before = roots.len();
                if let Some(template) = &dag.slots[slot as usize].template {
                    for i in 0..template.len() {
                        let t = template.task(i, base, group).0;
                        if t.deps == 0 && dag.local.binary_search(&t.host).is_ok() {
                            roots.push((t.host, base[0] + i as u32));
                        }
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

    /// The slot of plan `p`, expanded now if it is not live: from the
    /// template of its shape when a collective of it is live here.
    fn slot(&mut self, src: Source<'_>, p: u32) -> u32 {
        if let Some(&s) = self.live.get(&p) {
            return s;
        }
        let plan = self.plan.clone();
        let group = plan.plans.group(p as usize);
        plan.entries_into(p, &mut self.shared.entries);
        let shape = plan.shape_key(src.topo, p, |at| self.shared.entries.len_of(at));
        let op = &plan.plans.op(p as usize).2;
        let known = shape.as_ref().and_then(|k| self.shared.templates.get(k));
        let known = known.and_then(|ts| ts.iter().find(|(o, _)| o == op));
        let (template, shape) = match known {
            Some((_, t)) => (t.clone(), shape),
            None => {
                let e = plan.expand(src, p);
                let t = Arc::new(Template::new(e, ids(&plan, p), group, &self.shared.entries));
                self.held_tasks += t.len() as u64;
                self.peak_held_tasks = self.peak_held_tasks.max(self.held_tasks);
                let shape = shape.filter(|_| t.relative());
                if let Some(k) = &shape {
                    let known = self.shared.templates.entry(k.clone()).or_default();
                    known.push((op.clone(), t.clone()));
                }
                (t, shape)
            }
        };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Live::default());
            self.slots.len() as u32 - 1
        });
        let live = &mut self.slots[slot as usize];
        live.pending = template.pending(group, &self.local);
        template.counts_into(&mut live.left);
        template.outside_into(&self.shared.entries, &mut live.outside);
        live.template = Some(template);
        live.shape = shape;
        self.live.insert(p, slot);
        self.expansions += 1;
        self.peak_live = self.peak_live.max(self.live.len() as u64);
        if self.slots[slot as usize].pending == 0 {
            // Nothing of it happens here: it is expanded for nothing.
            self.release(p, slot);
        }
        slot
    }

    /// Frees plan `p`'s slot, and its template when no live collective
    /// shares it.
    fn release(&mut self, p: u32, slot: u32) {
        self.live.remove(&p);
        let live = &mut self.slots[slot as usize];
        let template = live.template.take().expect("a live collective");
        // Held by this collective, and by the cache when it is shared.
        let holders = 1 + usize::from(live.shape.is_some());
        if Arc::strong_count(&template) == holders {
            self.held_tasks -= template.len() as u64;
            if let Some(shape) = &live.shape {
                let known = self
                    .shared
                    .templates
                    .get_mut(shape)
                    .expect("a shared template");
                known.retain(|(_, t)| !Arc::ptr_eq(t, &template));
                if known.is_empty() {
                    self.shared.templates.remove(shape);
                }
            }
        }
        live.shape = None;
        if live.left.capacity() > POOLED_TASKS {
            live.left = Counts::default();
        }
        if live.outside.capacity() > POOLED_TASKS {
            live.outside = Vec::new();
        }
        self.free.push(slot);
    }

    /// Plan `p`'s live template.
    fn template_of(&self, p: u32) -> &Template {
        let live = &self.slots[self.live[&p] as usize];
        live.template.as_deref().expect("a live collective")
    }

    /// Task `task` and what it does (its collective live here, if any).
    fn task(&self, src: Source<'_>, task: u32) -> (Task, TaskKind) {
        match self.plan.task_place(task) {
            Place::Kept(i) => self.plan.kept_task(src.workload, i),
            Place::Plan(p) => {
                let template = self.template_of(p);
                let base = ids(&self.plan, p);
                let group = self.plan.plans.group(p as usize);
                template.task((task - base[0]) as usize, base, group)
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
            let (base, group) = (ids(&plan, p), plan.plans.group(p as usize));
            let Live { template, left, .. } = &mut self.slots[slot as usize];
            let template = template.as_deref().expect("a live collective");
            for &d in template.inside((task - base[0]) as usize) {
                if template.task(d as usize, base, group).0.host == host && left.seen(d) {
                    ready.push(base[0] + d);
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
            let (base, group) = (ids(&plan, p), plan.plans.group(p as usize));
            let Live {
                template,
                left,
                outside,
                ..
            } = &mut self.slots[slot as usize];
            let template = template.as_deref().expect("a live collective");
            let at = outside.partition_point(|&(o, _)| o < task);
            for &(o, d) in &outside[at..] {
                if o != task {
                    break;
                }
                if template.task(d as usize, base, group).0.host == host && left.seen(d) {
                    ready.push(base[0] + d);
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
                Some(_) => {
                    let i = flow - self.plan.base(p).flow;
                    self.template_of(p).has_queued_behind(i)
                }
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
                    Some(_) => {
                        let template = self.template_of(p);
                        let (b, group) = (ids(&self.plan, p), self.plan.plans.group(p as usize));
                        let (spec, t) = template.flow(i, group);
                        let c = template.task(t as usize, b, group).0.collective;
                        let after = template.queued_after(i as u32);
                        let mut live = info(base.task + t, c, &[]);
                        live.after = after.map_or(NONE, |a| base.flow + a);
                        (spec, live)
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

    /// Tasks in the templates held now (each shared template once).
    pub fn held_tasks(&self) -> u64 {
        self.held_tasks
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

/// The task (global id) of flow `flow` in `e`, expanded from `base`.
fn task_of(e: &Expanded, base: u32, flow: u32) -> u32 {
    let i = e
        .tasks
        .iter()
        .position(|(_, k)| *k == TaskKind::Flow(flow))
        .expect("a flow is a task of its collective");
    base + i as u32
}

/// Plan `p`'s first task, flow and collective ids.
fn ids(plan: &LazyPlan, p: u32) -> [u32; 3] {
    let b = plan.base(p);
    [b.task, b.flow, b.collective]
}
