//! The `netsim` command line: subcommands and the flags of a run.

use crate::dpu_bench_cmd::DpuBenchCmd;
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
    /// DPU-Bench: collectives staged on SmartNIC/DPU workers, offload efficiency.
    DpuBench(Box<DpuBenchCmd>),
    /// Check a scenario file without running it.
    Validate {
        /// Scenario file (TOML).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

const SUBCOMMANDS: &[&str] = &["run", "topo", "partition", "dpu-bench", "validate", "help"];

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

/// Where the flags a scenario file set came from (`file:line`), so that an
/// error about one of them names the file and line rather than a flag the
/// user never typed. Flags typed on the command line are not listed.
#[derive(Debug, Clone, Default)]
pub struct Origins(Vec<(String, String)>);

impl Origins {
    /// The origins of the scenario flags in the process arguments `args`
    /// (empty without `--config`).
    pub fn of(args: &[OsString]) -> Origins {
        let first = if names_subcommand(args) { 2 } else { 1 };
        let Some(config) = args.get(first..).and_then(config_path) else {
            return Origins::default();
        };
        // The scenario was read and checked by `expand_args` already.
        let fields = crate::scenario::field_lines(&config).unwrap_or_default();
        let typed = |flag: &str| {
            args[first..].iter().any(|a| {
                a.to_str().is_some_and(|a| {
                    a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('='))
                })
            })
        };
        Origins(
            fields
                .into_iter()
                .map(|(key, line)| (format!("--{key}"), format!("{}:{line}", config.display())))
                .filter(|(flag, _)| !typed(flag))
                .collect(),
        )
    }

    /// `error`, with the file and line of the scenario field it blames (the
    /// last `--flag:` it names, else the first `--flag`) when a scenario set it.
    pub fn locate(&self, error: anyhow::Error) -> anyhow::Error {
        let text = format!("{error:#}");
        let flags = flags_in(&text);
        let blamed = flags
            .iter()
            .rev()
            .find(|(_, colon)| *colon)
            .or(flags.first())
            .map(|(flag, _)| flag.as_str());
        match self
            .0
            .iter()
            .find(|(flag, _)| Some(flag.as_str()) == blamed)
        {
            Some((flag, at)) => error.context(format!("{at}: field `{}`", &flag[2..])),
            None => error,
        }
    }
}

/// The `--flag`s named in `text`, each with whether a `:` follows it.
fn flags_in(text: &str) -> Vec<(String, bool)> {
    let mut flags = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let after = &rest[at + 2..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(after.len());
        let preceded_ok = at == 0 || !rest[..at].ends_with(|c: char| c.is_ascii_alphanumeric());
        if len > 0 && preceded_ok {
            flags.push((
                format!("--{}", &after[..len]),
                after[len..].starts_with(':'),
            ));
        }
        rest = &after[len..];
    }
    flags
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
