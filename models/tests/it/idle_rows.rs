//! Idle ports' rows: left out by default, and the rows left are exactly the
//! kept ones less those that say nothing new (a link interval without bytes,
//! a queue that is empty, unpaused and whose counters stand where its
//! previous row left them), at packet and flow level.

use std::collections::HashMap;

use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::network::NetRun;
use netsim_models::telemetry::{LinkSample, MemorySink, QueueSample};
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::{Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec};

use crate::common::{fat_tree, fluid, packets, workload_fabric};

fn config(keep_idle_rows: bool) -> NetConfig {
    NetConfig {
        cc: CcKind::Dcqcn,
        sample_period: SimTime::from_ns(2_000),
        keep_idle_rows,
        ..NetConfig::default()
    }
}

/// A ring all-reduce over half the hosts of a k=4 fat-tree: the other
/// hosts' ports stay idle throughout.
fn spec() -> WorkloadSpec {
    WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ring,
        size_bytes: 1 << 20,
        group: GroupSpec::Ranks((0..8).collect()),
        dtype: Dtype::Int32,
        reduce_op: ReduceOp::Sum,
    })
}

fn rows(run: &NetRun<MemorySink>) -> (Vec<QueueSample>, Vec<LinkSample>) {
    let mut queues: Vec<QueueSample> = run
        .shards
        .iter()
        .flat_map(|s| s.sink.queues.clone())
        .collect();
    let mut links: Vec<LinkSample> = run
        .shards
        .iter()
        .flat_map(|s| s.sink.links.clone())
        .collect();
    queues.sort_by_key(|q| (q.node, q.port, q.priority, q.time_ns));
    links.sort_by_key(|l| (l.src, l.src_port, l.time_ns));
    (queues, links)
}

/// `kept` less its idle rows.
fn without_idle(kept: &(Vec<QueueSample>, Vec<LinkSample>)) -> (Vec<QueueSample>, Vec<LinkSample>) {
    let mut last: HashMap<(u32, u32, u8), [u64; 4]> = HashMap::new();
    let queues = kept
        .0
        .iter()
        .filter(|q| {
            let counts = [
                q.tx_bytes,
                q.ecn_marked_pkts,
                q.dropped_pkts,
                q.trimmed_pkts,
            ];
            let before = last
                .insert((q.node, q.port, q.priority), counts)
                .unwrap_or_default();
            q.qlen_bytes > 0 || q.paused || counts != before
        })
        .cloned()
        .collect();
    let links = kept.1.iter().filter(|l| l.tx_bytes > 0).cloned().collect();
    (queues, links)
}

#[test]
fn idle_rows_are_the_kept_rows_that_say_nothing_new() {
    let run = |keep| packets(&workload_fabric(&fat_tree(4, 3), &spec(), config(keep)));
    let (kept, skipped) = (rows(&run(true)), rows(&run(false)));
    let expected = without_idle(&kept);
    assert_eq!(skipped.0, expected.0, "queues");
    assert_eq!(skipped.1, expected.1, "links");
    // Idle ports are most rows of a fabric half used.
    assert!(
        2 * skipped.1.len() < kept.1.len(),
        "{} of {}",
        skipped.1.len(),
        kept.1.len()
    );
    assert!(
        2 * skipped.0.len() < kept.0.len(),
        "{} of {}",
        skipped.0.len(),
        kept.0.len()
    );
}

#[test]
fn flow_level_leaves_out_link_intervals_without_bytes() {
    let run = |keep| fluid(&workload_fabric(&fat_tree(4, 3), &spec(), config(keep)));
    let (kept, skipped) = (rows(&run(true)), rows(&run(false)));
    assert_eq!(skipped.1, without_idle(&kept).1);
    assert!(2 * skipped.1.len() < kept.1.len());
}
