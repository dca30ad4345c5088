//! ASTRA-sim's Chakra microbenchmarks (`runs/tests/data/chakra/`) run as
//! the same collective asked for directly: identical flows, collective
//! records and end time, so a trace's collective is netsim's own, with
//! ASTRA-sim's all-gather size (each rank's input) turned into netsim's
//! (the gathered output). The binary's tables are compared in
//! `runs/tests/it/chakra.rs`.

use crate::common;
use netsim_engine::SimTime;
use netsim_models::network::{collective_records, Fabric, NetRun};
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::trace::chakra;
use netsim_models::workload::{CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec};
use std::path::Path;
use std::sync::Arc;

use crate::common::star_run as run;

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

/// Two ranks written node by node: compute, an all-gather on a process
/// group from PyTorch's metadata, a send matched with its receive by tag,
/// a barrier. Both ranks' programs match and run, one after another.
#[test]
fn a_written_two_rank_trace_matches_and_runs() {
    use crate::chakra::{file, A, N, NODE};
    let pg = r#"['[{"pg_name": "1", "ranks": [0, 1]}]']"#;
    let gather = [
        ("comm_type", A::I(2)),
        ("comm_size", A::I(4096)),
        ("pg_name", A::S("1")),
    ];
    let barrier = [("comm_type", A::I(9))];
    let rank = |r: i64| {
        let peer = if r == 0 { "comm_dst" } else { "comm_src" };
        let p2p = [
            (peer, A::I(1 - r)),
            ("comm_size", A::I(10_000)),
            ("comm_tag", A::I(3)),
        ];
        file(&[
            N {
                id: 1,
                ty: 1,
                inputs: pg,
                ..NODE
            },
            N {
                id: 2,
                micros: 5,
                data: &[1],
                ..NODE
            },
            N {
                id: 3,
                ty: 7,
                data: &[2],
                attrs: &gather,
                ..NODE
            },
            N {
                id: 4,
                ty: if r == 0 { 5 } else { 6 },
                data: &[3],
                attrs: &p2p,
                ..NODE
            },
            N {
                id: 5,
                ty: 7,
                data: &[4],
                attrs: &barrier,
                ..NODE
            },
        ])
    };
    let dir = tempfile::tempdir().unwrap();
    for r in 0..2 {
        std::fs::write(dir.path().join(format!("w.{r}.et")), rank(r)).unwrap();
    }
    let files = chakra::files(dir.path()).unwrap().unwrap();
    let spec = WorkloadSpec {
        trace: Some(Arc::new(chakra::read(&files).unwrap())),
        ..WorkloadSpec::with_phases(Vec::new())
    };
    let (fabric, run) = run(2, &spec);
    let rows = collective_records(&fabric.workload, &run.spans());
    let ran: Vec<(&str, u64, bool)> = rows
        .iter()
        .map(|r| (r.op, r.size_bytes, r.end_ns.is_some()))
        .collect();
    assert_eq!(
        ran,
        [
            ("allgather", 8192, true),
            ("send", 10_000, true),
            ("barrier", 0, true)
        ]
    );
    // After the 5 us compute, each starts after the one before started (a
    // rank goes on once its own part is done, as real ranks do).
    assert!(rows[0].start_ns >= Some(5_000));
    assert!(rows.windows(2).all(|w| w[1].start_ns > w[0].start_ns));
}
