//! DPU-Bench on the packet-level fabric: the paper's trends emerge from
//! ports, PCIe, the DPU's memory controller and per-operation core costs.
//! Every figure here is the outcome of a packet-level run; nothing in the
//! model knows the curve.

use netsim::dpu_bench::{Bench, HostCost};
use netsim_models::dpu::{default_net, DpuParams};
use netsim_models::workload::dpu::staged::{Assign, Pattern};
use netsim_topo::{FatTreeParams, StarParams, TopoSpec};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

fn bench_with(spec: TopoSpec, params: DpuParams, ppn: u32) -> Bench {
    let base = netsim_topo::build(&spec).unwrap();
    Bench::new(
        &base,
        &params,
        8,
        ppn,
        default_net(),
        HostCost::default(),
        1,
    )
    .unwrap()
}

fn bench_on(spec: TopoSpec) -> Bench {
    bench_with(spec, DpuParams::default(), 8)
}

fn star_spec() -> TopoSpec {
    TopoSpec::Star(StarParams {
        hosts: 8,
        ..StarParams::default()
    })
}

/// The paper's set-up: 8 nodes x 8 processes per node, one switch.
fn star() -> Bench {
    bench_on(star_spec())
}

/// Efficiency (%) of `pattern` for each worker count.
fn efficiency(
    bench: &Bench,
    pattern: Pattern,
    assign: Assign,
    size: u64,
    workers: &[u32],
) -> Vec<f64> {
    let reference = bench.reference(pattern, size).unwrap();
    workers
        .iter()
        .map(|&w| {
            let row = bench.point(pattern, assign, w, size, reference).unwrap();
            assert_eq!(row.wpn, w.div_ceil(8));
            assert!(
                row.compute_ns >= row.reference_ns,
                "compute runs the reference's length"
            );
            row.offload_efficiency_pct
        })
        .collect()
}

#[test]
fn broadcast_one_worker_per_dpu_beats_one_worker_and_stays_high_at_2_and_4() {
    let e = efficiency(
        &star(),
        Pattern::Broadcast,
        Assign::Cyclic,
        MIB,
        &[1, 8, 16, 32],
    );
    assert!(
        e[1] >= e[0] + 5.0,
        "1 WPN {:.2}% vs one worker {:.2}%",
        e[1],
        e[0]
    );
    assert!(e[2] >= 95.0 && e[3] >= 95.0, "2 and 4 WPN: {e:?}");
}

#[test]
fn gather_one_worker_per_dpu_beats_one_worker_and_stays_high_at_2_and_4() {
    let e = efficiency(
        &star(),
        Pattern::Gather,
        Assign::Cyclic,
        MIB,
        &[1, 8, 16, 32],
    );
    assert!(
        e[1] >= e[0] + 5.0,
        "1 WPN {:.2}% vs one worker {:.2}%",
        e[1],
        e[0]
    );
    assert!(e[2] >= 95.0 && e[3] >= 95.0, "2 and 4 WPN: {e:?}");
    // The mechanism: no write can leave before its data is in DPU memory,
    // and at 4 WPN four first reads share the one memory controller. Staged
    // whole (a fragment as large as the buffer), the root's port idles for
    // four whole reads before the first write: efficiency falls below 95%.
    let whole = bench_with(
        star_spec(),
        DpuParams {
            chunk_bytes: MIB,
            ..DpuParams::default()
        },
        8,
    );
    let w = efficiency(&whole, Pattern::Gather, Assign::Cyclic, MIB, &[32]);
    assert!(
        w[0] < 95.0 && w[0] + 2.0 < e[3],
        "whole {w:?} vs fragments {e:?}"
    );
}

#[test]
fn all_in_allgather_beats_single_leader_at_one_worker_per_dpu() {
    let bench = star();
    let size = 64 * KIB;
    let leader = efficiency(
        &bench,
        Pattern::AllgatherSingleLeader,
        Assign::Cyclic,
        size,
        &[8],
    );
    let all_in = efficiency(&bench, Pattern::AllgatherAllIn, Assign::Cyclic, size, &[8]);
    assert!(
        all_in[0] > 2.0 * leader[0],
        "all-in {all_in:?} vs single leader {leader:?}"
    );
}

#[test]
fn block_falls_below_cyclic_when_the_remainder_piles_on_one_worker() {
    // 48 workers (6 WPN) for 64 processes: block gives 47 workers one
    // process and the last 17, cyclic gives 16 workers two.
    let bench = star();
    let size = 256 * KIB;
    let cyclic = efficiency(&bench, Pattern::Broadcast, Assign::Cyclic, size, &[48, 64]);
    let block = efficiency(&bench, Pattern::Broadcast, Assign::Block, size, &[48, 64]);
    assert!(
        block[0] + 5.0 <= cyclic[0],
        "6 WPN: block {block:?} cyclic {cyclic:?}"
    );
    // At 8 WPN with 8 PPN there are as many workers as processes: both
    // assignments give worker w process w, so they are the same run.
    assert_eq!(block[1], cyclic[1]);
}

#[test]
fn block_falls_below_cyclic_at_8_wpn_when_workers_serve_two_processes() {
    // 8 nodes x 16 PPN, 8 WPN (64 workers for 128 processes), 256 KiB
    // gather: cyclic gives worker w processes w and w + 64, both on its own
    // node (processes and workers are placed round robin over nodes), so it
    // reads them over PCIe; block gives it 2w and 2w + 1, on two other
    // nodes, so its reads cross the network too, sharing ports and the
    // switch with the writes into the root.
    let bench = bench_with(star_spec(), DpuParams::default(), 16);
    let size = 256 * KIB;
    let reference = bench.reference(Pattern::Gather, size).unwrap();
    let at_8_wpn = |assign| {
        let row = bench
            .point(Pattern::Gather, assign, 64, size, reference)
            .unwrap();
        assert_eq!(row.wpn, 8);
        row.offload_efficiency_pct
    };
    let (cyclic, block) = (at_8_wpn(Assign::Cyclic), at_8_wpn(Assign::Block));
    assert!(
        block + 5.0 <= cyclic,
        "8 WPN: block {block:.2}% cyclic {cyclic:.2}%"
    );
}

#[test]
fn staged_broadcast_runs_on_a_fat_tree() {
    // k = 4: 16 servers, the benchmark uses the first 8 (two pods).
    let bench = bench_on(TopoSpec::FatTree(FatTreeParams {
        k: 4,
        tiers: 3,
        ..FatTreeParams::default()
    }));
    let e = efficiency(
        &bench,
        Pattern::Broadcast,
        Assign::Cyclic,
        256 * KIB,
        &[1, 8],
    );
    assert!(e[1] >= e[0] + 5.0, "{e:?}");
    let again = efficiency(
        &bench,
        Pattern::Broadcast,
        Assign::Cyclic,
        256 * KIB,
        &[1, 8],
    );
    assert_eq!(e, again, "a run is deterministic");
}

#[test]
fn bad_shapes_are_refused_with_the_field_named() {
    let bench = star();
    let reference = bench.reference(Pattern::Broadcast, KIB).unwrap();
    let err = bench
        .point(Pattern::Broadcast, Assign::Cyclic, 65, KIB, reference)
        .unwrap_err();
    assert!(err.to_string().contains("workers"), "{err}");
    let err = bench
        .point(Pattern::Broadcast, Assign::Cyclic, 8, 0, reference)
        .unwrap_err();
    assert!(err.to_string().contains("size"), "{err}");
}
