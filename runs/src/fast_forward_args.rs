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
    if fabric.config.fast_forward.is_some() && fabric.workload.reduce.is_some() {
        anyhow::bail!(
            "--fast-forward on: SimAI's marked-flow delay (--reduce-overhead-ns) is not \
             fast-forwarded yet; run it with --fast-forward off"
        );
    }
    if fabric.config.fast_forward.is_some() && fabric.workload.host_overhead_jitter.0 > 0 {
        anyhow::bail!(
            "--fast-forward on: per-flow host-overhead jitter (--host-overhead-jitter-ns) is \
             not fast-forwarded yet; run it with --fast-forward off"
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
        "memo_rounds": stats.memo_rounds,
        "rails": fabric.config.fast_forward.is_some_and(|f| f.rails),
        "rails_classes": fabric
            .config
            .fast_forward
            .is_some_and(|f| f.rails)
            .then(|| netsim_models::network::rail_classes(fabric)),
        "rail_followed": stats.rail_followed,
        "rail_diverged": stats.rail_diverged,
        "rail_leader_marks": stats.rail_leader_marks,
        "rail_leader_pauses": stats.rail_leader_pauses,
    })
}

/// The one line rail replay warns with on stderr once it is no longer
/// exact, or `None`: some followers did not start at their twin's
/// instant, or a leading switch ECN-marked packets whose followers take
/// the marks while twin rails draw RED differently (`--ecn-draw packet`;
/// with `rail` they draw alike, and the marks are packet level's). PFC
/// pauses follow the queues: alone they change nothing.
pub(crate) fn rail_warning(stats: &NetStats, draws_shared: bool) -> Option<String> {
    let (diverged, marks) = (stats.rail_diverged, stats.rail_leader_marks);
    let why = if diverged > 0 {
        format!("{diverged} followed flows did not start at their twin's instant")
    } else if marks > 0 && !draws_shared {
        format!(
            "leading rail switches ECN-marked {marks} packets that their followers copy, \
             but twin rails draw RED differently (--ecn-draw packet; rail draws alike)"
        )
    } else {
        return None;
    };
    Some(format!(
        "netsim: warning: --ff-rails: {why}: the replay is no longer exact \
         (run.json: fast_forward.rail_diverged, rail_leader_marks)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rail_replay_warns_once_it_is_no_longer_exact() {
        let mut stats = NetStats {
            rail_followed: 9,
            rail_leader_pauses: 3,
            ..NetStats::default()
        };
        assert_eq!(rail_warning(&stats, false), None);
        stats.rail_leader_marks = 4;
        assert_eq!(rail_warning(&stats, true), None);
        let line = rail_warning(&stats, false).unwrap();
        assert!(line.contains("marked 4 packets"), "{line}");
        stats.rail_diverged = 2;
        let line = rail_warning(&stats, true).unwrap();
        assert!(line.contains(" 2 followed flows"), "{line}");
        assert_eq!(line.lines().count(), 1);
    }
}
