//! Fast-forward and memoization in a run (DESIGN.md §3c): what a run with
//! `--fast-forward on` or `--ff-memo on` refuses, and what `run.json`
//! reports of it.

use netsim_models::network::{Fabric, NetStats};

/// Refuses what fast-forward and memoization do not handle yet, one line
/// naming the flag (exit 2).
pub(crate) fn check(fabric: &Fabric) -> anyhow::Result<()> {
    if fabric.config.fast_forward.is_some() && !fabric.faults.faults.is_empty() {
        anyhow::bail!(
            "--fast-forward on: runs with faults (--fault, --faults, [[fault]]) are not \
             fast-forwarded yet; run them with --fast-forward off"
        );
    }
    if fabric.config.fast_forward.is_some() && !fabric.workload.ina_ops.is_empty() {
        anyhow::bail!(
            "--fast-forward on: in-network aggregation (--algo ina) is not fast-forwarded yet; \
             run it with --fast-forward off"
        );
    }
    if fabric.config.fast_forward.is_some_and(|f| f.memo) && fabric.topo.has_lossy_links() {
        anyhow::bail!(
            "--ff-memo: the topology file's links lose packets (error_rate), which is not \
             memoized; run it with --ff-memo off"
        );
    }
    Ok(())
}

/// `run.json`'s `fast_forward` object: the jumps (the same on every rank)
/// and the events they avoided, the steady payload, the memo's counts.
pub(crate) fn summary(
    fabric: &Fabric,
    stats: &NetStats,
    skipped_ps: u64,
    skips: u64,
    events_avoided: u64,
) -> serde_json::Value {
    serde_json::json!({
        "enabled": fabric.config.fast_forward.is_some(),
        "skipped_ns": netsim_engine::SimTime(skipped_ps).as_ns(),
        "skips": skips,
        "events_avoided": events_avoided,
        "flow_steady_bytes": stats.ff_flow_steady_bytes,
        "memo": fabric.config.fast_forward.is_some_and(|f| f.memo),
        "memo_hits": stats.memo_hits,
        "memo_misses": stats.memo_misses,
        "memo_events_avoided": stats.memo_events_avoided,
        "memo_path_hits": stats.memo_path_hits,
        "memo_sandbox_events": stats.memo_sandbox_events,
        "rails": fabric.config.fast_forward.is_some_and(|f| f.rails),
        "rails_classes": fabric
            .config
            .fast_forward
            .is_some_and(|f| f.rails)
            .then(|| netsim_models::network::rail_classes(fabric)),
        "rail_followed": stats.rail_followed,
        "rail_diverged": stats.rail_diverged,
    })
}
