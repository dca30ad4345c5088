//! A DPU-staged collective inside a workload on the packet-level fabric.
//! (DPU-Bench's trends are checked by `runs/tests/dpu_bench.rs`, beside
//! its driver.)

use netsim_models::dpu::{default_net, DpuParams};
use netsim_topo::{FatTreeParams, TopoSpec};

const KIB: u64 = 1024;

#[test]
fn a_dpu_staged_allgather_runs_inside_a_workload_on_a_fat_tree() {
    use netsim_engine::{Layout, SimTime};
    use netsim_models::dpu::attach;
    use netsim_models::network::{collective_records, simulate, Fabric};
    use netsim_models::telemetry::MemorySink;
    use netsim_models::workload::groups::GroupSpec;
    use netsim_models::workload::{
        build, Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec,
    };
    let base = netsim_topo::build(&TopoSpec::FatTree(FatTreeParams {
        k: 4,
        tiers: 3,
        ..FatTreeParams::default()
    }))
    .unwrap();
    let topo = attach(&base, &DpuParams::default()).unwrap().topo;
    let mut spec = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllGather,
        algorithm: Algorithm::Dpu,
        size_bytes: 64 * KIB,
        group: GroupSpec::All,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    let config = default_net();
    // Without workers the algorithm is refused, naming the flag.
    let err = build(&spec, &base, &config).unwrap_err();
    assert!(err.to_string().contains("--dpu-workers"), "{err}");
    spec.dpu_workers = 2;
    spec.parallelism = Some(netsim_models::workload::groups::Parallelism::data_parallel(
        16,
    ));
    let workload = build(&spec, &topo, &config).unwrap();
    // Only host memories (0..16) and DPUs (16..32) send or receive.
    assert!(workload.flows.iter().all(|f| f.src < 32 && f.dst < 32));
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let fabric = Fabric::with_workload(topo, routing, workload, config, 3);
    let layout = Layout::blocks(fabric.topo.node_count(), 1, SimTime::MAX).unwrap();
    let run = simulate(&fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    });
    let records = collective_records(&fabric.workload, &run.spans());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].algorithm, "dpu");
    let duration = records[0].duration_ns.expect("the all-gather completes");
    // Each rank receives 15 blocks through its 100 Gb/s port (and PCIe):
    // at least 15 x 64 KiB at 100 Gb/s.
    assert!(duration >= 15 * 64 * 1024 * 8 / 100, "{duration} ns");
    // Conservation: every byte sent was delivered; each host memory got
    // its 15 blocks (plus control messages) from the DPUs.
    let stats = run.stats();
    assert_eq!(stats.sent_payload_bytes, stats.delivered_payload_bytes);
    let into_hosts: u64 = fabric
        .workload
        .flows
        .iter()
        .filter(|f| f.dst < 16 && f.size_bytes == 64 * KIB)
        .map(|f| f.size_bytes)
        .sum();
    assert_eq!(into_hosts, 16 * 15 * 64 * KIB);
}
