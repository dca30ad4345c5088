//! What `--lazy-expansion on` cannot run yet, refused before the build
//! with the reason (docs/design/lazy-expansion.md).

use crate::run_cmd::{Fidelity, RunArgs};
use netsim_models::network::config::{EcmpEntropy, NetConfig, Transport};

/// Refuses `--lazy-expansion on` where a run reads flows or tasks that a
/// lazy workload has not expanded: flow level's classes, UEC,
/// fast-forward, `--recv-complete acked`, per-connection ECMP entropy and
/// rail draws (all of which read the whole flow list or task DAG).
pub fn check(args: &RunArgs, config: &NetConfig) -> anyhow::Result<()> {
    if args.workload.lazy_expansion != "on" {
        return Ok(());
    }
    let why = if args.fidelity == Fidelity::Flow && args.workload.fold_classes {
        Some("--fold-classes reads every flow of the folded jobs up front")
    } else if config.transport == Transport::Uec {
        Some("UEC receivers read flows the run may have freed")
    } else if config.fast_forward.is_some() {
        Some("fast-forward reads the whole task DAG")
    } else if config.recv_complete_at_ack {
        Some("--recv-complete acked reads the whole flow list")
    } else if config.ecmp_entropy == EcmpEntropy::Connection {
        Some("--ecmp-entropy connection numbers every flow's connection up front")
    } else if config.ecn_draw_rails {
        Some("--ecn-draw rail finds twin rails from the whole flow list up front")
    } else {
        None
    };
    match why {
        Some(why) => anyhow::bail!(
            "--lazy-expansion on: {why}; run it with --lazy-expansion off (the eager build)"
        ),
        None => Ok(()),
    }
}
