//! [`build`] and [`build_jobs`]: workload specs, placed on hosts, into the
//! task DAG for a topology, with offload decisions taken as they are built.

mod job;
pub mod lazy;
pub(crate) mod shape;
mod trace;

use super::algorithms::{self as algo, HalvingDoubling, HostTasks, Pieces, Rooted};
use super::offload::{self, InaKind, InaOp, InaPattern, Resources};
use super::spec::{Algorithm, BuildError, CollectiveOp, OpSpec, WorkloadSpec, TREE_CHUNK_BYTES};
use super::{trees, Builder, Collective, Workload};
use crate::network::config::NetConfig;
use crate::traffic::FlowSpec;
use netsim_engine::SimTime;
use netsim_topo::{NodeIndex, Role, Topology};

/// One workload placed on some hosts of a shared fabric.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Reported in the `job` column; `None` for a lone unnamed workload.
    pub name: Option<String>,
    pub spec: WorkloadSpec,
    /// Rank `r` runs on host `hosts[r]`; at least as many as the layout's ranks.
    pub hosts: Vec<NodeIndex>,
    /// When its first tasks may start.
    pub start: SimTime,
}

/// The DAG of `spec` on `topo` (rank `r` on host `r`), with fallback
/// decisions taken for `config`.
pub fn build(
    spec: &WorkloadSpec,
    topo: &Topology,
    config: &NetConfig,
) -> Result<Workload, BuildError> {
    let job = Job {
        name: None,
        spec: spec.clone(),
        hosts: (0..topo.host_count()).collect(),
        start: SimTime::ZERO,
    };
    build_jobs(&[job], &[], topo, config)
}

/// The DAG of several jobs sharing `topo` (switch offload resources
/// included), plus `background` flows, each starting at its own time; the
/// per-message host overhead is the first job's.
pub fn build_jobs(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
) -> Result<Workload, BuildError> {
    build_jobs_within(
        jobs,
        background,
        topo,
        config,
        super::memory::build_budget_bytes(),
    )
}

/// [`build_jobs`], refusing a workload that needs more than `budget_bytes`
/// to be built and run ([`super::memory::needed_bytes`]).
pub fn build_jobs_within(
    jobs: &[Job],
    background: &[FlowSpec],
    topo: &Topology,
    config: &NetConfig,
    budget_bytes: u64,
) -> Result<Workload, BuildError> {
    // Background traffic alone needs no job's settings.
    let none = WorkloadSpec::with_phases(Vec::new());
    let mut cx = Cx::new(jobs, topo, config, &none, budget_bytes);
    build_into(&mut cx, jobs, background)?;
    Ok(cx.b.finish())
}

/// Adds `jobs` then `background` to `cx`'s builder.
fn build_into<'a>(
    cx: &mut Cx<'a>,
    jobs: &'a [Job],
    background: &[FlowSpec],
) -> Result<(), BuildError> {
    let hosts = cx.topo.host_count();
    for (index, job) in jobs.iter().enumerate() {
        if let Some(&h) = job.hosts.iter().find(|&&h| h >= hosts) {
            return Err(BuildError::Invalid(format!(
                "placement names host {h} but the topology has {hosts} hosts"
            )));
        }
        cx.spec = &job.spec;
        cx.job = match &job.name {
            Some(name) => cx.b.job(name.clone()),
            None => super::NONE,
        };
        if let Some(plans) = &mut cx.plans {
            plans.set_job(index);
        }
        job::build_job(cx, job)?;
    }
    for f in background {
        let deps = if f.start > SimTime::ZERO {
            vec![cx.b.compute(f.src, f.start, super::NONE, &[])]
        } else {
            Vec::new()
        };
        cx.b.flow(f.src, f.dst, f.size_bytes, super::NONE, &deps);
    }
    if cx.b.over() {
        return Err(BuildError::Invalid(too_large(cx)));
    }
    Ok(())
}

/// The error of a workload that does not fit, and what its parts cost
/// (or of plans past the entries they may list, which refuse the rest).
fn too_large(cx: &Cx<'_>) -> String {
    use super::memory::{EDGE_BYTES, FLOW_BYTES, TASK_BYTES};
    use netsim_process::human_bytes;
    if let Some(error) = cx.plans.as_ref().and_then(lazy::Plans::too_many_entries) {
        return error;
    }
    let b = &cx.b;
    format!(
        "the workload needs more than the {} it may take here (the memory left; tasks \
         {TASK_BYTES} B, flows {FLOW_BYTES} B, dependencies {EDGE_BYTES} B each): use fewer --iterations, \
         --channels or --chunks, smaller groups or larger messages, or simulate fewer \
         data-parallel replicas (--fold-dp)",
        human_bytes(b.budget_bytes())
    )
}

struct Cx<'a> {
    b: Builder,
    topo: &'a Topology,
    spec: &'a WorkloadSpec,
    config: &'a NetConfig,
    resources: Resources,
    nvswitch: bool,
    /// The job being built ([`super::NONE`]: none).
    job: u32,
    /// Each collective's plan, recorded as it is built when asked
    /// ([`lazy::plan_jobs`]).
    plans: Option<lazy::Plans>,
    /// Set while one planned collective is expanded again alone: the
    /// fallback decided when it was planned, in place of a new attempt.
    replay: Option<lazy::Replay>,
    /// Whether collectives are planned only, not kept ([`lazy::plan_only_jobs`]).
    plan_only: bool,
}

impl<'a> Cx<'a> {
    /// A context building `jobs` (`none`'s settings when there are none).
    fn new(
        jobs: &'a [Job],
        topo: &'a Topology,
        config: &'a NetConfig,
        none: &'a WorkloadSpec,
        budget_bytes: u64,
    ) -> Cx<'a> {
        let host_overhead = jobs.first().map_or(SimTime::ZERO, |j| j.spec.host_overhead);
        let mut b = Builder::within(host_overhead, budget_bytes);
        let reduce_overhead = jobs
            .first()
            .map_or(SimTime::ZERO, |j| j.spec.reduce_overhead);
        if reduce_overhead > SimTime::ZERO {
            b.track_channels(reduce_overhead);
        }
        Cx {
            b,
            topo,
            spec: jobs.first().map_or(none, |j| &j.spec),
            config,
            resources: Resources::new(topo.node_count()),
            nvswitch: (0..topo.node_count()).any(|n| topo.role(n) == Role::NvSwitch),
            job: super::NONE,
            plans: None,
            replay: None,
            plan_only: false,
        }
    }

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

    /// Why the simulated members `group` of a group of `logical` members
    /// cannot stand for it: only flat rings fold (their steps do not depend
    /// on which members are simulated), and a ring needs two members.
    fn check_folded(&self, op: &OpSpec, group: &[NodeIndex], logical: usize) -> Result<(), String> {
        let folds = op.algorithm == Algorithm::Ring
            && matches!(
                op.op,
                CollectiveOp::AllReduce | CollectiveOp::AllGather | CollectiveOp::ReduceScatter
            );
        if !folds {
            return Err(format!(
                "--fold-dp: a folded group runs ring all-reduce, all-gather or reduce-scatter only, not {} with {}",
                op.op.name(),
                op.algorithm.name()
            ));
        }
        if group.len() < 2 && logical > 1 {
            return Err(format!(
                "--fold-dp: a group of {logical} would keep {} of its members; use a smaller fold",
                group.len()
            ));
        }
        // Over whole servers, an all-reduce reduces over NVSwitch and an
        // all-gather or reduce-scatter runs NCCL's rail rings: neither is a
        // flat ring, so neither folds.
        let rails = op.op != CollectiveOp::AllReduce;
        if (self.nvswitch || rails) && servers(self.topo, group).is_some() {
            return Err(
                "--fold-dp: a group with several GPUs per server reduces over NVSwitch or runs NCCL's rail rings, which do not fold"
                    .into(),
            );
        }
        Ok(())
    }

    /// Adds one collective on `group` (the simulated members of a group of
    /// `logical` members) and returns each member's exit; records its plan
    /// when plans are asked for.
    fn collective(
        &mut self,
        name: &std::sync::Arc<str>,
        op: &OpSpec,
        group: &[NodeIndex],
        logical: usize,
        entry: &HostTasks,
    ) -> HostTasks {
        if self.plan_only {
            return lazy::plan_alone(self, name, op, group, logical, entry);
        }
        let base = self.b.next_ids();
        let exits = self.collective_alone(name, op, group, logical, entry);
        let next = self.b.next_ids();
        if let Some(plans) = &mut self.plans {
            plans.record(base, next, name, op, group, logical, entry);
            if plans.over() {
                self.b.refuse();
            }
        }
        exits
    }

    /// [`Cx::collective`]'s tasks, flows and exits.
    fn collective_alone(
        &mut self,
        name: &std::sync::Arc<str>,
        op: &OpSpec,
        group: &[NodeIndex],
        logical: usize,
        entry: &HostTasks,
    ) -> HostTasks {
        let coll = self.b.collective(Collective {
            name: name.clone(),
            op: op.op,
            algorithm: op.algorithm.name(),
            group_size: logical as u32,
            size_bytes: op.size_bytes,
            offloaded: false,
            fallback_reason: None,
            tasks: 0,
            job: self.job,
        });
        let first = self.b.task_count();
        let Some(mut algorithm) = self.nccl_collective(coll, op, group, logical, entry) else {
            return algo::exits(&mut self.b, coll, first, group);
        };
        if algorithm == Algorithm::Ina {
            let attempt = match &self.replay {
                // The decision taken when it was planned (a collective
                // that was offloaded is not expanded alone).
                Some(replay) => Err(replay.fallback_reason.clone().unwrap_or_default()),
                None => self.offload(coll, op, group, entry),
            };
            match attempt {
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
                    self.b.collective_mut(coll).fallback_reason = Some(reason);
                }
            }
        }
        self.b.collective_mut(coll).algorithm = algorithm.name(); // what runs, not what was asked
        if !self.host_collective(coll, op, algorithm, group, logical, entry) {
            return HostTasks::new();
        }
        algo::exits(&mut self.b, coll, first, group)
    }

    /// Adds collective `coll` (`op` on `group`, of `logical` members) as
    /// host `algorithm`'s flows after `entry`; false, with the builder
    /// refusing, when its pieces would visit more members than tasks may be.
    fn host_collective(
        &mut self,
        coll: u32,
        op: &OpSpec,
        algorithm: Algorithm,
        group: &[NodeIndex],
        logical: usize,
        entry: &HostTasks,
    ) -> bool {
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
            return false;
        }
        let (topo, nvswitch, chunks) = (self.topo, self.nvswitch, self.spec.chunks);
        let b = &mut self.b;
        match (op.op, algorithm) {
            (CollectiveOp::AllReduce, Algorithm::Ring) => {
                let pieces = flat;
                match servers(topo, group).filter(|_| nvswitch) {
                    Some(servers) => {
                        b.collective_mut(coll).algorithm = "ring+nvswitch";
                        nvswitch_all_reduce(b, coll, &servers, size, pieces, entry);
                    }
                    None => {
                        let steps = 2 * (logical as u32 - 1);
                        algo::folded_ring(b, coll, group, logical, size, steps, pieces, entry);
                    }
                }
            }
            (CollectiveOp::AllGather | CollectiveOp::ReduceScatter, Algorithm::Ring) => {
                let steps = logical as u32 - 1;
                match servers(topo, group).filter(|_| logical == group.len()) {
                    Some(servers) => {
                        if !rail_rings(b, coll, &servers, size, steps, flat, entry) {
                            return false;
                        }
                    }
                    None => algo::folded_ring(b, coll, group, logical, size, steps, flat, entry),
                }
            }
            (CollectiveOp::AllReduce, Algorithm::Tree) => {
                let (channels, chunks) = (tree_halves.channels, chunks);
                let built = match trees::chain_servers(topo, group) {
                    Some(servers) => trees::server_double_binary_tree(
                        b, coll, &servers, size, channels, chunks, entry,
                    ),
                    None => {
                        trees::double_binary_tree(b, coll, group, size, channels, chunks, entry)
                    }
                };
                if !built {
                    return false;
                }
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
            (op, Algorithm::Dpu) => {
                let workers = self.spec.dpu_workers;
                let params = &self.spec.dpu;
                super::dpu::staged(b, topo, coll, op, group, size, workers, params, entry);
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
            (CollectiveOp::Send, _) => {
                let deps = entry.get(&group[0]).map_or(&[][..], Vec::as_slice);
                b.flow(group[0], group[1], size, coll, deps);
            }
            (op, algorithm) => {
                unreachable!("{} with {} passed validation", op.name(), algorithm.name())
            }
        }
        true
    }

    /// `op` as NCCL runs it ([`super::nccl`]) when the spec asks for
    /// NCCL's model or an algorithm only it has; `None` once built, or the
    /// host algorithm to build instead.
    fn nccl_collective(
        &mut self,
        coll: u32,
        op: &OpSpec,
        group: &[NodeIndex],
        logical: usize,
        entry: &HostTasks,
    ) -> Option<Algorithm> {
        use super::nccl::run::{self, Outcome};
        let only_nccl = matches!(
            op.algorithm,
            Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::Auto
        );
        if self.spec.nccl.is_none() && !only_nccl {
            return Some(op.algorithm);
        }
        if logical != group.len() {
            // A folded group runs the flat ring (all it can fold).
            return Some(match op.algorithm {
                Algorithm::Auto => op.op.default_algorithm(),
                Algorithm::Nvls | Algorithm::NvlsTree => Algorithm::Ring,
                other => other,
            });
        }
        let cx = run::Ctx {
            topo: self.topo,
            nccl: self.spec.nccl.unwrap_or_default(),
            channels: self.spec.channels,
            tree_pieces: self.pieces(op.size_bytes / 2, true),
            chunks: self.spec.chunks,
            mtu_bytes: self.config.mtu_bytes,
            pfc: self.config.pfc,
        };
        match run::collective(&mut self.b, &cx, coll, op, group, entry) {
            Outcome::Built => None,
            Outcome::Host(a) => Some(a),
        }
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
            engine_bps: None,
            release_chunks: 1,
            pattern: InaPattern::AllReduce,
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
    trees::chain_servers(topo, group).filter(|servers| servers.len() > 1)
}

/// NCCL's rings over whole servers (`servers`, as [`servers`] gives
/// them): one per local rank, each leaving a server on its own rail
/// ([`algo::rail_rings`]); `pieces.channels` above that count runs each
/// of them as often, rounded up to a whole number of rounds so that every
/// rail carries the same share. False, with the builder refusing, when
/// the rings would take more flows than tasks may be.
fn rail_rings(
    b: &mut Builder,
    coll: u32,
    servers: &[Vec<NodeIndex>],
    size_bytes: u64,
    steps: u32,
    pieces: Pieces,
    entry: &HostTasks,
) -> bool {
    let rails = algo::rail_rings(servers);
    let rounds = (pieces.channels as usize).div_ceil(rails.len());
    let channels = rounds * rails.len();
    let members = servers.iter().map(Vec::len).sum::<usize>() as u64;
    // Refused before the rings size their buffers for that many flows.
    if (channels as u64 * u64::from(pieces.chunks)).saturating_mul(members) > b.max_tasks() {
        b.refuse();
        return false;
    }
    let rings: Vec<Vec<NodeIndex>> = rails.iter().cycle().take(channels).cloned().collect();
    b.collective_mut(coll).algorithm = "ring+rails";
    let ranks = rings[0].len();
    algo::channel_rings(
        b,
        coll,
        &rings,
        ranks,
        size_bytes,
        steps,
        pieces.chunks,
        entry,
    );
    true
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
