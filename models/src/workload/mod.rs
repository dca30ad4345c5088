//! Workloads: collectives and compute decomposed into a DAG of tasks that the
//! network model executes.
//!
//! A task is a flow (RDMA message between two hosts, or one host's stream
//! into an in-network aggregation tree) or a compute delay on one host. A
//! task starts when every task it depends on has completed *as seen by the
//! host it starts on*: a flow is complete at its destination when its last
//! byte is delivered and at its source when its last byte is acknowledged.
//! Every dependency is therefore a local event at one host (the builder
//! asserts it), which is how real ranks proceed, needs no messages the
//! network does not carry, and keeps a host's decisions inside its shard.
//!
//! ```text
//! WorkloadSpec (CLI op, TOML file, SimAI text)  --build-->  Workload (tasks + flows + trees)
//!   spec.rs        what is asked for; build.rs  specs placed on hosts -> the DAG;
//!   builder.rs     the DAG built task by task within a memory budget
//!   groups.rs      who takes part (rank lists, TP/DP/PP/EP)
//!   algorithms.rs  ring, double binary tree, halving-doubling, ... -> flows
//!   dpu.rs         DPU-staged collectives; dpu/staged.rs the staged patterns as task DAGs
//!   offload/       switch profiles (profile.rs), aggregation trees (tree.rs), fallback decisions
//!   file.rs        the TOML workload file; simai.rs  SimAI/AICB layer text
//!   trace/         per-rank programs from traces (Chakra, GOAL); build/trace.rs their DAG
//! ```

pub mod algorithms;
pub mod build;
mod builder;
pub(crate) mod chunked;
pub mod dpu;
pub mod file;
mod gaps;
pub mod groups;
pub mod membus;
pub mod memory;
pub mod nccl;
pub mod offload;
pub mod on_demand;
pub mod progress;
mod rows;
mod sandbox;
pub mod simai;
pub mod spans;
pub mod spec;
pub mod trace;
pub mod trees;

use crate::traffic::FlowSpec;
use netsim_engine::SimTime;
use netsim_topo::NodeIndex;
use std::sync::Arc;

pub use build::{build, build_jobs, build_jobs_within, Job};
pub(crate) use builder::{dependent_starts, dependents_csr};
pub use builder::{Builder, IdBase, BYTES_PER_TASK};
pub use memory::WorkloadBytes;
pub use offload::{Dtype, InaKind, InaOp, InaPattern, ReduceOp, SwitchProfile, TreeNode};
pub use rows::CollectiveRows;
pub use spec::{Algorithm, CollectiveOp, OpSpec, Phase, PhaseKind, WorkloadSpec};

/// "No such id" in the dense id vectors of a workload.
pub const NONE: u32 = u32::MAX;

/// What a task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// Flow `flow` (index into [`Workload::flows`]).
    Flow(u32),
    /// Busy for `duration` on the task's host (a zero duration joins dependencies).
    Compute(SimTime),
}

/// One node of the DAG: 16 bytes, since the largest workloads hold hundreds
/// of millions (what it does is packed into one word: see [`Workload::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task {
    /// Where the task starts (a flow's source).
    pub host: NodeIndex,
    /// Number of tasks it waits for.
    pub deps: u32,
    /// The collective it belongs to, or [`NONE`] (compute phases).
    pub collective: u32,
    /// A flow id, or [`COMPUTE`] plus an index into [`Workload::durations`].
    what: u32,
}

/// The bit of [`Task`]'s packed word that marks a compute task.
const COMPUTE: u32 = 1 << 31;

/// What a flow of a workload belongs to ([`Workload::flow_info`]): its
/// task and collective, the aggregation tree it streams into ([`NONE`]
/// for a host-to-host flow), and the flow ahead of it on its queue pair
/// ([`NONE`] when it has a queue pair of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowInfo {
    pub task: u32,
    pub collective: u32,
    pub ina_op: u32,
    /// A flow queued behind another sends none of its packets while that
    /// one still has packets to send from the same port: NCCL's steps, one
    /// queue pair per connection, leave in order ([`Workload::flow_queued_after`]).
    pub after: u32,
}

/// One collective as the `collectives` table reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Collective {
    /// The phase's name, shared by its collectives (10^7 of them in a large job).
    pub name: Arc<str>,
    pub op: CollectiveOp,
    /// The algorithm that ran (after any fallback), e.g. `ring`, `ina`.
    pub algorithm: &'static str,
    pub group_size: u32,
    pub size_bytes: u64,
    pub offloaded: bool,
    pub fallback_reason: Option<String>,
    /// Number of tasks; the collective is complete when all have completed.
    pub tasks: u32,
    /// The job it belongs to (index into [`Workload::jobs`]), or [`NONE`].
    pub job: u32,
}

/// Switch offload attempts that fell back, counted when the workload is
/// built (the decision is static: profile, limits and resources).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FallbackCount {
    pub reductions: u64,
    pub barriers: u64,
}

/// Everything a run executes: flows, the DAG over them, and the aggregation
/// trees of offloaded operations. Read-only during the run.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    pub flows: Vec<FlowSpec>,
    /// Parallel to `flows`: the task each is (its collective is the
    /// task's); empty for plain traffic (no DAG).
    flow_task: Vec<u32>,
    /// The flows that stream into an aggregation tree and the tree's
    /// [`InaOp`], sorted by flow (few flows do: 4 B a flow for the rest
    /// would be 0.5 GB on a large job).
    ina_flows: Vec<(u32, u32)>,
    /// The flows queued behind another on one queue pair, and that flow,
    /// sorted by flow (NCCL's pipelined steps; few workloads have them).
    queued_flows: Vec<(u32, u32)>,
    /// The flows some flow is queued behind, sorted (`queued_flows`'
    /// second halves; a flow leaving its queue pair's state to the next).
    queue_heads: Vec<u32>,
    pub tasks: Vec<Task>,
    /// Tasks that depend on task `t`: `dependents[dependent_base[t]..dependent_base[t + 1]]`.
    dependents: Vec<u32>,
    dependent_base: Vec<u32>,
    pub collectives: CollectiveRows,
    /// The distinct compute durations, which compute tasks name by index.
    durations: Vec<SimTime>,
    /// Names of the jobs sharing the fabric.
    pub jobs: Vec<Arc<str>>,
    pub ina_ops: Vec<InaOp>,
    /// Per switch with a fallback: `(node, counts)`, sorted by node.
    pub fallbacks: Vec<(NodeIndex, FallbackCount)>,
    /// Time every task without dependencies waits before starting (per-message host overhead).
    pub host_overhead: SimTime,
    /// Each flow's extra host overhead is uniform in `[0, this]`
    /// (`--host-overhead-jitter-ns`; zero: none), drawn by
    /// [`Workload::flow_overhead`] from `jitter_seed` and the flow id alone.
    pub host_overhead_jitter: SimTime,
    /// The run seed the jitter is drawn from.
    pub jitter_seed: u64,
    /// SimAI 1.6's extra delay on the flows it marks (`--reduce-overhead-ns`).
    pub reduce: Option<Arc<membus::ReducePlan>>,
    /// The folded jobs that run as classes at flow level (`--fold-dp` with
    /// `--fold-classes`).
    pub folds: Vec<Fold>,
    /// Under `--lazy-expansion on`: the collectives' plans and the tasks
    /// outside them, from which a run expands each collective when it
    /// becomes ready (`tasks` and `flows` are then empty).
    pub lazy: Option<Arc<on_demand::LazyPlan>>,
}

/// A job of which only the first data-parallel replicas are built
/// (`WorkloadSpec::fold_dp`): its ranks `0..kept` run on hosts
/// `first..first + kept`, each standing for `replicas` ranks, and rank
/// `r + k * kept` (replica copy `k`) would run on host `first + k * kept + r`
/// where the job's placement is contiguous over its whole layout
/// (`contiguous`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fold {
    pub first: NodeIndex,
    pub kept: u32,
    pub replicas: u32,
    pub contiguous: bool,
}

impl Workload {
    /// Independent flows, each starting at its own time: plain traffic.
    pub fn from_flows(flows: Vec<FlowSpec>) -> Workload {
        Workload {
            flows,
            ..Workload::default()
        }
    }

    /// How long flow `flow` waits after it is ready before it starts: the
    /// host overhead plus its jitter, a hash of the run seed and the flow
    /// id (no shared stream, so any shard or thread count draws the same).
    pub fn flow_overhead(&self, flow: u32) -> SimTime {
        let jitter_ps = self.host_overhead_jitter.0;
        if jitter_ps == 0 {
            return self.host_overhead;
        }
        let mut h = self.jitter_seed ^ (u64::from(flow) << 16 | 0x4a17);
        let draw = netsim_engine::splitmix64(&mut h);
        self.host_overhead
            .saturating_add(SimTime(draw % (jitter_ps + 1)))
    }

    /// Whether the flows form a DAG of tasks (a workload) rather than traffic.
    pub fn has_tasks(&self) -> bool {
        !self.tasks.is_empty() || self.lazy.is_some()
    }

    /// How many flow ids the workload hands out (expanded or not).
    pub fn flow_count(&self) -> usize {
        self.lazy
            .as_ref()
            .map_or(self.flows.len(), |l| l.ids().flow as usize)
    }

    /// How many task ids the workload hands out (expanded or not).
    pub fn task_count(&self) -> usize {
        self.lazy
            .as_ref()
            .map_or(self.tasks.len(), |l| l.ids().task as usize)
    }

    /// What task `task` does.
    #[inline]
    pub fn kind(&self, task: &Task) -> TaskKind {
        kind(&self.durations, task)
    }

    #[inline]
    pub fn dependents(&self, task: u32) -> &[u32] {
        let t = task as usize;
        &self.dependents[self.dependent_base[t] as usize..self.dependent_base[t + 1] as usize]
    }

    /// The name of the job flow `flow` belongs to, if any.
    pub fn flow_job(&self, flow: u32) -> Option<&Arc<str>> {
        self.flow_collective(flow)
            .and_then(|c| self.collective_job(c))
    }

    /// The name of the job collective `collective` belongs to, if any.
    pub fn collective_job(&self, collective: u32) -> Option<&Arc<str>> {
        let job = self.collectives.get(collective as usize)?.job;
        self.jobs.get(job as usize)
    }

    /// The collective of flow `flow`, if it belongs to one.
    #[inline]
    pub fn flow_collective(&self, flow: u32) -> Option<u32> {
        // The task's alone: no search of the aggregation trees' flows.
        let task = *self.flow_task.get(flow as usize)?;
        let collective = self.tasks.get(task as usize)?.collective;
        (collective != NONE).then_some(collective)
    }

    /// What flow `flow` belongs to; `None` for plain traffic. A flow that
    /// is no task's (outside a memo sandbox's domain) has task [`NONE`].
    #[inline]
    pub fn flow_info(&self, flow: u32) -> Option<FlowInfo> {
        let task = *self.flow_task.get(flow as usize)?;
        Some(FlowInfo {
            task,
            collective: self.tasks.get(task as usize).map_or(NONE, |t| t.collective),
            ina_op: self.flow_ina_op(flow),
            after: self.flow_queued_after(flow),
        })
    }

    /// The task flow `flow` is.
    ///
    /// # Panics
    /// If the flow is plain traffic (no task).
    #[inline]
    pub fn flow_task(&self, flow: u32) -> u32 {
        self.flow_task[flow as usize]
    }

    /// The aggregation tree flow `flow` streams into, or [`NONE`].
    #[inline]
    pub fn flow_ina_op(&self, flow: u32) -> u32 {
        if self.ina_flows.is_empty() {
            return NONE;
        }
        match self.ina_flows.binary_search_by_key(&flow, |&(f, _)| f) {
            Ok(i) => self.ina_flows[i].1,
            Err(_) => NONE,
        }
    }

    /// The queued flows ([`Workload::flow_queued_after`]) among `flows`.
    pub fn queued_in(&self, flows: std::ops::Range<usize>) -> Vec<(u32, u32)> {
        let inside = |&&(f, _): &&(u32, u32)| flows.contains(&(f as usize));
        self.queued_flows.iter().filter(inside).copied().collect()
    }

    /// Whether a flow is queued behind `flow` on its queue pair.
    #[inline]
    pub fn flow_has_queued_behind(&self, flow: u32) -> bool {
        self.queue_heads.binary_search(&flow).is_ok()
    }

    /// The sorted flows ahead of others among `queued` ([`Workload::queue_heads`]).
    pub(crate) fn heads_of(queued: &[(u32, u32)]) -> Vec<u32> {
        let mut heads: Vec<u32> = queued.iter().map(|&(_, ahead)| ahead).collect();
        heads.sort_unstable();
        heads
    }

    /// The flow ahead of `flow` on its queue pair, or [`NONE`].
    #[inline]
    pub fn flow_queued_after(&self, flow: u32) -> u32 {
        if self.queued_flows.is_empty() {
            return NONE;
        }
        match self.queued_flows.binary_search_by_key(&flow, |&(f, _)| f) {
            Ok(i) => self.queued_flows[i].1,
            Err(_) => NONE,
        }
    }
}

/// What `task` does, its duration one of `durations`.
#[inline]
fn kind(durations: &[SimTime], task: &Task) -> TaskKind {
    if task.what & COMPUTE == 0 {
        TaskKind::Flow(task.what)
    } else {
        TaskKind::Compute(durations[(task.what & !COMPUTE) as usize])
    }
}
