//! `netsim run`: the flags of a simulation. What a run will do is built and
//! checked in `run_plan.rs`; running it in `run_sim.rs`; its figures go to
//! `run.json` and the summary line in `run_summary.rs`.

use crate::fault_args::FaultArgs;
use crate::network_args::NetworkArgs;
use crate::topology_args::TopologyArgs;
use crate::traffic_args::TrafficArgs;
use crate::workload_args::WorkloadArgs;
use netsim_engine::SimTime;
use std::path::PathBuf;

/// Flags of a run. Every flag may also be given in the scenario file under
/// its long name. A negative number is a flag's value, so its range check
/// names the flag (not "unexpected argument").
#[derive(clap::Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// Scenario file (TOML); flags typed on the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Topology: fat-tree, dragonfly, spectrum-x, hpn, hpn-dual-plane, dcn,
    /// dcn-dual-tor, star, or simai:FILE.
    #[arg(long, default_value = "fat-tree", help_heading = "Topology")]
    pub topo: String,
    #[command(flatten)]
    pub topology: TopologyArgs,

    #[command(flatten)]
    pub traffic: TrafficArgs,
    #[command(flatten)]
    pub network: NetworkArgs,
    #[command(flatten)]
    pub faults: FaultArgs,

    #[command(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    pub simbricks: crate::simbricks_args::SimbricksArgs,

    /// Worker threads; default: all cores.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Engine")]
    pub threads: Option<u32>,
    /// Shards, each run by its own worker thread; default: --threads.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Engine")]
    pub shards: Option<u32>,
    /// Partitioning: structural (by pod, group, segment) or metis.
    #[arg(long, default_value = "structural", help_heading = "Engine")]
    pub partition: String,
    /// Root seed; every node derives its random stream from it.
    #[arg(long, default_value_t = 1, help_heading = "Engine")]
    pub seed: u64,
    /// Fidelity: packet (every packet, queues, PFC, congestion control) or
    /// flow (max-min fair fluid flows over the same routes; sequential).
    #[arg(long, value_enum, default_value_t = Fidelity::Packet, help_heading = "Engine")]
    pub fidelity: Fidelity,
    /// Simulated time limit in microseconds; unfinished flows are reported.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Engine")]
    pub end_us: Option<u64>,

    /// Output directory for telemetry (Parquet) and run.json.
    #[arg(long, default_value = "netsim-out", help_heading = "Output")]
    pub out: PathBuf,
    /// No progress display.
    #[arg(long, help_heading = "Output")]
    pub quiet: bool,

    /// Where the flags a scenario file set came from, for errors.
    #[arg(skip)]
    pub origins: crate::cli::Origins,
}

/// How closely a run follows the network.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fidelity {
    /// Every packet through every queue.
    Packet,
    /// Flows at max-min fair rates, recomputed as flows start and finish.
    Flow,
}

impl Fidelity {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fidelity::Packet => "packet",
            Fidelity::Flow => "flow",
        }
    }
}

impl RunArgs {
    /// Worker threads: the flag, or every core.
    pub fn threads(&self) -> u32 {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
    }

    /// Shards per process: the flag, or one per thread; flow level runs
    /// as one.
    pub fn shards(&self) -> u32 {
        match self.fidelity {
            Fidelity::Flow => 1,
            Fidelity::Packet => self.shards.unwrap_or_else(|| self.threads()),
        }
    }

    /// The simulated time limit (`--end-us`), checked to fit; `MAX` without one.
    pub fn end(&self) -> anyhow::Result<SimTime> {
        self.end_us.map_or(Ok(SimTime::MAX), |us| {
            SimTime::try_from_us(us).map_err(|e| anyhow::anyhow!("--end-us: {e}"))
        })
    }
}
