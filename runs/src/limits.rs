//! Limits a run checks before it starts: the number of sample rows (its
//! memory is checked in [`crate::memory_check`]).

use anyhow::bail;
use netsim_engine::SimTime;
use netsim_models::workload::Workload;

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
