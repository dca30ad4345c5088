//! The `netsim` binary: parse, dispatch, and map errors to exit code 2.

use clap::Parser;
use netsim::cli::{expand_args, is_run, Cli, Command};
use netsim::ranks::{print_error, OtherRankFailed, Ranks};
use std::ffi::OsString;
use std::process::ExitCode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// In the mimalloc library the allocator above links (the `mimalloc`
// crate's bindings leave its options out).
extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (milliseconds).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

fn main() -> ExitCode {
    // Freed memory goes back to the system at once rather than 10 s later
    // (mimalloc 3's default for its arenas): a large workload is built in
    // blocks moved into exact-size vectors, and the blocks it frees would
    // otherwise stay resident beside them (1.83 against 1.32 GB at the end
    // of building SimAI's 9,216-GPU example at --fold-dp 12), and the memory
    // checks read what the process holds.
    // SAFETY: mimalloc's own function, called before any other thread runs.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    // A closed stdout (`netsim topo ... | head`) ends the process quietly,
    // as it does other command-line tools, instead of a panic in println.
    // SAFETY: restores the default disposition before any thread runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    match run() {
        // Stopped by SIGINT or SIGTERM, its tables and run.json written.
        Ok(()) => netsim::interrupt::exit_code().map_or(ExitCode::SUCCESS, ExitCode::from),
        // That rank printed the error.
        Err(error) if error.is::<OtherRankFailed>() => ExitCode::from(2),
        Err(error) if error.is::<Exit>() => ExitCode::from(error.downcast_ref::<Exit>().unwrap().0),
        Err(error) => {
            print_error(&error);
            ExitCode::from(2)
        }
    }
}

/// Leave with this exit code; the message, if any, is printed.
#[derive(Debug, thiserror::Error)]
#[error("exit code {0}")]
struct Exit(u8);

fn run() -> anyhow::Result<()> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let is_validate = args.get(1).is_some_and(|a| a == "validate");
    let origins = netsim::cli::Origins::of(&args);
    if !is_run(&args) {
        return dispatch(parse_or_exit(args)?, is_validate, None, origins);
    }
    // Under MPI the ranks start together before anything can fail, so that
    // bad input stops all of them with one message.
    let ranks = Ranks::init()?;
    let parsed = ranks.agree(expand_args(args))?;
    let cli = match Cli::try_parse_from(parsed) {
        Ok(cli) => cli,
        // Help, version and usage errors, the same on every rank: rank 0
        // prints, all leave with clap's exit code.
        Err(e) => {
            if ranks.rank() == 0 {
                print_clap(&e);
            }
            // Printed before anyone exits (see `Ranks::agree`).
            ranks.barrier();
            return Err(Exit(e.exit_code() as u8).into());
        }
    };
    dispatch(cli, false, Some(&ranks), origins)
}

fn parse_or_exit(args: Vec<OsString>) -> anyhow::Result<Cli> {
    Cli::try_parse_from(expand_args(args)?).map_err(|e| {
        print_clap(&e);
        Exit(e.exit_code() as u8).into()
    })
}

/// Help and the version as clap writes them; a usage error on one line,
/// the way every other error is reported.
fn print_clap(e: &clap::Error) {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
        }
        _ => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            print_error(&anyhow::anyhow!("{}", first.trim_start_matches("error: ")));
        }
    }
}

fn dispatch(
    cli: Cli,
    is_validate: bool,
    ranks: Option<&Ranks>,
    origins: netsim::cli::Origins,
) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(mut run) => {
            run.origins = origins;
            if is_validate {
                run.plan()?;
                println!("scenario is valid");
                Ok(())
            } else {
                run.run(ranks.expect("a run starts its ranks"))
            }
        }
        Command::Topo(topo) => topo.run(),
        Command::Partition(partition) => partition.run(),
        Command::DpuBench(bench) => bench.run(),
        Command::Validate { .. } => unreachable!("validate is parsed as a run"),
    }
}
