//! Running a network: [`simulate`] on an executor's shards, what each shard
//! hands back, and the run-wide counts and collective spans.

use super::{Fabric, Network};
use crate::telemetry::{CollectiveRecord, TelemetrySink};
use crate::workload::progress::CollectiveSpan;
use crate::workload::Workload;
use netsim_engine::{Executor, Layout, Progress, ShardId, SimTime, SkipStats, Threads};

/// Byte and packet counts of one shard, for conservation checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Payload bytes sent for the first time by this shard's hosts.
    pub sent_payload_bytes: u64,
    /// Payload bytes delivered in order to this shard's hosts.
    pub delivered_payload_bytes: u64,
    pub dropped_pkts: u64,
    pub pfc_pauses: u64,
    pub flows_finished: u64,
    /// Data packets sent again (go-back-N after a loss or a timeout).
    pub retransmitted_pkts: u64,
    /// Fast-forward: payload bytes acknowledged while their flow was
    /// steady on its own, or jumped over (DESIGN.md §3c).
    pub ff_flow_steady_bytes: u64,
    /// Memoization: collectives replayed from a record, collectives
    /// simulated, and the events the replays' records took.
    pub memo_hits: u64,
    pub memo_misses: u64,
    pub memo_events_avoided: u64,
    /// Memoization: of the hits, those whose record was made for a domain
    /// on other ports of the same classes (equivalent paths, DESIGN.md
    /// §3c), which a key naming ports by number would have missed.
    pub memo_path_hits: u64,
    /// Memoization: events its sandboxes handled (apart from the run's).
    pub memo_sandbox_events: u64,
    /// Memoization: its decision steps at check instants (at most one
    /// per 10 us of simulated time). Agreed: the same on every shard, so
    /// kept once, not summed.
    pub memo_rounds: u64,
    /// Packet level: the sender slots the shards' slabs grew to, each the
    /// most flows its hosts had started and not finished at once.
    pub sender_slots: u64,
    /// Rail replay: flows that followed a twin, and those that did not
    /// start at their twin's instant (the replay then differs).
    pub rail_followed: u64,
    pub rail_diverged: u64,
    /// Rail replay: data packets of leading flows that a leading switch
    /// ECN-marked, and PFC pauses on a leading switch's links; their
    /// followers take them as they are.
    pub rail_leader_marks: u64,
    pub rail_leader_pauses: u64,
    /// `--qp-rate kept`: queued flows that left their queue pair's DCQCN
    /// state at their turn (another port, sprayed, not DCQCN), and the
    /// hand-over entries still held at the end: states parked, queued
    /// flows held for their flow ahead and notes of flows ahead opened
    /// (0 once every queued flow started and had its turn).
    pub qp_rates_declined: u64,
    pub qp_rates_parked_left: u64,
}

impl std::ops::AddAssign for NetStats {
    fn add_assign(&mut self, o: NetStats) {
        self.sent_payload_bytes += o.sent_payload_bytes;
        self.delivered_payload_bytes += o.delivered_payload_bytes;
        self.dropped_pkts += o.dropped_pkts;
        self.pfc_pauses += o.pfc_pauses;
        self.flows_finished += o.flows_finished;
        self.retransmitted_pkts += o.retransmitted_pkts;
        self.ff_flow_steady_bytes += o.ff_flow_steady_bytes;
        self.memo_hits += o.memo_hits;
        self.memo_misses += o.memo_misses;
        self.memo_events_avoided += o.memo_events_avoided;
        self.memo_path_hits += o.memo_path_hits;
        self.memo_sandbox_events += o.memo_sandbox_events;
        self.memo_rounds = self.memo_rounds.max(o.memo_rounds);
        self.sender_slots += o.sender_slots;
        self.rail_followed += o.rail_followed;
        self.rail_diverged += o.rail_diverged;
        self.rail_leader_marks += o.rail_leader_marks;
        self.rail_leader_pauses += o.rail_leader_pauses;
        self.qp_rates_declined += o.qp_rates_declined;
        self.qp_rates_parked_left += o.qp_rates_parked_left;
    }
}

/// What one shard of a network run hands back.
#[derive(Debug)]
pub struct ShardOutcome<S> {
    pub sink: S,
    pub stats: NetStats,
    pub handled_events: u64,
    /// What fast-forward skipped on this shard.
    pub skip: SkipStats,
    /// Per collective of the workload, what this shard's hosts saw.
    pub spans: Vec<CollectiveSpan>,
}

/// Result of [`simulate`].
#[derive(Debug)]
pub struct NetRun<S> {
    /// Per shard run by this process, in shard order.
    pub shards: Vec<ShardOutcome<S>>,
    /// Time of the last event that changed anything, anywhere.
    pub sim_end: SimTime,
    pub windows: u64,
}

impl<S> NetRun<S> {
    pub fn events(&self) -> u64 {
        self.shards.iter().map(|s| s.handled_events).sum()
    }

    /// Fast-forward over this process's shards: the jumps (the same on
    /// every shard) and the events they avoided (summed).
    pub fn skip(&self) -> SkipStats {
        let mut total = self.shards.first().map_or(SkipStats::default(), |s| s.skip);
        total.events_avoided = self.shards.iter().map(|s| s.skip.events_avoided).sum();
        total
    }

    pub fn stats(&self) -> NetStats {
        let mut total = NetStats::default();
        for s in &self.shards {
            total += s.stats;
        }
        total
    }

    /// Per collective, what all shards saw together.
    pub fn spans(&self) -> Vec<CollectiveSpan> {
        merge_spans(self.shards.iter().map(|s| s.spans.as_slice()))
    }

    /// [`NetRun::spans`], taken out of the shards (one shard's are moved,
    /// not copied: a large job has 10^7 collectives).
    pub fn take_spans(&mut self) -> Vec<CollectiveSpan> {
        if let [only] = self.shards.as_mut_slice() {
            return std::mem::take(&mut only.spans);
        }
        let total = self.spans();
        for s in &mut self.shards {
            s.spans = Vec::new();
        }
        total
    }
}

/// The `collectives` table: each collective of `workload` with its span.
pub fn collective_records(workload: &Workload, spans: &[CollectiveSpan]) -> Vec<CollectiveRecord> {
    (0..workload.collectives.len().min(spans.len()))
        .map(|id| collective_record(workload, id as u32, &spans[id]))
        .collect()
}

/// The `collectives` table's row of collective `id` of `workload`, which
/// `span` saw (a run writes them one by one: a large job has 10^7).
pub fn collective_record(workload: &Workload, id: u32, span: &CollectiveSpan) -> CollectiveRecord {
    let c = &workload.collectives[id as usize];
    let started = span.start != SimTime::MAX;
    let complete = started && span.tasks_done == c.tasks;
    let start_ns = started.then(|| span.start.as_ns());
    let end_ns = complete.then(|| span.end.as_ns());
    CollectiveRecord {
        collective_id: id,
        name: c.name.to_string(),
        op: c.op.name(),
        algorithm: c.algorithm.to_string(),
        group_size: c.group_size,
        size_bytes: c.size_bytes,
        start_ns,
        end_ns,
        duration_ns: start_ns.zip(end_ns).map(|(s, e)| e - s),
        offloaded: c.offloaded,
        fallback_reason: c.fallback_reason.clone(),
        job: workload.collective_job(id).cloned(),
    }
}

/// The order of the `collectives` table's rows: the collectives that
/// finished, by end (in picoseconds, not the row's `end_ns`) then id, then
/// the others by id. It is the order in
/// which a streamed run finds rows final ([`crate::workload::spans::Spans`]),
/// so a table written after the run and one written during it are the same.
pub fn collective_order(workload: &Workload, spans: &[CollectiveSpan]) -> Vec<u32> {
    let n = workload.collectives.len().min(spans.len());
    let finished = |c: usize| {
        let s = &spans[c];
        s.start != SimTime::MAX && s.tasks_done == workload.collectives[c].tasks
    };
    let mut order: Vec<u32> = (0..n).filter(|&c| finished(c)).map(|c| c as u32).collect();
    order.sort_unstable_by_key(|&c| (spans[c as usize].end, c));
    order.extend((0..n).filter(|&c| !finished(c)).map(|c| c as u32));
    order
}

/// Per collective, the union of what several shards (or ranks) saw.
pub fn merge_spans<'a>(parts: impl Iterator<Item = &'a [CollectiveSpan]>) -> Vec<CollectiveSpan> {
    let mut total: Vec<CollectiveSpan> = Vec::new();
    for part in parts {
        if total.is_empty() {
            total = vec![CollectiveSpan::UNSEEN; part.len()];
        }
        for (t, p) in total.iter_mut().zip(part) {
            t.merge(p);
        }
    }
    total
}

/// Runs the network of `fabric` on the shards of `layout`, one worker
/// thread each, until every flow has finished or `end` is reached.
/// `make_sink(shard)` gives each shard its telemetry sink; `progress`, if
/// given, follows the run (for a progress display).
pub fn simulate<S, F>(
    fabric: &Fabric,
    layout: &Layout,
    end: SimTime,
    progress: Option<&Progress>,
    make_sink: F,
) -> NetRun<S>
where
    S: TelemetrySink,
    F: Fn(ShardId) -> S + Sync,
{
    simulate_on(&Threads, fabric, layout, end, progress, make_sink)
}

/// [`simulate`] on the shards `executor` runs in this process (all of them
/// on threads; this rank's under MPI). The outcome holds those shards only;
/// `sim_end` and `windows` are the run's.
pub fn simulate_on<E, S, F>(
    executor: &E,
    fabric: &Fabric,
    layout: &Layout,
    end: SimTime,
    progress: Option<&Progress>,
    make_sink: F,
) -> NetRun<S>
where
    E: Executor,
    S: TelemetrySink,
    F: Fn(ShardId) -> S + Sync,
{
    let reports = executor.run(layout, fabric.seed, end, progress, |shard, nodes| {
        Network::new(fabric, nodes, make_sink(shard))
    });
    // Samples and links rows run to the end of the whole run, on every rank alike.
    let last_activity = reports
        .iter()
        .map(|r| r.model.last_activity.as_ps())
        .max()
        .unwrap_or(0);
    let sim_end = SimTime(executor.max_over_processes(last_activity));
    let windows = reports.first().map_or(0, |r| r.windows);
    // Finishing writes telemetry: do it for all shards in parallel.
    let shards = std::thread::scope(|scope| {
        let handles: Vec<_> = reports
            .into_iter()
            .map(|r| {
                scope.spawn(move || {
                    let (sink, stats, spans) = r.model.finish(sim_end);
                    ShardOutcome {
                        sink,
                        stats,
                        handled_events: r.handled_events,
                        skip: r.skip,
                        spans,
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("finishing a shard panicked"))
            .collect()
    });
    NetRun {
        shards,
        sim_end,
        windows,
    }
}
