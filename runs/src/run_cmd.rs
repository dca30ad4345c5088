//! `netsim run`: the flags of a simulation and wiring them into a run.

use crate::fault_args::{fault_records, FaultArgs};
use crate::fcts::Fcts;
use crate::memory_check::RunBytes;
use crate::network_args::NetworkArgs;
use crate::partition_cmd::balanced_partition;
use crate::progress::with_progress_bar;
use crate::ranks::Ranks;
use crate::telemetry::{
    prepare_output_dir, write_run_json, PartConfig, TableWriter, TelemetryError, TABLES,
};
use crate::topology_args::TopologyArgs;
use crate::traffic_args::TrafficArgs;
use crate::workload_args::WorkloadArgs;
use anyhow::{bail, Context as _};
use netsim_engine::{
    process::{memory_left_bytes, peak_rss_bytes},
    rank_shards, splitmix64, Layout, Progress, SimTime,
};
use netsim_models::flow;
use netsim_models::network::{collective_record, merge_spans, CollectiveSpan, Fabric, NetStats};
use netsim_models::telemetry::{
    CollectiveRecord, FaultRecord, FlowRecord, LinkSample, PfcRecord, QueueSample,
    SwitchOffloadRecord, TelemetrySink,
};
use netsim_models::workload::Workload;
use netsim_partition::{partition, Partition, PartitionConfig, Strategy};
use netsim_topo::Routing;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

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

    #[command(flatten)]
    pub traffic: TrafficArgs,
    #[command(flatten)]
    pub network: NetworkArgs,
    #[command(flatten)]
    pub faults: FaultArgs,

    #[command(flatten)]
    pub workload: WorkloadArgs,

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
    fn name(self) -> &'static str {
        match self {
            Fidelity::Packet => "packet",
            Fidelity::Flow => "flow",
        }
    }
}

/// Everything a run needs, built and checked from the flags.
pub struct Plan {
    pub fabric: Fabric,
    pub partition: Partition,
    pub layout: Layout,
    pub scenario: String,
    /// Said before the run starts (a workload on fewer hosts than the fabric).
    pub note: Option<String>,
    /// What the run adds beside the workload, as checked before it starts.
    pub run_bytes: RunBytes,
}

/// The telemetry of one shard, streamed to its Parquet part files. The first
/// write error is kept and reported after the run; the rows after it are
/// dropped rather than stopping the simulation midway.
struct ParquetSink {
    flows: TableWriter<FlowRecord>,
    queues: TableWriter<QueueSample>,
    pfc: TableWriter<PfcRecord>,
    switch_offload: TableWriter<SwitchOffloadRecord>,
    links: TableWriter<LinkSample>,
    error: Option<TelemetryError>,
    /// Completion times of finished flows, for the run's percentiles.
    fcts: Fcts,
}

impl ParquetSink {
    fn keep(&mut self, result: Result<(), TelemetryError>) {
        if let (Err(e), None) = (result, &self.error) {
            self.error = Some(e);
        }
    }

    /// Renames the part files into place; returns rows of (flows, queues,
    /// pfc, switch_offload, links).
    fn finish(self) -> Result<[u64; 5], TelemetryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok([
            self.flows.finish()?,
            self.queues.finish()?,
            self.pfc.finish()?,
            self.switch_offload.finish()?,
            self.links.finish()?,
        ])
    }
}

impl TelemetrySink for ParquetSink {
    fn flow(&mut self, record: FlowRecord) {
        if let Some(fct_ns) = record.fct_ns {
            self.fcts.push(fct_ns);
        }
        let r = self.flows.push(&record);
        self.keep(r);
    }
    fn queue(&mut self, sample: QueueSample) {
        let r = self.queues.push(&sample);
        self.keep(r);
    }
    fn pfc(&mut self, record: PfcRecord) {
        let r = self.pfc.push(&record);
        self.keep(r);
    }
    fn switch_offload(&mut self, record: SwitchOffloadRecord) {
        let r = self.switch_offload.push(&record);
        self.keep(r);
    }
    fn link(&mut self, sample: LinkSample) {
        let r = self.links.push(&sample);
        self.keep(r);
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

    /// Fails when a flow has more packets than a sender counts (2^32): the
    /// error names where its size came from.
    fn check_packets(&self, workload: &Workload, mtu_bytes: u32) -> anyhow::Result<()> {
        let max_bytes = u64::from(u32::MAX) * u64::from(mtu_bytes);
        let Some((i, flow)) = workload
            .flows
            .iter()
            .enumerate()
            .find(|(_, f)| f.size_bytes > max_bytes)
        else {
            return Ok(());
        };
        // A flow of a collective came from the workload (or a job), any
        // other from the traffic.
        let origin = if workload.flow_collective(i as u32).is_some() {
            match &self.workload.workload {
                Some(w) if std::path::Path::new(w).exists() => format!("--workload {w}"),
                Some(_) => "--size".to_string(),
                None => "--job".to_string(),
            }
        } else {
            match self.traffic.pattern().strip_prefix("tm:") {
                Some(file) => format!("--traffic tm:{file}"),
                None => "--flow-size".to_string(),
            }
        };
        bail!(
            "{origin}: flow {i} ({} -> {}) carries {} bytes, more than 2^32 packets of \
             --mtu {mtu_bytes} bytes ({max_bytes} bytes at most)",
            flow.src,
            flow.dst,
            flow.size_bytes
        )
    }

    /// The simulated time limit (`--end-us`), checked to fit; `MAX` without one.
    pub fn end(&self) -> anyhow::Result<SimTime> {
        self.end_us.map_or(Ok(SimTime::MAX), |us| {
            SimTime::try_from_us(us).map_err(|e| anyhow::anyhow!("--end-us: {e}"))
        })
    }

    /// Builds and checks everything a run needs, without running it.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        self.plan_for(0, 1)
    }

    /// [`RunArgs::plan_for_unlocated`], its errors located in the scenario file.
    fn plan_for(&self, rank: usize, ranks: usize) -> anyhow::Result<Plan> {
        self.plan_for_unlocated(rank, ranks)
            .map_err(|e| self.origins.locate(e))
    }

    /// The plan of rank `rank` out of `ranks`: every rank computes the same
    /// partition of `ranks` x [`RunArgs::shards`] shards, and routing tables
    /// for the switches it owns.
    fn plan_for_unlocated(&self, rank: usize, ranks: usize) -> anyhow::Result<Plan> {
        self.end()?;
        // Flags alone decide these: before the build, which can take minutes.
        if self.workload.fold_classes {
            if self.fidelity != Fidelity::Flow {
                anyhow::bail!(
                    "--fold-classes: classes are a flow-level model; add --fidelity flow"
                );
            }
            if self.workload.fold_dp == 1 {
                anyhow::bail!("--fold-classes: there is nothing folded; add --fold-dp N");
            }
        }
        let topo = self
            .topology
            .generate(&self.topo)
            .with_context(|| format!("--topo {}", self.topo))?;
        let topo = self.workload.with_dpus(topo)?;
        let config = self.network.config()?;
        let faults = self.faults.faults(&topo)?;
        let (workload, note) =
            self.workload
                .with_traffic(&self.traffic, &topo, &config, self.seed)?;
        self.check_packets(&workload, config.mtu_bytes)?;
        crate::limits::check_samples(&workload, config.sample_period, topo.link_count())?;
        let strategy: Strategy = self
            .partition
            .parse()
            .map_err(|e| anyhow::anyhow!("--partition: {e}"))?;
        let ranks_u32 = ranks as u32;
        let partition_config = PartitionConfig {
            shards: self.shards() * ranks_u32,
            strategy,
            latency_floor_ps: 0,
        };
        // The work estimate follows ECMP at every switch, so it needs every switch's rows;
        // one process keeps them for the run, ranks then keep only their own.
        let full = Routing::build_within(&topo, None, memory_left_bytes())
            .with_context(|| format!("--topo {}", self.topo))?;
        // Beside the routing tables, before the estimate and the partition walk every flow.
        let run_bytes = RunBytes::of(
            self.fidelity,
            &config,
            &topo,
            &workload,
            ranks,
            self.shards(),
        );
        crate::memory_check::check_run_memory(&run_bytes, workload.flows.len())
            .with_context(|| format!("--topo {}", self.topo))?;
        // One shard has nothing to balance: no need to walk every flow.
        let partitioned = if partition_config.shards == 1 {
            partition(&topo, &partition_config)
        } else {
            balanced_partition(
                &topo,
                &full,
                &workload,
                &config,
                partition_config,
                ranks_u32,
                self.shards.is_some() && rank == 0,
            )
            .map(|(partition, _)| partition)
        };
        let partition = partitioned.map_err(|e| match ranks {
            1 => anyhow::Error::from(e),
            _ => {
                anyhow::Error::from(e).context(format!("{ranks} ranks x {} shards", self.shards()))
            }
        })?;
        let layout = Layout::new(
            partition.shard_of.clone(),
            partition.shards,
            partition.lookahead,
        )?;
        let (routing, owned) = if ranks == 1 {
            (full, None)
        } else {
            drop(full);
            // Routing rows for the switches this rank owns: they dominate the memory of a
            // large fabric.
            let local = rank_shards(layout.shards(), rank, ranks);
            let owned: Vec<bool> = partition
                .shard_of
                .iter()
                .map(|s| local.contains(&s.index()))
                .collect();
            let routing = Routing::build_within(&topo, Some(&owned), memory_left_bytes())
                .with_context(|| format!("--topo {}", self.topo))?;
            (routing, Some(owned))
        };
        let fault_plan = self.faults.plan(&topo, faults, owned.as_deref())?;
        let scenario = match (&self.config, &self.workload.workload) {
            (Some(path), _) => path.display().to_string(),
            (None, Some(w)) => format!("{} {w}", self.topo),
            (None, None) if !self.workload.job.is_empty() => {
                format!("{} {} jobs", self.topo, self.workload.job.len())
            }
            (None, None) => format!("{} {}", self.topo, self.traffic.pattern()),
        };
        let mut fabric = Fabric::with_workload(topo, routing, workload, config, self.seed);
        fabric.faults = fault_plan;
        crate::fast_forward_args::check(&fabric, ranks)?;
        if self.fidelity == Fidelity::Flow {
            if !fabric.faults.is_empty() {
                anyhow::bail!("--fault: the flow level has no faults; use --fidelity packet");
            }
            if fabric.config.link_error_rate > 0.0 {
                anyhow::bail!(
                    "--link-error-rate: the flow level loses nothing; use --fidelity packet"
                );
            }
            if fabric.topo.has_lossy_links() {
                anyhow::bail!(
                    "--topo: the topology file's links lose packets (error_rate), the flow \
                     level loses nothing; use --fidelity packet"
                );
            }
            netsim_models::flow::check(&fabric)?;
            if ranks > 1 {
                anyhow::bail!("--fidelity flow: runs in one process; start it without mpirun");
            }
        }
        Ok(Plan {
            run_bytes,
            fabric,
            partition,
            layout,
            scenario,
            note,
        })
    }

    /// Runs the scenario on this process's shards. Under MPI every rank
    /// calls it with the same flags; rank 0 writes `run.json`, the
    /// `collectives` table, the progress bar and the summary line.
    pub fn run(&self, ranks: &Ranks) -> anyhow::Result<()> {
        let started = Instant::now();
        let (rank, size) = (ranks.rank(), ranks.size());
        let plan = ranks.agree(self.plan_for(rank, size))?;
        if let (Some(note), 0) = (&plan.note, rank) {
            eprintln!("{note}");
        }
        ranks.check_same("partition", fingerprint(&plan.partition))?;
        let layout = &plan.layout;
        let local = ranks.local_shards(layout);
        let part = |shard: usize| PartConfig {
            out_dir: self.out.clone(),
            scenario: plan.scenario.clone(),
            seed: self.seed,
            rank: rank as u32,
            shard: shard as u32,
            row_group_rows: crate::telemetry::DEFAULT_ROW_GROUP_ROWS,
        };
        // Rank 0 clears the output directory before anyone writes into it.
        ranks.agree(if rank == 0 {
            prepare_output_dir(&self.out, TABLES).map_err(Into::into)
        } else {
            Ok(())
        })?;
        let sinks = ranks.agree(
            local
                .clone()
                .map(|shard| {
                    let part = part(shard);
                    Ok(Mutex::new(Some(ParquetSink {
                        flows: TableWriter::create(&part)?,
                        queues: TableWriter::create(&part)?,
                        pfc: TableWriter::create(&part)?,
                        switch_offload: TableWriter::create(&part)?,
                        links: TableWriter::create(&part)?,
                        error: None,
                        // One flow-level sink sees every flow.
                        fcts: match self.fidelity {
                            Fidelity::Flow => Fcts::with_capacity(plan.fabric.workload.flows.len()),
                            Fidelity::Packet => Fcts::default(),
                        },
                    })))
                })
                .collect::<Result<Vec<_>, TelemetryError>>()
                .map_err(Into::into),
        )?;
        let setup_s = started.elapsed().as_secs_f64();
        let end = self.end()?;

        let sim_started = Instant::now();
        let progress = Progress::new();
        let known_end = (end != SimTime::MAX).then_some(end);
        // Under MPI the bar is rank 0's (its shards' events).
        let show_progress = !self.quiet && rank == 0;
        let take_sink = |shard: usize| {
            sinks[shard - local.start]
                .lock()
                .expect("sink lock")
                .take()
                .expect("each shard takes its sink once")
        };
        let mut run = with_progress_bar(&progress, known_end, show_progress, || {
            match self.fidelity {
                Fidelity::Packet => {
                    ranks.simulate(&plan.fabric, layout, end, Some(&progress), |shard| {
                        take_sink(shard.index())
                    })
                }
                Fidelity::Flow => flow::simulate(&plan.fabric, end, Some(&progress), take_sink(0)),
            }
        });
        let sim_s = sim_started.elapsed().as_secs_f64();

        let stats = run.stats();
        let skip = run.skip();
        let spans = run.take_spans();
        let events_per_shard: Vec<u64> = run.shards.iter().map(|s| s.handled_events).collect();
        let mut fcts = Fcts::default();
        let finished: anyhow::Result<[u64; 5]> =
            run.shards
                .into_iter()
                .try_fold([0u64; 5], |mut rows, mut shard| {
                    fcts.append(&mut shard.sink.fcts);
                    for (total, n) in rows.iter_mut().zip(shard.sink.finish()?) {
                        *total += n;
                    }
                    Ok(rows)
                });
        let rows = ranks.agree(finished)?;

        // Every rank's figures to rank 0, as one record per rank.
        let wall_s = started.elapsed().as_secs_f64();
        let mut mine = vec![
            events_per_shard.iter().sum(),
            wall_s.to_bits(),
            setup_s.to_bits(),
            sim_s.to_bits(),
            peak_rss_bytes(),
            stats.sent_payload_bytes,
            stats.delivered_payload_bytes,
            stats.dropped_pkts,
            stats.pfc_pauses,
            stats.flows_finished,
            stats.retransmitted_pkts,
        ];
        mine.extend(rows);
        mine.extend([
            skip.skipped.as_ps(),
            skip.skips,
            skip.events_avoided,
            stats.ff_flow_steady_bytes,
            stats.memo_hits,
            stats.memo_misses,
            stats.memo_events_avoided,
            stats.memo_sandbox_events,
        ]);
        mine.extend(&events_per_shard);
        let record = mine.len();
        let gathered = ranks.gather(&mine);
        // One process keeps its own (10^8 flows and 10^7 collectives in a
        // large job): no copies to gather.
        let (fcts, spans) = if size == 1 {
            (Some(fcts), Some(spans))
        } else {
            (
                ranks
                    .gather_varcount(&fcts.to_ns())
                    .map(|t| Fcts::from_ns(&t)),
                gather_spans(ranks, &spans),
            )
        };
        let (Some(gathered), Some(mut fcts), Some(spans)) = (gathered, fcts, spans) else {
            return Ok(());
        };
        let per_rank: Vec<&[u64]> = gathered.chunks(record).collect();
        let sum = |i: usize| per_rank.iter().map(|r| r[i]).sum::<u64>();
        let max_f64 = |i: usize| {
            per_rank
                .iter()
                .map(|r| f64::from_bits(r[i]))
                .fold(0.0, f64::max)
        };
        let events = sum(0);
        let (wall_s, setup_s, sim_s) = (max_f64(1), max_f64(2), max_f64(3));
        let peak_rss_per_rank: Vec<u64> = per_rank.iter().map(|r| r[4]).collect();
        let stats = NetStats {
            sent_payload_bytes: sum(5),
            delivered_payload_bytes: sum(6),
            dropped_pkts: sum(7),
            pfc_pauses: sum(8),
            flows_finished: sum(9),
            retransmitted_pkts: sum(10),
            ff_flow_steady_bytes: sum(19),
            memo_hits: sum(20),
            memo_misses: sum(21),
            memo_events_avoided: sum(22),
            memo_sandbox_events: sum(23),
        };
        let rows: Vec<u64> = (11..16).map(sum).collect();
        // The jumps are the same on every rank; the events they avoided add up.
        let (skipped_ps, skips, events_avoided) = (per_rank[0][16], per_rank[0][17], sum(18));
        let events_per_shard: Vec<u64> = per_rank.iter().flat_map(|r| &r[24..]).copied().collect();
        let ranks_json: Vec<_> = per_rank
            .iter()
            .enumerate()
            .map(|(rank, r)| {
                serde_json::json!({
                    "rank": rank,
                    "events": r[0],
                    "wall_s": f64::from_bits(r[1]),
                    "setup_s": f64::from_bits(r[2]),
                    "simulate_s": f64::from_bits(r[3]),
                    "peak_rss_bytes": r[4],
                })
            })
            .collect();

        // One row per collective, from what every shard of every rank saw
        // of it, written as it is made.
        let workload = &plan.fabric.workload;
        let collectives = workload.collectives.len().min(spans.len());
        let mut collectives_done = 0;
        let mut writer = TableWriter::<CollectiveRecord>::create(&part(0))?;
        for (id, span) in spans.iter().enumerate().take(collectives) {
            let c = collective_record(workload, id as u32, span);
            collectives_done += usize::from(c.end_ns.is_some());
            writer.push(&c)?;
        }
        drop(spans);
        let collective_rows = writer.finish()?;
        let mut writer = TableWriter::<FaultRecord>::create(&part(0))?;
        for f in fault_records(&plan.fabric.faults) {
            writer.push(&f)?;
        }
        let fault_rows = writer.finish()?;

        let (fct_p50_ns, fct_p99_ns) = (fcts.percentile(0.5), fcts.percentile(0.99));
        drop(fcts);
        let shards = plan.partition.shards;
        let mut summary = serde_json::json!({
            "scenario": plan.scenario,
            "topology": plan.fabric.topo.kind(),
            "hosts": plan.fabric.topo.host_count(),
            "nodes": plan.fabric.topo.node_count(),
            "links": plan.fabric.topo.link_count(),
            "seed": self.seed,
            "version": env!("CARGO_PKG_VERSION"),
            "shards": shards,
            "threads": shards as usize / size,
            "ranks": size,
            "partition": plan.partition.report.strategy.to_string(),
            "edge_cut": plan.partition.report.edge_cut,
            "load_imbalance": plan.partition.report.load_imbalance,
            "lookahead_ps": plan.partition.lookahead.as_ps(),
            "windows": run.windows,
            "events": events,
            "events_per_shard": events_per_shard,
            "wall_s": wall_s,
            "setup_s": setup_s,
            "simulate_s": sim_s,
            "events_per_s": events as f64 / sim_s,
            "peak_rss_bytes": peak_rss_per_rank.iter().max(),
            "per_rank": ranks_json,
            "sim_end_ns": run.sim_end.as_ns(),
            "flows": plan.fabric.workload.flows.len(),
            "collectives": collectives,
            "collectives_finished": collectives_done,
            "flows_finished": stats.flows_finished,
            "fct_p50_ns": fct_p50_ns,
            "fct_p99_ns": fct_p99_ns,
            "sent_payload_bytes": stats.sent_payload_bytes,
            "delivered_payload_bytes": stats.delivered_payload_bytes,
            "dropped_pkts": stats.dropped_pkts,
            "pfc_pauses": stats.pfc_pauses,
            "rows": {
                "flows": rows[0],
                "queues": rows[1],
                "pfc": rows[2],
                "switch_offload": rows[3],
                "collectives": collective_rows,
                "links": rows[4],
            },
        });
        // Added apart from the literal above, which is at the json! macro's
        // recursion limit: the truth next to the estimate (`load_imbalance`),
        // and the fidelity.
        summary["events_imbalance"] = imbalance(&events_per_shard).into();
        summary["fidelity"] = self.fidelity.name().into();
        summary["fold_dp"] = self.workload.fold_dp.into();
        summary["fold_classes"] = self.workload.fold_classes.into();
        summary["network"] =
            crate::network_args::config_json(&self.network.cc_profile, &plan.fabric.config);
        summary["fast_forward"] = crate::fast_forward_args::summary(
            &plan.fabric,
            &stats,
            skipped_ps,
            skips,
            events_avoided,
        );
        summary["retransmitted_pkts"] = stats.retransmitted_pkts.into();
        summary["faults"] = plan.fabric.faults.faults.len().into();
        summary["tasks"] = plan.fabric.workload.tasks.len().into();
        summary["edges"] = plan.fabric.workload.edge_count().into();
        summary["workload_bytes"] = crate::memory_check::workload_bytes_json(&plan.fabric.workload);
        summary["run_bytes_predicted"] = plan.run_bytes.json();
        summary["rows"]["faults"] = fault_rows.into();
        write_run_json(&self.out, &summary)?;
        if !self.quiet {
            let collectives_note = if collectives == 0 {
                String::new()
            } else {
                format!("{collectives_done}/{collectives} collectives finished, ")
            };
            eprintln!(
                "netsim: {events} events in {sim_s:.3} s ({:.2} M events/s), wall {wall_s:.3} s, \
                 {}/{} flows finished, {collectives_note}FCT p50 {} us p99 {} us, simulated {:.1} us, \
                 output {}",
                events as f64 / sim_s / 1e6,
                stats.flows_finished,
                plan.fabric.workload.flows.len(),
                fct_p50_ns.map_or("-".into(), |f| format!("{:.1}", f as f64 / 1e3)),
                fct_p99_ns.map_or("-".into(), |f| format!("{:.1}", f as f64 / 1e3)),
                run.sim_end.as_ps() as f64 / 1e6,
                self.out.display()
            );
        }
        Ok(())
    }
}

/// Collective: every rank's collective spans, merged on rank 0.
fn gather_spans(ranks: &Ranks, spans: &[CollectiveSpan]) -> Option<Vec<CollectiveSpan>> {
    let flat: Vec<u64> = spans
        .iter()
        .flat_map(|s| [s.start.as_ps(), s.end.as_ps(), u64::from(s.tasks_done)])
        .collect();
    let all: Vec<CollectiveSpan> = ranks
        .gather(&flat)?
        .chunks_exact(3)
        .map(|s| CollectiveSpan {
            start: SimTime(s[0]),
            end: SimTime(s[1]),
            tasks_done: s[2] as u32,
        })
        .collect();
    let per_rank = all.len() / ranks.size();
    Some(merge_spans(all.chunks(per_rank.max(1))))
}

/// The largest of `per_shard` over their mean, minus 1 (0 when all are 0).
fn imbalance(per_shard: &[u64]) -> f64 {
    let total: u64 = per_shard.iter().sum();
    let max = per_shard.iter().copied().max().unwrap_or(0);
    if total == 0 {
        0.0
    } else {
        max as f64 * per_shard.len() as f64 / total as f64 - 1.0
    }
}

/// A hash of the node -> shard map and lookahead, to check that all ranks
/// computed the same partition.
fn fingerprint(partition: &Partition) -> u64 {
    let mut h = partition.lookahead.as_ps() ^ u64::from(partition.shards) << 32;
    for shard in &partition.shard_of {
        h = (h ^ u64::from(shard.0)).wrapping_mul(0x100_0000_01B3);
    }
    splitmix64(&mut h)
}
