//! The tables netsim writes: each record type's columns, Arrow types and nullability.
//!
//! docs/guide/output.md documents these schemas; a test compares the two.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use netsim_models::telemetry::{
    CollectiveRecord, FaultRecord, FlowRecord, LinkSample, PfcRecord, QueueSample,
    SwitchOffloadRecord,
};

use super::row::{RowBuilder, TableRow};

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

impl TableRow for FlowRecord {
    const TABLE: &'static str = "flows";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("flow_id", DataType::UInt32, false),
            Field::new("src", DataType::UInt32, false),
            Field::new("dst", DataType::UInt32, false),
            Field::new("size_bytes", DataType::UInt64, false),
            Field::new("start_ns", DataType::UInt64, false),
            // Null while the flow is unfinished at the end of the run.
            Field::new("end_ns", DataType::UInt64, true),
            Field::new("fct_ns", DataType::UInt64, true),
            Field::new("ideal_fct_ns", DataType::UInt64, false),
            Field::new("slowdown", DataType::Float64, true),
            Field::new("ecmp_path", DataType::UInt64, false),
            Field::new("ecn_marked_pkts", DataType::UInt64, false),
            Field::new("cnps", DataType::UInt64, false),
            Field::new("retransmitted_pkts", DataType::UInt64, false),
            Field::new("skipped_bytes", DataType::UInt64, false),
            Field::new("skipped_ns", DataType::UInt64, false),
            Field::new("trimmed_pkts", DataType::UInt64, false),
            Field::new("sacks", DataType::UInt64, false),
            Field::new("paths_used", DataType::UInt32, false),
            Field::new("finished", DataType::Boolean, false),
            // Null for plain traffic flows.
            Field::new("collective_id", DataType::UInt32, true),
            // The job's name; null for background traffic.
            Field::new("job", DataType::Utf8, true),
            // Why an unfinished flow did not finish; null when finished.
            Field::new("reason", DataType::Utf8, true),
        ]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.u32(self.flow_id);
        row.u32(self.src);
        row.u32(self.dst);
        row.u64(self.size_bytes);
        row.u64(self.start_ns);
        row.opt_u64(self.end_ns);
        row.opt_u64(self.fct_ns);
        row.u64(self.ideal_fct_ns);
        row.opt_f64(self.slowdown);
        row.u64(self.ecmp_path);
        row.u64(self.ecn_marked_pkts);
        row.u64(self.cnps);
        row.u64(self.retransmitted_pkts);
        row.u64(self.skipped_bytes);
        row.u64(self.skipped_ns);
        row.u64(self.trimmed_pkts);
        row.u64(self.sacks);
        row.u32(self.paths_used);
        row.bool(self.finished);
        row.opt_u32(self.collective_id);
        row.opt_str(self.job.as_deref());
        row.opt_str(self.reason);
    }
}

impl TableRow for FaultRecord {
    const TABLE: &'static str = "faults";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("time_ns", DataType::UInt64, false),
            Field::new("kind", DataType::Utf8, false),
            Field::new("target", DataType::Utf8, false),
            // The new rate of a link-rate fault; null otherwise.
            Field::new("value_gbps", DataType::Float64, true),
        ]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.u64(self.time_ns);
        row.str(self.kind);
        row.str(&self.target);
        row.opt_f64(self.value_gbps);
    }
}

impl TableRow for QueueSample {
    const TABLE: &'static str = "queues";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("time_ns", DataType::UInt64, false),
            Field::new("node", DataType::UInt32, false),
            Field::new("port", DataType::UInt32, false),
            Field::new("priority", DataType::UInt8, false),
            Field::new("qlen_bytes", DataType::UInt64, false),
            Field::new("tx_bytes", DataType::UInt64, false),
            Field::new("ecn_marked_pkts", DataType::UInt64, false),
            Field::new("dropped_pkts", DataType::UInt64, false),
            Field::new("trimmed_pkts", DataType::UInt64, false),
            Field::new("paused", DataType::Boolean, false),
        ]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.u64(self.time_ns);
        row.u32(self.node);
        row.u32(self.port);
        row.u8(self.priority);
        row.u64(self.qlen_bytes);
        row.u64(self.tx_bytes);
        row.u64(self.ecn_marked_pkts);
        row.u64(self.dropped_pkts);
        row.u64(self.trimmed_pkts);
        row.bool(self.paused);
    }
}

impl TableRow for PfcRecord {
    const TABLE: &'static str = "pfc";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("time_ns", DataType::UInt64, false),
            Field::new("node", DataType::UInt32, false),
            Field::new("port", DataType::UInt32, false),
            Field::new("priority", DataType::UInt8, false),
            // "pause" or "resume"; Parquet dictionary-encodes it on disk, so a
            // plain string costs next to nothing and reads as a string everywhere.
            Field::new("event", DataType::Utf8, false),
            // Set on resumes only: how long the priority was paused.
            Field::new("duration_ns", DataType::UInt64, true),
        ]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.u64(self.time_ns);
        row.u32(self.node);
        row.u32(self.port);
        row.u8(self.priority);
        row.str(self.event.as_str());
        row.opt_u64(self.duration_ns);
    }
}

impl TableRow for CollectiveRecord {
    const TABLE: &'static str = "collectives";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("collective_id", DataType::UInt32, false),
            Field::new("name", DataType::Utf8, false),
            Field::new("op", DataType::Utf8, false),
            Field::new("algorithm", DataType::Utf8, false),
            Field::new("group_size", DataType::UInt32, false),
            Field::new("size_bytes", DataType::UInt64, false),
            // Null when the collective never started / did not complete in the run.
            Field::new("start_ns", DataType::UInt64, true),
            Field::new("end_ns", DataType::UInt64, true),
            Field::new("duration_ns", DataType::UInt64, true),
            Field::new("offloaded", DataType::Boolean, false),
            // Set when an in-network operation fell back to a host algorithm.
            Field::new("fallback_reason", DataType::Utf8, true),
            Field::new("job", DataType::Utf8, true),
        ]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.u32(self.collective_id);
        row.str(&self.name);
        row.str(self.op);
        row.str(&self.algorithm);
        row.u32(self.group_size);
        row.u64(self.size_bytes);
        row.opt_u64(self.start_ns);
        row.opt_u64(self.end_ns);
        row.opt_u64(self.duration_ns);
        row.bool(self.offloaded);
        row.opt_str(self.fallback_reason.as_deref());
        row.opt_str(self.job.as_deref());
    }
}

impl TableRow for SwitchOffloadRecord {
    const TABLE: &'static str = "switch_offload";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("node", DataType::UInt32, false),
            Field::new("reductions_offloaded", DataType::UInt64, false),
            Field::new("reductions_fallback", DataType::UInt64, false),
            Field::new("barriers_offloaded", DataType::UInt64, false),
            Field::new("barriers_fallback", DataType::UInt64, false),
            Field::new("chunks_aggregated", DataType::UInt64, false),
        ]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.u32(self.node);
        row.u64(self.reductions_offloaded);
        row.u64(self.reductions_fallback);
        row.u64(self.barriers_offloaded);
        row.u64(self.barriers_fallback);
        row.u64(self.chunks_aggregated);
    }
}

impl TableRow for LinkSample {
    const TABLE: &'static str = "links";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("time_ns", DataType::UInt64, false),
            Field::new("interval_ns", DataType::UInt64, false),
            Field::new("link", DataType::UInt32, false),
            Field::new("src", DataType::UInt32, false),
            Field::new("src_port", DataType::UInt32, false),
            Field::new("dst", DataType::UInt32, false),
            // A handful of distinct labels; dictionary-encoded on disk.
            Field::new("tier", DataType::Utf8, false),
            Field::new("tx_bytes", DataType::UInt64, false),
            Field::new("utilization", DataType::Float64, false),
        ]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.u64(self.time_ns);
        row.u64(self.interval_ns);
        row.u32(self.link);
        row.u32(self.src);
        row.u32(self.src_port);
        row.u32(self.dst);
        row.str(self.tier);
        row.u64(self.tx_bytes);
        row.f64(self.utilization);
    }
}
