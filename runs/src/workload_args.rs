//! Flags of a collective workload and their translation into the task DAG.

use crate::traffic_args::TrafficArgs;
use anyhow::{bail, Context as _};
use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::traffic::FlowSpec;
use netsim_models::workload::file::{self, parse_size};
use netsim_models::workload::groups::{GroupSpec, Parallelism};
use netsim_models::workload::nccl::{Nccl, Protocol};
use netsim_models::workload::trace::{OpKind, Trace};
use netsim_models::workload::{
    self, simai, Algorithm, CollectiveOp, Dtype, Job, OpSpec, ReduceOp, SwitchProfile, Workload,
    WorkloadSpec,
};
use netsim_topo::Topology;
use std::path::Path;

/// Collective workload flags. Without `--workload`, a run simulates `--traffic`.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Workload")]
pub struct WorkloadArgs {
    /// A collective (allreduce, allgather, reducescatter, alltoall,
    /// broadcast, reduce, barrier), a workload file (.toml), a SimAI/AICB
    /// workload text file, a GOAL trace (.goal, by its content), or Chakra
    /// execution traces (a directory or the PREFIX of PREFIX.RANK.et);
    /// replaces --traffic.
    #[arg(long)]
    pub workload: Option<String>,
    /// Collective size: bytes, or with a unit (64KiB, 16MiB, 1GB).
    #[arg(long, default_value = "1MiB")]
    pub size: String,
    /// Algorithm: ring, tree, hd, ina (in-network), direct (alltoall), dissemination (barrier),
    /// nvls, nvls-tree (NVLink SHARP), auto (NCCL's choice).
    #[arg(long)]
    pub algo: Option<String>,
    /// Group: all, tp, dp, pp, ep, dp_ep (every group of that kind at once), or ranks "0-7,12".
    #[arg(long, default_value = "all")]
    pub group: String,
    /// Tensor-parallel size (TP groups are consecutive ranks, inside a server first).
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    /// Pipeline-parallel size.
    #[arg(long, default_value_t = 1)]
    pub pp: u32,
    /// Expert-parallel size (divides the data-parallel size).
    #[arg(long, default_value_t = 1)]
    pub ep: u32,
    /// Parallel rings/trees, each with its own queue pairs. An all-gather or
    /// reduce-scatter over whole servers runs NCCL's rail rings: one per GPU
    /// of a server, repeated in whole rounds to reach this count.
    #[arg(long, default_value_t = 1)]
    pub channels: u32,
    /// Flows per step (pipelining); default: 1 for rings, NCCL's tree chunks for tree all-reduce, 512 KiB pieces for other trees.
    #[arg(long)]
    pub chunks: Option<u32>,
    /// Element type of reductions: int32, int64, float16, bfloat16, float32, float64.
    #[arg(long, default_value = "float32")]
    pub dtype: String,
    /// Reduction operator: sum, min, max.
    #[arg(long, default_value = "sum")]
    pub reduce_op: String,
    /// Switch profile for in-network operations: tofino or sharp.
    #[arg(long, default_value = "tofino")]
    pub switch_profile: String,
    /// Override the profile's per-switch processing latency, ns.
    #[arg(long)]
    pub ina_latency_ns: Option<u64>,
    /// Override the profile's aggregation slots per group (chunks in flight).
    #[arg(long)]
    pub ina_slots: Option<u32>,
    /// Switch-offloaded barriers: on or off (off: dissemination on the hosts).
    #[arg(long, default_value = "on")]
    pub switch_barriers: String,
    /// Host algorithm an in-network all-reduce falls back to: ring, tree or hd.
    #[arg(long, default_value = "ring")]
    pub fallback_algo: String,
    /// NCCL's NVLink SHARP: on lets `--algo auto` choose NVLS / NVLS-Tree
    /// (H100-class GPUs only; SimAI's AS_NVLS_ENABLE). Giving --nvls, --pxn
    /// or --protocol runs collectives with NCCL's model (docs/models/collectives.md).
    #[arg(long, value_name = "on|off")]
    pub nvls: Option<String>,
    /// NCCL's PXN: inter-server ring hops relayed over NVLink to the GPU on
    /// the destination's rail (SimAI's AS_PXN_ENABLE).
    #[arg(long, value_name = "on|off")]
    pub pxn: Option<String>,
    /// NCCL protocol: ll, ll128, simple (flag bytes and latency per
    /// NCCL's tuning tables) or auto (NCCL's choice).
    #[arg(long)]
    pub protocol: Option<String>,
    /// NCCL's tuning latency before each collective's first send: on (NCCL)
    /// or off (as SimAI 1.6, which adds none; for comparing with it).
    #[arg(long, value_name = "on|off")]
    pub nccl_latency: Option<String>,
    /// What --algo auto follows: nccl (NCCL's tuning model, by size) or
    /// simai (SimAI 1.6's MockNccl: NVLS for a TP all-reduce of 8+ H100
    /// ranks with --nvls on, otherwise the ring, protocol Simple).
    #[arg(long, value_parser = ["nccl", "simai"])]
    pub nccl_tuning: Option<String>,
    /// NVLS all-reduce in one server: nccl (NCCL's bytes, S(n+1)/n a GPU
    /// each way, through the NVSwitch's engine) or mocknccl (SimAI 1.6's:
    /// S each way in 4 chunks, each chunk sent down once every GPU's copy
    /// of it is in, no engine; for comparing with SimAI).
    #[arg(long, value_parser = ["nccl", "mocknccl"])]
    pub nvls_flows: Option<String>,
    /// Per-message host overhead before each flow starts, ns.
    #[arg(long, default_value_t = 0)]
    pub host_overhead_ns: u64,
    /// Add to each flow's host overhead a delay uniform in [0, J] ns, drawn
    /// from the run seed and the flow id (0: none). Ranks do not post their
    /// sends in lockstep; SimAI 1.6's per-flow delays differ (10 or 40 ns).
    #[arg(long, value_name = "J", default_value_t = 0)]
    pub host_overhead_jitter_ns: u64,
    /// SimAI 1.6's extra delay, ns, on the flows it marks `processed` (its
    /// mem_write + 2 mem_read: 30): per rank and collective, each channel's
    /// sends in rounds of the group's size, all but a round's first on
    /// reduce-scatter, and on all-reduce while a per-rank toggle, flipped as
    /// any channel starts a round, is set (0: none).
    #[arg(long, value_name = "NS", default_value_t = 0)]
    pub reduce_overhead_ns: u64,
    /// Give every host's NIC a DPU (BlueField-2 defaults, the --dpu-* flags)
    /// with N worker cores for algorithm `dpu`; ranks run on the host
    /// memories only.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub dpu_workers: Option<u32>,
    #[command(flatten)]
    pub dpu: crate::dpu_args::DpuArgs,
    /// Multiply a trace's compute times (Chakra, GOAL) by this factor: a
    /// faster or slower GPU than the one traced.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub compute_scale: f64,
    /// Repetitions of the workload (each waits for the previous at every host).
    #[arg(long, default_value_t = 1)]
    pub iterations: u32,
    /// Simulate one data-parallel replica in N, each standing for N: expert
    /// and TP groups stay whole, DP rings keep their full step count and
    /// size. The other replicas' traffic is left out, unless --fold-classes
    /// counts it at flow level (docs/guide/flow-level.md).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub fold_dp: u32,
    /// With --fold-dp at flow level: run each simulated flow as a class of N
    /// members, the left-out replicas' load counted on the links they share
    /// (slower: classes couple across the spine; docs/guide/flow-level.md).
    #[arg(long)]
    pub fold_classes: bool,
    /// A job sharing the fabric, as a TOML inline table (repeatable):
    /// `{name = "train", workload = "w.txt", hosts = "consecutive", ranks = 32, start_us = 10}`.
    #[arg(long, value_name = "TABLE")]
    pub job: Vec<String>,
    /// Expand each collective into its tasks and flows when it becomes
    /// ready and free it after, so that memory follows what is in flight
    /// (packet level, RoCE; same tables as off: docs/design/lazy-expansion.md).
    #[arg(long, value_parser = ["on", "off"], default_value = "off")]
    pub lazy_expansion: String,
}

impl WorkloadArgs {
    /// The run's workload: `--workload` on the first hosts, or the `--job`s,
    /// with `background` flows on top; `None` when neither is given.
    pub fn workload(
        &self,
        topo: &Topology,
        config: &NetConfig,
        background: Vec<FlowSpec>,
    ) -> anyhow::Result<Option<(Workload, Option<String>)>> {
        let mut note = None;
        let jobs = if !self.job.is_empty() {
            if self.workload.is_some() {
                bail!("--workload: give either --workload or --job, not both");
            }
            crate::jobs::place(self, topo)?
        } else if let Some(name) = &self.workload {
            let hosts = netsim_models::dpu::compute_hosts(topo);
            let spec = self.spec(name, hosts)?;
            let ranks = spec.parallelism.map_or(hosts, |p| p.ranks());
            if ranks < hosts {
                // Said by the caller once the whole run is planned, so that
                // an error stays one line.
                note = Some(format!(
                    "note: the workload has {ranks} ranks; it runs on hosts 0-{} of {hosts}",
                    ranks - 1
                ));
            }
            if self.fold_dp > 1 {
                let dp = spec.parallelism.map_or(ranks, |p| p.dp);
                let folded = format!(
                    "note: --fold-dp {}: {} of {dp} data-parallel replicas are simulated, each \
                     standing for {}; {}",
                    self.fold_dp,
                    dp / self.fold_dp,
                    self.fold_dp,
                    if self.fold_classes {
                        format!(
                            "each of their flows runs as a class of {} (the others' load counted)",
                            self.fold_dp
                        )
                    } else {
                        "the others' traffic is left out".to_string()
                    }
                );
                note = Some(match note {
                    Some(n) => format!("{n}\n{folded}"),
                    None => folded,
                });
            }
            // What the file's reader noted (e.g. collectives SimAI ignores).
            for said in &spec.notes {
                note = Some(match note {
                    Some(n) => format!("{n}\n{said}"),
                    None => said.clone(),
                });
            }
            vec![Job {
                name: Some(job_name(name)),
                spec,
                hosts: (0..ranks).collect(),
                start: SimTime::ZERO,
            }]
        } else {
            return Ok(None);
        };
        let what = if self.job.is_empty() {
            "--workload"
        } else {
            "--job"
        };
        if self.lazy_expansion == "on" && self.reduce_overhead_ns > 0 {
            bail!("--reduce-overhead-ns: counts every flow of a collective as built, not with --lazy-expansion on");
        }
        let built = if self.lazy_expansion == "on" {
            workload::build::lazy::lazy_jobs(&jobs, &background, topo, config)
        } else {
            workload::build_jobs(&jobs, &background, topo, config)
        };
        let built = built.context(what)?;
        Ok(Some((built, note)))
    }

    /// What a run executes: the traffic alone, or the workload (or jobs)
    /// with the traffic as background flows when `--traffic` is given too;
    /// and a note for the user (a workload on fewer hosts than the fabric).
    pub fn with_traffic(
        &self,
        traffic: &TrafficArgs,
        topo: &Topology,
        config: &NetConfig,
        seed: u64,
    ) -> anyhow::Result<(Workload, Option<String>)> {
        let jobs = self.workload.is_some() || !self.job.is_empty();
        let flows = if jobs && traffic.traffic.is_none() {
            Vec::new()
        } else {
            traffic.flows(topo.host_count(), seed)?
        };
        if !jobs {
            // Traffic flows start at their own times: a per-message overhead
            // belongs to a workload's ranks, so the flags would do nothing.
            for (flag, ns) in [
                ("--host-overhead-ns", self.host_overhead_ns),
                ("--host-overhead-jitter-ns", self.host_overhead_jitter_ns),
                ("--reduce-overhead-ns", self.reduce_overhead_ns),
            ] {
                if ns > 0 {
                    bail!("{flag}: applies to a workload's flows (--workload or --job), not to --traffic alone");
                }
            }
            return Ok((Workload::from_flows(flows), None));
        }
        let (mut workload, note) = self
            .workload(topo, config, flows)?
            .expect("a workload was asked for");
        workload.host_overhead_jitter = SimTime::from_ns(self.host_overhead_jitter_ns);
        workload.jitter_seed = seed;
        Ok((workload, note))
    }

    /// `topo` with a DPU on every host when `--dpu-workers` is given.
    pub fn with_dpus(&self, topo: Topology) -> anyhow::Result<Topology> {
        if self.dpu_workers.is_none() {
            return Ok(topo);
        }
        let params = self.dpu.params()?;
        let fabric = netsim_models::dpu::attach(&topo, &params)
            .map_err(|e| anyhow::anyhow!("--dpu-workers: {e}"))?;
        Ok(fabric.topo)
    }

    /// The workload `name` (a collective, or a TOML or SimAI file) for
    /// `hosts` ranks, with this run's settings.
    pub fn spec(&self, name: &str, hosts: u32) -> anyhow::Result<WorkloadSpec> {
        let algorithm = match &self.algo {
            None => None,
            Some(a) => Some(Algorithm::parse(a).with_context(|| {
                format!(
                    "--algo: unknown `{a}` ({})",
                    Algorithm::ALL.map(|a| a.name()).join(", ")
                )
            })?),
        };
        let mut spec = match CollectiveOp::parse(name) {
            Some(op) => self.collective_spec(op, algorithm, hosts)?,
            None => match workload::trace::read(Path::new(name)) {
                Some(read) => {
                    let (trace, notes) = read?;
                    let mut spec = self.trace_spec(trace, algorithm, hosts)?;
                    spec.notes = notes;
                    spec
                }
                None => self.file_spec(name, algorithm, hosts)?,
            },
        };
        if self.host_overhead_ns > MAX_PER_MESSAGE_NS {
            bail!(
                "--host-overhead-ns: {} ns is above 100 ms, the longest supported",
                self.host_overhead_ns
            );
        }
        for (flag, ns) in [
            ("--host-overhead-jitter-ns", self.host_overhead_jitter_ns),
            ("--reduce-overhead-ns", self.reduce_overhead_ns),
        ] {
            if ns > MAX_PER_MESSAGE_NS {
                bail!("{flag}: {ns} ns is above 100 ms, the longest supported");
            }
        }
        spec.host_overhead = SimTime::from_ns(self.host_overhead_ns);
        spec.reduce_overhead = SimTime::from_ns(self.reduce_overhead_ns);
        spec.dpu_workers = self.dpu_workers.unwrap_or(0);
        spec.dpu = self.dpu.params()?;
        spec.fold_dp = self.fold_dp;
        spec.fold_classes = self.fold_classes;
        spec.profile = self.switch_profile(&spec.profile)?;
        let fallback = Algorithm::parse(&self.fallback_algo)
            .filter(|a| matches!(a, Algorithm::Ring | Algorithm::Tree | Algorithm::Hd))
            .with_context(|| {
                format!(
                    "--fallback-algo: `{}` is not ring, tree or hd",
                    self.fallback_algo
                )
            })?;
        spec.nccl = self.nccl(spec.nccl)?;
        if self.fallback_algo != "ring" {
            // Otherwise keep what a workload file chose (ring by default).
            spec.fallback = fallback;
        }
        Ok(spec)
    }

    /// NCCL's model as --nvls, --pxn, --protocol and --algo ask (`auto`,
    /// `nvls` and `nvls-tree` need it); `current` when none of them does.
    fn nccl(&self, current: Option<Nccl>) -> anyhow::Result<Option<Nccl>> {
        let on_off = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<bool>> {
            match v.as_deref() {
                None => Ok(None),
                Some("on") => Ok(Some(true)),
                Some("off") => Ok(Some(false)),
                Some(other) => bail!("--{flag}: `{other}` is not on or off"),
            }
        };
        let (nvls, pxn) = (on_off("nvls", &self.nvls)?, on_off("pxn", &self.pxn)?);
        let latency = on_off("nccl-latency", &self.nccl_latency)?;
        let protocol =
            match self.protocol.as_deref() {
                None | Some("auto") => None,
                Some(p) => Some(Protocol::parse(p).with_context(|| {
                    format!("--protocol: unknown `{p}` (ll, ll128, simple, auto)")
                })?),
            };
        let wants = matches!(self.algo.as_deref(), Some("auto" | "nvls" | "nvls-tree"));
        let simai = self.nccl_tuning.as_deref().map(|t| t == "simai");
        // `nccl` is the default: it asks for nothing.
        let mocknccl = (self.nvls_flows.as_deref() == Some("mocknccl")).then_some(true);
        if let (Some(_), Some(algo)) = (mocknccl, self.algo.as_deref()) {
            if !matches!(algo, "nvls" | "auto") {
                bail!("--nvls-flows mocknccl: shapes the NVLS all-reduce (--algo nvls or auto), not --algo {algo}");
            }
        }
        let asked = nvls.is_some()
            || pxn.is_some()
            || latency.is_some()
            || simai.is_some()
            || mocknccl.is_some();
        if !asked && self.protocol.is_none() && !wants {
            return Ok(current);
        }
        let mut nccl = current.unwrap_or_default();
        nccl.nvls = nvls.unwrap_or(nccl.nvls);
        nccl.pxn = pxn.unwrap_or(nccl.pxn);
        nccl.tuning_latency = latency.unwrap_or(nccl.tuning_latency);
        nccl.simai_choice = simai.unwrap_or(nccl.simai_choice);
        nccl.mocknccl_nvls = mocknccl.unwrap_or(nccl.mocknccl_nvls);
        if self.protocol.is_some() {
            nccl.protocol = protocol;
        }
        Ok(Some(nccl))
    }

    /// One collective `op` of --size on --group of `hosts` ranks laid out
    /// by --tp/--pp/--ep, by `algorithm` or its default.
    fn collective_spec(
        &self,
        op: CollectiveOp,
        algorithm: Option<Algorithm>,
        hosts: u32,
    ) -> anyhow::Result<WorkloadSpec> {
        let algorithm = algorithm.unwrap_or_else(|| op.default_algorithm());
        if !op.algorithms().contains(&algorithm) {
            bail!(
                "--algo: {} does not implement {} (use {})",
                algorithm.name(),
                op.name(),
                op.algorithm_names()
            );
        }
        let size_bytes = if op == CollectiveOp::Barrier {
            0
        } else {
            parse_size(&self.size).map_err(|e| anyhow::anyhow!("--size: {e}"))?
        };
        let group = GroupSpec::parse(&self.group).map_err(|e| anyhow::anyhow!("--group: {e}"))?;
        let dtype = Dtype::parse(&self.dtype).with_context(|| {
            format!(
                "--dtype: unknown `{}` ({})",
                self.dtype,
                Dtype::ALL.map(|d| d.name()).join(", ")
            )
        })?;
        let reduce_op = ReduceOp::parse(&self.reduce_op).with_context(|| {
            format!("--reduce-op: unknown `{}` (sum, min, max)", self.reduce_op)
        })?;
        let mut spec = WorkloadSpec::single(OpSpec {
            op,
            algorithm,
            size_bytes,
            group,
            dtype,
            reduce_op,
        });
        spec.parallelism = Some(
            Parallelism::new(hosts, self.tp, self.pp, self.ep)
                .map_err(|e| anyhow::anyhow!("--tp/--pp/--ep: {e}"))?,
        );
        spec.iterations = self.iterations;
        spec.channels = self.channels;
        spec.chunks = self.chunks;
        Ok(spec)
    }

    /// The workload file `name`: TOML (`.toml`) or SimAI text, whose
    /// collectives use `algorithm` (ring by default).
    fn file_spec(
        &self,
        name: &str,
        algorithm: Option<Algorithm>,
        hosts: u32,
    ) -> anyhow::Result<WorkloadSpec> {
        let path = Path::new(name);
        if !path.exists() {
            bail!(
                "--workload: `{name}` is neither a collective ({}) nor an existing file",
                CollectiveOp::ALL.map(|o| o.name()).join(", ")
            );
        }
        if path.extension().is_some_and(|e| e == "toml") {
            return Ok(file::read(path, hosts)?);
        }
        let mut spec = simai::read(path, hosts, algorithm.unwrap_or(Algorithm::Ring))?;
        spec.iterations = self.iterations;
        spec.channels = self.channels;
        spec.chunks = self.chunks;
        Ok(spec)
    }

    /// A trace's programs for `hosts` ranks at most, their collectives by
    /// `algorithm` where it implements them, compute scaled by
    /// --compute-scale.
    fn trace_spec(
        &self,
        mut trace: Trace,
        algorithm: Option<Algorithm>,
        hosts: u32,
    ) -> anyhow::Result<WorkloadSpec> {
        let ranks = trace.ranks();
        if ranks == 0 || ranks > hosts {
            bail!("--workload: the trace has {ranks} ranks but the fabric has {hosts} hosts");
        }
        if !(self.compute_scale.is_finite() && self.compute_scale >= 0.0) {
            bail!(
                "--compute-scale: {} is not a finite factor of at least 0",
                self.compute_scale
            );
        }
        if self.compute_scale != 1.0 {
            for op in &mut trace.ops {
                if let OpKind::Compute { duration } = &mut op.kind {
                    let scaled_ps = duration.as_ps() as f64 * self.compute_scale;
                    if scaled_ps >= SimTime::MAX.as_ps() as f64 {
                        bail!(
                            "--compute-scale: {} makes a compute of {duration} longer than the longest time netsim keeps",
                            self.compute_scale
                        );
                    }
                    *duration = SimTime(scaled_ps.round() as u64);
                }
            }
        }
        trace.algorithm = algorithm;
        let mut spec = WorkloadSpec::with_phases(Vec::new());
        spec.parallelism = Some(Parallelism::data_parallel(ranks));
        spec.trace = Some(std::sync::Arc::new(trace));
        spec.iterations = self.iterations;
        spec.channels = self.channels;
        spec.chunks = self.chunks;
        Ok(spec)
    }

    /// The switches' offload profile: --switch-profile, or the file's
    /// (`file_profile`) where the flag was left at its default, with the
    /// --ina-* flags laid over it.
    fn switch_profile(&self, file_profile: &SwitchProfile) -> anyhow::Result<SwitchProfile> {
        let mut profile = SwitchProfile::by_name(&self.switch_profile).with_context(|| {
            format!(
                "--switch-profile: unknown `{}` (tofino, sharp)",
                self.switch_profile
            )
        })?;
        if file_profile.name != profile.name && self.switch_profile == "tofino" {
            // The file chose a profile and the flag was left at its default.
            profile = file_profile.clone();
        }
        if let Some(ns) = self.ina_latency_ns {
            if ns > MAX_PER_MESSAGE_NS {
                bail!("--ina-latency-ns: {ns} ns is above 100 ms, the longest supported");
            }
            profile.processing = SimTime::from_ns(ns);
        }
        if let Some(slots) = self.ina_slots {
            if slots == 0 {
                bail!("--ina-slots: must be positive");
            }
            profile.slots_per_group = slots;
            profile.slots_total = profile.slots_total.max(slots);
        }
        profile.barriers = match self.switch_barriers.as_str() {
            "on" => true,
            "off" => false,
            other => bail!("--switch-barriers: `{other}` is not on or off"),
        };
        Ok(profile)
    }
}

/// Per-message costs of a NIC or switch: at most a link's latency.
const MAX_PER_MESSAGE_NS: u64 = netsim_topo::units::MAX_LATENCY_PS / 1_000;

/// A job's default name: the collective, or the file's stem.
pub fn job_name(workload: &str) -> String {
    Path::new(workload).file_stem().map_or_else(
        || workload.to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}
