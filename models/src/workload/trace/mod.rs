//! Workloads replayed from traces: one program per rank, as measured runs
//! record them (Chakra execution traces, `chakra.rs`; ATLAHS' GOAL,
//! `goal.rs`). Both formats are read into one [`Trace`]: per rank, a list of
//! operations (compute, send, receive, collective) with dependencies on
//! earlier or later operations of the same rank. `build/trace.rs` matches
//! sends with receives and collectives across ranks and adds the DAG.

pub mod chakra;
pub mod goal;

use super::file::WorkloadFileError;
use super::spec::{Algorithm, CollectiveOp};
use netsim_engine::SimTime;
use std::path::Path;

/// The trace `path` names, read, when it names one: a GOAL file (by its
/// content) or a set of Chakra per-rank files (a prefix or a directory).
/// With it, what the reader has to say once (where netsim runs the trace
/// differently from its own simulator). `None`: not a trace (another kind
/// of workload, or no such file).
pub fn read(path: &Path) -> Option<Result<(Trace, Vec<String>), WorkloadFileError>> {
    if goal::is_goal(path) {
        return Some(goal::read(path).map(|trace| (trace, Vec::new())));
    }
    match chakra::files(path) {
        Ok(None) => None,
        Ok(Some(files)) => Some(chakra::read_noted(&files)),
        Err(e) => Some(Err(e)),
    }
}

/// What one operation of a rank does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Busy for `duration` on the rank's host.
    Compute { duration: SimTime },
    /// `bytes` to rank `to`; completes when the receiver acknowledges the
    /// last byte. Matches the receive at `to` with the same `tag`.
    Send { to: u32, bytes: u64, tag: u64 },
    /// `bytes` from rank `from` (`None`: any rank) with `tag` (`None`: any
    /// tag); completes when the message has arrived.
    Recv {
        from: Option<u32>,
        bytes: u64,
        tag: Option<u64>,
    },
    /// Collective `op` of `bytes` (netsim's `--size`: the buffer each rank
    /// reduces, gathers into or scatters from) on process group `group`
    /// (index into [`Trace::groups`]). The n-th collective a rank issues on
    /// a group is the n-th of every other member.
    Collective {
        op: CollectiveOp,
        bytes: u64,
        group: u32,
    },
}

/// One dependency of an operation, on an operation of the same rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dep {
    /// Index into [`Trace::ops`].
    pub op: u32,
    /// After that operation starts (GOAL's `irequires`), not ends.
    pub on_start: bool,
}

/// One operation of a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    /// The trace's own name for it (a GOAL label, a Chakra node id), for errors.
    pub label: u64,
}

/// Every rank's program. Plain vectors indexed by `u32` ids, ranks'
/// operations one after another, dependencies in compressed rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Rank `r`'s operations are `ops[rank_start[r]..rank_start[r + 1]]`;
    /// `rank_start.len()` is ranks + 1.
    pub rank_start: Vec<u32>,
    pub ops: Vec<Op>,
    /// Operation `i`'s dependencies are `deps[dep_start[i]..dep_start[i + 1]]`;
    /// `dep_start.len()` is `ops.len() + 1`.
    pub dep_start: Vec<u32>,
    pub deps: Vec<Dep>,
    /// Process groups: the ranks of each, ascending and distinct.
    pub groups: Vec<Vec<u32>>,
    /// Where rank `r`'s program came from, for errors: a file, or a file
    /// and the rank's block in it.
    pub sources: Vec<String>,
    /// The algorithm of the collectives that implement it (`--algo`);
    /// the others, and all when `None`, run their default.
    pub algorithm: Option<Algorithm>,
}

impl Trace {
    pub fn ranks(&self) -> u32 {
        self.rank_start.len().saturating_sub(1) as u32
    }

    /// Rank `rank`'s operations' indices.
    pub fn rank_ops(&self, rank: u32) -> std::ops::Range<u32> {
        self.rank_start[rank as usize]..self.rank_start[rank as usize + 1]
    }

    pub fn op_deps(&self, op: u32) -> &[Dep] {
        &self.deps[self.dep_start[op as usize] as usize..self.dep_start[op as usize + 1] as usize]
    }
}

/// Builds a [`Trace`] rank by rank, operation by operation.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    trace: Trace,
}

impl TraceBuilder {
    pub fn new() -> TraceBuilder {
        let mut trace = Trace::default();
        trace.rank_start.push(0);
        trace.dep_start.push(0);
        TraceBuilder { trace }
    }

    /// Ends the current rank's program (the first rank's starts with the
    /// builder); `source` names where it came from.
    pub fn end_rank(&mut self, source: String) {
        self.trace.rank_start.push(self.trace.ops.len() as u32);
        self.trace.sources.push(source);
    }

    /// Appends an operation to the current rank; returns its index. `deps`
    /// name operations of the same rank, before or after this one.
    pub fn op(&mut self, op: Op, deps: &[Dep]) -> u32 {
        let id = self.trace.ops.len() as u32;
        self.trace.ops.push(op);
        self.trace.deps.extend_from_slice(deps);
        self.trace.dep_start.push(self.trace.deps.len() as u32);
        id
    }

    /// How many operations all ranks have so far: the next one's index.
    pub fn ops_len(&self) -> u32 {
        self.trace.ops.len() as u32
    }

    /// The index of the process group of `ranks` (ascending, distinct),
    /// added if new.
    pub fn group(&mut self, ranks: Vec<u32>) -> u32 {
        debug_assert!(ranks.windows(2).all(|w| w[0] < w[1]));
        match self.trace.groups.iter().position(|g| *g == ranks) {
            Some(i) => i as u32,
            None => {
                self.trace.groups.push(ranks);
                self.trace.groups.len() as u32 - 1
            }
        }
    }

    pub fn finish(self) -> Trace {
        self.trace
    }
}
