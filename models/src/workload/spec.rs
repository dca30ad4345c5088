//! What a user asks for: a collective on groups, or a program of phases
//! (`build.rs` turns it into the task DAG for a topology).

use super::groups::{GroupSpec, Parallelism};
use super::offload::{Dtype, ReduceOp, SwitchProfile};
use netsim_engine::SimTime;

/// A collective operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveOp {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    Barrier,
    /// Point-to-point transfer between two ranks (pipeline activations and
    /// gradients); only SimAI workloads make these, so it is not in `ALL`.
    Send,
}

impl CollectiveOp {
    pub const ALL: [CollectiveOp; 7] = [
        CollectiveOp::AllReduce,
        CollectiveOp::AllGather,
        CollectiveOp::ReduceScatter,
        CollectiveOp::AllToAll,
        CollectiveOp::Broadcast,
        CollectiveOp::Reduce,
        CollectiveOp::Barrier,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CollectiveOp::AllReduce => "allreduce",
            CollectiveOp::AllGather => "allgather",
            CollectiveOp::ReduceScatter => "reducescatter",
            CollectiveOp::AllToAll => "alltoall",
            CollectiveOp::Broadcast => "broadcast",
            CollectiveOp::Reduce => "reduce",
            CollectiveOp::Barrier => "barrier",
            CollectiveOp::Send => "send",
        }
    }

    pub fn parse(s: &str) -> Option<CollectiveOp> {
        CollectiveOp::ALL.into_iter().find(|o| o.name() == s)
    }

    /// The algorithm used when none is asked for.
    pub fn default_algorithm(self) -> Algorithm {
        match self {
            CollectiveOp::AllToAll | CollectiveOp::Send => Algorithm::Direct,
            CollectiveOp::Barrier => Algorithm::Dissemination,
            _ => Algorithm::Ring,
        }
    }

    /// Algorithms that implement this operation.
    pub fn algorithms(self) -> &'static [Algorithm] {
        use Algorithm::*;
        match self {
            CollectiveOp::AllReduce => &[Ring, Tree, Hd, Ina, Nvls, NvlsTree, Auto],
            CollectiveOp::AllGather => &[Ring, Hd, Dpu, Auto],
            CollectiveOp::ReduceScatter => &[Ring, Hd, Auto],
            CollectiveOp::AllToAll => &[Direct, Dpu, Auto],
            CollectiveOp::Send => &[Direct],
            CollectiveOp::Broadcast => &[Ring, Tree, Dpu],
            CollectiveOp::Reduce => &[Ring, Tree],
            CollectiveOp::Barrier => &[Dissemination, Ina],
        }
    }

    /// [`CollectiveOp::algorithms`]' names, for an error: `ring, tree, hd`.
    pub fn algorithm_names(self) -> String {
        self.algorithms()
            .iter()
            .map(|a| a.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A collective algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Ring,
    /// Double binary tree (all-reduce) or binary tree (broadcast, reduce).
    Tree,
    /// Recursive halving-doubling.
    Hd,
    /// In-network: aggregation in the switches (reductions, barriers).
    Ina,
    /// All-to-all: every pair at once.
    Direct,
    /// Software barrier.
    Dissemination,
    /// Staged on SmartNIC/DPU workers (broadcast, all-gather all-in,
    /// all-to-all): needs DPUs on the hosts (`dpu_workers`).
    Dpu,
    /// NVLink SHARP: the NVSwitch reduces and multicasts (NCCL's NVLS).
    Nvls,
    /// NVLS inside servers, a tree across them (NCCL's NVLS_TREE).
    NvlsTree,
    /// What NCCL's tuning model picks ([`super::nccl::tuning`]).
    Auto,
}

impl Algorithm {
    pub const ALL: [Algorithm; 10] = [
        Algorithm::Ring,
        Algorithm::Tree,
        Algorithm::Hd,
        Algorithm::Ina,
        Algorithm::Direct,
        Algorithm::Dissemination,
        Algorithm::Dpu,
        Algorithm::Nvls,
        Algorithm::NvlsTree,
        Algorithm::Auto,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::Hd => "hd",
            Algorithm::Ina => "ina",
            Algorithm::Direct => "direct",
            Algorithm::Dissemination => "dissemination",
            Algorithm::Dpu => "dpu",
            Algorithm::Nvls => "nvls",
            Algorithm::NvlsTree => "nvls-tree",
            Algorithm::Auto => "auto",
        }
    }

    pub fn parse(s: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// One collective on a kind of group.
#[derive(Clone, Debug, PartialEq)]
pub struct OpSpec {
    pub op: CollectiveOp,
    pub algorithm: Algorithm,
    pub size_bytes: u64,
    pub group: GroupSpec,
    pub dtype: Dtype,
    pub reduce_op: ReduceOp,
}

/// What a phase does on each of its hosts.
#[derive(Clone, Debug, PartialEq)]
pub enum PhaseKind {
    Collective(OpSpec),
    Compute {
        duration: SimTime,
        group: GroupSpec,
    },
    /// Every rank of pipeline stage `from` sends `size_bytes` to the rank of
    /// stage `to` with the same TP and DP coordinates (one `send` row each).
    Send {
        size_bytes: u64,
        from: u32,
        to: u32,
    },
}

/// One step of a workload program.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: String,
    pub kind: PhaseKind,
    /// Indices of earlier phases it waits for (at each host).
    pub after: Vec<usize>,
    /// Runs only on this pipeline stage's ranks; `None`: on every stage.
    pub stage: Option<u32>,
}

/// A workload: phases in dependency order, repeated `iterations` times.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Parallel layout over the hosts; `None`: everything data-parallel.
    pub parallelism: Option<Parallelism>,
    pub phases: Vec<Phase>,
    pub iterations: u32,
    pub channels: u32,
    /// Flows per step and channel; `None`: one for rings, pieces of at most
    /// [`TREE_CHUNK_BYTES`] for trees and chains.
    pub chunks: Option<u32>,
    /// Per-message host overhead before each flow starts.
    pub host_overhead: SimTime,
    /// SimAI 1.6's extra delay on the flows it marks `processed`
    /// ([`super::membus`]); zero: none.
    pub reduce_overhead: SimTime,
    pub profile: SwitchProfile,
    /// Host algorithm an all-reduce falls back to when it cannot be offloaded.
    pub fallback: Algorithm,
    /// Workers per DPU for algorithm `dpu` (0: the hosts have no DPUs).
    pub dpu_workers: u32,
    /// The DPUs' figures for algorithm `dpu` (per-operation costs, cores,
    /// staging fragment).
    pub dpu: crate::dpu::DpuParams,
    /// Data-parallel replicas each simulated replica stands for (1: every
    /// replica is simulated). See [`crate::workload::build`]'s folding.
    pub fold_dp: u32,
    /// At flow level, run a folded job's flows as classes with a
    /// multiplicity (the replicas left out counted on the links they
    /// share; [`crate::flow`]'s classes) instead of leaving them out.
    pub fold_classes: bool,
    /// NCCL's model of collectives (NVLS, PXN, protocols, its choice);
    /// `None`: the older model, unchanged.
    pub nccl: Option<super::nccl::Nccl>,
    /// A per-rank program replayed from a trace instead of `phases`.
    pub trace: Option<std::sync::Arc<super::trace::Trace>>,
    /// What the file's reader wants the user told once on stderr (each a
    /// line starting `note:`), e.g. where netsim runs what SimAI would not.
    pub notes: Vec<String>,
}

/// Pipelining granularity of trees and chains when `chunks` is not given
/// (NCCL's tree and ring protocols use chunks of this order).
pub const TREE_CHUNK_BYTES: u64 = 512 * 1024;

impl WorkloadSpec {
    /// One collective on `group`, once.
    pub fn single(op: OpSpec) -> WorkloadSpec {
        WorkloadSpec::with_phases(vec![Phase {
            name: op.op.name().into(),
            kind: PhaseKind::Collective(op),
            after: Vec::new(),
            stage: None,
        }])
    }

    /// `phases`, once, with every other setting at its default.
    pub fn with_phases(phases: Vec<Phase>) -> WorkloadSpec {
        WorkloadSpec {
            parallelism: None,
            phases,
            iterations: 1,
            channels: 1,
            chunks: None,
            host_overhead: SimTime::ZERO,
            reduce_overhead: SimTime::ZERO,
            profile: SwitchProfile::tofino(),
            fallback: Algorithm::Ring,
            dpu_workers: 0,
            dpu: crate::dpu::DpuParams::default(),
            fold_dp: 1,
            fold_classes: false,
            nccl: None,
            trace: None,
            notes: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("phase `{phase}`: {message}")]
    Phase { phase: String, message: String },
    #[error("{0}")]
    Invalid(String),
}
