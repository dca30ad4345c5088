//! The `netsim` command line: subcommands and the flags of a run.

use crate::partition_cmd::PartitionCmd;
use crate::run_cmd::RunArgs;
use crate::topo_cmd::TopoCmd;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// netsim: a parallel packet-level simulator of datacenter networks.
#[derive(Parser, Debug)]
#[command(name = "netsim", version, args_override_self = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Simulate a scenario (the default subcommand).
    Run(Box<RunArgs>),
    /// Generate a topology, print its summary, optionally export it.
    Topo(Box<TopoCmd>),
    /// Cut a topology into shards and report the partition's quality.
    Partition(Box<PartitionCmd>),
    /// Check a scenario file without running it.
    Validate {
        /// Scenario file (TOML).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

const SUBCOMMANDS: &[&str] = &["run", "topo", "partition", "validate", "help"];

/// Turns the process arguments into what clap parses: `run` inserted when no
/// subcommand is named, and a `--config` scenario expanded into flags that
/// precede the typed ones (typed flags win).
pub fn expand_args(mut args: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    if !names_subcommand(&args) {
        args.insert(1, "run".into());
    }
    let subcommand = args[1].to_str().unwrap_or("").to_string();
    if subcommand != "run" && subcommand != "validate" {
        return Ok(args);
    }
    let Some(config) = config_path(&args[2..]) else {
        return Ok(args);
    };
    let flags = crate::scenario::expand::<Cli>(&config, "run")?;
    let mut expanded = args[..2].to_vec();
    if subcommand == "validate" {
        // Validation parses the scenario as a run would.
        expanded[1] = "run".into();
    }
    expanded.extend(flags);
    expanded.extend(args[2..].iter().cloned());
    Ok(expanded)
}

/// Whether the process arguments name a subcommand (or ask for help or the
/// version) rather than implying `run`.
fn names_subcommand(args: &[OsString]) -> bool {
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    SUBCOMMANDS.contains(&first) || matches!(first, "-h" | "--help" | "-V" | "--version")
}

/// Whether the process arguments ask for a simulation run (`run`, or no
/// subcommand at all): the only command that runs across MPI ranks.
pub fn is_run(args: &[OsString]) -> bool {
    !names_subcommand(args) || args[1] == "run"
}

fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut path = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let arg = arg.to_str().unwrap_or("");
        if arg == "--config" {
            path = iter.next().map(PathBuf::from);
        } else if let Some(value) = arg.strip_prefix("--config=") {
            path = Some(PathBuf::from(value));
        }
    }
    path
}
