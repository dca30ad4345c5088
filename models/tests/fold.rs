//! Folded data-parallel replicas (`--fold-dp`): a folded run simulates one
//! replica in N and must reproduce the whole run wherever the replicas
//! left out share no link with the simulated ones (a non-blocking switch),
//! with N times fewer flows.

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

fn config() -> NetConfig {
    NetConfig {
        cc: CcKind::None,
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
    let routing = Routing::build(topo).unwrap();
    let fabric = Fabric::with_workload(topo.clone(), routing, workload, config(), 3);
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
