//! ASTRA-sim's Chakra microbenchmarks (`runs/tests/data/chakra/`) run as
//! the same collective asked for directly: identical flows, collective
//! records and end time, so a trace's collective is netsim's own, with
//! ASTRA-sim's all-gather size (each rank's input) turned into netsim's
//! (the gathered output). The binary's tables are compared in
//! `runs/tests/it/chakra.rs`.

use crate::common::{self, cc_none, layout};
use netsim_engine::SimTime;
use netsim_models::network::{collective_records, simulate, Fabric, NetRun};
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::trace::chakra;
use netsim_models::workload::{build, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec};
use std::path::Path;
use std::sync::Arc;

fn run(hosts: u32, spec: &WorkloadSpec) -> (Fabric, NetRun<MemorySink>) {
    let topo = netsim_topo::build(&common::star(hosts)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let workload = build(spec, &topo, &cc_none()).unwrap();
    let fabric = Fabric::with_workload(topo, routing, workload, cc_none(), 7);
    let layout = layout(&fabric.topo, 1);
    let run = simulate(&fabric, &layout, SimTime::from_us(1_000_000), None, |_| {
        MemorySink::default()
    });
    (fabric, run)
}

#[test]
fn each_microbenchmark_runs_as_netsims_own_collective() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runs/tests/data/chakra");
    let mib = 1u64 << 20;
    for (dir, op) in [
        ("all_reduce", CollectiveOp::AllReduce),
        ("all_gather", CollectiveOp::AllGather),
        ("all_to_all", CollectiveOp::AllToAll),
        ("reduce_scatter", CollectiveOp::ReduceScatter),
    ] {
        for n in [4u32, 8] {
            let files = chakra::files(&data.join(format!("{dir}/{n}npus_1MB")))
                .unwrap()
                .unwrap();
            let traced = WorkloadSpec {
                trace: Some(Arc::new(chakra::read(&files).unwrap())),
                ..WorkloadSpec::with_phases(Vec::new())
            };
            let size_bytes = if op == CollectiveOp::AllGather {
                u64::from(n) * mib
            } else {
                mib
            };
            let direct = WorkloadSpec::single(OpSpec {
                op,
                algorithm: op.default_algorithm(),
                size_bytes,
                group: GroupSpec::All,
                dtype: Dtype::Float32,
                reduce_op: ReduceOp::Sum,
            });
            let (traced_fabric, traced) = run(n, &traced);
            let (direct_fabric, direct) = run(n, &direct);
            assert_eq!(common::flows(&traced), common::flows(&direct), "{dir} {n}");
            let rows =
                |f: &Fabric, r: &NetRun<MemorySink>| collective_records(&f.workload, &r.spans());
            assert_eq!(
                rows(&traced_fabric, &traced),
                rows(&direct_fabric, &direct),
                "{dir} {n}"
            );
            assert_eq!(traced.sim_end, direct.sim_end, "{dir} {n}");
        }
    }
}

/// Chakra's feeder test trace (one rank of a PyTorch run, unpacked with
/// `tar` where there is one) runs to its end: its collectives are on the
/// rank alone and send nothing, so the run takes its data dependencies'
/// critical path of `duration_micros`, 46140 us (worked out from the file
/// apart from netsim).
#[test]
fn chakras_feeder_test_trace_runs_to_the_end() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runs/tests/data/chakra");
    let dir = tempfile::tempdir().unwrap();
    let unpacked = std::process::Command::new("tar")
        .arg("xzf")
        .arg(data.join("feeder_tests_trace.tar.gz"))
        .arg("-C")
        .arg(dir.path())
        .status();
    if !unpacked.is_ok_and(|s| s.success()) {
        eprintln!("no tar: Chakra's feeder test trace is not run");
        return;
    }
    let files = chakra::files(&dir.path().join("tests/data"))
        .unwrap()
        .unwrap();
    let trace = chakra::read(&files).unwrap();
    let spec = WorkloadSpec {
        trace: Some(Arc::new(trace)),
        ..WorkloadSpec::with_phases(Vec::new())
    };
    let (fabric, run) = run(2, &spec);
    assert!(fabric.workload.flows.is_empty());
    assert_eq!(run.sim_end, SimTime::from_us(46_140));
}
