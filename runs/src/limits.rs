//! Limits a run checks before it allocates or starts: the network model's
//! memory and the number of sample rows.

use anyhow::bail;
use netsim_engine::process::{memory_in_use_bytes, memory_limit_bytes};
use netsim_engine::SimTime;
use netsim_models::workload::Workload;

/// What the network model holds per port (queues, counters, pause state),
/// a generous estimate for the memory check.
const BYTES_PER_PORT: u64 = 192;

/// Fails when the network model's ports and per-flow state (this rank's
/// share of them, at `bytes_per_flow` each) would not fit beside what this
/// process already holds (the workload among it).
pub fn check_model_memory(
    topo: &netsim_topo::Topology,
    flows: usize,
    bytes_per_flow: u64,
    ranks: usize,
) -> anyhow::Result<()> {
    use netsim_engine::process::human_bytes;
    let ports = 2 * u64::from(topo.link_count()) / ranks as u64;
    let senders = flows as u64 / ranks as u64;
    let need = ports
        .saturating_mul(BYTES_PER_PORT)
        .saturating_add(senders.saturating_mul(bytes_per_flow));
    let (limit, held) = (memory_limit_bytes(), memory_in_use_bytes());
    if need > limit.saturating_sub(held) {
        bail!(
            "the network model needs ~{} for {ports} ports and {senders} flows; this process \
             may use {} and holds {} already (a smaller topology or fewer flows fit)",
            human_bytes(need),
            human_bytes(limit),
            human_bytes(held)
        );
    }
    Ok(())
}

/// The most rows the `links` and `queues` tables may be asked for: beyond
/// this a run writes samples for hours.
const MAX_SAMPLE_ROWS: u64 = 1_000_000_000;

/// Fails when the workload surely runs so long that sampling every
/// `period` would write more than [`MAX_SAMPLE_ROWS`] rows: the run lasts at
/// least as long as its latest flow start, its longest compute task and the
/// host overhead, and every period adds a row per link direction.
pub fn check_samples(workload: &Workload, period: SimTime, links: u32) -> anyhow::Result<()> {
    if period == SimTime::ZERO {
        return Ok(());
    }
    let latest_start = workload.flows.iter().map(|f| f.start).max();
    let longest_compute = workload
        .tasks
        .iter()
        .filter_map(|t| match workload.kind(t) {
            netsim_models::workload::TaskKind::Compute(d) => Some(d),
            netsim_models::workload::TaskKind::Flow(_) => None,
        });
    let overhead = workload.has_tasks().then_some(workload.host_overhead);
    let span = latest_start
        .into_iter()
        .chain(longest_compute)
        .chain(overhead)
        .max()
        .unwrap_or(SimTime::ZERO);
    let rows = (span.as_ps() / period.as_ps()).saturating_mul(2 * u64::from(links));
    if rows > MAX_SAMPLE_ROWS {
        bail!(
            "--sample-ns: the run lasts at least {:.3} s of simulated time, so sampling every {} ns \
             writes over {rows} rows (at most {MAX_SAMPLE_ROWS}): raise --sample-ns or set it to 0",
            span.as_ps() as f64 / 1e12,
            period.as_ns()
        );
    }
    Ok(())
}
