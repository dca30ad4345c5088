//! A flow-level run hands a sink that takes them the `collectives` rows as
//! they become final (issue 32): the very rows, in the very order, that
//! the spans of the whole run give (finished collectives by end then id,
//! then the rest by id), and no more of them held back when the run grows
//! longer.

use crate::common;
use netsim_engine::SimTime;
use netsim_models::flow;
use netsim_models::network::config::NetConfig;
use netsim_models::network::{collective_order, collective_record, Fabric};
use netsim_models::telemetry::{
    CollectiveRecord, FlowRecord, LinkSample, MemorySink, PfcRecord, QueueSample,
    SwitchOffloadRecord, TelemetrySink,
};
use netsim_models::workload::build::lazy::lazy_jobs;
use netsim_models::workload::build_jobs;
use netsim_topo::Routing;
use std::collections::BTreeSet;

/// Takes the rows as they come and counts, at every row, the collectives
/// of which a flow has finished and whose row has not come yet.
#[derive(Default)]
struct Streaming {
    flows: Vec<FlowRecord>,
    collectives: Vec<CollectiveRecord>,
    waiting: BTreeSet<u32>,
    written: BTreeSet<u32>,
    most_waiting: usize,
}

impl TelemetrySink for Streaming {
    fn flow(&mut self, record: FlowRecord) {
        if let Some(c) = record.collective_id {
            if !self.written.contains(&c) {
                self.waiting.insert(c);
                self.most_waiting = self.most_waiting.max(self.waiting.len());
            }
        }
        self.flows.push(record);
    }
    fn queue(&mut self, _: QueueSample) {}
    fn pfc(&mut self, _: PfcRecord) {}
    fn switch_offload(&mut self, _: SwitchOffloadRecord) {}
    fn link(&mut self, _: LinkSample) {}
    fn takes_collectives(&self) -> bool {
        true
    }
    fn collective(&mut self, record: CollectiveRecord) {
        assert!(self.written.insert(record.collective_id), "one row each");
        self.waiting.remove(&record.collective_id);
        self.collectives.push(record);
    }
}

/// The 128-GPU MoE repeated `iterations` times on Spectrum-X, built eager
/// or lazy.
fn moe(iterations: u32, lazy: bool) -> Fabric {
    let (topo, job) = common::moe_128_job(iterations);
    let config = NetConfig::default();
    let jobs = std::slice::from_ref(&job);
    let workload = match lazy {
        true => lazy_jobs(jobs, &[], &topo, &config),
        false => build_jobs(jobs, &[], &topo, &config),
    }
    .unwrap();
    let routing = Routing::build(&topo).unwrap();
    let fabric = Fabric::with_workload(topo, routing, workload, config, 3);
    flow::check(&fabric).unwrap();
    fabric
}

/// Runs `fabric` to `end` streamed and whole: the streamed rows are the
/// whole run's; returns the most collectives waiting for their row.
fn streamed_against_whole(fabric: &Fabric, end: SimTime) -> usize {
    let whole = flow::simulate(fabric, end, None, MemorySink::default());
    let streamed = flow::simulate(fabric, end, None, Streaming::default());
    let [shard] = &streamed.shards[..] else {
        unreachable!("one shard")
    };
    assert!(shard.spans.is_empty(), "a streamed run keeps no spans");
    let spans = whole.spans();
    let rows: Vec<_> = collective_order(&fabric.workload, &spans)
        .into_iter()
        .map(|c| collective_record(&fabric.workload, c, &spans[c as usize]))
        .collect();
    assert_eq!(rows.len(), fabric.workload.collectives.len());
    assert!(shard.sink.collectives == rows, "the streamed rows differ");
    assert!(shard.sink.flows == whole.shards[0].sink.flows);
    shard.sink.most_waiting
}

#[test]
fn collectives_rows_stream_as_the_whole_run_writes_them_however_long_the_run() {
    for lazy in [false, true] {
        let one = moe(1, lazy);
        let waiting_one = streamed_against_whole(&one, SimTime::MAX);
        let waiting_three = streamed_against_whole(&moe(3, lazy), SimTime::MAX);
        // Iterations wait for each other: three times the collectives, no
        // more rows held back at once.
        let per_iteration = one.workload.collectives.len();
        assert_eq!(waiting_three, waiting_one, "lazy {lazy}");
        assert!(
            waiting_one * 4 < per_iteration,
            "{waiting_one} of {per_iteration}"
        );
    }
}

#[test]
fn a_run_stopped_early_streams_the_unfinished_rows_last() {
    let fabric = moe(2, true);
    let whole = flow::simulate(&fabric, SimTime::MAX, None, MemorySink::default());
    let half = SimTime(whole.sim_end.as_ps() / 2);
    streamed_against_whole(&fabric, half);
}
