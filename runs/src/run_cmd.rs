//! `netsim run`: the flags of a simulation and wiring them into a run.

use crate::topology_args::TopologyArgs;
use anyhow::bail;
use std::path::PathBuf;

/// Flags of a run. Every flag may also be given in the scenario file under
/// its long name.
#[derive(clap::Args, Debug)]
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

    /// Collective workload (issue 5: not available yet).
    #[arg(long, help_heading = "Workload")]
    pub workload: Option<String>,

    /// Worker threads (one shard each); default: all cores.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Engine")]
    pub threads: Option<u32>,
    /// Root seed; every node derives its random stream from it.
    #[arg(long, default_value_t = 1, help_heading = "Engine")]
    pub seed: u64,
    /// Simulated time limit in microseconds; unfinished flows are reported.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Engine")]
    pub end_us: Option<u64>,

    /// Output directory for telemetry (Parquet) and run.json.
    #[arg(long, default_value = "netsim-out", help_heading = "Output")]
    pub out: PathBuf,
    /// No progress display.
    #[arg(long, help_heading = "Output")]
    pub quiet: bool,
}

impl RunArgs {
    /// Worker threads: the flag, or every core.
    pub fn threads(&self) -> u32 {
        self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
        })
    }

    /// Checks everything a run would check, without running.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.workload.is_some() {
            bail!("--workload: collective workloads are not available yet (issue 5)");
        }
        Ok(())
    }

    pub fn run(&self) -> anyhow::Result<()> {
        self.check()?;
        bail!(
            "--topo {}: the packet-level network model is not available yet (issue 4)",
            self.topo
        )
    }
}
