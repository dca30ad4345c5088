//! One job's part of the DAG: its parallel layout on its hosts, then every
//! phase of every iteration, each iteration after the previous one at each host.

use std::sync::Arc;

use super::{too_large, Cx, Job};
use crate::workload::algorithms::HostTasks;
use crate::workload::groups::{GroupSpec, Parallelism};
use crate::workload::offload::{Dtype, ReduceOp};
use crate::workload::spec::{
    Algorithm, BuildError, CollectiveOp, OpSpec, Phase, PhaseKind, WorkloadSpec,
};
use crate::workload::{Fold, NONE};
use netsim_engine::SimTime;
use netsim_topo::NodeIndex;

/// Adds every iteration of `job` (whose spec is `cx.spec`) to the DAG.
pub(super) fn build_job(cx: &mut Cx<'_>, job: &Job) -> Result<(), BuildError> {
    let spec = cx.spec;
    if let Some(trace) = &spec.trace {
        return super::trace::build_trace_job(cx, job, trace);
    }
    let layout = JobLayout {
        hosts: &job.hosts,
        parallelism: job_parallelism(cx, job)?,
    };
    check_dpu_phases(cx, spec)?;
    let job_first_bytes = cx.b.bytes();
    // Before the first iteration: the job's start time at each of its hosts.
    let mut previous_iteration: HostTasks = HostTasks::new();
    if job.start > SimTime::ZERO {
        for r in 0..layout.parallelism.ranks() {
            let h = job.hosts[r as usize];
            previous_iteration.insert(h, vec![cx.b.compute(h, job.start, NONE, &[])]);
        }
    }
    let released = released_after(spec);
    // No task of an iteration starts before this, counting compute alone.
    let mut begin = job.start;
    for iteration in 0..spec.iterations {
        let at = Start {
            iteration,
            begin,
            previous: &previous_iteration,
        };
        (previous_iteration, begin) = build_iteration(cx, &layout, &released, at)?;
        // Every iteration adds as much as the first.
        let per_iteration = cx.b.bytes() - job_first_bytes;
        let needed = job_first_bytes
            .saturating_add(per_iteration.saturating_mul(u64::from(spec.iterations)));
        if iteration == 0 && (needed > cx.b.budget_bytes() || cx.b.over()) {
            use netsim_process::human_bytes;
            return Err(BuildError::Invalid(format!(
                "{} iterations of ~{} each: {}",
                spec.iterations,
                human_bytes(per_iteration),
                too_large(cx)
            )));
        }
        if per_iteration == 0 {
            // Nothing to repeat (every group has one member).
            break;
        }
    }
    Ok(())
}

/// The layout simulated for `job` (folded by `--fold-dp`), recording the
/// fold's replica classes when asked; an error if the job's hosts or the
/// spec's counts cannot carry it.
fn job_parallelism(cx: &mut Cx<'_>, job: &Job) -> Result<Parallelism, BuildError> {
    let spec = cx.spec;
    let ranks = job.hosts.len() as u32;
    let parallelism = match spec.parallelism {
        Some(p) => p,
        None => Parallelism::data_parallel(ranks),
    };
    let whole_ranks = parallelism.ranks();
    let parallelism = fold(parallelism, spec.fold_dp)?;
    if spec.fold_dp > 1 && spec.fold_classes {
        // Replica copy k of rank r is rank r + k * kept (DP is the outermost
        // dimension of the layout).
        let first = job.hosts.first().copied().unwrap_or(0);
        let contiguous = job.hosts.len() as u64 >= u64::from(whole_ranks)
            && (0..whole_ranks).all(|r| first.checked_add(r) == Some(job.hosts[r as usize]));
        cx.b.fold(Fold {
            first,
            kept: parallelism.ranks(),
            replicas: spec.fold_dp,
            contiguous,
        });
    }
    if parallelism.ranks() > ranks {
        return Err(BuildError::Invalid(format!(
            "the parallel layout needs {} ranks (tp {} x pp {} x dp {}) but {ranks} hosts are given",
            parallelism.ranks(),
            parallelism.tp,
            parallelism.pp,
            parallelism.dp
        )));
    }
    if spec.channels == 0 || spec.chunks == Some(0) || spec.iterations == 0 {
        return Err(BuildError::Invalid(
            "channels, chunks and iterations must be positive".into(),
        ));
    }
    Ok(parallelism)
}

/// The layout simulated when each simulated data-parallel replica
/// stands for `fold` of them: the first `dp / fold` replicas. Expert groups
/// stay whole (`dp / fold` is a multiple of `ep`); DP and DP_EP rings keep
/// their full step count and step size over the replicas simulated (see
/// [`crate::workload::algorithms::folded_ring`]). What this leaves out is the traffic of the other
/// replicas: where it would have shared a link with the simulated ones
/// (ECMP collisions above the leaves, a DP ring's hops between segments),
/// the folded run is optimistic. docs/perf/ ("Folding on HPN") gives the
/// measured difference.
fn fold(p: Parallelism, fold: u32) -> Result<Parallelism, BuildError> {
    if fold == 1 {
        return Ok(p);
    }
    if fold == 0 || !p.dp.is_multiple_of(fold) || !(p.dp / fold).is_multiple_of(p.ep) {
        return Err(BuildError::Invalid(format!(
            "--fold-dp {fold}: the fold must divide the data-parallel size {} into a multiple of ep {}",
            p.dp, p.ep
        )));
    }
    Ok(Parallelism {
        dp: p.dp / fold,
        ..p
    })
}

/// Whether the fabric can run the spec's DPU collectives.
fn check_dpu_phases(cx: &Cx<'_>, spec: &WorkloadSpec) -> Result<(), BuildError> {
    for phase in &spec.phases {
        if let PhaseKind::Collective(op) = &phase.kind {
            if op.algorithm == Algorithm::Dpu {
                crate::workload::dpu::check(cx.topo, spec.dpu_workers, &spec.dpu).map_err(
                    |message| BuildError::Phase {
                        phase: phase.name.clone(),
                        message,
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// For each phase, the phases whose exits may be released once it is built:
/// those it is the last to wait for. Past that phase, their exits are only
/// needed in the iteration's end, which gathers them as phases end (a large
/// SimAI job has 10^5 phases of hundreds of hosts).
fn released_after(spec: &WorkloadSpec) -> Vec<Vec<usize>> {
    let mut last_use: Vec<usize> = (0..spec.phases.len()).collect();
    for (j, phase) in spec.phases.iter().enumerate() {
        for &i in &phase.after {
            last_use[i] = last_use[i].max(j);
        }
    }
    let mut released: Vec<Vec<usize>> = vec![Vec::new(); spec.phases.len()];
    for (i, &j) in last_use.iter().enumerate() {
        released[j].push(i);
    }
    released
}

/// The job's ranks on its hosts.
struct JobLayout<'j> {
    /// Rank `r` runs on `hosts[r]`.
    hosts: &'j [NodeIndex],
    parallelism: Parallelism,
}

impl JobLayout<'_> {
    /// The hosts of the ranks `group`.
    fn place(&self, group: Vec<NodeIndex>) -> Result<Vec<NodeIndex>, String> {
        let ranks = self.hosts.len() as u32;
        group
            .into_iter()
            .map(|r| {
                self.hosts.get(r as usize).copied().ok_or_else(|| {
                    format!(
                        "group names host {r} but the job has {ranks} hosts (ranks 0..{})",
                        ranks.saturating_sub(1)
                    )
                })
            })
            .collect()
    }
}

/// Where an iteration starts: after `previous` (each host's last task of
/// the iteration before), none of which completes before `begin`.
struct Start<'p> {
    iteration: u32,
    begin: SimTime,
    previous: &'p HostTasks,
}

/// Adds iteration `at.iteration` and returns each host's last task of it,
/// and a time none of those completes before (counting compute alone).
fn build_iteration(
    cx: &mut Cx<'_>,
    layout: &JobLayout<'_>,
    released: &[Vec<usize>],
    at: Start<'_>,
) -> Result<(HostTasks, SimTime), BuildError> {
    let (iteration, previous) = (at.iteration, at.previous);
    let spec = cx.spec;
    // Per phase: none of its exits completes before this. A lower bound
    // on when each collective can start (its flows finish no sooner),
    // which the memory check reads ([`super::lazy::Plans::earliest`]).
    let mut low: Vec<SimTime> = Vec::with_capacity(spec.phases.len());
    let mut exits: Vec<HostTasks> = Vec::with_capacity(spec.phases.len());
    // Per host, every phase's exits in phase order: what the next
    // iteration waits for. Indexed by host (a B-tree of every host was a
    // fifth of a plan-only build's time on SimAI's 9,216-GPU example);
    // `None` for a host no phase named.
    let mut all: Vec<Option<Vec<u32>>> = vec![None; cx.topo.host_count() as usize];
    for phase in &spec.phases {
        // A member that waits lists the exits of one phase at least.
        let start = phase
            .after
            .iter()
            .map(|&i| low[i])
            .min()
            .unwrap_or(at.begin);
        if let Some(plans) = &mut cx.plans {
            plans.set_earliest(start);
        }
        // Entry at each host: the phases it waits for, or the whole
        // previous iteration for a phase that waits for none. One source
        // (most phases) is read where it is, not copied.
        let merged: HostTasks;
        let entry = match phase.after.as_slice() {
            [] => previous,
            [i] => &exits[*i],
            after => {
                merged = merge_entries(after.iter().map(|&i| &exits[i]));
                &merged
            }
        };
        let name: Arc<str> = if spec.iterations > 1 {
            format!("{}#{iteration}", phase.name).into()
        } else {
            phase.name.as_str().into()
        };
        let err = |message: String| BuildError::Phase {
            phase: phase.name.clone(),
            message,
        };
        let mut waits = true;
        let exit = build_phase(cx, layout, phase, &name, entry, &mut waits).map_err(err)?;
        if cx.b.over() {
            return Err(err(too_large(cx)));
        }
        low.push(match &phase.kind {
            // A host that waits for nothing computes at once.
            PhaseKind::Compute { duration, .. } if waits => start + *duration,
            PhaseKind::Compute { duration, .. } => *duration,
            _ => cx.plans.as_ref().map_or(start, |p| p.phase_low()),
        });
        exits.push(exit);
        let j = exits.len() - 1;
        for &i in &released[j] {
            for (h, tasks) in std::mem::take(&mut exits[i]) {
                let list = all[h as usize].get_or_insert_with(Vec::new);
                list.extend_from_slice(&tasks);
            }
        }
    }
    // The next iteration starts at each host when all of this one is done
    // there (every phase was released into `all` by the last), hosts in
    // increasing order as the tasks' ids go.
    debug_assert!(exits.iter().all(|e| e.is_empty()));
    let mut next = HostTasks::new();
    // Each host's join waits for an exit of some phase, if for any.
    let mut begin = low.iter().copied().min().unwrap_or(at.begin);
    for (h, deps) in all.into_iter().enumerate() {
        if let Some(deps) = deps {
            let h = h as NodeIndex;
            if deps.is_empty() {
                begin = SimTime::ZERO;
            }
            next.insert(h, vec![cx.b.join(h, NONE, &deps)]);
        }
    }
    Ok((next, begin))
}

/// Per host, the tasks of every source in turn (a host named by any
/// source is named, with no task if none lists one).
fn merge_entries<'a>(sources: impl Iterator<Item = &'a HostTasks>) -> HostTasks {
    let mut entry = HostTasks::new();
    for s in sources {
        for (&h, tasks) in s {
            entry.entry(h).or_default().extend_from_slice(tasks);
        }
    }
    entry
}

/// Adds one phase, named `name` in this iteration, after `entry` at each
/// host; returns each host's exit from it, or why it cannot be built.
/// `waits` turns false if a host computes with an empty entry.
fn build_phase(
    cx: &mut Cx<'_>,
    layout: &JobLayout<'_>,
    phase: &Phase,
    name: &Arc<str>,
    entry: &HostTasks,
    waits: &mut bool,
) -> Result<HostTasks, String> {
    let parallelism = &layout.parallelism;
    // Gathered, then made a map at once: inserted one by one, a B-tree
    // per phase of hundreds of hosts cost a tenth of a plan-only build.
    // Of a host named twice, the last exit stays, as inserts would leave.
    let mut exit: Vec<(NodeIndex, Vec<u32>)> = Vec::new();
    match &phase.kind {
        PhaseKind::Compute { duration, group } => {
            for g in parallelism.groups_in(group, phase.stage) {
                for h in layout.place(g)? {
                    let deps = entry.get(&h).map_or(&[][..], Vec::as_slice);
                    *waits &= !deps.is_empty();
                    let t = cx.b.compute(h, *duration, NONE, deps);
                    exit.push((h, vec![t]));
                }
            }
        }
        PhaseKind::Collective(op) => {
            build_collective_phase(cx, layout, phase, op, name, entry, &mut exit)?
        }
        PhaseKind::Send {
            size_bytes,
            from,
            to,
        } => {
            if *size_bytes == 0 || *from >= parallelism.pp || *to >= parallelism.pp {
                return Err(format!(
                    "a send of {size_bytes} bytes from stage {from} to stage {to} of {}",
                    parallelism.pp
                ));
            }
            let op = OpSpec {
                op: CollectiveOp::Send,
                algorithm: Algorithm::Direct,
                size_bytes: *size_bytes,
                group: GroupSpec::Pp,
                dtype: Dtype::Float32,
                reduce_op: ReduceOp::Sum,
            };
            for d in 0..parallelism.dp {
                for t in 0..parallelism.tp {
                    let pair = vec![parallelism.rank(t, d, *from), parallelism.rank(t, d, *to)];
                    let pair = layout.place(pair)?;
                    exit.extend(cx.collective(name, &op, &pair, 2, entry));
                }
            }
        }
    }
    Ok(exit.into_iter().collect())
}

/// Adds a collective phase `op`: one collective per group of the layout,
/// folded where `--fold-dp` says, each member's exit into `exit`.
fn build_collective_phase(
    cx: &mut Cx<'_>,
    layout: &JobLayout<'_>,
    phase: &Phase,
    op: &OpSpec,
    name: &Arc<str>,
    entry: &HostTasks,
    exit: &mut Vec<(NodeIndex, Vec<u32>)>,
) -> Result<(), String> {
    if op.size_bytes == 0 && op.op != CollectiveOp::Barrier {
        return Err("size must be positive".into());
    }
    let fold_dp = cx.spec.fold_dp;
    let fold = match op.group {
        GroupSpec::Dp | GroupSpec::DpEp | GroupSpec::All => fold_dp,
        GroupSpec::Tp | GroupSpec::Pp | GroupSpec::Ep => 1,
        GroupSpec::Ranks(_) if fold_dp == 1 => 1,
        GroupSpec::Ranks(_) => return Err("an explicit rank list cannot be folded".into()),
    };
    for g in layout.parallelism.groups_in(&op.group, phase.stage) {
        let g = layout.place(g)?;
        let logical = g.len() * fold as usize;
        if fold > 1 {
            cx.check_folded(op, &g, logical)?;
        }
        if g.len() < 2 {
            // A group of one has nothing to communicate:
            // its member goes on from its entry.
            for h in g {
                exit.push((h, entry.get(&h).cloned().unwrap_or_default()));
            }
            continue;
        }
        exit.extend(cx.collective(name, op, &g, logical, entry));
        if cx.b.over() {
            return Err(too_large(cx));
        }
    }
    Ok(())
}
