//! Lazy expansion's ground (issue 32): every collective, expanded alone at
//! the ids its plan reserved, is exactly the eager build's tasks, flows and
//! dependencies, and planning changes no id of the eager build.

use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::workload::build::lazy::{
    expand, lazy_jobs, lazy_jobs_within, plan_jobs, plan_only_jobs, plan_only_shaped, Plans,
};
use netsim_models::workload::nccl::Nccl;
use netsim_models::workload::on_demand::{self, Source};
use netsim_models::workload::IdBase;
use netsim_models::workload::{build_jobs, file, simai, Algorithm, Job, Workload};
use netsim_topo::{FatTreeParams, SimaiParams, SimaiTemplate, TopoSpec, Topology};

const MOE: &str = include_str!("../../../runs/scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
const MIXTRAL: &str =
    include_str!("../../../runs/scenarios/workloads/mixtral-8x7b-ep8-tp2-128.txt");

fn fat_tree() -> Topology {
    netsim_topo::build(&TopoSpec::FatTree(FatTreeParams {
        k: 8,
        tiers: 3,
        ..FatTreeParams::default()
    }))
    .unwrap()
}

fn spectrum_x() -> Topology {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 128;
    netsim_topo::build(&TopoSpec::Simai(p)).unwrap()
}

fn moe(topo: &Topology, algorithm: Algorithm, nccl: bool) -> Job {
    simai_job(MOE, topo, algorithm, nccl)
}

fn simai_job(text: &str, topo: &Topology, algorithm: Algorithm, nccl: bool) -> Job {
    let mut spec = simai::parse(text, "workload.txt", 128, algorithm).unwrap();
    if nccl {
        spec.nccl = Some(Nccl::default());
    }
    Job {
        name: None,
        spec,
        hosts: (0..topo.host_count()).collect(),
        start: SimTime::ZERO,
    }
}

/// Checks that `plans` tile the eager workload's collectives and flows in
/// build order and that each expands alone into the eager rows; returns
/// how many expanded alone.
fn check_expands_alone(jobs: &[Job], topo: &Topology, w: &Workload, plans: &Plans) -> usize {
    let config = NetConfig::default();
    let deps = w.dependencies();
    let (mut collectives, mut flows, mut expanded) = (0, 0, 0);
    for (i, plan) in plans.list.iter().enumerate() {
        // Ranges reserved in build order, back to back: the ids are the
        // eager build's whichever collective is expanded first.
        assert_eq!(plan.base.collective, collectives);
        assert_eq!(plan.base.flow, flows);
        collectives += plan.count.collective;
        flows += plan.count.flow;
        let row = &w.collectives[plan.base.collective as usize];
        let Some(part) = expand(jobs, topo, &config, plans, i, row) else {
            continue;
        };
        assert_eq!(
            part,
            w.reserved_part(plan, &deps),
            "collective {}",
            plan.base.collective
        );
        expanded += 1;
    }
    assert_eq!(collectives as usize, w.collectives.len());
    assert_eq!(flows as usize, w.flows.len());
    expanded
}

#[test]
fn every_collective_expanded_alone_is_the_eager_builds() {
    let cases = [
        (fat_tree(), Algorithm::Ring, false),
        (fat_tree(), Algorithm::Tree, false),
        (fat_tree(), Algorithm::Hd, false),
        // Falls back (no switch offload): the fallback is replayed.
        (fat_tree(), Algorithm::Ina, false),
        (spectrum_x(), Algorithm::Auto, true),
        (spectrum_x(), Algorithm::Ring, true),
    ];
    for (topo, algorithm, nccl) in cases {
        let jobs = [moe(&topo, algorithm, nccl)];
        let config = NetConfig::default();
        let eager = build_jobs(&jobs, &[], &topo, &config).unwrap();
        let (w, plans) = plan_jobs(&jobs, &[], &topo, &config).unwrap();
        // Planning changes nothing of the eager build.
        assert_eq!((&w.tasks, &w.flows), (&eager.tasks, &eager.flows));
        assert_eq!(w.collectives, eager.collectives);
        let expanded = check_expands_alone(&jobs, &topo, &w, &plans);
        assert_eq!(expanded, plans.list.len(), "{algorithm:?}, nccl {nccl}");
        assert!(expanded > 100, "{algorithm:?}: {expanded}");
        check_plan_only(&jobs, &topo, &w, &plans);
    }
}

/// A plan-only build keeps no flow and a fraction of the eager bytes, and
/// plans what the eager build planned.
fn check_plan_only(jobs: &[Job], topo: &Topology, w: &Workload, plans: &Plans) {
    let config = NetConfig::default();
    let (skeleton, only) = plan_only_jobs(jobs, &[], topo, &config).unwrap();
    let ids = IdBase {
        task: w.tasks.len() as u32,
        flow: w.flows.len() as u32,
        collective: w.collectives.len() as u32,
    };
    assert_eq!(skeleton.ids, ids);
    assert_eq!(skeleton.collectives, w.collectives);
    assert_eq!(only.list, plans.list);
    for i in 0..only.list.len() {
        assert_eq!(only.entry(i), plans.entry(i));
        assert_eq!((only.op(i), only.group(i)), (plans.op(i), plans.group(i)));
    }
    assert_eq!(skeleton.kept_flows, 0);
    let eager = w.bytes().total();
    let lazy = skeleton.bytes + only.bytes();
    assert!(
        lazy * 2 < eager,
        "plan-only {lazy} B against eager {eager} B"
    );
}

/// Collectives of one shape built once (their ids, rows and exits reused,
/// relabelled) plan exactly what building each alone plans: every plan's
/// ids, counts, operation, members and entry, and the rows.
#[test]
fn shaped_plans_are_the_plans_built_one_by_one() {
    let cases = [
        (MOE, fat_tree(), Algorithm::Ring, false),
        (MOE, fat_tree(), Algorithm::Tree, false),
        (MOE, fat_tree(), Algorithm::Hd, false),
        (MOE, fat_tree(), Algorithm::Ina, false),
        (MOE, spectrum_x(), Algorithm::Ring, false),
        (MOE, spectrum_x(), Algorithm::Ring, true),
        (MIXTRAL, fat_tree(), Algorithm::Ring, false),
        (MIXTRAL, spectrum_x(), Algorithm::Ring, false),
        (MIXTRAL, spectrum_x(), Algorithm::Hd, false),
    ];
    for (text, topo, algorithm, nccl) in cases {
        let jobs = [simai_job(text, &topo, algorithm, nccl)];
        let config = NetConfig::default();
        let (one, alone) = plan_only_shaped(&jobs, &[], &topo, &config, false).unwrap();
        let (skeleton, shaped) = plan_only_shaped(&jobs, &[], &topo, &config, true).unwrap();
        assert!(
            alone.list.len() > 100,
            "{algorithm:?}: {}",
            alone.list.len()
        );
        assert_eq!(shaped.list, alone.list, "{algorithm:?}, nccl {nccl}");
        for i in 0..alone.list.len() {
            assert_eq!(shaped.entry(i), alone.entry(i));
            assert_eq!(
                (shaped.op(i), shaped.group(i)),
                (alone.op(i), alone.group(i))
            );
        }
        assert_eq!(skeleton.ids, one.ids);
        assert_eq!(skeleton.collectives, one.collectives);
        let kept = (skeleton.kept_tasks, skeleton.kept_flows, skeleton.edges);
        assert_eq!(kept, (one.kept_tasks, one.kept_flows, one.edges));
        assert_eq!(skeleton.bytes, one.bytes);
    }
}

/// The partition's walk over a lazy workload (flows of a shape expanded
/// once, relabelled) gives the eager build's flows, in id order.
#[test]
fn the_lazy_flow_walk_is_the_eager_flows() {
    for (text, topo) in [(MOE, spectrum_x()), (MIXTRAL, fat_tree())] {
        let jobs = [simai_job(text, &topo, Algorithm::Ring, false)];
        let config = NetConfig::default();
        let eager = build_jobs(&jobs, &[], &topo, &config).unwrap();
        let w = lazy_jobs(&jobs, &[], &topo, &config).unwrap();
        let src = Source {
            workload: &w,
            topo: &topo,
            config: &config,
        };
        let mut flows = Vec::new();
        let lazy = w.lazy.as_ref().unwrap();
        lazy.each_flow(src, |id, flow| flows.push((id, *flow)));
        let ids = 0..eager.flows.len() as u32;
        assert_eq!(
            flows,
            ids.zip(eager.flows.iter().copied()).collect::<Vec<_>>()
        );
    }
}

/// The shape cache is hit: on the 128-GPU MoE, the collectives of a
/// phase's groups and of every micro-batch's repeat of the phase are
/// planned from a shape built once; with shapes off, none is.
#[test]
fn most_collectives_are_planned_from_a_shape_built_before() {
    let topo = spectrum_x();
    let jobs = [moe(&topo, Algorithm::Ring, false)];
    let config = NetConfig::default();
    let (_, alone) = plan_only_shaped(&jobs, &[], &topo, &config, false).unwrap();
    assert_eq!(alone.shape_hits(), 0);
    let (_, shaped) = plan_only_shaped(&jobs, &[], &topo, &config, true).unwrap();
    let (hits, plans) = (shaped.shape_hits(), shaped.list.len() as u64);
    eprintln!("{hits} of {plans} planned from a shape built before");
    assert!(hits * 10 >= plans * 9, "{hits} of {plans}");
}

/// Plans that would list more entries than a lazy build allows stop it
/// with an error naming them (at 2^32 entries, 16 GiB, it was a panic):
/// on the 128-GPU MoE, exactly as many as its plans list is accepted, one
/// fewer is refused.
#[test]
fn plans_past_the_most_entries_are_refused_with_an_error() {
    let topo = spectrum_x();
    let jobs = [moe(&topo, Algorithm::Ring, false)];
    let config = NetConfig::default();
    let (_, plans) = plan_only_jobs(&jobs, &[], &topo, &config).unwrap();
    // Per plan, per member: a count, then the tasks it waits for.
    let listed: usize = (0..plans.list.len())
        .map(|i| plans.group(i).len() + plans.entry(i).values().map(Vec::len).sum::<usize>())
        .sum();
    assert!(listed > 1000, "{listed}");
    let w = lazy_jobs_within(&jobs, &[], &topo, &config, listed).unwrap();
    assert!(w.lazy.is_some());
    let Err(error) = lazy_jobs_within(&jobs, &[], &topo, &config, listed - 1) else {
        panic!("plans of {listed} entries accepted within {}", listed - 1);
    };
    let error = error.to_string();
    let most = format!("pass the {} a lazy build may list", listed - 1);
    assert!(error.contains(&most), "{error}");
    assert!(error.contains("--fold-dp"), "{error}");
}

/// The memory check's live tasks (issue 32): a collective is expanded
/// whole when its first member is ready, so a host may hold a member's
/// share of the largest one. One ring all-reduce over the 128 hosts of a
/// k = 8 fat-tree sends 2 x 127 chunks a member, past the flat 64 a host
/// the check allowed before; every task of the collective may be live.
#[test]
fn a_host_may_hold_a_member_s_share_of_the_largest_collective() {
    let topo = fat_tree();
    let hosts = topo.host_count();
    let text = "[[phase]]\nname = \"ar\"\ncollective = \"allreduce\"\nsize = \"1MiB\"\n\
                algo = \"ring\"\n";
    let jobs = [Job {
        name: None,
        spec: file::parse(text, "w.toml", hosts).unwrap(),
        hosts: (0..hosts).collect(),
        start: SimTime::ZERO,
    }];
    let config = NetConfig::default();
    let w = lazy_jobs(&jobs, &[], &topo, &config).unwrap();
    let lazy = w.lazy.as_ref().unwrap();
    assert_eq!(hosts, 128);
    // The collective's tasks, the same share at each member.
    let in_collective = u64::from(lazy.ids().task) - lazy.kept_tasks();
    let share = lazy.live_tasks_per_host();
    assert!(share >= 2 * 127, "{share}");
    assert_eq!(share * 128, in_collective);
    // Its template and its counts: no other collective shares them.
    let per_task = on_demand::BYTES_PER_LIVE_TASK + on_demand::BYTES_PER_LIVE_COUNT;
    assert_eq!(lazy.live_bytes(&topo), in_collective * per_task);
}
