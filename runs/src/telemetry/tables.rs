//! The tables netsim writes: each record type's columns, Arrow types and nullability.
//!
//! docs/guide/output.md documents these schemas; a test compares the two.

use netsim_models::telemetry::{
    CollectiveRecord, FaultRecord, FlowRecord, LinkSample, PfcRecord, QueueSample,
    SwitchOffloadRecord,
};

use super::row::{table_row, TableRow};

/// Every table a run writes; pass it to [`super::prepare_output_dir`].
pub const TABLES: &[&str] = &[
    FlowRecord::TABLE,
    QueueSample::TABLE,
    PfcRecord::TABLE,
    CollectiveRecord::TABLE,
    SwitchOffloadRecord::TABLE,
    LinkSample::TABLE,
    FaultRecord::TABLE,
];

table_row! {
    FlowRecord => "flows", |r| {
        flow_id: u32,
        src: u32,
        dst: u32,
        size_bytes: u64,
        start_ns: u64,
        // Null while the flow is unfinished at the end of the run.
        end_ns: Option<u64>,
        fct_ns: Option<u64>,
        ideal_fct_ns: u64,
        slowdown: Option<f64>,
        ecmp_path: u64,
        ecn_marked_pkts: u64,
        cnps: u64,
        retransmitted_pkts: u64,
        skipped_bytes: u64,
        skipped_ns: u64,
        trimmed_pkts: u64,
        sacks: u64,
        paths_used: u32,
        finished: bool,
        // Null for plain traffic flows.
        collective_id: Option<u32>,
        // The job's name; null for background traffic.
        job: Option<&str> = r.job.as_deref(),
        // Why an unfinished flow did not finish; null when finished.
        reason: Option<&str>,
    }
}

table_row! {
    FaultRecord => "faults", |r| {
        time_ns: u64,
        kind: &str,
        target: &str = &r.target,
        // The new rate of a link-rate fault; null otherwise.
        value_gbps: Option<f64>,
    }
}

table_row! {
    QueueSample => "queues", |r| {
        time_ns: u64,
        node: u32,
        port: u32,
        priority: u8,
        qlen_bytes: u64,
        tx_bytes: u64,
        ecn_marked_pkts: u64,
        dropped_pkts: u64,
        trimmed_pkts: u64,
        paused: bool,
    }
}

table_row! {
    PfcRecord => "pfc", |r| {
        time_ns: u64,
        node: u32,
        port: u32,
        priority: u8,
        // "pause" or "resume"; Parquet dictionary-encodes it on disk, so a
        // plain string costs next to nothing and reads as a string everywhere.
        event: &str = r.event.as_str(),
        // Set on resumes only: how long the priority was paused.
        duration_ns: Option<u64>,
    }
}

table_row! {
    CollectiveRecord => "collectives", |r| {
        collective_id: u32,
        name: &str = &r.name,
        op: &str,
        algorithm: &str = &r.algorithm,
        group_size: u32,
        size_bytes: u64,
        // Null when the collective never started / did not complete in the run.
        start_ns: Option<u64>,
        end_ns: Option<u64>,
        duration_ns: Option<u64>,
        offloaded: bool,
        // Set when an in-network operation fell back to a host algorithm.
        fallback_reason: Option<&str> = r.fallback_reason.as_deref(),
        job: Option<&str> = r.job.as_deref(),
    }
}

table_row! {
    SwitchOffloadRecord => "switch_offload", |r| {
        node: u32,
        reductions_offloaded: u64,
        reductions_fallback: u64,
        barriers_offloaded: u64,
        barriers_fallback: u64,
        chunks_aggregated: u64,
    }
}

table_row! {
    LinkSample => "links", |r| {
        time_ns: u64,
        interval_ns: u64,
        link: u32,
        src: u32,
        src_port: u32,
        dst: u32,
        // A handful of distinct labels; dictionary-encoded on disk.
        tier: &str,
        tx_bytes: u64,
        utilization: f64,
    }
}
