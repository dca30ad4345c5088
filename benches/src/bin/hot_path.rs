//! The hot path's benchmark: packet-level scenarios where every packet is
//! simulated, run through the `netsim` binary, one JSON line of figures each.
//!
//! `cargo run --release -p netsim-benches --bin hot_path -- --repeat 5`
//!
//! Each scenario runs `--repeat` times per thread count; the line carries
//! the median events/s (of the simulation phase, from `run.json`), the
//! nanoseconds of simulation per event, the median CPU seconds of the whole
//! process (user + system, from `getrusage`: descheduling on a shared
//! machine does not inflate it), the largest peak RSS, and cycles per
//! event two ways: counted by `perf stat` where the machine can count them
//! (with cache misses), and estimated as CPU time x the CPU's nominal
//! clock from `/proc/cpuinfo` (`cycles_per_event_est`), which a VM without
//! hardware counters still gives. Both are of the whole process: setup and
//! table writing included.

use anyhow::{bail, Context as _};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Parser)]
#[command(about = "netsim hot-path benchmark: packet-level scenarios")]
struct Cli {
    /// The netsim binary to measure.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/netsim"))]
    netsim: PathBuf,
    /// Runs per scenario and thread count (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Thread counts to run each scenario with.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<u32>,
    /// Scenarios to run (default: all).
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<String>,
    /// Where runs write their tables.
    #[arg(long, default_value = "/tmp/netsim-hot-path")]
    out: PathBuf,
    /// Count cycles and cache misses with `perf stat` where it can.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    perf: bool,
}

/// A benchmark scenario: a name and the `netsim run` flags after the repo root.
struct Scenario {
    name: &'static str,
    args: &'static [&'static str],
}

const SCENARIOS: &[Scenario] = &[
    // 1,024 hosts, a permutation of 2 MB flows, PFC, no congestion control:
    // contention everywhere, so nothing can be skipped (issues 4 and 40).
    Scenario {
        name: "fat-tree-k16-permutation",
        args: &["--config", "runs/scenarios/fat-tree-k16-permutation.toml"],
    },
    // The same with htsim's buffers (15 packets of 9 KB per port, PFC near
    // 12 packets): issue 40's comparison beside htsim.
    Scenario {
        name: "fat-tree-k16-htsim-buffers",
        args: &[
            "--config",
            "runs/scenarios/fat-tree-k16-permutation.toml",
            "--buffer-kb",
            "2160",
            "--pfc-alpha",
            "0.05",
        ],
    },
    // A 128-GPU AICB-style iteration at packet level: NVLink and fabric hops.
    Scenario {
        name: "repeated-layers-128",
        args: &[
            "--topo",
            "spectrum-x",
            "--gpus",
            "128",
            "--workload",
            "benches/workloads/repeated-layers-128.txt",
            "--fast-forward",
            "off",
            "--sample-ns",
            "0",
        ],
    },
];

/// What one run measured.
struct Sample {
    events: u64,
    events_per_s: f64,
    simulate_s: f64,
    peak_rss_bytes: u64,
    cpu_s: f64,
    cycles: Option<f64>,
    cache_misses: Option<f64>,
}

/// CPU seconds (user + system) used so far by this process's finished
/// children.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The CPU's nominal clock in Hz: the `@ x.xxGHz` of the model name, else
/// the first `cpu MHz` line of `/proc/cpuinfo` (a VM's reported clock);
/// `None` where neither is there.
fn nominal_clock_hz() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let field = |key: &str| {
        info.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split(':').nth(1))
            .map(str::trim)
    };
    let from_name = field("model name")
        .and_then(|name| name.split('@').nth(1))
        .and_then(|ghz| ghz.trim().trim_end_matches("GHz").parse::<f64>().ok())
        .map(|ghz| ghz * 1e9);
    from_name.or_else(|| field("cpu MHz")?.parse::<f64>().ok().map(|mhz| mhz * 1e6))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::create_dir_all(&cli.out).with_context(|| format!("creating {}", cli.out.display()))?;
    for scenario in SCENARIOS {
        if !cli.scenarios.is_empty() && !cli.scenarios.iter().any(|s| s == scenario.name) {
            continue;
        }
        for &threads in &cli.threads {
            let samples = (0..cli.repeat)
                .map(|_| run(&cli, &root, scenario, threads))
                .collect::<anyhow::Result<Vec<_>>>()?;
            println!("{}", summary(scenario.name, threads, &samples));
        }
    }
    Ok(())
}

/// Runs `scenario` once and reads its figures.
fn run(cli: &Cli, root: &Path, scenario: &Scenario, threads: u32) -> anyhow::Result<Sample> {
    let out = cli.out.join(format!("{}-t{threads}", scenario.name));
    let counters = out.with_extension("perf.csv");
    let mut command = if cli.perf {
        let mut perf = Command::new("perf");
        perf.args(["stat", "-x,", "-e", "cycles,cache-misses", "-o"])
            .arg(&counters)
            .arg("--")
            .arg(&cli.netsim);
        perf
    } else {
        Command::new(&cli.netsim)
    };
    command
        .current_dir(root)
        .arg("run")
        .args(scenario.args)
        .args(["--threads", &threads.to_string(), "--quiet", "--out"])
        .arg(&out);
    let cpu_before = children_cpu_s();
    let status = command
        .status()
        .with_context(|| format!("running {}", cli.netsim.display()))?;
    let cpu_s = children_cpu_s() - cpu_before;
    if !status.success() {
        bail!("{} failed: {status}", scenario.name);
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).context("reading run.json")?)?;
    let field = |key: &str| {
        summary[key]
            .as_f64()
            .with_context(|| format!("run.json has no {key}"))
    };
    let perf_csv = if cli.perf {
        std::fs::read_to_string(&counters).unwrap_or_default()
    } else {
        String::new()
    };
    Ok(Sample {
        events: field("events")? as u64,
        events_per_s: field("events_per_s")?,
        simulate_s: field("simulate_s")?,
        peak_rss_bytes: field("peak_rss_bytes")? as u64,
        cpu_s,
        cycles: counter(&perf_csv, "cycles"),
        cache_misses: counter(&perf_csv, "cache-misses"),
    })
}

/// A counter's value from `perf stat -x,` output; `None` where the machine
/// cannot count it (`<not supported>`, as in many VMs) or perf is absent.
fn counter(csv: &str, event: &str) -> Option<f64> {
    csv.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(',').collect();
        (fields.get(2) == Some(&event))
            .then(|| fields[0].parse().ok())
            .flatten()
    })
}

/// One JSON line: medians over the samples (the largest peak RSS).
fn summary(name: &str, threads: u32, samples: &[Sample]) -> serde_json::Value {
    let median = |values: Vec<f64>| -> Option<f64> {
        let mut values = values;
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        Some(values[values.len() / 2])
    };
    let events = samples[0].events;
    let per_event = |pick: fn(&Sample) -> Option<f64>| {
        median(samples.iter().filter_map(pick).collect()).map(|v| v / events as f64)
    };
    let cpu_s = median(samples.iter().map(|s| s.cpu_s).collect());
    let clock_hz = nominal_clock_hz();
    serde_json::json!({
        "scenario": name,
        "threads": threads,
        "runs": samples.len(),
        "events": events,
        "events_per_s": median(samples.iter().map(|s| s.events_per_s).collect()),
        "simulate_s": median(samples.iter().map(|s| s.simulate_s).collect()),
        "ns_per_event": median(samples.iter().map(|s| s.simulate_s * 1e9 / events as f64).collect()),
        "cpu_s": cpu_s,
        "nominal_clock_hz": clock_hz,
        "cycles_per_event_est": cpu_s.zip(clock_hz).map(|(cpu, hz)| cpu * hz / events as f64),
        "cycles_per_event": per_event(|s| s.cycles),
        "cache_misses_per_event": per_event(|s| s.cache_misses),
        "peak_rss_bytes": samples.iter().map(|s| s.peak_rss_bytes).max(),
    })
}
