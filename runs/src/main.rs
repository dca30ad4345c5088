//! The `netsim` binary: parse, dispatch, and map errors to exit code 2.

use clap::Parser;
use netsim::cli::{expand_args, Cli, Command};
use std::process::ExitCode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("netsim: error: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<()> {
    let is_validate = std::env::args().nth(1).as_deref() == Some("validate");
    let args = expand_args(std::env::args_os().collect())?;
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Run(run) if is_validate => {
            run.plan()?;
            println!("scenario is valid");
            Ok(())
        }
        Command::Run(run) => run.run(),
        Command::Topo(topo) => topo.run(),
        Command::Partition(partition) => partition.run(),
        Command::Validate { .. } => unreachable!("validate is parsed as a run"),
    }
}
