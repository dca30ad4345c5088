//! Scenario benchmarks: fixed-seed runs that print one JSON line of figures.
//!
//! `cargo run --release -p netsim-benches --bin scenario -- phold --nodes 1024 --events-per-node 16 --threads 2`

use clap::{Parser, Subcommand};
use netsim_benches::phold::{run_phold, PholdConfig};
use netsim_engine::SimTime;
use netsim_process::peak_rss_bytes;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "netsim scenario benchmarks")]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand)]
enum Scenario {
    /// PHOLD: a constant population of events hopping between random nodes.
    Phold {
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
        nodes: u32,
        #[arg(long, default_value_t = 16)]
        events_per_node: u32,
        /// Worker threads, one shard each.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        threads: u32,
        /// Fixed part of each delay, also the lookahead.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        lookahead_ns: u64,
        /// Mean of the exponential part of each delay.
        #[arg(long, default_value_t = 1000)]
        mean_ns: u64,
        /// Simulated time to run.
        #[arg(long, default_value_t = 4000)]
        end_us: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.scenario {
        Scenario::Phold {
            nodes,
            events_per_node,
            threads,
            lookahead_ns,
            mean_ns,
            end_us,
            seed,
        } => {
            let config = PholdConfig {
                nodes,
                events_per_node,
                lookahead: SimTime::from_ns(lookahead_ns),
                mean_delay_ps: (mean_ns * 1000) as f64,
                end: SimTime::from_us(end_us),
                seed,
            };
            let started = Instant::now();
            let outcome = run_phold(&config, threads)?;
            let wall_s = started.elapsed().as_secs_f64();
            let events = outcome.events();
            let line = serde_json::json!({
                "scenario": "phold",
                "nodes": nodes,
                "events_per_node": events_per_node,
                "threads": threads,
                "events": events,
                "windows": outcome.windows,
                "wall_s": wall_s,
                "events_per_s": events as f64 / wall_s,
                "peak_rss_bytes": peak_rss_bytes(),
                "state_hash": format!("{:016x}", outcome.state_hash()),
            });
            println!("{line}");
        }
    }
    Ok(())
}
