//! The memory a run checks before it allocates: the network model's ports
//! and per-flow state beside what the process holds already (the workload
//! among it), and what `run.json` reports of the workload's structures.

use crate::run_cmd::Fidelity;
use anyhow::bail;
use netsim_engine::process::{memory_in_use_bytes, memory_limit_bytes};
use netsim_models::flow;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::workload::Workload;

/// What a run of `fidelity` holds per flow (this rank's), for
/// [`check_model_memory`].
pub fn bytes_per_flow(fidelity: Fidelity, config: &NetConfig) -> u64 {
    match fidelity {
        Fidelity::Flow => flow::bytes_per_flow(config.cc == CcKind::None),
        Fidelity::Packet => netsim_models::network::BYTES_PER_SENDER,
    }
}

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

/// `run.json`'s `workload_bytes`: what the workload's structures hold.
pub fn workload_bytes_json(workload: &Workload) -> serde_json::Value {
    let bytes = workload.bytes();
    serde_json::json!({
        "tasks": bytes.tasks,
        "flows": bytes.flows,
        "dependents": bytes.dependents,
        "collectives": bytes.collectives,
        "total": bytes.total(),
    })
}
