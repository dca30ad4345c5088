//! What a workload holds in memory, structure by structure, and what it
//! would hold once built: the builder refuses a workload whose structures
//! would not fit before it allocates them, and `run.json` reports them.

use super::progress::CollectiveSpan;
use super::{Collective, Task, Workload};
use crate::traffic::FlowSpec;
use std::mem::size_of;

/// Bytes of one workload's structures (their lengths, not spare capacity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadBytes {
    /// The tasks of the DAG ([`Task`], 16 B each).
    pub tasks: u64,
    /// The flows ([`FlowSpec`]), the task each is, and the aggregation
    /// tree of the few that stream into one.
    pub flows: u64,
    /// The dependents' lists: one id per edge, one offset per task.
    pub dependents: u64,
    /// The collectives' rows and fallback reasons (a name is one string
    /// per phase, shared by its collectives, and left out).
    pub collectives: u64,
}

impl WorkloadBytes {
    /// What a workload of these counts holds once built (`edges`: its
    /// dependencies), leaving out the collectives' names.
    pub fn of_counts(tasks: u64, flows: u64, edges: u64, collectives: u64) -> WorkloadBytes {
        let each = |n: u64, bytes: usize| n.saturating_mul(bytes as u64);
        WorkloadBytes {
            tasks: each(tasks, size_of::<Task>()),
            flows: each(flows, size_of::<FlowSpec>() + 4),
            dependents: each(edges, 4).saturating_add(each(tasks.saturating_add(1), 4)),
            collectives: each(collectives, size_of::<Collective>()),
        }
    }

    /// All of them.
    pub fn total(&self) -> u64 {
        self.tasks
            .saturating_add(self.flows)
            .saturating_add(self.dependents)
            .saturating_add(self.collectives)
    }
}

impl Workload {
    /// What this workload's structures hold.
    pub fn bytes(&self) -> WorkloadBytes {
        let edges = self.dependents.len() as u64;
        let mut b = WorkloadBytes::of_counts(
            self.tasks.len() as u64,
            self.flows.len() as u64,
            edges,
            self.collectives.len() as u64,
        );
        if !self.has_tasks() {
            // Plain traffic: no DAG, no tasks of flows.
            b.flows = (self.flows.len() * size_of::<FlowSpec>()) as u64;
            b.dependents = 0;
        }
        b.flows += (self.ina_flows.len() * INA_FLOW_BYTES as usize) as u64;
        b.flows += (self.queued_flows.len() * INA_FLOW_BYTES as usize) as u64;
        b.flows += (self.queue_heads.len() * QUEUE_HEAD_BYTES as usize) as u64;
        // Each distinct row once, an index per collective.
        b.collectives = self.collectives.bytes();
        if let Some(lazy) = &self.lazy {
            // Under `--lazy-expansion on`: the plans and the kept tasks.
            b.tasks = b.tasks.saturating_add(lazy.bytes());
        }
        b
    }

    /// Dependency edges of the DAG.
    pub fn edge_count(&self) -> u64 {
        self.dependents.len() as u64
    }
}

/// What a workload being built may count ([`needed_bytes`]): what this
/// process may still use, less [`BUILD_SLACK_BYTES`]. The builder grows
/// its structures in blocks that never copy what they hold and moves them
/// into vectors of their exact length, freeing each block as it goes (see
/// [`super::chunked`]), so what it counts is what it holds in resident
/// memory. Under an address-space limit (`ulimit -v`) only a third of what
/// is left: the allocator reserves address space in large pieces ahead of
/// use, which the limit counts (a k=256 fat-tree's all-reduce under 4 GiB
/// aborted with all but 256 MiB, or 1 GiB, of what was left counted).
pub fn build_budget_bytes() -> u64 {
    use netsim_process::{address_space_limit_bytes, memory_in_use_bytes, memory_limit_bytes};
    let left = memory_limit_bytes().saturating_sub(memory_in_use_bytes());
    let usable = match address_space_limit_bytes() {
        u64::MAX => left,
        _ => left / 3,
    };
    usable.saturating_sub(BUILD_SLACK_BYTES)
}

/// What a build holds beyond its count at most: a block of each structure
/// being moved and the scratch of the phase being built.
pub const BUILD_SLACK_BYTES: u64 = 256 << 20;

/// What one task costs: the task, its offset into the dependents' lists,
/// and the count of dependencies it still waits for during a run (1 B).
pub const TASK_BYTES: u64 = size_of::<Task>() as u64 + 4 + super::progress::BYTES_PER_TASK;

/// What one dependency costs: its entry in the task's list of dependencies
/// while the workload is built, which becomes its entry in the dependents'
/// lists (the one freed block by block as the other fills).
pub const EDGE_BYTES: u64 = 4;

/// What one flow costs: its spec, the task it is, and the least a run
/// holds per flow (a flow-level run's slot index; the rest of a run's
/// per-flow state is checked before it starts).
pub const FLOW_BYTES: u64 = size_of::<FlowSpec>() as u64 + 4 + 4;

/// What a flow streaming into an aggregation tree costs beside: its entry
/// in the list of those.
pub const INA_FLOW_BYTES: u64 = 8;

/// What a flow queued behind another costs besides its entry: the flow
/// ahead's entry in the sorted list of those (`Workload::queue_heads`).
pub const QUEUE_HEAD_BYTES: u64 = 4;

/// What one collective costs: its row, its fallback reason, and its span
/// during a run (its name is one string per phase, shared by its
/// collectives, and left out).
pub fn collective_bytes(c: &Collective) -> u64 {
    let text = c.fallback_reason.as_ref().map_or(0, String::len);
    (size_of::<Collective>() + text + size_of::<CollectiveSpan>()) as u64
}

/// What a workload of `tasks`, `edges`, `flows` and collectives of
/// `collective_bytes` needs while it is built and run at least: the
/// [`super::Builder`] refuses a workload past what the process may use.
pub fn needed_bytes(tasks: u64, edges: u64, flows: u64, collective_bytes: u64) -> u64 {
    tasks
        .saturating_mul(TASK_BYTES)
        .saturating_add(edges.saturating_mul(EDGE_BYTES))
        .saturating_add(flows.saturating_mul(FLOW_BYTES))
        .saturating_add(collective_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Builder, NONE};
    use netsim_engine::SimTime;

    #[test]
    fn a_task_is_16_bytes_and_counts_add_up() {
        assert_eq!(size_of::<Task>(), 16);
        let mut b = Builder::new(SimTime::ZERO);
        let a = b.flow(0, 1, 10, NONE, &[]);
        let c = b.flow(1, 2, 10, NONE, &[a]);
        b.compute(1, SimTime(5), NONE, &[a, c]);
        let w = b.finish();
        let bytes = w.bytes();
        assert_eq!(bytes.tasks, 3 * 16);
        assert_eq!(bytes.flows, 2 * (24 + 4));
        // Three edges, four offsets.
        assert_eq!(bytes.dependents, 3 * 4 + 4 * 4);
        assert_eq!(bytes.total(), 48 + 56 + 28);
    }
}
