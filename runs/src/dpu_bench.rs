//! The DPU-Bench driver on the packet-level fabric: the pure-host reference time, the
//! offloaded iteration (hosts compute for the reference time while workers
//! communicate), and offload efficiency = reference / max(pure_comm,
//! compute) x 100, as Michalowicz et al. (PEARC '23) define it.

use netsim_engine::{Layout, SimTime};
use netsim_models::dpu::{attach, DpuFabric, DpuParams};
use netsim_models::network::config::NetConfig;
use netsim_models::network::{simulate, Fabric};
use netsim_models::telemetry::{
    FlowRecord, LinkSample, PfcRecord, QueueSample, SwitchOffloadRecord, TelemetrySink,
};
use netsim_models::workload::dpu::staged::{self, Assign, CoreCost, Pattern, Shape};
use netsim_models::workload::{Builder, Workload};
use netsim_topo::{Routing, Topology};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum DpuError {
    /// A parameter is out of range; the text names it.
    #[error("{0}")]
    Invalid(String),
    /// The run ended before every task completed (a model bug or a run too large).
    #[error("the {0} run did not complete every task")]
    Incomplete(&'static str),
}

/// The cost of a host process's own RDMA operations and memory copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostCost {
    pub core: CoreCost,
    /// One core's memory-copy bandwidth, bits/s (a transfer within a server).
    pub copy_bps: u64,
}

impl Default for HostCost {
    /// An x86 host core: 200 ns per post, 100 ns per poll, 80 Gb/s (10 GB/s) memcpy.
    fn default() -> Self {
        HostCost {
            core: CoreCost {
                post: SimTime::from_ns(200),
                poll: SimTime::from_ns(100),
            },
            copy_bps: 80_000_000_000,
        }
    }
}

/// One row of the `dpu_bench` table.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    pub pattern: Pattern,
    pub assign: Assign,
    pub workers: u32,
    /// Workers on the busiest DPU.
    pub wpn: u32,
    pub size_bytes: u64,
    /// The pure-host run.
    pub reference_ns: u64,
    /// The offloaded run: until the workers' last completion notice arrived.
    pub pure_comm_ns: u64,
    /// The offloaded run: until the hosts' compute (after the hand-over) ended.
    pub compute_ns: u64,
    pub offload_efficiency_pct: f64,
}

/// A DPU-Bench set-up: `nodes` servers with `ppn` host processes each on a
/// fabric whose every host has a DPU.
#[derive(Debug)]
pub struct Bench {
    pub fabric: DpuFabric,
    routing: Routing,
    pub net: NetConfig,
    pub seed: u64,
    pub nodes: u32,
    pub ppn: u32,
    pub host: HostCost,
}

impl Bench {
    /// Attaches DPUs with `params` to `base` and routes it.
    pub fn new(
        base: &Topology,
        params: &DpuParams,
        nodes: u32,
        ppn: u32,
        net: NetConfig,
        host: HostCost,
        seed: u64,
    ) -> Result<Bench, DpuError> {
        let fabric = attach(base, params).map_err(|e| DpuError::Invalid(e.to_string()))?;
        if host.copy_bps == 0 {
            return Err(DpuError::Invalid(
                "host copy bandwidth must be positive".into(),
            ));
        }
        Shape {
            nodes,
            ppn,
            workers: 1,
        }
        .validate(&fabric)
        .map_err(DpuError::Invalid)?;
        let routing = Routing::build(&fabric.topo).map_err(|e| DpuError::Invalid(e.to_string()))?;
        Ok(Bench {
            fabric,
            routing,
            net,
            seed,
            nodes,
            ppn,
            host,
        })
    }

    fn shape(&self, workers: u32) -> Shape {
        Shape {
            nodes: self.nodes,
            ppn: self.ppn,
            workers,
        }
    }

    /// The paper's worker counts: powers of two below one per DPU, then
    /// every whole number of workers per DPU up to the cores (and never
    /// more workers than host processes).
    pub fn worker_counts(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut w = 1;
        while w < self.nodes {
            out.push(w);
            w *= 2;
        }
        let max_wpn = self.fabric.params.cores.min(self.ppn);
        out.extend((1..=max_wpn).map(|k| k * self.nodes));
        out
    }

    /// Simulates `workload` and returns the end of each collective.
    fn run(&self, workload: Workload, what: &'static str) -> Result<Vec<SimTime>, DpuError> {
        let collectives = workload.collectives.clone();
        let fabric = Fabric::with_workload(
            self.fabric.topo.clone(),
            self.routing.clone(),
            workload,
            self.net.clone(),
            self.seed,
        );
        let layout = Layout::blocks(fabric.topo.node_count(), 1, SimTime::MAX)
            .expect("one shard is a valid layout");
        let run = simulate(&fabric, &layout, SimTime::MAX, None, |_| NullSink);
        let spans = run.spans();
        collectives
            .iter()
            .zip(&spans)
            .map(|(c, s)| {
                if s.tasks_done == c.tasks {
                    Ok(s.end)
                } else {
                    Err(DpuError::Incomplete(what))
                }
            })
            .collect()
    }

    fn check_size(size: u64) -> Result<(), DpuError> {
        if size == 0 || size > 1 << 34 {
            return Err(DpuError::Invalid(format!(
                "size must be 1 B..=16 GiB, got {size}"
            )));
        }
        Ok(())
    }

    /// The pure-host time of `pattern` with `size` bytes per process.
    pub fn reference(&self, pattern: Pattern, size: u64) -> Result<SimTime, DpuError> {
        Bench::check_size(size)?;
        let mut b = Builder::new(SimTime::ZERO);
        staged::reference(
            &mut b,
            &self.fabric,
            &self.shape(1),
            pattern,
            size,
            self.host.core,
            self.host.copy_bps,
        );
        if b.over() {
            return Err(DpuError::Invalid(
                "the reference run does not fit in memory".into(),
            ));
        }
        Ok(self.run(b.finish(), "reference")?[0])
    }

    /// One offloaded point, given its pattern's `reference` time.
    pub fn point(
        &self,
        pattern: Pattern,
        assign: Assign,
        workers: u32,
        size: u64,
        reference: SimTime,
    ) -> Result<BenchRow, DpuError> {
        Bench::check_size(size)?;
        let shape = self.shape(workers);
        shape.validate(&self.fabric).map_err(DpuError::Invalid)?;
        let mut b = Builder::new(SimTime::ZERO);
        staged::offloaded(
            &mut b,
            &self.fabric,
            &shape,
            pattern,
            assign,
            size,
            reference,
            self.host.core,
        );
        if b.over() {
            return Err(DpuError::Invalid(
                "the offloaded run does not fit in memory".into(),
            ));
        }
        let ends = self.run(b.finish(), "offloaded")?;
        let (compute, comm) = (ends[0], ends[1]);
        let slowest = compute.max(comm).as_ps().max(1);
        Ok(BenchRow {
            pattern,
            assign,
            workers,
            wpn: shape.wpn(),
            size_bytes: size,
            reference_ns: reference.as_ns(),
            pure_comm_ns: comm.as_ns(),
            compute_ns: compute.as_ns(),
            offload_efficiency_pct: reference.as_ps() as f64 / slowest as f64 * 100.0,
        })
    }
}

/// Keeps nothing: the benchmark needs only the collectives' spans.
struct NullSink;

impl TelemetrySink for NullSink {
    fn flow(&mut self, _: FlowRecord) {}
    fn queue(&mut self, _: QueueSample) {}
    fn pfc(&mut self, _: PfcRecord) {}
    fn switch_offload(&mut self, _: SwitchOffloadRecord) {}
    fn link(&mut self, _: LinkSample) {}
}
