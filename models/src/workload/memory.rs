//! What a workload holds in memory, structure by structure, and what it
//! would hold once built: the builder refuses a workload whose structures
//! would not fit before it allocates them, and `run.json` reports them.

use super::progress::CollectiveSpan;
use super::{Collective, FlowInfo, Task, Workload};
use crate::traffic::FlowSpec;
use std::mem::size_of;

/// Bytes of one workload's structures (their lengths, not spare capacity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadBytes {
    /// The tasks of the DAG ([`Task`], 16 B each).
    pub tasks: u64,
    /// The flows ([`FlowSpec`]) and what each belongs to ([`FlowInfo`]).
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
            flows: each(flows, size_of::<FlowSpec>() + size_of::<FlowInfo>()),
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
            // Plain traffic: no DAG, no flow info.
            b.flows = (self.flows.len() * size_of::<FlowSpec>()) as u64;
            b.dependents = 0;
        }
        let names: usize = self
            .collectives
            .iter()
            .map(|c| c.fallback_reason.as_ref().map_or(0, String::len))
            .sum();
        b.collectives = b.collectives.saturating_add(names as u64);
        b
    }

    /// Dependency edges of the DAG.
    pub fn edge_count(&self) -> u64 {
        self.dependents.len() as u64
    }
}

/// What a workload being built may count ([`needed_bytes`]): a third of
/// what this process may still use, since a vector that doubles holds its
/// old and its new buffer at once, up to three times its length.
pub fn build_budget_bytes() -> u64 {
    use netsim_engine::process::{memory_in_use_bytes, memory_limit_bytes};
    memory_limit_bytes().saturating_sub(memory_in_use_bytes()) / 3
}

/// What one task costs: the task, its offset into the dependents' lists,
/// and the count of dependencies it still waits for during a run.
pub const TASK_BYTES: u64 = size_of::<Task>() as u64 + 4 + 4;

/// What one dependency costs: its entry in the dependents' lists, and while
/// the workload is built its entry in the task's list of dependencies.
pub const EDGE_BYTES: u64 = 4 + 4;

/// What one flow costs: its spec, what it belongs to, and the least a run
/// holds per flow (a flow-level run's slot index; a packet-level run holds
/// a whole sender, which the run checks before it starts).
pub const FLOW_BYTES: u64 = (size_of::<FlowSpec>() + size_of::<FlowInfo>()) as u64 + 4;

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
        assert_eq!(bytes.flows, 2 * (24 + 12));
        // Three edges, four offsets.
        assert_eq!(bytes.dependents, 3 * 4 + 4 * 4);
        assert_eq!(bytes.total(), 48 + 72 + 28);
    }
}
