//! SimAI pipeline-parallel workloads run end to end: an idealised GPipe
//! iteration against its hand-computed schedule, and a 128-GPU
//! PP 4 x EP 2 x TP 8 MoE workload (stage order, sends and all-to-alls).

use crate::common;
use netsim_engine::SimTime;
use netsim_models::network::{collective_records, simulate, Fabric, NetRun};
use netsim_models::telemetry::{CollectiveRecord, MemorySink};
use netsim_models::workload::{build, simai, Algorithm, WorkloadSpec};
use netsim_topo::{Routing, TopoSpec};

use crate::common::{cc_none, layout};

/// The latency of [`common::link`].
const LINK_NS: u64 = 1000;

fn run(topo: &TopoSpec, spec: &WorkloadSpec) -> (Vec<CollectiveRecord>, NetRun<MemorySink>) {
    run_on(topo, spec, 1)
}

fn run_on(
    topo: &TopoSpec,
    spec: &WorkloadSpec,
    shards: u32,
) -> (Vec<CollectiveRecord>, NetRun<MemorySink>) {
    let topo = netsim_topo::build(topo).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let workload = build(spec, &topo, &cc_none()).unwrap();
    let fabric = Fabric::with_workload(topo, routing, workload, cc_none(), 7);
    let layout = layout(&fabric.topo, shards);
    let run = simulate(&fabric, &layout, SimTime::from_us(1_000_000), None, |_| {
        MemorySink::default()
    });
    (collective_records(&fabric.workload, &run.spans()), run)
}

/// Serialization of `bytes` at 100 Gb/s, in ns.
fn ser_ns(bytes: u64) -> u64 {
    bytes * 8 / 100
}

#[test]
fn a_gpipe_iteration_matches_the_hand_computed_schedule() {
    // One GPU per stage on a star; each micro-batch is one compute-only line.
    let (pp, ga) = (4u64, 3u64);
    let (fwd_ns, ig_ns, wg_ns) = (50_000u64, 30_000u64, 40_000u64);
    let size = 256 * 1024u64;
    let line = format!("embedding_layer -1 {fwd_ns} NONE 0 {ig_ns} NONE 0 {wg_ns} NONE 0 0\n");
    let text = format!(
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: {pp} vpp: 1 ga: {ga} all_gpus: {pp} checkpoints: 0 checkpoint_initiates: 0 pp_comm: {size}\n{ga}\n{}",
        line.repeat(ga as usize)
    );
    let spec = simai::parse(&text, "gpipe.txt", pp as u32, Algorithm::Ring).unwrap();
    let topo = common::star(pp as u32);
    let (rows, run) = run(&topo, &spec);

    // A transfer, delivered: every wire byte at the link rate, two link
    // latencies, and the last packet stored and forwarded by the switch.
    let c = cc_none();
    let (mtu, header) = (u64::from(c.mtu_bytes), u64::from(c.header_bytes));
    let packets = size.div_ceil(mtu);
    let last_packet = size - (packets - 1) * mtu + header;
    let t_ns = ser_ns(size + packets * header) + 2 * LINK_NS + ser_ns(last_packet);
    // GPipe: stage s ends micro-batch m's forward at s(F+T) + (m+1)F; the
    // backward mirrors it, so the first stage ends the iteration at
    // (ga + pp - 1)(F + B) + 2(pp - 1)T.
    let b_ns = ig_ns + wg_ns;
    let expected = (ga + pp - 1) * (fwd_ns + b_ns) + 2 * (pp - 1) * t_ns;
    let measured = run.sim_end.as_ns();
    let error = (measured as f64 - expected as f64).abs() / expected as f64;
    assert!(
        error < 0.002,
        "iteration {measured} ns, schedule says {expected} ns (T = {t_ns} ns)"
    );
    let sends: Vec<&CollectiveRecord> = rows.iter().filter(|r| r.op == "send").collect();
    assert_eq!(sends.len() as u64, 2 * ga * (pp - 1));
    // Stage 1 receives micro-batch 2's activations when stage 0 has done
    // three forwards.
    let act = rows
        .iter()
        .find(|r| r.name == "s0.mb2.activations")
        .unwrap();
    assert_eq!(act.start_ns, Some(3 * fwd_ns));
    // Complete at the sender when the last ACK is back: two more link latencies.
    let took = act.duration_ns.unwrap();
    assert!(took > t_ns && took < t_ns + 3 * LINK_NS, "{took} vs {t_ns}");
}

#[test]
fn a_128_gpu_pp4_ep2_tp8_workload_runs_in_pipeline_order() {
    let text = include_str!("../../../runs/scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    let spec = simai::parse(text, "moe.txt", 128, Algorithm::Ring).unwrap();
    let topo = common::fat_tree(8, 3);
    let (rows, _) = run(&topo, &spec);
    // The same collectives, to the picosecond, on 4 shards.
    assert_eq!(run_on(&topo, &spec, 4).0, rows);
    let unfinished: Vec<&str> = rows
        .iter()
        .filter(|r| r.end_ns.is_none())
        .map(|r| r.name.as_str())
        .collect();
    assert!(unfinished.is_empty(), "{unfinished:?}");
    let count = |op: &str| rows.iter().filter(|r| r.op == op).count();
    // 32 (tp, dp) pipelines x 3 boundaries x 2 micro-batches x 2 directions.
    assert_eq!(count("send"), 384);
    // 16 EP groups of 2 per stage x 4 stages x 4 all-to-all lines x 2 micro-batches.
    assert_eq!(count("alltoall"), 512);
    assert!(rows
        .iter()
        .filter(|r| r.op == "alltoall")
        .all(|r| r.group_size == 2));

    let min = |name: &str, f: &dyn Fn(&CollectiveRecord) -> Option<u64>| {
        rows.iter()
            .filter(|r| r.name == name)
            .filter_map(f)
            .min()
            .unwrap_or_else(|| panic!("no row {name}"))
    };
    // A send's row ends when its ACKs are back at the sender; its data is
    // delivered no earlier than its start plus serialization of 1 MiB.
    let transfer_ns = (1u64 << 20) * 8 / 100;
    for m in 0..2 {
        for s in 1..4 {
            // Forward: the embedding layer's compute (20 us) then its TP all-reduce.
            let arrived =
                min(&format!("s{}.mb{m}.activations", s - 1), &|r| r.start_ns) + transfer_ns;
            let started = min(&format!("s{s}.mb{m}.embedding_layer.fwd.allreduce"), &|r| {
                r.start_ns
            });
            assert!(
                started >= arrived + 20_000,
                "stage {s} mb {m}: forward at {started} ns, activations at {arrived} ns"
            );
        }
        for s in 0..3 {
            // Backward: final_column's input- and weight-gradient compute
            // (40 us), then the MoE layer's input-gradient all-gather.
            let arrived =
                min(&format!("s{}.mb{m}.gradients", s + 1), &|r| r.start_ns) + transfer_ns;
            let started = min(&format!("s{s}.mb{m}.mlp_moelayer.ig.allgather"), &|r| {
                r.start_ns
            });
            assert!(
                started >= arrived + 40_000,
                "stage {s} mb {m}: backward at {started} ns, gradients at {arrived} ns"
            );
        }
    }
}
