//! Running a plan on this process's shards: each shard's telemetry
//! streamed to its Parquet part files (or kept in memory for the Python
//! API), the simulation with its progress bar, and what the shards did
//! handed to `run_summary.rs`.

use crate::fcts::{exact_percentiles, read_fcts, FlowsPart};
use crate::progress::with_progress_bar;
use crate::ranks::Ranks;
use crate::run_cmd::{Fidelity, RunArgs};
use crate::run_summary::{FctTimes, Outcome, StreamedCollectives};
use crate::run_tables::{KeptPart, KeptTable, Output, RunTables};
use crate::telemetry::{
    part_name, prepare_output_dir, Kept, PartConfig, TableRow, TableWriter, TelemetryError, TABLES,
};
use netsim_engine::{splitmix64, Progress, SimTime};
use netsim_models::flow;
use netsim_models::network::ShardOutcome;
use netsim_models::telemetry::{
    CollectiveRecord, FlowRecord, LinkSample, PfcRecord, QueueSample, SwitchOffloadRecord,
    TelemetrySink,
};
use netsim_partition::Partition;
use std::sync::Mutex;
use std::time::Instant;

/// The telemetry of one shard, streamed to its Parquet part files (or kept
/// in memory). The first write error is kept and reported after the run;
/// the rows after it are dropped rather than stopping the simulation midway.
struct ParquetSink {
    /// The part's rank and shard.
    rank: u32,
    shard: u32,
    flows: TableWriter<FlowRecord>,
    queues: TableWriter<QueueSample>,
    pfc: TableWriter<PfcRecord>,
    switch_offload: TableWriter<SwitchOffloadRecord>,
    links: TableWriter<LinkSample>,
    /// A flow-level run's `collectives` table, streamed as its rows become
    /// final (packet level writes it after the run, from every shard's
    /// spans), and the rows of finished collectives.
    collectives: Option<(TableWriter<CollectiveRecord>, usize)>,
    error: Option<TelemetryError>,
}

impl ParquetSink {
    fn keep(&mut self, result: Result<(), TelemetryError>) {
        if let (Err(e), None) = (result, &self.error) {
            self.error = Some(e);
        }
    }

    /// The names of the tables [`ParquetSink::finish`] returns, in order.
    const TABLES: [&'static str; 5] = [
        FlowRecord::TABLE,
        QueueSample::TABLE,
        PfcRecord::TABLE,
        SwitchOffloadRecord::TABLE,
        LinkSample::TABLE,
    ];

    /// Renames the part files into place; returns what was kept of (flows,
    /// queues, pfc, switch_offload, links), and of the streamed collectives.
    fn finish(self) -> Result<([Kept; 5], Option<StreamedCollectives>), TelemetryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let tables = [
            self.flows.finish_kept()?,
            self.queues.finish_kept()?,
            self.pfc.finish_kept()?,
            self.switch_offload.finish_kept()?,
            self.links.finish_kept()?,
        ];
        let collectives = match self.collectives {
            Some((writer, finished)) => Some(StreamedCollectives {
                kept: writer.finish_kept()?,
                finished,
            }),
            None => None,
        };
        Ok((tables, collectives))
    }
}

impl TelemetrySink for ParquetSink {
    fn flow(&mut self, record: FlowRecord) {
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
    fn takes_collectives(&self) -> bool {
        self.collectives.is_some()
    }
    fn collective(&mut self, record: CollectiveRecord) {
        let (writer, finished) = self.collectives.as_mut().expect("takes collectives");
        *finished += usize::from(record.end_ns.is_some());
        let r = writer.push(&record);
        self.keep(r);
    }
}

impl RunArgs {
    /// Runs the scenario on this process's shards. Under MPI every rank
    /// calls it with the same flags; rank 0 writes `run.json`, the
    /// `collectives` table, the progress bar and the summary line.
    ///
    /// SIGINT or SIGTERM stops it at the next synchronisation window: the
    /// tables hold what was written, `run.json` says `"interrupted": true`
    /// ([`crate::interrupt`]).
    pub fn run(&self, ranks: &Ranks) -> anyhow::Result<()> {
        crate::interrupt::install();
        let progress = &crate::interrupt::CLI_PROGRESS;
        self.run_with(ranks, Output::Files, progress)?;
        if let (Some(by), 0) = (crate::interrupt::signal_name(), ranks.rank()) {
            eprintln!(
                "netsim: stopped by {by} at simulated {} ns; run.json says interrupted",
                progress.sim_time().as_ns()
            );
        }
        Ok(())
    }

    /// Runs the scenario in this process, its tables and summary kept in
    /// memory rather than written (the Python API). The caller may watch
    /// `progress` from another thread and stop the run through it: the
    /// run then unwinds with [`netsim_engine::Stopped`].
    pub fn run_in_memory(&self, progress: &Progress) -> anyhow::Result<RunTables> {
        let ranks = Ranks::init()?;
        let tables = self.run_with(&ranks, Output::Memory, progress)?;
        Ok(tables.expect("a single process is rank 0"))
    }

    /// The run, its tables going to `output`; rank 0 returns them when
    /// they were kept in memory.
    fn run_with(
        &self,
        ranks: &Ranks,
        output: Output,
        progress: &Progress,
    ) -> anyhow::Result<Option<RunTables>> {
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
        ranks.agree(if rank == 0 && output == Output::Files {
            prepare_output_dir(&self.out, TABLES).map_err(Into::into)
        } else {
            Ok(())
        })?;
        let sinks = ranks.agree(
            local
                .clone()
                .map(|shard| self.sink(output, &part(shard)).map(|s| Mutex::new(Some(s))))
                .collect::<Result<Vec<_>, TelemetryError>>()
                .map_err(Into::into),
        )?;
        let setup_s = started.elapsed().as_secs_f64();
        let end = self.end()?;

        let sim_started = Instant::now();
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
        let simulate = || {
            with_progress_bar(progress, known_end, show_progress, || match self.fidelity {
                Fidelity::Packet => {
                    ranks.simulate(&plan.fabric, layout, end, Some(progress), |shard| {
                        take_sink(shard.index())
                    })
                }
                Fidelity::Flow => flow::simulate(&plan.fabric, end, Some(progress), take_sink(0)),
            })
        };
        let mut run = if plan.fabric.external.is_empty() {
            simulate()
        } else {
            // A SimBricks peer's failure or SIGTERM stops every shard.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(simulate)) {
                Ok(run) => run,
                Err(panic) => {
                    return crate::simbricks_args::after_stop(&plan.fabric, panic).map(|()| None)
                }
            }
        };
        let sim_s = sim_started.elapsed().as_secs_f64();

        let stats = run.stats();
        let skip = run.skip();
        let spans = run.take_spans();
        let events_per_shard: Vec<u64> = run.shards.iter().map(|s| s.handled_events).collect();
        let finished = finish_shards(run.shards);
        let (rows, mut tables, collectives) = ranks.agree(finished)?;
        let fcts = ranks.agree(self.fct_times(ranks, output, &tables[0]))?;
        // Every rank stopped at the same exchange; rank 0 learns why.
        if let Some(signals) = ranks.gather(&[crate::interrupt::signal_number()]) {
            crate::interrupt::adopt_first(&signals);
        }
        let outcome = Outcome {
            started,
            setup_s,
            sim_s,
            stats,
            skip,
            spans,
            collectives,
            events_per_shard,
            fcts,
            rows,
            windows: run.windows,
            sim_end: run.sim_end,
            interrupted: progress.interrupted() || crate::interrupt::signal_name().is_some(),
        };
        let summary = self.write_summary(ranks, &plan, outcome, &part(0), output)?;
        Ok(match (output, summary) {
            (Output::Memory, Some((summary, kept))) => {
                tables.extend(kept);
                // In the order the CLI lists its tables.
                tables.sort_by_key(|t| TABLES.iter().position(|&name| name == t.name));
                Some(RunTables {
                    tables,
                    summary,
                    scenario: plan.scenario.clone(),
                    seed: self.seed,
                })
            }
            _ => None,
        })
    }

    /// The telemetry sink of the part `part`.
    fn sink(&self, output: Output, part: &PartConfig) -> Result<ParquetSink, TelemetryError> {
        Ok(ParquetSink {
            rank: part.rank,
            shard: part.shard,
            flows: output.writer(part)?,
            queues: output.writer(part)?,
            pfc: output.writer(part)?,
            switch_offload: output.writer(part)?,
            links: output.writer(part)?,
            // A flow-level run is one sequential part, rank 0's first.
            collectives: match self.fidelity {
                Fidelity::Flow => Some((output.writer(part)?, 0)),
                Fidelity::Packet => None,
            },
            error: None,
        })
    }

    /// The completion times of the flows of this rank's `flows` table,
    /// read back from its parts: their percentiles when this is the only
    /// rank, else every time for rank 0 to gather.
    fn fct_times(
        &self,
        ranks: &Ranks,
        output: Output,
        flows: &KeptTable,
    ) -> anyhow::Result<FctTimes> {
        debug_assert_eq!(flows.name, FlowRecord::TABLE);
        let dir = self.out.join(FlowRecord::TABLE);
        let parts: Vec<FlowsPart> = flows
            .parts
            .iter()
            .map(|p| match output {
                Output::Files => FlowsPart::File(dir.join(part_name(p.rank, p.shard))),
                Output::Memory => FlowsPart::Batches(&p.kept.batches),
            })
            .collect();
        Ok(if ranks.size() == 1 {
            FctTimes::Percentiles(exact_percentiles(&parts, [0.5, 0.99])?)
        } else {
            FctTimes::Kept(read_fcts(&parts)?)
        })
    }
}

/// Finishes every shard's sink: the rows of (flows, queues, pfc, switch_offload, links) summed
/// over the shards, those tables' parts when kept in memory, and the
/// `collectives` table when a sink streamed it.
fn finish_shards(
    shards: Vec<ShardOutcome<ParquetSink>>,
) -> anyhow::Result<([u64; 5], Vec<KeptTable>, Option<StreamedCollectives>)> {
    let mut tables: Vec<KeptTable> = ParquetSink::TABLES
        .iter()
        .map(|&name| KeptTable {
            name,
            parts: Vec::new(),
        })
        .collect();
    let mut rows = [0u64; 5];
    let mut streamed = None;
    for shard in shards {
        let (rank, shard_id) = (shard.sink.rank, shard.sink.shard);
        let (kept_tables, collectives) = shard.sink.finish()?;
        streamed = streamed.or(collectives);
        for ((total, table), kept) in rows.iter_mut().zip(&mut tables).zip(kept_tables) {
            *total += kept.rows;
            table.parts.push(KeptPart {
                rank,
                shard: shard_id,
                kept,
            });
        }
    }
    Ok((rows, tables, streamed))
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
