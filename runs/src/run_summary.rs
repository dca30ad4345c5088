//! The figures of a finished run: every rank's gathered on rank 0, the
//! `collectives` and `faults` tables, `run.json`'s summary and the line
//! printed after the run.

use crate::fault_args::fault_records;
use crate::fcts::Fcts;
use crate::ranks::Ranks;
use crate::run_cmd::RunArgs;
use crate::run_plan::Plan;
use crate::run_tables::{KeptPart, KeptTable, Output};
use crate::telemetry::{write_run_json, Kept, PartConfig, TableRow};
use netsim_engine::{SimTime, SkipStats};
use netsim_models::network::{
    collective_order, collective_record, merge_spans, CollectiveSpan, NetStats,
};
use netsim_models::telemetry::{CollectiveRecord, FaultRecord};
use netsim_models::workload::Workload;
use netsim_process::peak_rss_bytes;
use std::time::Instant;

/// The completion times of this process's flows, read back from its
/// `flows` table ([`crate::fcts`]).
pub(crate) enum FctTimes {
    /// The percentiles `run.json` gives, p50 and p99: the only process's.
    Percentiles([Option<u64>; 2]),
    /// Every time, for rank 0 to gather.
    Kept(Fcts),
}

impl FctTimes {
    /// p50 and p99.
    fn percentiles(self) -> (Option<u64>, Option<u64>) {
        match self {
            FctTimes::Percentiles([p50, p99]) => (p50, p99),
            FctTimes::Kept(mut f) => (f.percentile(0.5), f.percentile(0.99)),
        }
    }

    /// This rank's times, as words to gather.
    fn to_ns(&self) -> Vec<u64> {
        match self {
            FctTimes::Percentiles(_) => Vec::new(),
            FctTimes::Kept(f) => f.to_ns(),
        }
    }
}

/// What this process's shards did, before it is summed over the ranks.
pub(crate) struct Outcome {
    /// When the run started (its wall time ends at the summary).
    pub started: Instant,
    pub setup_s: f64,
    pub sim_s: f64,
    pub stats: NetStats,
    pub skip: SkipStats,
    pub spans: Vec<CollectiveSpan>,
    /// The `collectives` table, when a flow-level sink streamed it (then
    /// `spans` is empty).
    pub collectives: Option<StreamedCollectives>,
    pub events_per_shard: Vec<u64>,
    pub fcts: FctTimes,
    /// Rows written: flows, queues, pfc, switch_offload, links.
    pub rows: [u64; 5],
    /// The same on every rank.
    pub windows: u64,
    pub sim_end: SimTime,
    /// Stopped by a signal at a window boundary ([`crate::interrupt`]).
    pub interrupted: bool,
}

impl Outcome {
    /// This rank's figures as one record of words for rank 0 (times as
    /// `f64` bits, the wall time up to now): the layout `write_summary`
    /// reads back.
    fn words(&self) -> Vec<u64> {
        let (stats, skip) = (&self.stats, &self.skip);
        let mut words = vec![
            self.events_per_shard.iter().sum(),
            self.started.elapsed().as_secs_f64().to_bits(),
            self.setup_s.to_bits(),
            self.sim_s.to_bits(),
            peak_rss_bytes(),
            stats.sent_payload_bytes,
            stats.delivered_payload_bytes,
            stats.dropped_pkts,
            stats.pfc_pauses,
            stats.flows_finished,
            stats.retransmitted_pkts,
        ];
        words.extend(self.rows);
        words.extend([
            skip.skipped.as_ps(),
            skip.skips,
            skip.events_avoided,
            stats.ff_flow_steady_bytes,
            stats.memo_hits,
            stats.memo_misses,
            stats.memo_events_avoided,
            stats.memo_sandbox_events,
            stats.sender_slots,
            stats.memo_path_hits,
            stats.rail_followed,
            stats.rail_diverged,
            stats.rail_leader_marks,
            stats.rail_leader_pauses,
            stats.qp_rates_declined,
            stats.qp_rates_parked_left,
            stats.memo_rounds,
        ]);
        words.extend(&self.events_per_shard);
        words
    }
}

/// Every rank's [`Outcome`], summed (or the largest, or rank 0's where
/// all ranks agree) from the records of [`Outcome::words`].
struct Totals {
    events: u64,
    wall_s: f64,
    setup_s: f64,
    sim_s: f64,
    peak_rss_per_rank: Vec<u64>,
    stats: NetStats,
    /// Rows written: flows, queues, pfc, switch_offload, links.
    rows: Vec<u64>,
    skipped_ps: u64,
    skips: u64,
    events_avoided: u64,
    events_per_shard: Vec<u64>,
    /// `run.json`'s `per_rank` array.
    ranks_json: Vec<serde_json::Value>,
}

impl Totals {
    /// Reads `gathered`, the ranks' records of `record` words each, back.
    fn from_words(gathered: &[u64], record: usize) -> Totals {
        let per_rank: Vec<&[u64]> = gathered.chunks(record).collect();
        let sum = |i: usize| per_rank.iter().map(|r| r[i]).sum::<u64>();
        let max_f64 = |i: usize| {
            per_rank
                .iter()
                .map(|r| f64::from_bits(r[i]))
                .fold(0.0, f64::max)
        };
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
            sender_slots: sum(24),
            memo_path_hits: sum(25),
            rail_followed: sum(26),
            rail_diverged: sum(27),
            rail_leader_marks: sum(28),
            rail_leader_pauses: sum(29),
            qp_rates_declined: sum(30),
            qp_rates_parked_left: sum(31),
            // Agreed: the same on every rank.
            memo_rounds: per_rank[0][32],
        };
        let ranks_json = per_rank
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
        Totals {
            events: sum(0),
            wall_s: max_f64(1),
            setup_s: max_f64(2),
            sim_s: max_f64(3),
            peak_rss_per_rank: per_rank.iter().map(|r| r[4]).collect(),
            stats,
            rows: (11..16).map(sum).collect(),
            // The jumps are the same on every rank; the events they avoided add up.
            skipped_ps: per_rank[0][16],
            skips: per_rank[0][17],
            events_avoided: sum(18),
            events_per_shard: per_rank.iter().flat_map(|r| &r[33..]).copied().collect(),
            ranks_json,
        }
    }
}

/// The `collectives` table as a flow-level run streamed it.
pub(crate) struct StreamedCollectives {
    pub kept: Kept,
    /// Rows of finished collectives.
    pub finished: usize,
}

/// What rank 0 wrote of the collectives and faults.
struct Written {
    /// Both tables, when kept in memory.
    kept: Vec<KeptTable>,
    /// Collectives in the workload that have a span.
    collectives: usize,
    collectives_finished: usize,
    collective_rows: u64,
    fault_rows: u64,
}

/// The `collectives` and `faults` tables, into `part0` of `output`: one
/// row per collective, from what every shard of every rank saw of it
/// (`spans`, freed once written) unless a flow-level run `streamed` them,
/// and one per fault.
fn write_tables(
    plan: &Plan,
    spans: Vec<CollectiveSpan>,
    streamed: Option<StreamedCollectives>,
    part0: &PartConfig,
    output: Output,
) -> anyhow::Result<Written> {
    let workload = &plan.fabric.workload;
    let (collectives, collectives_finished, collective_kept) = match streamed {
        Some(s) => (workload.collectives.len(), s.finished, s.kept),
        None => write_collectives(workload, spans, part0, output)?,
    };
    let mut writer = output.writer::<FaultRecord>(part0)?;
    for f in fault_records(&plan.fabric.faults) {
        writer.push(&f)?;
    }
    let fault_kept = writer.finish_kept()?;
    let (collective_rows, fault_rows) = (collective_kept.rows, fault_kept.rows);
    let part = |name, kept| KeptTable {
        name,
        parts: vec![KeptPart {
            rank: part0.rank,
            shard: part0.shard,
            kept,
        }],
    };
    Ok(Written {
        kept: vec![
            part(CollectiveRecord::TABLE, collective_kept),
            part(FaultRecord::TABLE, fault_kept),
        ],
        collectives,
        collectives_finished,
        collective_rows,
        fault_rows,
    })
}

/// The `collectives` table from `spans`: the collectives that have one,
/// the rows of finished ones, and what the writer kept.
fn write_collectives(
    workload: &Workload,
    spans: Vec<CollectiveSpan>,
    part0: &PartConfig,
    output: Output,
) -> anyhow::Result<(usize, usize, Kept)> {
    let collectives = workload.collectives.len().min(spans.len());
    let mut collectives_finished = 0;
    let mut writer = output.writer::<CollectiveRecord>(part0)?;
    for id in collective_order(workload, &spans) {
        let c = collective_record(workload, id, &spans[id as usize]);
        collectives_finished += usize::from(c.end_ns.is_some());
        writer.push(&c)?;
    }
    drop(spans);
    Ok((collectives, collectives_finished, writer.finish_kept()?))
}

impl RunArgs {
    /// Gathers every rank's [`Outcome`] on rank 0, which writes the
    /// `collectives` and `faults` tables (into `part0` of `output`),
    /// `run.json` and the summary line. Collective under MPI. Rank 0
    /// returns `run.json`'s contents and, kept in memory, the two tables.
    pub(crate) fn write_summary(
        &self,
        ranks: &Ranks,
        plan: &Plan,
        outcome: Outcome,
        part0: &PartConfig,
        output: Output,
    ) -> anyhow::Result<Option<(serde_json::Value, Vec<KeptTable>)>> {
        let size = ranks.size();
        let mine = outcome.words();
        let record = mine.len();
        let gathered = ranks.gather(&mine);
        // One process keeps its own (10^8 flows and 10^7 collectives in a
        // large job): no copies to gather.
        let (fcts, spans) = if size == 1 {
            (Some(outcome.fcts), Some(outcome.spans))
        } else {
            (
                ranks
                    .gather_varcount(&outcome.fcts.to_ns())
                    .map(|t| FctTimes::Kept(Fcts::from_ns(&t))),
                gather_spans(ranks, &outcome.spans),
            )
        };
        let (Some(gathered), Some(fcts), Some(spans)) = (gathered, fcts, spans) else {
            return Ok(None);
        };
        let totals = Totals::from_words(&gathered, record);
        let mut written = write_tables(plan, spans, outcome.collectives, part0, output)?;
        let fct_ns = fcts.percentiles();
        let run = RunFigures {
            size,
            windows: outcome.windows,
            sim_end: outcome.sim_end,
            fct_ns,
        };
        let mut summary = self.summary_json(plan, &run, &totals, &written);
        // Stopped by a signal: every table holds what was written up to
        // the stop, as at a time limit.
        summary["interrupted"] = outcome.interrupted.into();
        let by = crate::interrupt::signal_name().filter(|_| outcome.interrupted);
        summary["interrupted_by"] = by.unwrap_or_default().into();
        if output == Output::Files {
            write_run_json(&self.out, &summary)?;
        }
        if let Some(warning) =
            crate::fast_forward_args::rail_warning(&totals.stats, plan.fabric.config.ecn_draw_rails)
        {
            eprintln!("{warning}");
        }
        if !self.quiet {
            self.print_summary(plan, &run, &totals, &written);
        }
        Ok(Some((summary, std::mem::take(&mut written.kept))))
    }

    /// `run.json`'s contents.
    fn summary_json(
        &self,
        plan: &Plan,
        run: &RunFigures,
        totals: &Totals,
        written: &Written,
    ) -> serde_json::Value {
        let (stats, rows, shards) = (&totals.stats, &totals.rows, plan.partition.shards);
        let mut summary = serde_json::json!({
            "scenario": plan.scenario,
            "topology": plan.fabric.topo.kind(),
            "hosts": plan.fabric.topo.host_count(),
            "nodes": plan.fabric.topo.node_count(),
            "links": plan.fabric.topo.link_count(),
            "seed": self.seed,
            "version": env!("CARGO_PKG_VERSION"),
            "shards": shards,
            "threads": shards as usize / run.size,
            "ranks": run.size,
            "partition": plan.partition.report.strategy.to_string(),
            "edge_cut": plan.partition.report.edge_cut,
            "load_imbalance": plan.partition.report.load_imbalance,
            "lookahead_ps": plan.partition.lookahead.as_ps(),
            "windows": run.windows,
            "events": totals.events,
            "events_per_shard": totals.events_per_shard,
            "wall_s": totals.wall_s,
            "setup_s": totals.setup_s,
            "simulate_s": totals.sim_s,
            "events_per_s": totals.events as f64 / totals.sim_s,
            "peak_rss_bytes": totals.peak_rss_per_rank.iter().max(),
            "per_rank": totals.ranks_json,
            "sim_end_ns": run.sim_end.as_ns(),
            "flows": plan.fabric.workload.flow_count(),
            "collectives": written.collectives,
            "collectives_finished": written.collectives_finished,
            "flows_finished": stats.flows_finished,
            "fct_p50_ns": run.fct_ns.0,
            "fct_p99_ns": run.fct_ns.1,
            "sent_payload_bytes": stats.sent_payload_bytes,
            "delivered_payload_bytes": stats.delivered_payload_bytes,
            "dropped_pkts": stats.dropped_pkts,
            "pfc_pauses": stats.pfc_pauses,
            "rows": {
                "flows": rows[0],
                "queues": rows[1],
                "pfc": rows[2],
                "switch_offload": rows[3],
                "collectives": written.collective_rows,
                "links": rows[4],
            },
        });
        // Added apart from the literal above, which is at the json! macro's
        // recursion limit: the truth next to the estimate (`load_imbalance`),
        // and the fidelity. `sender_slots`: packet level's peak of flows in
        // flight, summed over shards (what its memory follows).
        summary["events_imbalance"] = imbalance(&totals.events_per_shard).into();
        summary["sender_slots"] = stats.sender_slots.into();
        summary["fidelity"] = self.fidelity.name().into();
        summary["fold_dp"] = self.workload.fold_dp.into();
        summary["fold_classes"] = self.workload.fold_classes.into();
        summary["network"] = crate::network_args::config_json(
            &self.network.cc_profile,
            &self.network.uec.uec_profile,
            &plan.fabric.config,
        );
        summary["fast_forward"] = crate::fast_forward_args::summary(
            &plan.fabric,
            stats,
            totals.skipped_ps,
            totals.skips,
            totals.events_avoided,
        );
        summary["retransmitted_pkts"] = stats.retransmitted_pkts.into();
        summary["faults"] = plan.fabric.faults.faults.len().into();
        summary["tasks"] = plan.fabric.workload.task_count().into();
        summary["edges"] = plan.fabric.workload.edge_count().into();
        summary["workload_bytes"] = crate::memory_check::workload_bytes_json(&plan.fabric.workload);
        summary["run_bytes_predicted"] = plan.run_bytes.json();
        summary["peak_rss_predicted_bytes"] = plan
            .held_bytes
            .saturating_add(plan.run_bytes.total())
            .into();
        summary["rows"]["faults"] = written.fault_rows.into();
        summary
    }

    /// The line printed on stderr after the run.
    fn print_summary(&self, plan: &Plan, run: &RunFigures, totals: &Totals, written: &Written) {
        let (collectives, collectives_done) = (written.collectives, written.collectives_finished);
        let collectives_note = if collectives == 0 {
            String::new()
        } else {
            format!("{collectives_done}/{collectives} collectives finished, ")
        };
        let (events, sim_s, wall_s) = (totals.events, totals.sim_s, totals.wall_s);
        let (fct_p50_ns, fct_p99_ns) = run.fct_ns;
        eprintln!(
            "netsim: {events} events in {sim_s:.3} s ({:.2} M events/s), wall {wall_s:.3} s, \
             {}/{} flows finished, {collectives_note}FCT p50 {} us p99 {} us, simulated {:.1} us, \
             output {}",
            events as f64 / sim_s / 1e6,
            totals.stats.flows_finished,
            plan.fabric.workload.flow_count(),
            fct_p50_ns.map_or("-".into(), |f| format!("{:.1}", f as f64 / 1e3)),
            fct_p99_ns.map_or("-".into(), |f| format!("{:.1}", f as f64 / 1e3)),
            run.sim_end.as_ps() as f64 / 1e6,
            self.out.display()
        );
    }
}

/// The figures of the run as a whole that `run.json` and the summary line report.
struct RunFigures {
    /// Ranks.
    size: usize,
    /// Synchronisation windows, the same on every rank.
    windows: u64,
    sim_end: SimTime,
    /// Flow completion time percentiles p50 and p99, if any flow finished.
    fct_ns: (Option<u64>, Option<u64>),
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
