//! A trace's per-rank programs ([`crate::workload::trace`]) into the DAG:
//! each send matched with a receive, the n-th collective of each process
//! group across its members, and every operation added once all it waits
//! for has been (so that a task's dependencies always come before it).
//!
//! A send is a flow from its rank's host, after the send's dependencies; its
//! receive completes when the flow has arrived and the receive's own
//! dependencies have completed. A collective runs with netsim's algorithms
//! once every member has reached it, each member entering when its own
//! dependencies have completed.

use std::collections::VecDeque;
use std::sync::Arc;

mod plan;

use super::{Cx, Job};
use crate::workload::algorithms::HostTasks;
use crate::workload::groups::GroupSpec;
use crate::workload::offload::{Dtype, ReduceOp};
use crate::workload::spec::{Algorithm, BuildError, CollectiveOp, OpSpec};
use crate::workload::trace::{OpKind, Trace};
use crate::workload::NONE;
use netsim_engine::SimTime;
use netsim_topo::NodeIndex;
use plan::{op_error, Plan};

/// Adds every iteration of trace `trace` of `job` (whose spec is `cx.spec`).
pub(super) fn build_trace_job(cx: &mut Cx<'_>, job: &Job, trace: &Trace) -> Result<(), BuildError> {
    let ranks = trace.ranks();
    if ranks as usize > job.hosts.len() {
        return Err(BuildError::Invalid(format!(
            "the trace has {ranks} ranks but {} hosts are given",
            job.hosts.len()
        )));
    }
    if cx.spec.fold_dp > 1 {
        return Err(BuildError::Invalid(
            "--fold-dp: a trace's ranks each run their own program; only a layout of data-parallel replicas folds"
                .into(),
        ));
    }
    let plan = Plan::new(trace)?;
    let mut previous = HostTasks::new();
    if job.start > SimTime::ZERO {
        for &h in &job.hosts[..ranks as usize] {
            previous.insert(h, vec![cx.b.compute(h, job.start, NONE, &[])]);
        }
    }
    for iteration in 0..cx.spec.iterations {
        let suffix = if cx.spec.iterations > 1 {
            format!("#{iteration}")
        } else {
            String::new()
        };
        let mut run = Run::new(trace, &plan, &job.hosts, &suffix);
        previous = run.build(cx, &previous)?;
        if cx.b.over() {
            return Err(BuildError::Invalid(super::too_large(cx)));
        }
    }
    Ok(())
}

/// One iteration of the trace being added.
struct Run<'a> {
    trace: &'a Trace,
    plan: &'a Plan,
    hosts: &'a [NodeIndex],
    /// Unresolved dependencies of each operation (a receive also waits
    /// for its send's flow).
    waiting: Vec<u32>,
    /// The task whose completion at the operation's host is its start
    /// (where some operation waits for that) and its end.
    start: Vec<u32>,
    end: Vec<u32>,
    /// A receive's flow.
    flow: Vec<u32>,
    /// Collective members that have arrived, per instance.
    arrived: Vec<u32>,
    /// A collective member's entry tasks, kept until its instance is built.
    entries: Vec<Vec<u32>>,
    ready: VecDeque<u32>,
    names: Vec<Arc<str>>,
}

impl<'a> Run<'a> {
    fn new(trace: &'a Trace, plan: &'a Plan, hosts: &'a [NodeIndex], suffix: &str) -> Run<'a> {
        let n = trace.ops.len();
        let mut waiting: Vec<u32> = (0..n as u32)
            .map(|i| trace.op_deps(i).len() as u32)
            .collect();
        for (i, op) in trace.ops.iter().enumerate() {
            if matches!(op.kind, OpKind::Recv { .. }) {
                waiting[i] += 1;
            }
        }
        let ready = (0..n as u32)
            .filter(|&i| waiting[i as usize] == 0)
            .collect();
        let mut names: Vec<Arc<str>> = CollectiveOp::ALL
            .iter()
            .map(|o| format!("{}{suffix}", o.name()).into())
            .collect();
        names.push(format!("send{suffix}").into());
        Run {
            trace,
            plan,
            hosts,
            waiting,
            start: vec![NONE; n],
            end: vec![NONE; n],
            flow: vec![NONE; n],
            arrived: vec![0; plan.instance_ops.len()],
            entries: vec![Vec::new(); n],
            ready,
            names,
        }
    }

    /// Adds the iteration after `previous` (each host's exit from the one
    /// before) and returns each host's exit from this one.
    fn build(&mut self, cx: &mut Cx<'_>, previous: &HostTasks) -> Result<HostTasks, BuildError> {
        let mut done = 0usize;
        while let Some(i) = self.ready.pop_front() {
            let host = self.host(i);
            let mut entry: Vec<u32> = self
                .trace
                .op_deps(i)
                .iter()
                .map(|d| {
                    if d.on_start {
                        self.start[d.op as usize]
                    } else {
                        self.end[d.op as usize]
                    }
                })
                .collect();
            if entry.is_empty() {
                entry = previous.get(&host).cloned().unwrap_or_default();
            }
            if self.plan.starts_watched[i as usize] {
                let start = cx.b.join(host, NONE, &entry);
                self.start[i as usize] = start;
                entry = vec![start];
                self.resolve(i, true);
            }
            done += self.execute(cx, i, entry);
            if cx.b.over() {
                return Ok(HostTasks::new());
            }
        }
        if done < self.trace.ops.len() {
            let stuck = (0..self.trace.ops.len() as u32)
                .find(|&i| self.end[i as usize] == NONE)
                .expect("an operation is left");
            return Err(op_error(
                self.trace,
                stuck,
                &self.plan.rank,
                "never starts: it waits, directly or through a receive or a collective, for an operation that waits for it",
            ));
        }
        Ok(self.exits(cx, previous))
    }

    fn host(&self, op: u32) -> NodeIndex {
        self.hosts[self.plan.rank[op as usize] as usize]
    }

    /// Adds operation `i`'s tasks after `entry`; returns how many
    /// operations that ended (a collective ends all its members at once).
    fn execute(&mut self, cx: &mut Cx<'_>, i: u32, entry: Vec<u32>) -> usize {
        let host = self.host(i);
        match self.trace.ops[i as usize].kind {
            OpKind::Compute { duration } => {
                let end = cx.b.compute(host, duration, NONE, &entry);
                self.finish(i, end);
                1
            }
            OpKind::Send { bytes, .. } => {
                let recv = self.plan.partner[i as usize];
                let pair = [host, self.host(recv)];
                let op = op_spec(CollectiveOp::Send, Algorithm::Direct, bytes.max(1));
                let entries = HostTasks::from([(host, entry)]);
                let send_name = self.names[CollectiveOp::ALL.len()].clone();
                let exits = cx.collective(&send_name, &op, &pair, 2, &entries);
                let flow = single(cx, host, &exits);
                self.flow[recv as usize] = single(cx, pair[1], &exits);
                self.finish(i, flow);
                self.release(recv);
                1
            }
            OpKind::Recv { .. } => {
                let mut deps = entry;
                deps.push(self.flow[i as usize]);
                let end = cx.b.join(host, NONE, &deps);
                self.finish(i, end);
                1
            }
            OpKind::Collective { op, bytes, .. } => {
                self.entries[i as usize] = entry;
                let instance = self.plan.instance[i as usize];
                self.arrived[instance as usize] += 1;
                let ops = &self.plan.instance_ops[instance as usize];
                if self.arrived[instance as usize] as usize == ops.len() {
                    self.collective(cx, instance, op, bytes);
                    ops.len()
                } else {
                    0
                }
            }
        }
    }

    /// Adds collective instance `instance` (`op` of `bytes`), all of whose
    /// members have arrived, and ends each member's operation.
    fn collective(&mut self, cx: &mut Cx<'_>, instance: u32, op: CollectiveOp, bytes: u64) {
        let ops = &self.plan.instance_ops[instance as usize];
        let group: Vec<NodeIndex> = ops.iter().map(|&o| self.host(o)).collect();
        let entries: HostTasks = ops
            .iter()
            .map(|&o| (self.host(o), std::mem::take(&mut self.entries[o as usize])))
            .collect();
        // A group of one, or a buffer of nothing, has nothing to send.
        let exits = if group.len() < 2 || (bytes == 0 && op != CollectiveOp::Barrier) {
            entries
        } else {
            let algorithm = self
                .trace
                .algorithm
                .filter(|a| op.algorithms().contains(a))
                .unwrap_or_else(|| op.default_algorithm());
            let name =
                self.names[CollectiveOp::ALL.iter().position(|&o| o == op).unwrap_or(0)].clone();
            let spec = op_spec(op, algorithm, bytes);
            cx.collective(&name, &spec, &group, group.len(), &entries)
        };
        for &o in ops {
            let end = single(cx, self.host(o), &exits);
            self.finish(o, end);
        }
    }

    /// Operation `i` ends with task `end`: what waits for its end may go on.
    fn finish(&mut self, i: u32, end: u32) {
        self.end[i as usize] = end;
        self.resolve(i, false);
    }

    /// Resolves the dependencies on operation `i`'s start (`on_start`) or end.
    fn resolve(&mut self, i: u32, on_start: bool) {
        for &(dependent, watches_start) in self.plan.dependents_of(i) {
            if watches_start == on_start {
                self.release(dependent);
            }
        }
    }

    fn release(&mut self, op: u32) {
        let w = &mut self.waiting[op as usize];
        *w -= 1;
        if *w == 0 {
            self.ready.push_back(op);
        }
    }

    /// Each rank's exit: a join of its operations that nothing waits for
    /// the end of (or the previous iteration's exit, for a rank without any).
    fn exits(&self, cx: &mut Cx<'_>, previous: &HostTasks) -> HostTasks {
        let mut exits = HostTasks::new();
        for r in 0..self.trace.ranks() {
            let host = self.hosts[r as usize];
            let mut leaves: Vec<u32> = self
                .trace
                .rank_ops(r)
                .filter(|&i| self.plan.dependents_of(i).iter().all(|&(_, s)| s))
                .map(|i| self.end[i as usize])
                .collect();
            if leaves.is_empty() {
                leaves = previous.get(&host).cloned().unwrap_or_default();
            }
            exits.insert(host, vec![cx.b.join(host, NONE, &leaves)]);
        }
        exits
    }
}

/// The one task standing for `host`'s part in `exits` (a join when there
/// are several, or none).
fn single(cx: &mut Cx<'_>, host: NodeIndex, exits: &HostTasks) -> u32 {
    match exits.get(&host).map(Vec::as_slice) {
        Some(&[task]) => task,
        Some(tasks) => cx.b.join(host, NONE, tasks),
        None => cx.b.join(host, NONE, &[]),
    }
}

fn op_spec(op: CollectiveOp, algorithm: Algorithm, size_bytes: u64) -> OpSpec {
    OpSpec {
        op,
        algorithm,
        size_bytes,
        group: GroupSpec::All,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    }
}
