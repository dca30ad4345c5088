//! What the model integration tests share: a layout of a fabric over shards,
//! a run's flow records in id order, a flow spec in one line.

// Every test crate compiles this module for itself and uses a part of it.
#![allow(dead_code)]

use netsim_engine::{Layout, SimTime};
use netsim_models::network::NetRun;
use netsim_models::telemetry::{FlowRecord, MemorySink};
use netsim_models::traffic::FlowSpec;
use netsim_partition::{partition, PartitionConfig, Strategy};
use netsim_topo::Topology;

/// `topo` on `shards` shards: one block for 1, else the structural
/// partition with no latency floor (its lookahead the partition's).
pub fn layout(topo: &Topology, shards: u32) -> Layout {
    if shards == 1 {
        Layout::blocks(topo.node_count(), 1, SimTime::MAX).unwrap()
    } else {
        let p = partition(
            topo,
            &PartitionConfig {
                shards,
                strategy: Strategy::Structural,
                latency_floor_ps: 0,
            },
        )
        .unwrap();
        Layout::new(p.shard_of, p.shards, p.lookahead).unwrap()
    }
}

/// Every flow record of `run`, whichever shard wrote it, in flow id order.
pub fn flows(run: &NetRun<MemorySink>) -> Vec<FlowRecord> {
    let mut flows: Vec<FlowRecord> = run
        .shards
        .iter()
        .flat_map(|s| s.sink.flows.clone())
        .collect();
    flows.sort_by_key(|f| f.flow_id);
    flows
}

/// A flow of `size_bytes` from `src` to `dst` starting at time zero.
pub fn flow(src: u32, dst: u32, size_bytes: u64) -> FlowSpec {
    FlowSpec {
        src,
        dst,
        size_bytes,
        start: SimTime::ZERO,
    }
}
