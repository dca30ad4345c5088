//! Folded data-parallel replicas (`--fold-dp`): a folded run simulates one
//! replica in N, with N times fewer flows, and must reproduce the whole run
//! wherever the replicas are symmetric: on a non-blocking switch, and at
//! flow level with classes (`fold_classes`: each flow a class of N members),
//! also where the replicas share a link (each member counted there).

use netsim_engine::SimTime;
use netsim_models::flow;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::network::{collective_records, Fabric, NetRun};
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::groups::{GroupSpec, Parallelism};
use netsim_models::workload::spec::BuildError;
use netsim_models::workload::{
    build, simai, Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, Workload, WorkloadSpec,
};
use netsim_models::workload::{build_jobs, Job};
use netsim_topo::{LinkParams, Routing, StarParams, TopoSpec, Topology};

const GBPS: u64 = 1_000_000_000;

/// A pipelined MoE job: TP 2, PP 2, EP 2, DP 8 on 32 GPUs, two micro-batches,
/// with DP and DP_EP rings, expert all-to-alls and pipeline sends.
const MOE: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 2 pp: 2 vpp: 1 ga: 2 all_gpus: 32 checkpoints: 0 checkpoint_initiates: 0 pp_comm: 262144
10
grad_gather -1 1 NONE 0 1 NONE 0 1 ALLGATHER 4194304 100
grad_param_comm -1 1 NONE 0 1 NONE 0 1 REDUCESCATTER 8388608 100
moe_grad_norm1 -1 1 NONE 0 1 NONE 0 1 ALLGATHER_DP_EP 2097152 100
moe_grad_norm2 -1 1 NONE 0 1 NONE 0 1 REDUCESCATTER_DP_EP 4194304 100
embedding_layer -1 20000 ALLREDUCE 1048576 1 NONE 0 30000 NONE 0 100
attention_row -1 40000 REDUCESCATTER 1048576 20000 ALLGATHER 1048576 20000 NONE 0 100
mlp_moelayer -1 1 ALLTOALL_EP 2097152 1 ALLTOALL_EP 2097152 1 NONE 0 100
embedding_layer -1 20000 ALLREDUCE 1048576 1 NONE 0 30000 NONE 0 100
attention_row -1 40000 REDUCESCATTER 1048576 20000 ALLGATHER 1048576 20000 NONE 0 100
mlp_moelayer -1 1 ALLTOALL_EP 2097152 1 ALLTOALL_EP 2097152 1 NONE 0 100
";

fn star(hosts: u32) -> Topology {
    netsim_topo::build(&TopoSpec::Star(StarParams {
        hosts,
        host_link: LinkParams {
            bandwidth_bps: 100 * GBPS,
            latency_ps: 1_000_000,
        },
    }))
    .unwrap()
}

/// Congestion control on: flow level shares links max-min, where folded
/// flows can run as classes.
fn config() -> NetConfig {
    NetConfig {
        sample_period: SimTime::ZERO,
        ..NetConfig::default()
    }
}

fn moe(fold_dp: u32) -> WorkloadSpec {
    let mut spec = simai::parse(MOE, "moe.txt", 32, Algorithm::Ring).unwrap();
    spec.fold_dp = fold_dp;
    spec
}

fn run(topo: &Topology, workload: Workload) -> (Fabric, NetRun<MemorySink>) {
    run_with(topo, workload, config())
}

fn run_with(
    topo: &Topology,
    workload: Workload,
    config: NetConfig,
) -> (Fabric, NetRun<MemorySink>) {
    let routing = Routing::build(topo).unwrap();
    let fabric = Fabric::with_workload(topo.clone(), routing, workload, config, 3);
    flow::check(&fabric).unwrap();
    let run = flow::simulate(&fabric, SimTime::MAX, None, MemorySink::default());
    (fabric, run)
}

#[test]
fn a_folded_job_on_a_non_blocking_switch_ends_exactly_when_the_whole_job_does() {
    let topo = star(32);
    let whole = build(&moe(1), &topo, &config()).unwrap();
    let folded = build(&moe(2), &topo, &config()).unwrap();
    // Every collective of a simulated replica keeps its flows; half the
    // replicas are left out.
    assert_eq!(folded.flows.len() * 2, whole.flows.len());
    let (wf, wr) = run(&topo, whole);
    let (ff, fr) = run(&topo, folded);
    assert_eq!(fr.sim_end, wr.sim_end);
    let (wc, fc) = (
        collective_records(&wf.workload, &wr.shards[0].spans),
        collective_records(&ff.workload, &fr.shards[0].spans),
    );
    assert!(wc.iter().chain(&fc).all(|c| c.end_ns.is_some()));
    // Each folded collective ran exactly as its counterpart in the whole
    // job: the same name, group size (the whole group's), start and end.
    for c in &fc {
        let twin = wc
            .iter()
            .find(|w| w.name == c.name && w.start_ns == c.start_ns && w.end_ns == c.end_ns)
            .unwrap_or_else(|| panic!("no twin for {c:?}"));
        assert_eq!(twin.group_size, c.group_size, "{}", c.name);
    }
    let dp_rings = fc.iter().filter(|c| c.name.contains(".wg.")).count();
    assert!(dp_rings > 0 && fc.iter().any(|c| c.group_size == 8));
}

#[test]
fn a_folded_dp_ring_sends_the_whole_rings_steps_and_sizes() {
    let topo = star(16);
    let mut spec = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ring,
        size_bytes: 16 << 20,
        group: GroupSpec::Dp,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    spec.parallelism = Some(Parallelism::new(16, 1, 1, 1).unwrap());
    spec.fold_dp = 4;
    let w = build(&spec, &topo, &config()).unwrap();
    // 4 members x 2(16 - 1) steps of 1 MiB.
    assert_eq!(w.flows.len(), 4 * 30);
    assert!(w.flows.iter().all(|f| f.size_bytes == 1 << 20));
    assert!(w.flows.iter().all(|f| f.src < 4 && f.dst < 4));
    assert_eq!(w.collectives[0].group_size, 16);
}

fn build_err(spec: &WorkloadSpec) -> String {
    match build(spec, &star(32), &config()) {
        Err(e @ (BuildError::Invalid(_) | BuildError::Phase { .. })) => e.to_string(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn folds_that_cannot_stand_for_the_whole_job_are_refused() {
    // 8 replicas in folds of 3; folds of 8 leave expert groups of 2 no room.
    assert!(build_err(&moe(3)).contains("--fold-dp 3: the fold must divide"));
    assert!(build_err(&moe(8)).contains("--fold-dp 8"));
    // Folds of 4 keep expert groups whole but DP_EP groups with one member.
    assert!(build_err(&moe(4)).contains("would keep 1 of its members"));
    // Only rings fold: a halving-doubling all-reduce's steps depend on the members.
    let mut spec = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Hd,
        size_bytes: 1 << 20,
        group: GroupSpec::Dp,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    spec.parallelism = Some(Parallelism::new(32, 1, 1, 1).unwrap());
    spec.fold_dp = 2;
    assert!(build_err(&spec).contains("ring all-reduce, all-gather or reduce-scatter only"));
}

/// Two switches joined by one 100 Gb/s link, hosts alternating between
/// them (even hosts on switch 8, odd on switch 9) on 400 Gb/s links: every
/// ring hop between neighbours crosses the shared link, and with 8 hosts 4
/// flows cross it each way.
fn dumbbell(gpus_per_server: u32) -> Topology {
    let mut text = format!("10 {gpus_per_server} 0 2 9 H100\n8 9\n8 9 100Gbps 0.001ms 0\n");
    for h in 0..8 {
        text += &format!("{h} {} 400Gbps 0.001ms 0\n", 8 + h % 2);
    }
    netsim_topo::simai::parse_simai(&text, "dumbbell").unwrap()
}

/// An all-reduce ring over `dp` data-parallel ranks, folded by `fold_dp`.
fn ring(fold_dp: u32, dp: u32) -> WorkloadSpec {
    let mut spec = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ring,
        size_bytes: 8 << 20,
        group: GroupSpec::Dp,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    spec.parallelism = Some(Parallelism::new(dp, 1, 1, 1).unwrap());
    spec.fold_dp = fold_dp;
    spec.fold_classes = true;
    spec
}

fn sampled() -> NetConfig {
    NetConfig {
        sample_period: SimTime::from_ns(20_000),
        ..NetConfig::default()
    }
}

#[test]
fn members_of_a_class_share_a_link_as_the_whole_runs_flows_do() {
    // Folded by 4, hosts 0 and 1 are kept: the class of flow 0 -> 1 has the
    // members 2k -> 2k+1, all four across the 100 Gb/s link (weight 4), so
    // each runs at 100 / 4 = 25 Gb/s, as the whole ring's 4 flows that
    // cross it each way do. (The replicas left out sending nothing, the
    // flow would have the link to itself: 4 times faster.)
    let topo = dumbbell(1);
    let whole = build(&ring(1, 8), &topo, &config()).unwrap();
    let folded = build(&ring(4, 8), &topo, &config()).unwrap();
    assert_eq!(folded.flows.len() * 4, whole.flows.len());
    let (wf, wr) = run_with(&topo, whole, sampled());
    let (ff, fr) = run_with(&topo, folded, sampled());
    assert_eq!(fr.sim_end, wr.sim_end);
    let span = |f: &Fabric, r: &NetRun<MemorySink>| {
        let c = collective_records(&f.workload, &r.shards[0].spans);
        (c[0].start_ns, c[0].end_ns)
    };
    assert_eq!(span(&ff, &fr), span(&wf, &wr));
    // The links table counts every member: each link direction carries
    // what it carries in the whole run, interval by interval (a copy's host
    // links report their kept host's), so bytes are conserved.
    let rows = |r: &NetRun<MemorySink>| {
        let mut rows: Vec<_> = r.shards[0]
            .sink
            .links
            .iter()
            .map(|l| (l.time_ns, l.src, l.src_port, l.tx_bytes))
            .collect();
        rows.sort_unstable();
        rows
    };
    let (wl, fl) = (rows(&wr), rows(&fr));
    assert_eq!(fl, wl);
    // Switch 8's port 0 is the shared link toward switch 9: the 4 members
    // of flow 0 -> 1's class crossed it in each of the 14 steps.
    let shared: u64 = fl
        .iter()
        .filter(|l| l.1 == 8 && l.2 == 0)
        .map(|l| l.3)
        .sum();
    assert_eq!(shared % (4 * 14), 0);
    let wire_bytes = shared / (4 * 14);
    assert!(wire_bytes > 1 << 20, "{wire_bytes}");
    // Each flow drains at a quarter of the shared link: its completion is
    // the ideal one (alone at 100 Gb/s) plus 3 serialisations at 100 Gb/s.
    let flows = &fr.shards[0].sink.flows;
    assert_eq!(flows.len(), 2 * 14);
    let serialisation_ns = (wire_bytes * 8) as f64 / 100.0;
    for f in flows {
        let late_ns = (f.fct_ns.unwrap() - f.ideal_fct_ns) as f64;
        assert!(
            (late_ns - 3.0 * serialisation_ns).abs() < 2.0,
            "{f:?}: {late_ns} ns late"
        );
    }
    // The plain fold leaves the copies out: each kept flow has the shared
    // link to itself and ends at its ideal time, 4 times too early.
    let plain = WorkloadSpec {
        fold_classes: false,
        ..ring(4, 8)
    };
    let (_, pr) = run_with(&topo, build(&plain, &topo, &config()).unwrap(), sampled());
    assert!(pr.sim_end < fr.sim_end);
    for f in &pr.shards[0].sink.flows {
        assert!(f.fct_ns.unwrap() - f.ideal_fct_ns < 2, "{f:?}");
    }
}

#[test]
fn classes_are_refused_where_copies_would_not_mirror_the_kept_replicas() {
    let refused = |topo: &Topology, workload: Workload, config: NetConfig| {
        let routing = Routing::build(topo).unwrap();
        let fabric = Fabric::with_workload(topo.clone(), routing, workload, config, 3);
        flow::check(&fabric).unwrap_err().to_string()
    };
    // FIFO sharing (--cc none) has no classes.
    let fifo = NetConfig {
        cc: CcKind::None,
        ..config()
    };
    let topo = dumbbell(1);
    let w = build(&ring(4, 8), &topo, &fifo).unwrap();
    assert!(refused(&topo, w, fifo).contains("--cc none"));
    // 12 ranks in 3 servers of 4 GPUs, folded by 4: the kept ranks 0-2
    // share server 0, their first copy (ranks 3-5) straddles servers 0 and 1.
    let mut text = "13 4 0 1 12 H100\n12\n".to_string();
    for h in 0..12 {
        text += &format!("{h} 12 400Gbps 0.001ms 0\n");
    }
    let topo = netsim_topo::simai::parse_simai(&text, "servers").unwrap();
    let w = build(&ring(4, 12), &topo, &config()).unwrap();
    assert!(refused(&topo, w, config()).contains("do not sit on the fabric as the kept ones do"));
    // A job placed on scattered hosts has no copies to stand for.
    let topo = dumbbell(1);
    let job = Job {
        name: None,
        spec: ring(4, 8),
        hosts: vec![0, 1, 2, 3, 4, 5, 7, 6],
        start: SimTime::ZERO,
    };
    let w = build_jobs(&[job], &[], &topo, &config()).unwrap();
    assert!(refused(&topo, w, config()).contains("consecutive hosts"));
}
