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

/// A chain of `steps` ring steps over 8 hosts of a k=4 fat-tree, each host's
/// flow after the previous step's flows it sent and received, run at
/// packet level on two shards:
/// the run's sender slots and its flows finished.
fn chain_run(steps: u32) -> (u64, u64) {
    use netsim_models::workload::{Builder, NONE};
    let hosts = 8;
    let mut b = Builder::new(SimTime::ZERO);
    let mut last: Vec<u32> = Vec::new();
    for _ in 0..steps {
        last = (0..hosts)
            .map(|h| {
                let deps = match last.is_empty() {
                    true => vec![],
                    false => vec![last[h as usize], last[((h + hosts - 1) % hosts) as usize]],
                };
                b.flow(h, (h + 1) % hosts, 20_000, NONE, &deps)
            })
            .collect();
    }
    let topo = netsim_topo::build(&crate::common::fat_tree(4, 2)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let config = NetConfig::default();
    let fabric =
        netsim_models::network::Fabric::with_workload(topo, routing, b.finish(), config, 3);
    let layout = crate::common::layout(&fabric.topo, 2);
    let run = netsim_models::network::simulate(&fabric, &layout, SimTime::MAX, None, |_| {
        netsim_models::telemetry::MemorySink::default()
    });
    let stats = run.stats();
    (stats.sender_slots, stats.flows_finished)
}

#[test]
fn senders_are_made_as_flows_start_so_a_longer_chain_holds_no_more() {
    // A host's flow waits for the previous step's flows at that host: at
    // most about a step's 8 flows run at once, however long the chain.
    let (short_slots, short_done) = chain_run(4);
    let (long_slots, long_done) = chain_run(64);
    assert_eq!((short_done, long_done), (4 * 8, 64 * 8));
    assert!(short_slots <= 8, "{short_slots}");
    assert_eq!(long_slots, short_slots);
}
