//! The ground of lazy expansion (issue 32): each collective's id ranges
//! are reserved in build order when the workload is planned, and one
//! collective can be expanded again alone, at those ids, into exactly the
//! tasks, flows and dependencies the whole build gives it. A run that
//! expands a collective only when its dependencies are met therefore sees
//! the ids, and writes the rows, of the eager build.

use super::super::algorithms::HostTasks;
use super::super::builder::IdBase;
use super::super::spec::{BuildError, OpSpec, WorkloadSpec};
use super::super::{Builder, Collective, Task, TaskKind, Workload, COMPUTE};
use super::{build_into, Cx, Job};
use crate::network::config::NetConfig;
use crate::traffic::FlowSpec;
use netsim_topo::{NodeIndex, Topology};
use std::sync::Arc;

/// The plans recorded while a workload is built ([`plan_jobs`]).
#[derive(Debug, Default)]
pub(super) struct Plans {
    /// The job being built: index into the jobs.
    pub job: usize,
    pub list: Vec<CollectivePlan>,
}

/// What a collective expanded alone keeps of the build that planned it.
#[derive(Debug)]
pub(super) struct Replay {
    /// The fallback the planned build decided, if it tried an offload.
    pub fallback_reason: Option<String>,
}

/// One collective as planned: what it is, what it waits for at each
/// member, and the id ranges reserved for it.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectivePlan {
    /// Its first task, flow and collective ids.
    pub base: IdBase,
    /// How many task, flow and collective ids it reserved from `base`.
    pub count: IdBase,
    /// The job it belongs to: index into the jobs planned.
    pub job: usize,
    pub name: Arc<str>,
    pub op: OpSpec,
    /// Its simulated members, of a group of `logical`.
    pub group: Vec<NodeIndex>,
    pub logical: usize,
    /// Per member, the tasks before the collective it waits for.
    pub entry: HostTasks,
    /// Its row as built: the algorithm after any fallback, its task count.
    pub row: Collective,
}

impl CollectivePlan {
    /// Whether it can be expanded alone: an offloaded collective's
    /// aggregation tree holds switch resources in build order.
    pub fn expands_alone(&self) -> bool {
        !self.row.offloaded
    }
}

/// Records the plan of the collective `cx` just built from `base`.
pub(super) fn record(
    cx: &mut Cx<'_>,
    base: IdBase,
    name: &Arc<str>,
    op: &OpSpec,
    group: &[NodeIndex],
    logical: usize,
    entry: &HostTasks,
) {
    let next = cx.b.next_ids();
    let row = cx.b.collective_mut(base.collective).clone();
    let Some(plans) = &mut cx.plans else { return };
    // Only the members' entries: the builder reads no other host's.
    let entry = group
        .iter()
        .filter_map(|h| entry.get(h).map(|deps| (*h, deps.clone())))
        .collect();
    plans.list.push(CollectivePlan {
        base,
        count: IdBase {
            task: next.task - base.task,
            flow: next.flow - base.flow,
            collective: next.collective - base.collective,
        },
        job: plans.job,
        name: name.clone(),
        op: op.clone(),
        group: group.to_vec(),
        logical,
        entry,
        row,
    });
}

/// [`super::build_jobs`] with every collective's plan, in build order.
pub fn plan_jobs(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
) -> Result<(Workload, Vec<CollectivePlan>), BuildError> {
    let none = WorkloadSpec::with_phases(Vec::new());
    let budget = super::super::memory::build_budget_bytes();
    let mut cx = Cx::new(jobs, topo, config, &none, budget);
    cx.plans = Some(Plans::default());
    build_into(&mut cx, jobs, background)?;
    let plans = cx.plans.take().map(|p| p.list).unwrap_or_default();
    Ok((cx.b.finish(), plans))
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
}

/// Collective `plan` of `jobs` expanded alone; `None` for one that does
/// not expand alone ([`CollectivePlan::expands_alone`]).
pub fn expand(
    jobs: &[Job],
    topo: &Topology,
    config: &NetConfig,
    plan: &CollectivePlan,
) -> Option<Expanded> {
    if !plan.expands_alone() {
        return None;
    }
    let none = WorkloadSpec::with_phases(Vec::new());
    let mut cx = Cx::new(jobs, topo, config, &none, u64::MAX);
    let job = &jobs[plan.job];
    cx.spec = &job.spec;
    cx.job = plan.row.job;
    cx.b = Builder::at(job.spec.host_overhead, plan.base);
    cx.replay = Some(Replay {
        fallback_reason: plan.row.fallback_reason.clone(),
    });
    cx.collective_alone(&plan.name, &plan.op, &plan.group, plan.logical, &plan.entry);
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
            collectives: self.collectives[range(plan.base.collective, plan.count.collective)]
                .to_vec(),
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
