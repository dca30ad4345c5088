//! `netsim dpu-bench`: DPU-Bench (Michalowicz et al., PEARC '23) on the
//! packet-level fabric — the four staged patterns for both assignments over
//! worker counts and sizes, a `dpu_bench` Parquet table and a summary.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use netsim_engine::SimTime;
use netsim_models::dpu::default_net;
use netsim_models::workload::dpu::staged::{Assign, Pattern};
use netsim_models::workload::file::parse_size;
use netsim_topo::units::{parse_gbps, parse_ns};
use netsim_topo::{FatTreeParams, LinkParams, StarParams, TopoSpec};
use rayon::prelude::*;

use crate::dpu_args::DpuArgs;
use crate::dpu_bench::{Bench, BenchRow, HostCost};
use crate::telemetry::{
    prepare_output_dir, table_row, write_run_json, PartConfig, TableRow, TableWriter,
    DEFAULT_ROW_GROUP_ROWS,
};

/// `netsim dpu-bench [--topo star|fat-tree] [--nodes N --ppn N] [--sizes ..]
/// [--workers ..] [--patterns ..] [--assign ..] [DPU flags] [--out DIR]`.
#[derive(clap::Args, Debug)]
pub struct DpuBenchCmd {
    /// star (one switch) or fat-tree (3 tiers, --k).
    #[arg(long, default_value = "star")]
    pub topo: String,
    /// Fat-tree radix (k^3/4 servers; the benchmark uses the first --nodes).
    #[arg(long, default_value_t = 4)]
    pub k: u32,
    /// Network port and fabric link bandwidth, Gb/s (HDR100: 100).
    #[arg(long, value_parser = parse_gbps, default_value = "100", value_name = "GBPS")]
    pub link_gbps: u64,
    /// Fabric link latency, ns.
    #[arg(long, value_parser = parse_ns, default_value = "1000", value_name = "NS")]
    pub link_latency_ns: u64,
    /// Nodes (servers with a DPU each).
    #[arg(long, default_value_t = 8)]
    pub nodes: u32,
    /// Host processes per node.
    #[arg(long, default_value_t = 8)]
    pub ppn: u32,
    /// Bytes per process of broadcast and gather, comma separated (`256KiB,1MiB`).
    #[arg(long, default_value = "256KiB,512KiB,1MiB,2MiB,4MiB")]
    pub sizes: String,
    /// Bytes per process of the two allgathers. Every process's block goes
    /// to every other process (64 x 63 blocks at 8 x 8), so one 4 MiB point
    /// is 16 GiB of packets; the default keeps the sweep to about a minute.
    #[arg(long, default_value = "256KiB")]
    pub allgather_sizes: String,
    /// Worker counts, comma separated; default 1, 2, 4, .. below one per
    /// DPU, then every whole number per DPU up to the cores.
    #[arg(long)]
    pub workers: Option<String>,
    /// Patterns: broadcast, gather, allgather_single_leader, allgather_all_in.
    #[arg(
        long,
        default_value = "broadcast,gather,allgather_single_leader,allgather_all_in"
    )]
    pub patterns: String,
    /// Assignments of processes to workers: cyclic, block.
    #[arg(long, default_value = "cyclic,block")]
    pub assign: String,
    #[command(flatten)]
    pub dpu: DpuArgs,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory (gets `dpu_bench/` and `run.json`).
    #[arg(long, default_value = "netsim-out")]
    pub out: PathBuf,
}

table_row! {
    BenchRow => "dpu_bench", |r| {
        pattern: &str = r.pattern.name(),
        assign: &str = r.assign.name(),
        workers: u32,
        wpn: u32,
        size_bytes: u64,
        reference_ns: u64,
        pure_comm_ns: u64,
        compute_ns: u64,
        offload_efficiency_pct: f64,
    }
}

/// Runs every `(pattern, assign, workers, size, reference)` point in
/// parallel, printing each as it finishes.
fn run_points(
    bench: &Bench,
    points: &[(Pattern, Assign, u32, u64, SimTime)],
) -> Result<Vec<BenchRow>, crate::dpu_bench::DpuError> {
    points
        .par_iter()
        .map(|&(p, a, w, s, r)| {
            let t = Instant::now();
            let row = bench.point(p, a, w, s, r)?;
            // One write per line, so lines from parallel points never interleave.
            let line = format!(
                "  {:<24} {:<6} {:>9} w={:<3} wpn={} {:>6.1}%  ({:.2} s)\n",
                p.name(),
                a.name(),
                s,
                w,
                row.wpn,
                row.offload_efficiency_pct,
                t.elapsed().as_secs_f64()
            );
            let _ = std::io::stdout().lock().write_all(line.as_bytes());
            Ok(row)
        })
        .collect::<Result<_, crate::dpu_bench::DpuError>>()
}

fn list<T>(flag: &str, text: &str, parse: impl Fn(&str) -> Option<T>) -> anyhow::Result<Vec<T>> {
    let items: Vec<T> = text
        .split(',')
        .map(|s| parse(s.trim()).with_context(|| format!("{flag}: `{}` is not valid", s.trim())))
        .collect::<anyhow::Result<_>>()?;
    if items.is_empty() {
        bail!("{flag}: give at least one value");
    }
    Ok(items)
}

impl DpuBenchCmd {
    fn bench(&self) -> anyhow::Result<Bench> {
        if self.nodes == 0 || self.nodes > 4096 {
            bail!("--nodes: must be 1..=4096, got {}", self.nodes);
        }
        if self.ppn == 0 || self.ppn > 4096 {
            bail!("--ppn: must be 1..=4096, got {}", self.ppn);
        }
        let link = LinkParams {
            bandwidth_bps: self.link_gbps,
            latency_ps: self.link_latency_ns,
        };
        let spec = match self.topo.as_str() {
            "star" => TopoSpec::Star(StarParams {
                hosts: self.nodes,
                host_link: link,
            }),
            "fat-tree" => TopoSpec::FatTree(FatTreeParams {
                k: self.k,
                tiers: 3,
                oversub: 1,
                host_link: link,
                agg_link: link,
                core_link: link,
                ..FatTreeParams::default()
            }),
            other => bail!("--topo: `{other}` is not star or fat-tree"),
        };
        let base = netsim_topo::build(&spec).map_err(|e| anyhow::anyhow!("{e}"))?;
        let params = self.dpu.params()?;
        Bench::new(
            &base,
            &params,
            self.nodes,
            self.ppn,
            default_net(),
            HostCost::default(),
            self.seed,
        )
        .map_err(|e| anyhow::anyhow!("--nodes/--ppn: {e}"))
    }

    /// Runs every point (in parallel, each printed as it finishes), writes
    /// the table and `run.json`, prints the summary.
    pub fn run(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        let size_list = |flag: &str, text: &str| -> anyhow::Result<Vec<u64>> {
            let sizes = list(flag, text, |s| parse_size(s).ok().filter(|&b| b > 0))?;
            if let Some(s) = sizes.iter().find(|&&s| s > 1 << 34) {
                bail!("{flag}: {s} bytes is over 16 GiB");
            }
            Ok(sizes)
        };
        let sizes = size_list("--sizes", &self.sizes)?;
        let allgather_sizes = size_list("--allgather-sizes", &self.allgather_sizes)?;
        let patterns = list("--patterns", &self.patterns, Pattern::parse)?;
        let assigns = list("--assign", &self.assign, Assign::parse)?;
        let bench = self.bench()?;
        let workers = self.worker_list(&bench)?;
        prepare_output_dir(&self.out, &[BenchRow::TABLE])?;
        let refs: Vec<(Pattern, u64)> = patterns
            .iter()
            .flat_map(|&p| {
                let sizes = match p {
                    Pattern::Broadcast | Pattern::Gather => &sizes,
                    _ => &allgather_sizes,
                };
                sizes.iter().map(move |&s| (p, s))
            })
            .collect();
        let reference: Vec<SimTime> = refs
            .par_iter()
            .map(|&(p, s)| bench.reference(p, s))
            .collect::<Result<_, _>>()?;
        let mut points = Vec::new();
        for (i, &(p, s)) in refs.iter().enumerate() {
            for &a in &assigns {
                for &w in &workers {
                    points.push((p, a, w, s, reference[i]));
                }
            }
        }
        println!(
            "{} points ({} references in {:.1} s); each printed as it finishes:",
            points.len(),
            refs.len(),
            started.elapsed().as_secs_f64()
        );
        let rows = run_points(&bench, &points)?;
        let written = self.write_table(&rows)?;
        self.summary(&rows, &workers);
        let wall_s = started.elapsed().as_secs_f64();
        write_run_json(
            &self.out,
            &serde_json::json!({
                "scenario": "dpu-bench",
                "seed": self.seed,
                "version": env!("CARGO_PKG_VERSION"),
                "topology": bench.fabric.topo.kind(),
                "nodes": self.nodes,
                "ppn": self.ppn,
                "points": rows.len(),
                "wall_s": wall_s,
                "tables": { "dpu_bench": written },
            }),
        )?;
        println!(
            "{} points in {wall_s:.1} s; table in {}",
            rows.len(),
            self.out.join(BenchRow::TABLE).display()
        );
        Ok(())
    }

    /// The worker counts to run: --workers, or the paper's; each must fit
    /// the DPUs' cores and the host processes.
    fn worker_list(&self, bench: &Bench) -> anyhow::Result<Vec<u32>> {
        let cores = bench.fabric.params.cores;
        let workers = match &self.workers {
            Some(text) => list("--workers", text, |s| s.parse::<u32>().ok())?,
            None => bench.worker_counts(),
        };
        for &w in &workers {
            if w == 0 || w > self.nodes * self.ppn || w.div_ceil(self.nodes) > cores {
                bail!(
                    "--workers: {w} is not 1..={} with at most --dpu-cores per DPU",
                    (self.nodes * self.ppn).min(self.nodes * cores)
                );
            }
        }
        Ok(workers)
    }

    /// Writes `rows` as the `dpu_bench` table; returns its row count.
    fn write_table(&self, rows: &[BenchRow]) -> anyhow::Result<u64> {
        let mut writer = TableWriter::<BenchRow>::create(&PartConfig {
            out_dir: self.out.clone(),
            scenario: "dpu-bench".into(),
            seed: self.seed,
            rank: 0,
            shard: 0,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
        })?;
        for r in rows {
            writer.push(r)?;
        }
        Ok(writer.finish()?)
    }

    /// One line per (pattern, assignment, size): efficiency at each worker count.
    fn summary(&self, rows: &[BenchRow], workers: &[u32]) {
        print!("{:<24} {:<6} {:>9}", "pattern", "assign", "size");
        for w in workers {
            print!(" {:>6}", format!("w={w}"));
        }
        println!();
        for line in rows.chunks(workers.len()) {
            let r = &line[0];
            print!(
                "{:<24} {:<6} {:>9}",
                r.pattern.name(),
                r.assign.name(),
                r.size_bytes
            );
            for r in line {
                print!(" {:>6.1}", r.offload_efficiency_pct);
            }
            println!();
        }
    }
}
