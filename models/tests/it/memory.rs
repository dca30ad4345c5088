//! What a workload costs in memory: the builder's count, which refuses a
//! workload too large for the process, is exactly what the built workload's
//! structures make, and the refusal falls on that byte.

use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::workload::memory::{collective_bytes, needed_bytes};
use netsim_models::workload::{build_jobs_within, simai, Algorithm, Job, Workload};
use netsim_topo::{FatTreeParams, TopoSpec, Topology};

fn topo() -> Topology {
    netsim_topo::build(&TopoSpec::FatTree(FatTreeParams {
        k: 8,
        tiers: 3,
        ..FatTreeParams::default()
    }))
    .unwrap()
}

fn build(topo: &Topology, budget_bytes: u64) -> Result<Workload, String> {
    let text = include_str!("../../../runs/scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    let spec = simai::parse(text, "moe.txt", 128, Algorithm::Ring).unwrap();
    let job = Job {
        name: None,
        spec,
        hosts: (0..topo.host_count()).collect(),
        start: SimTime::ZERO,
    };
    build_jobs_within(&[job], &[], topo, &NetConfig::default(), budget_bytes)
        .map_err(|e| e.to_string())
}

#[test]
fn a_workload_is_refused_one_byte_short_of_what_it_needs() {
    let topo = topo();
    let w = build(&topo, u64::MAX).unwrap();
    let names: u64 = w.collectives.iter().map(collective_bytes).sum();
    let needed = needed_bytes(
        w.tasks.len() as u64,
        w.edge_count(),
        w.flows.len() as u64,
        names,
    );
    // PP 4 x EP 2 x TP 8: hundreds of collectives, thousands of tasks.
    assert!(w.collectives.len() > 100 && w.tasks.len() > 10_000);
    // Per task 16 B + its offset + its byte of dependencies left; per
    // dependency 4 B (the dependencies' list becomes the dependents'); per
    // flow its spec, its task and its slot.
    assert_eq!(
        needed,
        21 * w.tasks.len() as u64 + 4 * w.edge_count() + 32 * w.flows.len() as u64 + names
    );
    let fits = build(&topo, needed).unwrap();
    assert_eq!(fits.tasks, w.tasks);
    let err = build(&topo, needed - 1).unwrap_err();
    assert!(err.contains("needs more than"), "{err}");
    assert!(err.contains("--fold-dp"), "{err}");
}

#[test]
fn the_structures_hold_what_their_counts_say() {
    let w = build(&topo(), u64::MAX).unwrap();
    let b = w.bytes();
    assert_eq!(b.tasks, 16 * w.tasks.len() as u64);
    assert_eq!(b.flows, 28 * w.flows.len() as u64);
    assert_eq!(
        b.dependents,
        4 * (w.edge_count() + w.tasks.len() as u64 + 1)
    );
    // Every task's dependencies are some task's dependents.
    let deps: u64 = w.tasks.iter().map(|t| u64::from(t.deps)).sum();
    assert_eq!(deps, w.edge_count());
    let listed: u64 = (0..w.tasks.len() as u32)
        .map(|t| w.dependents(t).len() as u64)
        .sum();
    assert_eq!(listed, deps);
}
