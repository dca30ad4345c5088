//! Telemetry records the network models emit; the binary streams them to Parquet.
//!
//! Plain rows with units in their names. `None` marks a value that does not
//! exist yet (a flow unfinished at the end of the run).

use std::sync::Arc;

/// One flow, finished or not, at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRecord {
    pub flow_id: u32,
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    pub fct_ns: Option<u64>,
    /// Size at the bottleneck rate plus the unloaded path latency.
    pub ideal_fct_ns: u64,
    /// `fct_ns / ideal_fct_ns`.
    pub slowdown: Option<f64>,
    /// ECMP hash of the flow's 5-tuple (identifies its path under hashing).
    pub ecmp_path: u64,
    pub ecn_marked_pkts: u64,
    pub cnps: u64,
    pub retransmitted_pkts: u64,
    /// Fast-forward: payload bytes and time the flow jumped over.
    pub skipped_bytes: u64,
    pub skipped_ns: u64,
    /// UEC: the flow's packets trimmed on the way (NACKs its sender received).
    pub trimmed_pkts: u64,
    /// UEC: selective acknowledgements its sender received.
    pub sacks: u64,
    /// Distinct paths the flow used: entropy values sprayed over (UEC), 1 (RoCE).
    pub paths_used: u32,
    pub finished: bool,
    /// The collective the flow belongs to, if any.
    pub collective_id: Option<u32>,
    /// The job it belongs to; `None` for background traffic.
    pub job: Option<Arc<str>>,
    /// Why an unfinished flow did not finish: `retry-limit` (its queue pair
    /// gave up, e.g. its destination was cut off) or `time-limit` (still
    /// running when the run reached `--end-us`); `None` when finished.
    pub reason: Option<&'static str>,
}

/// One fault of the run's plan.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRecord {
    pub time_ns: u64,
    /// `link-down`, `link-up`, `node-down`, `node-up`, `link-rate`.
    pub kind: &'static str,
    /// `A-B` (a link's end nodes) or `N` (a node).
    pub target: String,
    /// `link-rate`: the new rate in Gb/s.
    pub value_gbps: Option<f64>,
}

/// One egress queue (switch port and priority) at one sampling instant.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSample {
    pub time_ns: u64,
    pub node: u32,
    pub port: u32,
    pub priority: u8,
    pub qlen_bytes: u64,
    /// Bytes transmitted since the start of the run.
    pub tx_bytes: u64,
    /// Packets marked since the start of the run.
    pub ecn_marked_pkts: u64,
    /// Packets dropped since the start of the run.
    pub dropped_pkts: u64,
    /// Data packets trimmed to their header since the start of the run (UEC).
    pub trimmed_pkts: u64,
    /// The queue is paused by PFC from downstream.
    pub paused: bool,
}

/// One direction of a link over one sampling interval `(time_ns -
/// interval_ns, time_ns]`, sampled at the same instants as the queues.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSample {
    /// End of the interval.
    pub time_ns: u64,
    /// The sampling period, except for the last interval, which ends with the run.
    pub interval_ns: u64,
    /// The link's index in the topology.
    pub link: u32,
    /// Sending node and its port (as in the `queues` table).
    pub src: u32,
    pub src_port: u32,
    /// Receiving node.
    pub dst: u32,
    /// `<src role>-<dst role>` (`host-tor`, `tor-agg`, `agg-core`, ...), or
    /// `local` / `global` between dragonfly routers of one group / two groups.
    pub tier: &'static str,
    /// Bytes serialised onto the link during the interval (a packet on the
    /// wire at an instant counts pro rata on each side of it).
    pub tx_bytes: u64,
    /// `tx_bytes * 8 / (bandwidth * interval)`, 0 to 1.
    pub utilization: f64,
}

/// Whether a PFC frame pauses or resumes a priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfcEvent {
    Pause,
    Resume,
}

impl PfcEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            PfcEvent::Pause => "pause",
            PfcEvent::Resume => "resume",
        }
    }
}

/// A PFC pause or resume taking effect at the egress port it stops or restarts.
#[derive(Clone, Debug, PartialEq)]
pub struct PfcRecord {
    pub time_ns: u64,
    pub node: u32,
    pub port: u32,
    pub priority: u8,
    pub event: PfcEvent,
    /// For a resume, how long the priority was paused.
    pub duration_ns: Option<u64>,
}

/// One switch's in-network computing counters at the end of a run (the
/// counters deployments read to verify that the offloaded path was used).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchOffloadRecord {
    pub node: u32,
    /// Offloaded reductions whose last chunk this switch passed down.
    pub reductions_offloaded: u64,
    /// Reductions that would have used this switch but fell back to hosts.
    pub reductions_fallback: u64,
    /// Offloaded barriers this switch released.
    pub barriers_offloaded: u64,
    pub barriers_fallback: u64,
    /// Chunks (or barrier arrivals) this switch aggregated from all its children.
    pub chunks_aggregated: u64,
}

impl SwitchOffloadRecord {
    /// Whether the switch took part in, or fell back from, any operation:
    /// only those are reported.
    pub fn is_used(&self) -> bool {
        self.reductions_offloaded
            + self.reductions_fallback
            + self.barriers_offloaded
            + self.barriers_fallback
            + self.chunks_aggregated
            > 0
    }
}

/// One collective of a workload at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveRecord {
    pub collective_id: u32,
    /// The phase it belongs to (`#k` marks iteration k).
    pub name: String,
    pub op: &'static str,
    /// What ran: `ring`, `tree`, `hd`, `ina`, `direct`, `dissemination`,
    /// `ring+nvswitch`, `ring+rails`; after a fallback, the host algorithm.
    pub algorithm: String,
    pub group_size: u32,
    pub size_bytes: u64,
    /// First task started, last task completed; `None` if it never started
    /// or did not complete within the run.
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub duration_ns: Option<u64>,
    pub offloaded: bool,
    pub fallback_reason: Option<String>,
    /// The job it belongs to.
    pub job: Option<Arc<str>>,
}

/// Where a shard's model writes its telemetry rows, in the order it makes
/// them (which is deterministic: the same on any number of shards).
pub trait TelemetrySink: Send {
    fn flow(&mut self, record: FlowRecord);
    fn queue(&mut self, sample: QueueSample);
    fn pfc(&mut self, record: PfcRecord);
    fn switch_offload(&mut self, record: SwitchOffloadRecord);
    fn link(&mut self, sample: LinkSample);
    /// Whether the sink takes the `collectives` table's rows during the
    /// run ([`TelemetrySink::collective`]); otherwise the run keeps every
    /// collective's span, and the rows are made from them after it. Only a
    /// sequential (flow-level) run hands them out.
    fn takes_collectives(&self) -> bool {
        false
    }
    /// The `collectives` table's next row, in the table's order
    /// ([`crate::network::collective_order`]): every collective of the
    /// workload once, finished ones as soon as their row is final.
    fn collective(&mut self, record: CollectiveRecord) {
        let _ = record;
    }
}

/// Keeps every row in memory; for tests and small runs.
#[derive(Debug, Default, Clone)]
pub struct MemorySink {
    pub flows: Vec<FlowRecord>,
    pub queues: Vec<QueueSample>,
    pub pfc: Vec<PfcRecord>,
    pub switch_offload: Vec<SwitchOffloadRecord>,
    pub links: Vec<LinkSample>,
}

impl TelemetrySink for MemorySink {
    fn flow(&mut self, record: FlowRecord) {
        self.flows.push(record);
    }
    fn queue(&mut self, sample: QueueSample) {
        self.queues.push(sample);
    }
    fn pfc(&mut self, record: PfcRecord) {
        self.pfc.push(record);
    }
    fn switch_offload(&mut self, record: SwitchOffloadRecord) {
        self.switch_offload.push(record);
    }
    fn link(&mut self, sample: LinkSample) {
        self.links.push(sample);
    }
}
