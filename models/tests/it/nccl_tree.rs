//! NCCL's tree all-reduce on GPU servers: a chain through each server's
//! GPUs per channel and NCCL's two trees among the servers over that
//! channel's rail (`models/src/workload/trees.rs`, [`chained`]), for
//! `--algo tree` with NCCL's model and without it.
//!
//! [`chained`]: netsim_models::workload::trees::chained

use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::nccl::{Nccl, Protocol};
use netsim_models::workload::{Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec};
use netsim_topo::{SimaiParams, SimaiTemplate, TopoSpec};

use netsim_engine::SimTime;
use netsim_models::network::Fabric;
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::{Builder, NONE};

use crate::common::{
    cc_none, collectives, flows, layout, lossless, packets, star, workload_fabric,
};

fn spectrum_x(gpus: u32) -> SimaiParams {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = gpus;
    p
}

/// A tree all-reduce of `size_bytes` over every GPU, with NCCL's model
/// (Simple, no tuning latency) or as a host algorithm.
fn tree_spec(size_bytes: u64, nccl: bool) -> WorkloadSpec {
    let mut spec = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Tree,
        size_bytes,
        group: GroupSpec::All,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    spec.nccl = nccl.then_some(Nccl {
        nvls: false,
        pxn: false,
        protocol: Some(Protocol::Simple),
        tuning_latency: false,
        simai_choice: false,
        mocknccl_nvls: false,
    });
    spec
}

/// 4 servers of 8: per channel `h` (8 of them, 2 trees each, `S/16` a
/// tree) every GPU sends and receives its tree's share once per chain
/// edge it touches, `2 (8 - 1)` over the chains and trees, so
/// `2 x 7/8 x S` over NVLink; across servers every flow stays on its rail
/// and each rail NIC carries its server's degree in the two trees among
/// the servers (0-2-{1,3} and 3-1-{0,2}): `S/8` each way on servers 0
/// and 3, `2 x S/8` on the inner servers 1 and 2. The old shape, every
/// GPU in one tree, sent up to 4 halves of `S` through a NIC.
#[test]
fn tree_on_servers_chains_inside_and_crosses_on_rails() {
    let size: u64 = 64 << 20;
    let (gpus, local) = (32usize, 8usize);
    for nccl in [true, false] {
        let spec = tree_spec(size, nccl);
        let topo = netsim_topo::build(&TopoSpec::Simai(spectrum_x(gpus as u32))).unwrap();
        let w = netsim_models::workload::build(&spec, &topo, &lossless()).unwrap();
        let label = if nccl { "tree/simple" } else { "tree" };
        assert_eq!(w.collectives[0].algorithm, label);
        // 64 chunks (NCCL's 64 KiB a tree at depth 7 + 2), 16 trees,
        // every tree edge once each way.
        assert_eq!(w.flows.len(), 64 * 16 * 2 * (gpus - 1), "nccl: {nccl}");
        let (mut nic, mut nvlink) = (vec![[0u64; 2]; gpus], vec![[0u64; 2]; gpus]);
        for f in &w.flows {
            let (s, d) = (f.src as usize, f.dst as usize);
            // SimAI's numbering: the GPUs first, 8 a server.
            assert!(s < gpus && d < gpus, "{s} -> {d} is not GPU to GPU");
            let load = if s / local == d / local {
                &mut nvlink
            } else {
                assert_eq!(s % local, d % local, "{s} -> {d} leaves its rail");
                &mut nic
            };
            load[s][0] += f.size_bytes;
            load[d][1] += f.size_bytes;
        }
        let rails: Vec<[u64; 2]> = (0..gpus)
            .map(|g| [[1, 2, 2, 1][g / local] * size / 8; 2])
            .collect();
        assert_eq!(nic, rails, "nccl: {nccl}");
        assert_eq!(nvlink, vec![[2 * 7 * size / 8; 2]; gpus], "nccl: {nccl}");
    }
}

/// Every flow of the chained tree is one of NCCL 2.19's chunks
/// (`computeColl`: 512 KiB halved while a tree would take fewer than
/// `8 x depth`, `4 x depth`, `depth` chunks; depth `7 + log2 2 = 8` on 2
/// servers of 8): 32 KiB at 1 MiB, 64 KiB at 16 MiB, 256 KiB at 256 MiB,
/// with and without NCCL's model, and `size / (16 x chunk)` pieces. The
/// old rule, half the buffer in 512 KiB pieces (at most 64), made 512 KiB
/// flows at 256 MiB.
#[test]
fn chained_tree_flows_are_nccls_chunks() {
    let topo = netsim_topo::build(&TopoSpec::Simai(spectrum_x(16))).unwrap();
    for (size, chunk) in [
        (1u64 << 20, 32u64 << 10),
        (16 << 20, 64 << 10),
        (256 << 20, 256 << 10),
    ] {
        for nccl in [true, false] {
            let w =
                netsim_models::workload::build(&tree_spec(size, nccl), &topo, &lossless()).unwrap();
            let pieces = (size / (16 * chunk)) as usize;
            assert_eq!(
                w.flows.len(),
                pieces * 16 * 2 * 15,
                "{size} B, nccl: {nccl}"
            );
            assert!(
                w.flows.iter().all(|f| f.size_bytes == chunk),
                "{size} B, nccl: {nccl}: a flow is not {chunk} B"
            );
        }
    }
}

/// On 2 servers of 8 every rail NIC carries `S/8` each way and every
/// GPU's NVLink `2 x 7/8 x S`, so the all-reduce takes the slower of the
/// two at its payload rate, plus the pipeline's fill and drain: the rails
/// at 100 Gb/s NICs (measured +17%: each rail direction carries one
/// tree's flows up and the other's down, which start a chain's depth
/// apart), NVLink (2.88 Tb/s) at 400 Gb/s. The old shape, every GPU in
/// one tree, took over 4 times as long.
#[test]
fn tree_on_two_servers_takes_the_busier_links_time() {
    let size: u64 = 16 << 20;
    let config = lossless();
    let (mtu, header) = (u64::from(config.mtu_bytes), u64::from(config.header_bytes));
    let ps = |bytes: u64, bps: u64| {
        let wire = bytes + bytes.div_ceil(mtu) * header;
        (u128::from(wire) * 8_000_000_000_000 / u128::from(bps)) as u64
    };
    for nic_gbps in [100u64, 400] {
        let mut p = spectrum_x(16);
        p.nic_bps = nic_gbps * 1_000_000_000;
        let rails_ps = ps(size / 8, p.nic_bps);
        let nvlink_ps = ps(2 * 7 * size / 8, p.nvlink_bps);
        let bound_ps = rails_ps.max(nvlink_ps);
        let spec = tree_spec(size, false);
        let fabric = workload_fabric(&TopoSpec::Simai(p), &spec, config.clone());
        let run = packets(&fabric);
        let c = &collectives(&fabric, &run)[0];
        let took_ps = (c.end_ns.expect("finished") - c.start_ns.expect("started")) * 1000;
        assert!(
            took_ps >= bound_ps && took_ps <= bound_ps * 120 / 100,
            "{nic_gbps} Gb/s NICs: tree took {took_ps} ps; rails {rails_ps} ps, NVLink {nvlink_ps} ps"
        );
    }
}

/// Two 1 MB flows from host 0 to host 1 of a star, ready at once. On
/// queue pairs of their own they share the link round robin, so the first
/// ends only with the second, at about twice its ideal time. Queued on
/// one queue pair ([`Builder::queue_after`]), as NCCL's steps are, the
/// first leaves alone at line rate and ends at its ideal time (measured
/// +0.3%), and the
/// second's packets follow its last: the two end a flow's serialization
/// apart (the ideal time less the 2 us path), and both are done by the
/// same time as when they shared.
#[test]
fn flows_queued_on_one_queue_pair_leave_in_order() {
    let size: u64 = 1_000_000;
    let mut ends = Vec::new();
    for queued in [false, true] {
        let topo = netsim_topo::build(&star(2)).unwrap();
        let routing = netsim_topo::Routing::build(&topo).unwrap();
        let mut b = Builder::new(SimTime::ZERO);
        let first = b.flow(0, 1, size, NONE, &[]);
        let second = b.flow(0, 1, size, NONE, &[]);
        if queued {
            b.queue_after(second, first);
        }
        let w = b.finish();
        assert_eq!(w.flow_queued_after(1), if queued { 0 } else { NONE });
        assert_eq!(w.flow_queued_after(0), NONE);
        let fabric = Fabric::with_workload(topo, routing, w, cc_none(), 3);
        let f = flows(&packets(&fabric));
        let (a, c) = (&f[0], &f[1]);
        let (a_fct, c_end) = (a.fct_ns.unwrap(), c.end_ns.unwrap());
        if queued {
            assert!(
                a_fct * 100 <= a.ideal_fct_ns * 101,
                "the first took {a_fct} ns, ideal {}",
                a.ideal_fct_ns
            );
            let apart = c_end - a.end_ns.unwrap();
            assert!(
                apart * 10 >= a.ideal_fct_ns * 9 && apart <= a.ideal_fct_ns,
                "queued flows ended {apart} ns apart"
            );
        } else {
            assert!(
                a_fct * 10 >= a.ideal_fct_ns * 19,
                "sharing, the first took {a_fct} ns, ideal {}",
                a.ideal_fct_ns
            );
        }
        ends.push(c_end);
    }
    let (shared, queued) = (ends[0] as i64, ends[1] as i64);
    assert!(
        (shared - queued).abs() * 1000 <= shared,
        "both done at {queued} ns queued, {shared} ns shared"
    );
}

/// Every edge of the chained tree sends its chunks on one queue pair, in
/// order, up to NCCL_STEPS (8) of them in flight: on 2 servers of 8 at
/// 16 MiB (16 pieces of 64 KiB a tree), each flow but an edge's first is
/// queued behind the edge's previous flow (same source and destination,
/// an earlier id), and the `k`-th waits for the `k - 8`-th to complete,
/// not for the one before it.
#[test]
fn chained_tree_edges_queue_their_chunks_eight_in_flight() {
    let topo = netsim_topo::build(&TopoSpec::Simai(spectrum_x(16))).unwrap();
    let w = netsim_models::workload::build(&tree_spec(16 << 20, true), &topo, &lossless()).unwrap();
    let (pieces, edges) = (16usize, 16 * 2 * 15);
    assert_eq!(w.flows.len(), pieces * edges);
    let deps = w.dependencies();
    // Per edge (tree, direction, pair), its flows in order.
    let mut by_flow: Vec<Vec<u32>> = Vec::new();
    let mut head_of = std::collections::HashMap::new();
    for f in 0..w.flows.len() as u32 {
        let ahead = w.flow_queued_after(f);
        if ahead == NONE {
            head_of.insert(f, by_flow.len());
            by_flow.push(vec![f]);
            continue;
        }
        let (a, s) = (w.flows[ahead as usize], w.flows[f as usize]);
        assert!(
            ahead < f && (a.src, a.dst) == (s.src, s.dst),
            "{f} behind {ahead}"
        );
        let edge = head_of[&ahead];
        assert_eq!(
            by_flow[edge].last(),
            Some(&ahead),
            "{f} skips its edge's previous flow"
        );
        by_flow[edge].push(f);
        head_of.insert(f, edge);
    }
    assert_eq!(
        by_flow.len(),
        edges,
        "one queue pair per tree edge and direction"
    );
    for edge in &by_flow {
        assert_eq!(edge.len(), pieces);
        for (k, &f) in edge.iter().enumerate() {
            let mine = &deps[w.flow_task(f) as usize];
            if k >= 8 {
                assert!(
                    mine.contains(&w.flow_task(edge[k - 8])),
                    "flow {f}: no window"
                );
            }
            if k >= 1 {
                assert!(
                    !mine.contains(&w.flow_task(edge[k - 1])),
                    "flow {f}: window of 1"
                );
            }
        }
    }
}

/// The chained tree with its queued flows writes the same flow rows on 1,
/// 2 and 4 shards: a queue pair's order is decided at its source host.
#[test]
fn chained_tree_with_queue_pairs_is_the_same_on_1_2_4_shards() {
    let spec = tree_spec(1 << 20, true);
    let fabric = workload_fabric(&TopoSpec::Simai(spectrum_x(16)), &spec, lossless());
    let rows = |shards: u32| {
        let l = layout(&fabric.topo, shards);
        let run = netsim_models::network::simulate(&fabric, &l, SimTime::MAX, None, |_| {
            MemorySink::default()
        });
        let mut f: Vec<String> = flows(&run).iter().map(|r| format!("{r:?}")).collect();
        f.sort();
        f
    };
    let one = rows(1);
    assert_eq!(one.len(), fabric.workload.flows.len());
    assert_eq!(rows(2), one);
    assert_eq!(rows(4), one);
}
