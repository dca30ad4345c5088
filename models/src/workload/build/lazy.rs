//! The ground of lazy expansion (issue 32): each collective's id ranges
//! are reserved in build order when the workload is planned, and one
//! collective can be expanded again alone, at those ids, into exactly the
//! tasks, flows and dependencies the whole build gives it. A run that
//! expands a collective only when its dependencies are met therefore sees
//! the ids, and writes the rows, of the eager build.

use super::super::algorithms::HostTasks;
use super::super::builder::IdBase;
use super::super::offload::Resources;
use super::super::on_demand::LazyPlan;
use super::super::spec::{BuildError, CollectiveOp, OpSpec, WorkloadSpec};
use super::super::{Builder, Collective, Task, TaskKind, Workload, COMPUTE};
use super::shape::{self, Shapes};
use super::{build_into, Cx, Job};
use crate::network::config::NetConfig;
use crate::traffic::FlowSpec;
use hashbrown::HashMap;
use netsim_engine::SimTime;
use netsim_topo::{NodeIndex, Role, Topology};
use std::hash::BuildHasher;
use std::sync::Arc;

/// Every collective's plan, in build order, with what plans share: the
/// operations (one per phase), the members and the entries, in pools.
#[derive(Debug, Default)]
pub struct Plans {
    /// The job being built: index into the jobs.
    job: usize,
    pub list: Vec<CollectivePlan>,
    /// Per operation: the job, the phase's name and the operation.
    ops: Vec<(usize, Arc<str>, OpSpec)>,
    /// Per operation: no plan of it starts before this (a lower bound
    /// from compute durations alone, [`Plans::set_earliest`]).
    op_earliest: Vec<SimTime>,
    /// The phase being built: its members start no earlier (those that
    /// wait for something), and the least start of its plans so far.
    earliest: SimTime,
    phase_low: SimTime,
    /// The operation of each (job, phase name) seen, by the name's address.
    op_ids: HashMap<(usize, usize), u32>,
    /// Every distinct group, once: plans of a group seen before (the same
    /// ring in every micro-batch) share its members.
    members: Vec<NodeIndex>,
    /// Per distinct group: where it is in `members` (first, length).
    group_at: Vec<(u32, u32)>,
    /// The distinct groups by their hash: their indices into `group_at`.
    groups: HashMap<u64, Vec<u32>>,
    /// Members listed by the plans, shared or not (for `entry_tasks`).
    listed: usize,
    /// Per plan, per member in order: how many tasks it waits for, then those.
    entries: Vec<u32>,
    /// Shapes built so far, while a plan-only build reuses them.
    shapes: Option<Shapes>,
    /// Collectives planned from a shape built before, not built again.
    shape_hits: u64,
    /// The most `entries` may hold, and whether a plan would have passed it
    /// (the build then stops with [`Plans::too_many_entries`]).
    max_entries: MaxEntries,
    over: bool,
}

/// The most entries the plans of one build may list: each plan finds its
/// own by a `u32` offset (2^32 entries would be 16 GiB).
pub const MAX_PLAN_ENTRIES: usize = u32::MAX as usize;

/// [`MAX_PLAN_ENTRIES`] unless a build asks for fewer.
#[derive(Clone, Copy, Debug)]
struct MaxEntries(usize);

impl Default for MaxEntries {
    fn default() -> MaxEntries {
        MaxEntries(MAX_PLAN_ENTRIES)
    }
}

/// What a collective expanded alone keeps of the build that planned it.
#[derive(Debug)]
pub(super) struct Replay {
    /// The fallback the planned build decided, if it tried an offload.
    pub fallback_reason: Option<String>,
}

/// One collective as planned (40 B): the id ranges reserved for it, and
/// where [`Plans`] keeps its operation, members and entries (a distinct
/// group's index, and an offset into the entries: 2^32 of them would be
/// 16 GiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectivePlan {
    /// Its first task, flow and collective ids.
    pub base: IdBase,
    /// How many task, flow and collective ids it reserved from `base`.
    pub count: IdBase,
    /// Of a group of `logical` members.
    pub logical: u32,
    op: u32,
    group: u32,
    entries: u32,
}

const _: () = assert!(std::mem::size_of::<CollectivePlan>() == 40);

impl Plans {
    pub(super) fn set_job(&mut self, job: usize) {
        self.job = job;
        self.set_earliest(SimTime::ZERO);
    }

    /// The phase built next starts no earlier than `at` at a member
    /// whose entry lists a task (the phases it waits for cannot all end
    /// sooner, counting their compute alone).
    pub(super) fn set_earliest(&mut self, at: SimTime) {
        self.earliest = at;
        self.phase_low = at;
    }

    /// The least start of the plans recorded since [`Plans::set_earliest`]:
    /// no exit of theirs completes sooner.
    pub(super) fn phase_low(&self) -> SimTime {
        self.phase_low
    }

    /// No flow or task of plan `i` starts before this.
    pub fn earliest(&self, i: usize) -> SimTime {
        self.op_earliest[self.list[i].op as usize]
    }

    /// Plan `i`'s job, phase name and operation.
    pub fn op(&self, i: usize) -> &(usize, Arc<str>, OpSpec) {
        &self.ops[self.list[i].op as usize]
    }

    /// Plan `i`'s simulated members.
    pub fn group(&self, i: usize) -> &[NodeIndex] {
        let (first, len) = self.group_at[self.list[i].group as usize];
        &self.members[first as usize..(first + len) as usize]
    }

    /// Plan `i`'s entry: per member, the tasks before it that it waits for.
    pub fn entry(&self, i: usize) -> HostTasks {
        let end = self
            .list
            .get(i + 1)
            .map_or(self.entries.len(), |p| p.entries as usize);
        let mut at = self.list[i].entries as usize;
        let mut entry = HostTasks::new();
        for &h in self.group(i) {
            let n = self.entries[at] as usize;
            if n > 0 {
                entry.insert(h, self.entries[at + 1..at + 1 + n].to_vec());
            }
            at += 1 + n;
        }
        debug_assert_eq!(at, end);
        entry
    }

    /// Plan `i`'s entry, member by member: `f(member, tasks it waits for)`.
    pub(crate) fn each_entry(&self, i: usize, mut f: impl FnMut(NodeIndex, &[u32])) {
        let mut at = self.list[i].entries as usize;
        for &h in self.group(i) {
            let n = self.entries[at] as usize;
            f(h, &self.entries[at + 1..at + 1 + n]);
            at += 1 + n;
        }
    }

    /// Why the plans are incomplete, if a plan would have passed the most
    /// entries they may list (it was not recorded, nor any after it).
    pub(super) fn too_many_entries(&self) -> Option<String> {
        self.over.then(|| {
            format!(
                "the collectives' entries (per member, the tasks it waits for) pass the {} \
                 a lazy build may list ({}; each plan finds its own by a 32-bit offset): use \
                 fewer --iterations or simulate fewer data-parallel replicas (--fold-dp)",
                self.max_entries.0,
                netsim_process::human_bytes(self.max_entries.0 as u64 * 4)
            )
        })
    }

    /// Whether a plan would have passed the most entries the plans may list.
    pub(super) fn over(&self) -> bool {
        self.over
    }

    /// How many collectives were planned from a shape built before.
    pub fn shape_hits(&self) -> u64 {
        self.shape_hits
    }

    /// How many tasks the entries list, all plans together.
    pub(crate) fn entry_tasks(&self) -> usize {
        self.entries.len() - self.listed
    }

    /// What the plans hold.
    pub fn bytes(&self) -> u64 {
        (self.list.len() * std::mem::size_of::<CollectivePlan>()
            + self.members.len() * 4
            + self.group_at.len() * 8
            + self.entries.len() * 4
            + self.groups.len() * 32
            + self.ops.len() * std::mem::size_of::<(usize, Arc<str>, OpSpec)>()
            + self.op_earliest.len() * 8) as u64
    }

    /// The index of `group` among the distinct groups, added if not seen
    /// before.
    fn intern(&mut self, group: &[NodeIndex]) -> u32 {
        let hash = self.groups.hasher().hash_one(group);
        let seen = self.groups.entry(hash).or_default();
        let (members, group_at) = (&self.members, &self.group_at);
        let same = |&&g: &&u32| {
            let (first, len) = group_at[g as usize];
            members[first as usize..(first + len) as usize] == *group
        };
        if let Some(&g) = seen.iter().find(same) {
            return g;
        }
        let g = self.group_at.len() as u32;
        seen.push(g);
        self.group_at
            .push((self.members.len() as u32, group.len() as u32));
        self.members.extend_from_slice(group);
        g
    }

    /// Records the plan of a collective built from `base` to `next`;
    /// records nothing once its entries would pass the most allowed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        base: IdBase,
        next: IdBase,
        name: &Arc<str>,
        op: &OpSpec,
        group: &[NodeIndex],
        logical: usize,
        entry: &HostTasks,
    ) {
        let key = (self.job, Arc::as_ptr(name) as *const u8 as usize);
        let known = self.op_ids.get(&key).copied();
        let op_id = match known {
            Some(i) if self.ops[i as usize].2 == *op => i,
            _ => {
                self.ops.push((self.job, name.clone(), op.clone()));
                self.op_earliest.push(SimTime::MAX);
                let i = (self.ops.len() - 1) as u32;
                self.op_ids.insert(key, i);
                i
            }
        };
        let deps_of = |h: &NodeIndex| entry.get(h).map_or(&[][..], Vec::as_slice);
        let listing = group.len() + group.iter().map(|h| deps_of(h).len()).sum::<usize>();
        if self.over || self.entries.len() + listing > self.max_entries.0 {
            self.over = true;
            return;
        }
        let group_id = self.intern(group);
        self.listed += group.len();
        // Every offset fits: the entries end at or before `MAX_PLAN_ENTRIES`.
        let entries = self.entries.len() as u32;
        // A member that waits for nothing may start at once; a send's
        // receiver starts nothing.
        let senders = if op.op == CollectiveOp::Send {
            1
        } else {
            group.len()
        };
        let mut waits = true;
        for (i, h) in group.iter().enumerate() {
            // Only the members' entries: the builder reads no other host's.
            let deps = deps_of(h);
            waits &= i >= senders || !deps.is_empty();
            self.entries.push(deps.len() as u32);
            self.entries.extend_from_slice(deps);
        }
        let earliest = if waits { self.earliest } else { SimTime::ZERO };
        self.phase_low = self.phase_low.min(earliest);
        let op_earliest = &mut self.op_earliest[op_id as usize];
        *op_earliest = (*op_earliest).min(earliest);
        self.list.push(CollectivePlan {
            base,
            count: IdBase {
                task: next.task - base.task,
                flow: next.flow - base.flow,
                collective: next.collective - base.collective,
            },
            logical: logical as u32,
            op: op_id,
            group: group_id,
            entries,
        });
    }
}

/// [`super::build_jobs`] with every collective's plan, in build order.
pub fn plan_jobs(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
) -> Result<(Workload, Plans), BuildError> {
    let none = WorkloadSpec::with_phases(Vec::new());
    let budget = super::super::memory::build_budget_bytes();
    let mut cx = Cx::new(jobs, topo, config, &none, budget);
    cx.plans = Some(Plans::default());
    build_into(&mut cx, jobs, background)?;
    let plans = cx.plans.take().unwrap_or_default();
    Ok((cx.b.finish(), plans))
}

/// What a plan-only build holds ([`plan_only_jobs`]): the tasks outside
/// collectives and the collectives' rows, beside the [`Plans`].
#[derive(Clone, Debug)]
pub struct Skeleton {
    /// The ids the whole workload hands out: as many tasks, flows and
    /// collectives as the eager build.
    pub ids: IdBase,
    /// Tasks and flows kept (outside collectives) and their dependencies.
    pub kept_tasks: u64,
    pub kept_flows: u64,
    pub edges: u64,
    pub collectives: Vec<Collective>,
    /// What the kept structures hold.
    pub bytes: u64,
}

/// [`super::build_jobs`] planned only: every collective is built alone,
/// its plan recorded, then dropped, so that the build never holds more
/// than one collective's tasks and flows. An offloaded collective (whose
/// aggregation tree the run needs) is refused for now.
pub fn plan_only_jobs(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
) -> Result<(Skeleton, Plans), BuildError> {
    plan_only_shaped(jobs, background, topo, config, true)
}

/// [`plan_only_jobs`], building each collective of a shape seen before
/// again (`shapes` false) or not (true): the same plans either way.
pub fn plan_only_shaped(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
    shapes: bool,
) -> Result<(Skeleton, Plans), BuildError> {
    let (b, plans) = build_planned(jobs, background, topo, config, (shapes, MAX_PLAN_ENTRIES))?;
    if let Some(c) = b.offloaded_collective() {
        return Err(BuildError::Invalid(format!(
            "collective {c} is offloaded: a plan-only build keeps no aggregation tree yet"
        )));
    }
    Ok((b.into_skeleton(), plans))
}

/// `jobs` built planned only, each shape built once when `shapes`, the
/// plans listing at most `max_entries` entries: the builder with what it
/// kept, and the plans.
fn build_planned(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
    (shapes, max_entries): (bool, usize),
) -> Result<(Builder, Plans), BuildError> {
    let none = WorkloadSpec::with_phases(Vec::new());
    let budget = super::super::memory::build_budget_bytes();
    let mut cx = Cx::new(jobs, topo, config, &none, budget);
    cx.plans = Some(Plans {
        shapes: shapes.then(Shapes::default),
        max_entries: MaxEntries(max_entries.min(MAX_PLAN_ENTRIES)),
        ..Plans::default()
    });
    cx.plan_only = true;
    build_into(&mut cx, jobs, background)?;
    let mut plans = cx.plans.take().unwrap_or_default();
    plans.shapes = None;
    Ok((cx.b, plans))
}

/// [`plan_only_jobs`] for a run that expands each collective when it
/// becomes ready: the workload's small structures, its collectives' rows,
/// and ([`Workload::lazy`]) what it keeps to expand them.
pub fn lazy_jobs(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
) -> Result<Workload, BuildError> {
    lazy_jobs_within(jobs, background, topo, config, MAX_PLAN_ENTRIES)
}

/// [`lazy_jobs`] refusing plans that list more than `max_entries` entries
/// (at most [`MAX_PLAN_ENTRIES`]).
pub fn lazy_jobs_within(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
    max_entries: usize,
) -> Result<Workload, BuildError> {
    let (b, plans) = build_planned(jobs, background, topo, config, (true, max_entries))?;
    if let Some(c) = b.offloaded_collective() {
        return Err(BuildError::Invalid(format!(
            "--lazy-expansion on: collective {c} is offloaded to the switches, whose \
             aggregation trees are kept only by the eager build (--lazy-expansion off)"
        )));
    }
    let (mut w, kept) = b.into_kept();
    if !w.ina_ops.is_empty() {
        return Err(BuildError::Invalid(
            "--lazy-expansion on: some flows stream into switches (NVLS or in-network \
             aggregation), which only the eager build keeps (--lazy-expansion off)"
                .to_string(),
        ));
    }
    w.lazy = Some(Arc::new(LazyPlan::new(jobs.to_vec(), plans, kept, topo)));
    Ok(w)
}

/// [`Cx::collective`] in a plan-only build: built alone into a scratch
/// builder at the next ids, planned, and dropped but for its rows.
pub(super) fn plan_alone(
    cx: &mut Cx<'_>,
    name: &Arc<str>,
    op: &OpSpec,
    group: &[NodeIndex],
    logical: usize,
    entry: &HostTasks,
) -> HostTasks {
    let base = cx.b.next_ids();
    let key = cx
        .plans
        .as_ref()
        .and_then(|p| p.shapes.as_ref())
        .and_then(|_| {
            let entry_len = |_, h| entry.get(&h).map_or(0, Vec::len);
            shape::key(cx.topo, cx.spec, cx.job, op, group, logical, entry_len)
        });
    let known = key.as_ref().and_then(|k| {
        let shapes = cx.plans.as_ref()?.shapes.as_ref()?;
        shapes.get(k, op).cloned()
    });
    let (next, exits) = match known {
        Some(shape) => {
            // Built before: the same ids, rows and exits, relabelled.
            cx.b.skip_shape(shape.count, &shape.rows, name);
            if let Some(plans) = &mut cx.plans {
                plans.shape_hits += 1;
            }
            (add(base, shape.count), shape.exits(group, base.task))
        }
        None => {
            let scratch = Builder::at(cx.b.host_overhead(), base);
            let kept = std::mem::replace(&mut cx.b, scratch);
            let exits = cx.collective_alone(name, op, group, logical, entry);
            let scratch = std::mem::replace(&mut cx.b, kept);
            let next = scratch.next_ids();
            let rows = scratch.shape_rows();
            let shapes = cx.plans.as_mut().and_then(|p| p.shapes.as_mut());
            if let (Some(shapes), Some(key), Some(rows)) = (shapes, key, rows) {
                let count = sub(next, base);
                shapes.insert(key, op, (base, count), rows, group, &exits);
            }
            if scratch.over() {
                cx.b.refuse();
            }
            cx.b.skip_collective(scratch);
            (next, exits)
        }
    };
    if let Some(plans) = &mut cx.plans {
        let before = plans.bytes();
        plans.record(base, next, name, op, group, logical, entry);
        cx.b.charge(plans.bytes() - before);
        if plans.over() {
            cx.b.refuse();
        }
    }
    exits
}

fn add(a: IdBase, b: IdBase) -> IdBase {
    IdBase {
        task: a.task + b.task,
        flow: a.flow + b.flow,
        collective: a.collective + b.collective,
    }
}

fn sub(a: IdBase, b: IdBase) -> IdBase {
    IdBase {
        task: a.task - b.task,
        flow: a.flow - b.flow,
        collective: a.collective - b.collective,
    }
}

/// One collective's tasks, flows and dependencies, ids from its plan's base.
#[derive(Clone, Debug, PartialEq)]
pub struct Expanded {
    /// Its tasks, with what each does (a compute task's duration is named
    /// by value, not by an index into a workload's durations).
    pub tasks: Vec<(Task, TaskKind)>,
    pub flows: Vec<FlowSpec>,
    /// Per task, the tasks it waits for, in increasing order.
    pub deps: Vec<Vec<u32>>,
    /// Its rows (a DPU-staged collective registers more than one).
    pub collectives: Vec<Collective>,
    /// Its flows queued behind another ([`Workload::flow_queued_after`]),
    /// global ids, sorted.
    pub queued: Vec<(u32, u32)>,
}

/// Plan `i` of `jobs` expanded alone (`row`: its collective's row as
/// planned); `None` for an offloaded collective, whose aggregation tree
/// holds switch resources in build order.
pub fn expand(
    jobs: &[Job],
    topo: &Topology,
    config: &NetConfig,
    plans: &Plans,
    i: usize,
    row: &Collective,
) -> Option<Expanded> {
    let nvswitch = has_nvswitch(topo);
    expand_with(jobs, (topo, nvswitch), config, plans, i, row)
}

/// Whether `topo` has an NVSwitch (which the build's choices read).
pub(crate) fn has_nvswitch(topo: &Topology) -> bool {
    (0..topo.node_count()).any(|n| topo.role(n) == Role::NvSwitch)
}

/// [`expand`] with `topo`'s [`has_nvswitch`] known: nothing per node is
/// made (a replayed collective takes no switch resources), so that a run
/// may expand millions.
pub(crate) fn expand_with(
    jobs: &[Job],
    (topo, nvswitch): (&Topology, bool),
    config: &NetConfig,
    plans: &Plans,
    i: usize,
    row: &Collective,
) -> Option<Expanded> {
    if row.offloaded {
        return None;
    }
    let plan = &plans.list[i];
    let (job, name, op) = plans.op(i);
    let spec = &jobs[*job].spec;
    let mut cx = Cx {
        b: Builder::at(spec.host_overhead, plan.base),
        topo,
        spec,
        config,
        resources: Resources::new(0),
        nvswitch,
        job: row.job,
        plans: None,
        replay: Some(Replay {
            fallback_reason: row.fallback_reason.clone(),
        }),
        plan_only: false,
    };
    let entry = plans.entry(i);
    cx.collective_alone(name, op, plans.group(i), plan.logical as usize, &entry);
    Some(cx.b.into_expanded())
}

/// `task` as it compares between workloads: a compute task's index into
/// its workload's durations left out (its `kind` holds the duration).
pub(crate) fn comparable(task: Task, kind: TaskKind) -> (Task, TaskKind) {
    match kind {
        TaskKind::Compute(_) => (
            Task {
                what: COMPUTE,
                ..task
            },
            kind,
        ),
        TaskKind::Flow(_) => (task, kind),
    }
}

impl Workload {
    /// The part of this workload that `plan` reserved, as [`expand`]
    /// gives it (`deps`: every task's dependencies, from
    /// [`Workload::dependencies`]).
    pub fn reserved_part(&self, plan: &CollectivePlan, deps: &[Vec<u32>]) -> Expanded {
        let range = |base: u32, count: u32| base as usize..(base + count) as usize;
        let tasks = range(plan.base.task, plan.count.task);
        Expanded {
            tasks: self.tasks[tasks.clone()]
                .iter()
                .map(|t| comparable(*t, self.kind(t)))
                .collect(),
            flows: self.flows[range(plan.base.flow, plan.count.flow)].to_vec(),
            deps: deps[tasks].to_vec(),
            collectives: self
                .collectives
                .range(range(plan.base.collective, plan.count.collective)),
            queued: self.queued_in(range(plan.base.flow, plan.count.flow)),
        }
    }

    /// Every task's dependencies, in increasing order, from the
    /// dependents' lists (for tests and checks: it holds every edge again).
    pub fn dependencies(&self) -> Vec<Vec<u32>> {
        let mut deps = vec![Vec::new(); self.tasks.len()];
        for d in 0..self.tasks.len() as u32 {
            for &t in self.dependents(d) {
                deps[t as usize].push(d);
            }
        }
        deps
    }
}
