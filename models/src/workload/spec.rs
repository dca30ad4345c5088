//! What a user asks for (a collective on groups, or a program of phases),
//! and [`build`], which turns it into the task DAG for a topology.

use super::algorithms::{self as algo, HalvingDoubling, HostTasks, Pieces, Rooted};
use super::groups::{GroupSpec, Parallelism};
use super::offload::{self, Dtype, InaKind, InaOp, ReduceOp, Resources, SwitchProfile};
use super::{Builder, Collective, Workload};
use crate::network::config::NetConfig;
use netsim_engine::SimTime;
use netsim_topo::{NodeIndex, Role, Topology};

/// A collective operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveOp {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    Barrier,
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
        }
    }

    pub fn parse(s: &str) -> Option<CollectiveOp> {
        CollectiveOp::ALL.into_iter().find(|o| o.name() == s)
    }

    /// The algorithm used when none is asked for.
    pub fn default_algorithm(self) -> Algorithm {
        match self {
            CollectiveOp::AllToAll => Algorithm::Direct,
            CollectiveOp::Barrier => Algorithm::Dissemination,
            _ => Algorithm::Ring,
        }
    }

    /// Algorithms that implement this operation.
    pub fn algorithms(self) -> &'static [Algorithm] {
        use Algorithm::*;
        match self {
            CollectiveOp::AllReduce => &[Ring, Tree, Hd, Ina],
            CollectiveOp::AllGather | CollectiveOp::ReduceScatter => &[Ring, Hd],
            CollectiveOp::AllToAll => &[Direct],
            CollectiveOp::Broadcast | CollectiveOp::Reduce => &[Ring, Tree],
            CollectiveOp::Barrier => &[Dissemination, Ina],
        }
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
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Ring,
        Algorithm::Tree,
        Algorithm::Hd,
        Algorithm::Ina,
        Algorithm::Direct,
        Algorithm::Dissemination,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::Hd => "hd",
            Algorithm::Ina => "ina",
            Algorithm::Direct => "direct",
            Algorithm::Dissemination => "dissemination",
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
    Compute { duration: SimTime, group: GroupSpec },
}

/// One step of a workload program.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: String,
    pub kind: PhaseKind,
    /// Indices of earlier phases it waits for (at each host).
    pub after: Vec<usize>,
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
    pub profile: SwitchProfile,
    /// Host algorithm an all-reduce falls back to when it cannot be offloaded.
    pub fallback: Algorithm,
}

/// Pipelining granularity of trees and chains when `chunks` is not given
/// (NCCL's tree and ring protocols use chunks of this order).
pub const TREE_CHUNK_BYTES: u64 = 512 * 1024;

impl WorkloadSpec {
    /// One collective on `group`, once.
    pub fn single(op: OpSpec) -> WorkloadSpec {
        WorkloadSpec {
            parallelism: None,
            phases: vec![Phase {
                name: op.op.name().into(),
                kind: PhaseKind::Collective(op),
                after: Vec::new(),
            }],
            iterations: 1,
            channels: 1,
            chunks: None,
            host_overhead: SimTime::ZERO,
            profile: SwitchProfile::tofino(),
            fallback: Algorithm::Ring,
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

/// The DAG of `spec` on `topo`, with fallback decisions taken for `config`.
pub fn build(
    spec: &WorkloadSpec,
    topo: &Topology,
    config: &NetConfig,
) -> Result<Workload, BuildError> {
    let hosts = topo.host_count();
    let parallelism = match spec.parallelism {
        Some(p) => p,
        None => Parallelism::data_parallel(hosts),
    };
    if parallelism.ranks() > hosts {
        return Err(BuildError::Invalid(format!(
            "the parallel layout needs {} ranks (tp {} x dp {} x pp {}) but the topology has {hosts} hosts",
            parallelism.ranks(),
            parallelism.tp,
            parallelism.dp,
            parallelism.pp
        )));
    }
    if spec.channels == 0 || spec.chunks == Some(0) || spec.iterations == 0 {
        return Err(BuildError::Invalid(
            "channels, chunks and iterations must be positive".into(),
        ));
    }
    let mut cx = Cx {
        b: Builder::new(spec.host_overhead),
        topo,
        spec,
        config,
        resources: Resources::new(topo.node_count()),
        nvswitch: (0..topo.node_count()).any(|n| topo.role(n) == Role::NvSwitch),
    };
    let mut previous_iteration: HostTasks = HostTasks::new();
    for iteration in 0..spec.iterations {
        let mut exits: Vec<HostTasks> = Vec::with_capacity(spec.phases.len());
        for phase in &spec.phases {
            let err = |message: String| BuildError::Phase {
                phase: phase.name.clone(),
                message,
            };
            // Entry at each host: the phases it waits for, or the whole
            // previous iteration for a phase that waits for none.
            let mut entry = HostTasks::new();
            let sources: Vec<&HostTasks> = if phase.after.is_empty() {
                vec![&previous_iteration]
            } else {
                phase.after.iter().map(|&i| &exits[i]).collect()
            };
            for s in sources {
                for (&h, tasks) in s {
                    entry.entry(h).or_default().extend_from_slice(tasks);
                }
            }
            let name = if spec.iterations > 1 {
                format!("{}#{iteration}", phase.name)
            } else {
                phase.name.clone()
            };
            let mut exit = HostTasks::new();
            match &phase.kind {
                PhaseKind::Compute { duration, group } => {
                    for g in parallelism.groups(group) {
                        check_group(&g, hosts).map_err(err)?;
                        for h in g {
                            let deps = entry.get(&h).map_or(&[][..], Vec::as_slice);
                            let t = cx.b.compute(h, *duration, super::NONE, deps);
                            exit.insert(h, vec![t]);
                        }
                    }
                }
                PhaseKind::Collective(op) => {
                    if op.size_bytes == 0 && op.op != CollectiveOp::Barrier {
                        return Err(err("size must be positive".into()));
                    }
                    for g in parallelism.groups(&op.group) {
                        check_group(&g, hosts).map_err(err)?;
                        if g.len() < 2 {
                            // A group of one has nothing to communicate.
                            continue;
                        }
                        exit.extend(cx.collective(&name, op, &g, &entry));
                        if cx.b.over() {
                            return Err(err(too_large(&cx.b)));
                        }
                    }
                }
            }
            if cx.b.over() {
                return Err(err(too_large(&cx.b)));
            }
            exits.push(exit);
        }
        // The next iteration starts at each host when all of this one is done there.
        let mut all = HostTasks::new();
        for e in &exits {
            for (&h, tasks) in e {
                all.entry(h).or_default().extend_from_slice(tasks);
            }
        }
        previous_iteration = all
            .into_iter()
            .map(|(h, deps)| (h, vec![cx.b.join(h, super::NONE, &deps)]))
            .collect();
        // Every iteration adds as many tasks as the first.
        let needed = u64::from(cx.b.task_count()).saturating_mul(u64::from(spec.iterations));
        if iteration == 0 && (needed > cx.b.max_tasks() || cx.b.over()) {
            return Err(BuildError::Invalid(format!(
                "{} iterations of {} tasks each: {}",
                spec.iterations,
                cx.b.task_count(),
                too_large(&cx.b)
            )));
        }
        if cx.b.task_count() == 0 {
            // Nothing to repeat (every group has one member).
            break;
        }
    }
    Ok(cx.b.finish())
}

/// The error of a workload with more tasks than fit, and what they would cost.
fn too_large(b: &Builder) -> String {
    use netsim_engine::process::{human_bytes, memory_limit_bytes};
    format!(
        "the workload needs more than {} tasks (~{} at {} B each; this process may use {}): \
         use fewer --iterations, --channels or --chunks, smaller groups or larger messages",
        b.max_tasks(),
        human_bytes(b.max_tasks().saturating_mul(super::BYTES_PER_TASK)),
        super::BYTES_PER_TASK,
        human_bytes(memory_limit_bytes())
    )
}

fn check_group(g: &[NodeIndex], hosts: u32) -> Result<(), String> {
    match g.iter().find(|&&h| h >= hosts) {
        Some(h) => Err(format!(
            "group names host {h} but the topology has {hosts} hosts (0..{})",
            hosts - 1
        )),
        None => Ok(()),
    }
}

struct Cx<'a> {
    b: Builder,
    topo: &'a Topology,
    spec: &'a WorkloadSpec,
    config: &'a NetConfig,
    resources: Resources,
    nvswitch: bool,
}

impl Cx<'_> {
    fn pieces(&self, size_bytes: u64, tree: bool) -> Pieces {
        let chunks = self.spec.chunks.unwrap_or_else(|| {
            if tree {
                size_bytes.div_ceil(TREE_CHUNK_BYTES).clamp(1, 64) as u32
            } else {
                1
            }
        });
        Pieces {
            channels: self.spec.channels,
            chunks,
        }
    }

    /// Adds one collective on `group` and returns each member's exit.
    fn collective(
        &mut self,
        name: &str,
        op: &OpSpec,
        group: &[NodeIndex],
        entry: &HostTasks,
    ) -> HostTasks {
        let coll = self.b.collective(Collective {
            name: name.into(),
            op: op.op,
            algorithm: op.algorithm.name().into(),
            group_size: group.len() as u32,
            size_bytes: op.size_bytes,
            offloaded: false,
            fallback_reason: None,
            tasks: 0,
        });
        let first = self.b.task_count();
        let mut algorithm = op.algorithm;
        if algorithm == Algorithm::Ina {
            match self.offload(coll, op, group, entry) {
                Ok(()) => {
                    self.b.collective_mut(coll).offloaded = true;
                    return algo::exits(&mut self.b, coll, first, group);
                }
                Err(reason) => {
                    algorithm = if op.op == CollectiveOp::Barrier {
                        Algorithm::Dissemination
                    } else {
                        self.spec.fallback
                    };
                    let c = self.b.collective_mut(coll);
                    c.algorithm = algorithm.name().into();
                    c.fallback_reason = Some(reason);
                }
            }
        }
        let size = op.size_bytes;
        let (flat, tree_halves, tree_whole) = (
            self.pieces(size, false),
            self.pieces(size / 2, true),
            self.pieces(size, true),
        );
        // Every piece visits every member at least once: refuse before the
        // algorithms size their buffers for that many flows.
        let pieces_max = [flat, tree_halves, tree_whole]
            .iter()
            .map(|p| u64::from(p.channels) * u64::from(p.chunks))
            .max()
            .unwrap_or(1);
        if pieces_max.saturating_mul(group.len() as u64) > self.b.max_tasks() {
            self.b.refuse();
            return HostTasks::new();
        }
        let (topo, nvswitch) = (self.topo, self.nvswitch);
        let b = &mut self.b;
        match (op.op, algorithm) {
            (CollectiveOp::AllReduce, Algorithm::Ring) => {
                let pieces = flat;
                match servers(topo, group).filter(|_| nvswitch) {
                    Some(servers) => {
                        b.collective_mut(coll).algorithm = "ring+nvswitch".into();
                        nvswitch_all_reduce(b, coll, &servers, size, pieces, entry);
                    }
                    None => {
                        let steps = 2 * (group.len() as u32 - 1);
                        algo::ring(b, coll, group, size, steps, pieces, entry);
                    }
                }
            }
            (CollectiveOp::AllGather | CollectiveOp::ReduceScatter, Algorithm::Ring) => {
                algo::ring(b, coll, group, size, group.len() as u32 - 1, flat, entry);
            }
            (CollectiveOp::AllReduce, Algorithm::Tree) => {
                algo::double_binary_tree(b, coll, group, size, tree_halves, entry);
            }
            (CollectiveOp::AllReduce, Algorithm::Hd) => {
                algo::halving_doubling(b, coll, group, size, HalvingDoubling::AllReduce, entry)
            }
            (CollectiveOp::ReduceScatter, Algorithm::Hd) => {
                algo::halving_doubling(b, coll, group, size, HalvingDoubling::ReduceScatter, entry)
            }
            (CollectiveOp::AllGather, Algorithm::Hd) => {
                algo::halving_doubling(b, coll, group, size, HalvingDoubling::AllGather, entry)
            }
            (CollectiveOp::AllToAll, _) => {
                algo::all_to_all(b, coll, group, size, flat, entry);
            }
            (CollectiveOp::Broadcast | CollectiveOp::Reduce, algorithm) => {
                let shape = Rooted {
                    reduce: op.op == CollectiveOp::Reduce,
                    tree: algorithm == Algorithm::Tree,
                };
                algo::rooted(b, coll, group, size, shape, tree_whole, entry);
            }
            (CollectiveOp::Barrier, _) => algo::dissemination_barrier(b, coll, group, entry),
            (op, algorithm) => {
                unreachable!("{} with {} passed validation", op.name(), algorithm.name())
            }
        }
        algo::exits(&mut self.b, coll, first, group)
    }

    /// Sets up the aggregation tree of an offloaded all-reduce or barrier,
    /// or says why it cannot be.
    fn offload(
        &mut self,
        coll: u32,
        op: &OpSpec,
        group: &[NodeIndex],
        entry: &HostTasks,
    ) -> Result<(), String> {
        let kind = if op.op == CollectiveOp::Barrier {
            InaKind::Barrier
        } else {
            InaKind::Reduce
        };
        let Some((tree, members)) = offload::aggregation_tree(self.topo, group) else {
            return Err("a member has no network switch".into());
        };
        let blame = |b: &mut Builder, nodes: &[NodeIndex]| {
            for &n in nodes {
                b.count_fallback(n, kind);
            }
        };
        if kind == InaKind::Reduce && !self.config.pfc {
            blame(
                &mut self.b,
                &tree.iter().map(|t| t.node).collect::<Vec<_>>(),
            );
            return Err("in-network aggregation needs a lossless fabric (--pfc on)".into());
        }
        let slots = match offload::admit(
            &self.spec.profile,
            kind,
            op.dtype,
            op.reduce_op,
            &tree,
            &mut self.resources,
        ) {
            Ok(slots) => slots,
            Err((reason, nodes)) => {
                blame(&mut self.b, &nodes);
                return Err(reason);
            }
        };
        let (chunk_bytes, chunks, size) = match kind {
            InaKind::Barrier => {
                let b = algo::BARRIER_MESSAGE_BYTES;
                (b as u32, 1, b)
            }
            InaKind::Reduce => {
                let mtu = u64::from(self.config.mtu_bytes);
                let chunks = op.size_bytes.div_ceil(mtu);
                if chunks > u64::from(u32::MAX) {
                    return Err("too many chunks".into());
                }
                (self.config.mtu_bytes, chunks as u32, op.size_bytes)
            }
        };
        let op_id = self.b.ina_op(InaOp {
            collective: coll,
            kind,
            tree,
            size_bytes: size,
            chunk_bytes,
            chunks,
            slots,
            processing: self.spec.profile.processing,
            members: members.clone(),
        });
        for (host, port) in members {
            let leaf = self.topo.port(host, port).peer;
            let deps = entry.get(&host).map_or(&[][..], Vec::as_slice);
            self.b.flow_into(host, leaf, size, coll, op_id, deps);
        }
        Ok(())
    }
}

/// The group's GPUs by server, when the group spans several servers with
/// the same number (more than one) of its GPUs in each: then an all-reduce
/// can reduce inside servers over NVSwitch and across them per rail.
fn servers(topo: &Topology, group: &[NodeIndex]) -> Option<Vec<Vec<NodeIndex>>> {
    let mut by_server: std::collections::BTreeMap<u32, Vec<NodeIndex>> = Default::default();
    for &h in group {
        by_server
            .entry(topo.node(h).coords.server?)
            .or_default()
            .push(h);
    }
    let servers: Vec<Vec<NodeIndex>> = by_server.into_values().collect();
    let local = servers[0].len();
    (servers.len() > 1 && local > 1 && servers.iter().all(|s| s.len() == local)).then_some(servers)
}

/// Hierarchical all-reduce: reduce-scatter inside each server (ring over
/// NVSwitch), all-reduce of each `1/L` shard across servers among the GPUs
/// of the same local rank (ring over the rails), all-gather inside servers.
fn nvswitch_all_reduce(
    b: &mut Builder,
    coll: u32,
    servers: &[Vec<NodeIndex>],
    size_bytes: u64,
    pieces: Pieces,
    entry: &HostTasks,
) {
    let local = servers[0].len();
    let stage = |b: &mut Builder,
                 groups: &[Vec<NodeIndex>],
                 size: u64,
                 steps_of: &dyn Fn(usize) -> u32,
                 entry: &HostTasks| {
        let mut next = HostTasks::new();
        for g in groups {
            let first = b.task_count();
            algo::ring(b, coll, g, size, steps_of(g.len()), pieces, entry);
            next.extend(algo::exits(b, coll, first, g));
        }
        next
    };
    let rails: Vec<Vec<NodeIndex>> = (0..local)
        .map(|r| servers.iter().map(|s| s[r]).collect())
        .collect();
    let after_rs = stage(b, servers, size_bytes, &|n| n as u32 - 1, entry);
    let shard = size_bytes.div_ceil(local as u64);
    let after_ar = stage(b, &rails, shard, &|n| 2 * (n as u32 - 1), &after_rs);
    stage(b, servers, size_bytes, &|n| n as u32 - 1, &after_ar);
}
