//! Collectives and in-network computing against closed forms, link counts,
//! limits, and across shard counts.

use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::network::{simulate, Fabric, NetRun};
use netsim_models::telemetry::{MemorySink, SwitchOffloadRecord};
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::{
    build, Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, SwitchProfile, WorkloadSpec,
};
use netsim_topo::{
    Arrangement, DragonflyParams, FatTreeParams, LinkParams, Routing, StarParams, TopoSpec,
};

use crate::common::{collectives, flows, layout, offload};

const GBPS: u64 = 1_000_000_000;
const LINK_NS: u64 = 1000;

fn link() -> LinkParams {
    LinkParams {
        bandwidth_bps: 100 * GBPS,
        latency_ps: LINK_NS * 1000,
    }
}

fn star(hosts: u32) -> TopoSpec {
    TopoSpec::Star(StarParams {
        hosts,
        host_link: link(),
    })
}

fn fat_tree(k: u32, tiers: u32) -> TopoSpec {
    TopoSpec::FatTree(FatTreeParams {
        k,
        tiers,
        oversub: 1,
        host_link: link(),
        agg_link: link(),
        core_link: link(),
        ..FatTreeParams::default()
    })
}

fn op(op: CollectiveOp, algorithm: Algorithm, size_bytes: u64) -> OpSpec {
    OpSpec {
        op,
        algorithm,
        size_bytes,
        group: GroupSpec::All,
        dtype: Dtype::Int32,
        reduce_op: ReduceOp::Sum,
    }
}

fn config() -> NetConfig {
    NetConfig {
        cc: CcKind::None,
        sample_period: SimTime::ZERO,
        ..NetConfig::default()
    }
}

fn fabric(topo: &TopoSpec, spec: &WorkloadSpec, config: NetConfig) -> Fabric {
    let topo = netsim_topo::build(topo).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let workload = build(spec, &topo, &config).unwrap();
    Fabric::with_workload(topo, routing, workload, config, 7)
}

fn run(fabric: &Fabric, shards: u32) -> NetRun<MemorySink> {
    let layout = layout(&fabric.topo, shards);
    simulate(fabric, &layout, SimTime::from_us(100_000), None, |_| {
        MemorySink::default()
    })
}

/// Duration of the one collective of a single-op run, in ns.
fn duration_ns(topo: &TopoSpec, spec: &WorkloadSpec, config: NetConfig) -> u64 {
    let fabric = fabric(topo, spec, config);
    let run = run(&fabric, 1);
    let c = collectives(&fabric, &run);
    assert_eq!(c.len(), 1);
    c[0].duration_ns.expect("the collective completes")
}

fn serialization_ns(bytes: u64) -> f64 {
    bytes as f64 * 8.0 / 100.0
}

#[test]
fn ring_all_reduce_matches_the_alpha_beta_cost() {
    // A non-blocking k=4 three-tier fat-tree: 16 hosts, ring neighbours
    // under the same ToR, the same pod, or in another pod.
    let topo_spec = fat_tree(4, 3);
    let config = config();
    let overhead_ns = 500;
    for n in [4u32, 16] {
        let size = 1u64 << 20;
        let mut spec = WorkloadSpec::single(OpSpec {
            group: GroupSpec::Ranks((0..n).collect()),
            ..op(CollectiveOp::AllReduce, Algorithm::Ring, size)
        });
        spec.host_overhead = SimTime::from_ns(overhead_ns);
        let fabric = fabric(&topo_spec, &spec, config.clone());
        let measured = collectives(&fabric, &run(&fabric, 1))[0]
            .duration_ns
            .unwrap() as f64;

        // beta: every byte once per step at the payload rate of the links.
        let (mtu, header) = (u64::from(config.mtu_bytes), u64::from(config.header_bytes));
        let payload_rate = 100e9 * mtu as f64 / (mtu + header) as f64;
        let beta_ns = 2.0 * (n - 1) as f64 / n as f64 * size as f64 * 8.0 / payload_rate * 1e9;
        // alpha: one hop to the ring neighbour (link latencies plus the
        // store-and-forward of one packet per switch) plus the message overhead,
        // averaged over the ring's hops.
        let routing = &fabric.routing;
        let hop_ns: f64 = (0..n)
            .map(|i| {
                let links =
                    routing.path(&fabric.topo, i, (i + 1) % n, &mut |_| 0).len() as f64 - 1.0;
                links * LINK_NS as f64 + (links - 1.0) * serialization_ns(mtu + header)
            })
            .sum::<f64>()
            / n as f64;
        let alpha_ns = hop_ns + overhead_ns as f64;
        let expected = beta_ns + 2.0 * (n - 1) as f64 * alpha_ns;
        let error = (measured - expected).abs() / expected;
        assert!(
            error < 0.05,
            "N={n}: ring all-reduce took {measured} ns, alpha-beta says {expected:.0} ns (beta {beta_ns:.0}, alpha {alpha_ns:.0}): {:.1}% off",
            error * 100.0
        );
    }
}

#[test]
fn in_network_all_reduce_on_a_star_is_flat_in_group_size() {
    let profile = SwitchProfile::tofino();
    let size = 1024;
    let mut durations = Vec::new();
    for hosts in [4u32, 8, 12, 16] {
        let spec = WorkloadSpec::single(op(CollectiveOp::AllReduce, Algorithm::Ina, size));
        durations.push(duration_ns(&star(hosts), &spec, config()) as f64);
    }
    // S/B plus one link latency up and one down plus the switch.
    let wire = size + u64::from(config().header_bytes);
    let expected =
        2.0 * serialization_ns(wire) + 2.0 * LINK_NS as f64 + profile.processing.as_ns() as f64;
    assert!(
        (durations[0] - expected).abs() < 0.1 * expected,
        "4 hosts: {} ns, expected about {expected} ns",
        durations[0]
    );
    let spread = durations.iter().cloned().fold(f64::MIN, f64::max)
        - durations.iter().cloned().fold(f64::MAX, f64::min);
    assert!(
        spread < 1000.0,
        "latency from 4 to 16 hosts varies by {spread} ns: {durations:?}"
    );
}

#[test]
fn in_network_all_reduce_crosses_each_tree_link_once_each_way() {
    let topo_spec = fat_tree(4, 3);
    let size = 64 * 1024;
    let spec = WorkloadSpec::single(op(CollectiveOp::AllReduce, Algorithm::Ina, size));
    let mut config = config();
    // Fine enough that the last sample follows the last transmission.
    config.sample_period = SimTime::from_ns(500);
    let fabric = fabric(&topo_spec, &spec, config.clone());
    let run = run(&fabric, 1);
    let c = collectives(&fabric, &run);
    assert!(c[0].offloaded && c[0].end_ns.is_some(), "{c:?}");
    let op = &fabric.workload.ina_ops[0];
    let chunks = size.div_ceil(u64::from(config.mtu_bytes));
    let wire = size + chunks * u64::from(config.header_bytes);
    // Final cumulative data bytes per switch egress port.
    let mut tx = std::collections::BTreeMap::new();
    for s in &run.shards {
        for q in &s.sink.queues {
            if q.priority == 1 {
                let bytes = tx.entry((q.node, q.port)).or_insert(0);
                *bytes = q.tx_bytes.max(*bytes);
            }
        }
    }
    let mut tree_ports = 0;
    for t in &op.tree {
        for &p in &t.child_ports {
            assert_eq!(
                tx[&(t.node, u32::from(p))],
                wire,
                "down link {}:{p}",
                t.node
            );
            tree_ports += 1;
        }
        if let Some(p) = t.parent_port {
            assert_eq!(tx[&(t.node, u32::from(p))], wire, "up link {}:{p}", t.node);
            tree_ports += 1;
        }
    }
    // 16 host links down, 12 switch links down and up.
    assert_eq!(tree_ports, 16 + 2 * 12);
    let off_tree: u64 = tx
        .iter()
        .filter(|((n, p), _)| {
            op.tree_node(*n).is_none_or(|t| {
                t.parent_port != Some(*p as u16) && !t.child_ports.contains(&(*p as u16))
            })
        })
        .map(|(_, b)| b)
        .sum();
    assert_eq!(off_tree, 0, "no data outside the tree");
    let counters = offload(&run);
    assert_eq!(counters.len(), op.tree.len());
    assert!(counters
        .iter()
        .all(|r| r.reductions_offloaded == 1 && r.chunks_aggregated == chunks));
}

#[test]
fn barrier_latency_grows_with_tree_depth_not_group_size() {
    let barrier = |topo: &TopoSpec| {
        let spec = WorkloadSpec::single(op(CollectiveOp::Barrier, Algorithm::Ina, 0));
        duration_ns(topo, &spec, config())
    };
    let (star8, star64) = (barrier(&star(8)), barrier(&star(64)));
    assert!(
        star8.abs_diff(star64) < 500,
        "star 8: {star8} ns, 64: {star64} ns"
    );
    let (two_tier, three_tier) = (barrier(&fat_tree(4, 2)), barrier(&fat_tree(4, 3)));
    // One more switch level: two more links and one more switch.
    assert!(
        two_tier > star8 + 2 * LINK_NS,
        "star {star8}, 2-tier {two_tier}"
    );
    assert!(
        three_tier > two_tier + 2 * LINK_NS,
        "2-tier {two_tier}, 3-tier {three_tier}"
    );
}

#[test]
fn a_barrier_beyond_the_member_limit_falls_back_and_is_counted() {
    let spec = WorkloadSpec::single(op(CollectiveOp::Barrier, Algorithm::Ina, 0));
    let fabric = fabric(&star(129), &spec, config());
    let run = run(&fabric, 1);
    let c = &collectives(&fabric, &run)[0];
    assert!(!c.offloaded);
    assert_eq!(c.algorithm, "dissemination");
    assert!(
        c.fallback_reason.as_deref().unwrap().contains("128"),
        "{c:?}"
    );
    assert!(c.end_ns.is_some());
    let switch = fabric.topo.host_count();
    assert_eq!(
        offload(&run),
        [SwitchOffloadRecord {
            node: switch,
            barriers_fallback: 1,
            ..Default::default()
        }]
    );
    // 128 members fit.
    let fabric = fabric_ok(&star(128));
    assert!(collectives(&fabric, &run_ok(&fabric))[0].offloaded);
}

fn fabric_ok(topo: &TopoSpec) -> Fabric {
    fabric(
        topo,
        &WorkloadSpec::single(op(CollectiveOp::Barrier, Algorithm::Ina, 0)),
        config(),
    )
}

fn run_ok(fabric: &Fabric) -> NetRun<MemorySink> {
    run(fabric, 1)
}

#[test]
fn float_sums_fall_back_on_tofino_but_not_on_sharp() {
    for (profile, offloaded) in [
        (SwitchProfile::tofino(), false),
        (SwitchProfile::sharp(), true),
    ] {
        let mut spec = WorkloadSpec::single(OpSpec {
            dtype: Dtype::Float32,
            ..op(CollectiveOp::AllReduce, Algorithm::Ina, 64 * 1024)
        });
        spec.profile = profile.clone();
        let fabric = fabric(&star(4), &spec, config());
        let run = run(&fabric, 1);
        let c = &collectives(&fabric, &run)[0];
        assert_eq!(c.offloaded, offloaded, "{}: {c:?}", profile.name);
        assert!(c.end_ns.is_some());
        let counters = offload(&run);
        if offloaded {
            assert_eq!(counters[0].reductions_offloaded, 1);
            assert_eq!(counters[0].reductions_fallback, 0);
        } else {
            assert_eq!(c.algorithm, "ring");
            assert!(c.fallback_reason.as_deref().unwrap().contains("float32"));
            assert_eq!(counters[0].reductions_fallback, 1);
            assert_eq!(counters[0].reductions_offloaded, 0);
            assert_eq!(counters[0].chunks_aggregated, 0);
        }
    }
}

#[test]
fn too_few_aggregation_slots_stall_the_stream() {
    let time = |slots: u32| {
        let mut spec = WorkloadSpec::single(op(CollectiveOp::AllReduce, Algorithm::Ina, 1 << 20));
        spec.profile.slots_per_group = slots;
        duration_ns(&fat_tree(4, 3), &spec, config())
    };
    let (plenty, one) = (time(512), time(1));
    // 1 MiB at 100 Gb/s is about 85 us; one slot waits a tree round trip per chunk.
    assert!(plenty < 120_000, "512 slots: {plenty} ns");
    assert!(one > 5 * plenty, "1 slot: {one} ns, 512 slots: {plenty} ns");
}

#[test]
fn latency_bound_all_reduce_favours_trees_and_halving_doubling() {
    let time = |algorithm| {
        let mut spec = WorkloadSpec::single(op(CollectiveOp::AllReduce, algorithm, 8 * 1024));
        spec.host_overhead = SimTime::from_ns(1000);
        duration_ns(&fat_tree(4, 3), &spec, config())
    };
    let (ring, tree, hd) = (
        time(Algorithm::Ring),
        time(Algorithm::Tree),
        time(Algorithm::Hd),
    );
    assert!(tree < ring && hd < ring, "ring {ring} tree {tree} hd {hd}");
}

#[test]
fn every_operation_completes_and_conserves_bytes() {
    let topo = fat_tree(4, 3);
    for (o, algorithms) in [
        (
            CollectiveOp::AllReduce,
            &[Algorithm::Ring, Algorithm::Tree, Algorithm::Hd][..],
        ),
        (CollectiveOp::AllGather, &[Algorithm::Ring, Algorithm::Hd]),
        (
            CollectiveOp::ReduceScatter,
            &[Algorithm::Ring, Algorithm::Hd],
        ),
        (CollectiveOp::AllToAll, &[Algorithm::Direct]),
        (CollectiveOp::Broadcast, &[Algorithm::Ring, Algorithm::Tree]),
        (CollectiveOp::Reduce, &[Algorithm::Ring, Algorithm::Tree]),
        (CollectiveOp::Barrier, &[Algorithm::Dissemination]),
    ] {
        for &a in algorithms {
            // 12 of 16 hosts: halving-doubling folds the extra ranks.
            let spec = WorkloadSpec::single(OpSpec {
                group: GroupSpec::Ranks((0..12).collect()),
                ..op(o, a, 96 * 1024)
            });
            let fabric = fabric(&topo, &spec, config());
            let run = run(&fabric, 1);
            let c = &collectives(&fabric, &run)[0];
            assert!(c.end_ns.is_some(), "{} {}: {c:?}", o.name(), a.name());
            let stats = run.stats();
            assert_eq!(stats.sent_payload_bytes, stats.delivered_payload_bytes);
            let flow_bytes: u64 = fabric.workload.flows.iter().map(|f| f.size_bytes).sum();
            assert_eq!(
                stats.delivered_payload_bytes,
                flow_bytes,
                "{} {}",
                o.name(),
                a.name()
            );
            assert!(flows(&run)
                .iter()
                .all(|f| f.finished && f.collective_id == Some(0)));
        }
    }
}

#[test]
fn collectives_are_identical_on_one_and_four_shards() {
    let topo = fat_tree(4, 3);
    let text = r#"
host_overhead_ns = 500
[[phase]]
name = "compute"
compute_us = 3
[[phase]]
name = "ring"
collective = "allreduce"
size = "256KiB"
[[phase]]
name = "tree"
collective = "allreduce"
algo = "tree"
size = "256KiB"
after = ["compute"]
[[phase]]
name = "ina"
collective = "allreduce"
algo = "ina"
dtype = "int32"
size = "256KiB"
after = ["ring", "tree"]
[[phase]]
name = "barrier"
collective = "barrier"
algo = "ina"
[[phase]]
name = "a2a"
collective = "alltoall"
size = "64KiB"
group = "0-7"
after = ["compute"]
"#;
    let spec = netsim_models::workload::file::parse(text, "test.toml", 16).unwrap();
    let fabric = fabric(&topo, &spec, NetConfig::default());
    let one = run(&fabric, 1);
    let four = run(&fabric, 4);
    assert_eq!(four.shards.len(), 4);
    let c1 = collectives(&fabric, &one);
    assert_eq!(c1, collectives(&fabric, &four));
    assert!(c1.iter().all(|c| c.end_ns.is_some()), "{c1:?}");
    assert_eq!(flows(&one), flows(&four));
    assert_eq!(offload(&one), offload(&four));
    // Dependencies hold: each host starts its part of `ina` after its parts
    // of `ring` and `tree`, so `ina`, which needs every member, ends after
    // both; `tree` waits for 3 us of compute.
    let by_name = |n: &str| c1.iter().find(|c| c.name == n).unwrap().clone();
    let ina_end = by_name("ina").end_ns.unwrap();
    assert!(ina_end > by_name("ring").end_ns.unwrap() && ina_end > by_name("tree").end_ns.unwrap());
    assert!(by_name("tree").start_ns.unwrap() >= 3_000);
}

#[test]
fn hierarchical_barrier_on_a_dragonfly() {
    let topo = TopoSpec::Dragonfly(DragonflyParams {
        p: 2,
        a: 4,
        h: 2,
        groups: Some(5),
        arrangement: Arrangement::Absolute,
        host_link: link(),
        local_link: link(),
        global_link: link(),
    });
    let spec = WorkloadSpec::single(op(CollectiveOp::Barrier, Algorithm::Ina, 0));
    let fabric = fabric(&topo, &spec, config());
    let run = run(&fabric, 1);
    let c = &collectives(&fabric, &run)[0];
    assert!(c.offloaded && c.end_ns.is_some(), "{c:?}");
    let op = &fabric.workload.ina_ops[0];
    assert!(op.tree.len() > 1, "spans several routers");
    let released: u64 = offload(&run).iter().map(|r| r.barriers_offloaded).sum();
    assert_eq!(released, op.tree.len() as u64);
}

#[test]
fn ring_all_reduce_uses_nvswitch_stages_inside_servers() {
    use netsim_topo::{SimaiParams, SimaiTemplate};
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 16;
    let topo = TopoSpec::Simai(p);
    let size = 4 << 20;
    let spec = WorkloadSpec::single(op(CollectiveOp::AllReduce, Algorithm::Ring, size));
    let fabric = fabric(&topo, &spec, config());
    let run = run(&fabric, 1);
    let c = &collectives(&fabric, &run)[0];
    assert_eq!(c.algorithm, "ring+nvswitch");
    assert!(c.end_ns.is_some());
    // Intra-server stages stay inside a server (NVSwitch); across servers
    // only same-rail GPUs talk, each carrying 1/8 of the data.
    let server = |h: u32| fabric.topo.node(h).coords.server.unwrap();
    let rail = |h: u32| fabric.topo.node(h).coords.rail.unwrap();
    let mut cross_bytes = 0;
    for f in &fabric.workload.flows {
        if server(f.src) != server(f.dst) {
            assert_eq!(rail(f.src), rail(f.dst), "{f:?}");
            cross_bytes += f.size_bytes;
        }
    }
    // Each of 8 rails runs a 2-server ring all-reduce of size/8: 2 steps of
    // size/16 from each of 2 GPUs.
    assert_eq!(cross_bytes, 8 * 2 * 2 * (size / 16));
    let stats = run.stats();
    assert_eq!(stats.sent_payload_bytes, stats.delivered_payload_bytes);
}

/// All-gather and reduce-scatter over whole servers run NCCL's rings, as
/// SimAI's MockNccl builds them: one ring per local rank `c`, visiting
/// local ranks `c, c + 1, ...` in every server, so ring `c` leaves each
/// server from rail `c - 1` into rail `c` of the next; every flow carries
/// `size / (n * 8)` and the inter-server traffic uses every NIC.
#[test]
fn all_gather_across_servers_runs_one_ring_per_rail() {
    use netsim_topo::{SimaiParams, SimaiTemplate};
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 16;
    let topo = TopoSpec::Simai(p);
    let size: u64 = 16 << 20;
    for collective in [CollectiveOp::AllGather, CollectiveOp::ReduceScatter] {
        let spec = WorkloadSpec::single(op(collective, Algorithm::Ring, size));
        let fabric = fabric(&topo, &spec, config());
        let (n, channels) = (16u64, 8u64);
        let flows = &fabric.workload.flows;
        // (n - 1) steps of every rank on every ring.
        assert_eq!(flows.len() as u64, channels * n * (n - 1));
        assert!(flows.iter().all(|f| f.size_bytes == size / (n * channels)));
        let server = |h: u32| fabric.topo.node(h).coords.server.unwrap();
        let rail = |h: u32| fabric.topo.node(h).coords.rail.unwrap();
        let mut exits = std::collections::BTreeSet::new();
        for f in flows {
            if server(f.src) != server(f.dst) {
                // Into rail c from rail c - 1 (mod 8).
                assert_eq!((rail(f.src) + 1) % 8, rail(f.dst), "{f:?}");
                exits.insert((server(f.src), rail(f.src)));
            }
        }
        // Every NIC of both servers carries a ring out of its server.
        assert_eq!(exits.len(), 16);
        let run = run(&fabric, 1);
        let c = &collectives(&fabric, &run)[0];
        assert_eq!(c.algorithm, "ring+rails");
        assert!(c.end_ns.is_some());
        let stats = run.stats();
        assert_eq!(stats.sent_payload_bytes, stats.delivered_payload_bytes);
        assert_eq!(
            stats.delivered_payload_bytes,
            channels * n * (n - 1) * (size / (n * channels))
        );
    }
    // More channels than rails: whole rounds of the 8 rings (12 -> 16), so
    // every rail carries the same share.
    let mut spec = WorkloadSpec::single(op(CollectiveOp::AllGather, Algorithm::Ring, size));
    spec.channels = 12;
    let fabric = fabric(&topo, &spec, config());
    let flows = &fabric.workload.flows;
    assert_eq!(flows.len() as u64, 16 * 16 * 15);
    assert!(flows.iter().all(|f| f.size_bytes == size / (16 * 16)));
}

/// NCCL's double binary tree (`ncclGetDtree`, two trees of half the
/// buffer each) on a star: each member's NIC sends and receives its
/// trees' halves once per tree edge it touches. From 4 members the inner
/// nodes of either tree touch 3 edges of it and 1 of the other, 2 halves
/// each way per tree pair, and the two roots 1 and 1; a binary heap and
/// its mirror would give each of 4 members 3 halves.
#[test]
fn double_binary_tree_moves_nccls_share_through_each_nic() {
    let size = 1u64 << 20;
    // Per member, tree edges touched over the two trees.
    let cases: [(u32, &[u64]); 4] = [
        (3, &[3, 2, 3]),
        (4, &[2, 4, 4, 2]),
        (5, &[3, 2, 4, 4, 3]),
        (8, &[2, 4, 4, 4, 4, 4, 4, 2]),
    ];
    for (n, edges) in cases {
        let spec = WorkloadSpec::single(op(CollectiveOp::AllReduce, Algorithm::Tree, size));
        let topo = netsim_topo::build(&star(n)).unwrap();
        let w = build(&spec, &topo, &config()).unwrap();
        let (mut sent, mut received) = (vec![0u64; n as usize], vec![0u64; n as usize]);
        for f in &w.flows {
            sent[f.src as usize] += f.size_bytes;
            received[f.dst as usize] += f.size_bytes;
        }
        let want: Vec<u64> = edges.iter().map(|e| e * size / 2).collect();
        assert_eq!(sent, want, "{n} members: bytes sent");
        assert_eq!(received, want, "{n} members: bytes received");
    }
}

/// The double binary tree's alpha-beta time on a star of `n` hosts at
/// 100 Gb/s: the busiest NIC's bytes (2 halves of the buffer each way
/// from 4 hosts, 1 on 2) at the links' payload rate, plus the pipeline's
/// fill: one of NCCL's chunks (512 KiB; 256 KiB on 8 hosts, where a tree
/// would take fewer than `8 x depth` of 512 KiB) and one hop's latency for
/// each of the `2 x depth` hops from the leaves up to the root and back
/// (depth 1 on 2 hosts, 2 on 4, 3 on 8: NCCL's root has one child).
#[test]
fn double_binary_tree_all_reduce_matches_its_alpha_beta_time() {
    let size = 16u64 << 20;
    let config = config();
    let (mtu, header) = (u64::from(config.mtu_bytes), u64::from(config.header_bytes));
    let payload_rate = 100e9 * mtu as f64 / (mtu + header) as f64;
    let ns = |bytes: u64| bytes as f64 * 8.0 / payload_rate * 1e9;
    for (n, halves, depth) in [(2u32, 2u64, 1u64), (4, 4, 2), (8, 4, 3)] {
        let spec = WorkloadSpec::single(op(CollectiveOp::AllReduce, Algorithm::Tree, size));
        let measured = duration_ns(&star(n), &spec, config.clone()) as f64;
        let beta_ns = ns(halves * size / 2);
        // One of NCCL's chunks a hop: 512 KiB, 256 KiB at depth 3.
        let chunk = netsim_models::workload::trees::nccl_chunk_bytes(size, 2, depth);
        let hop_ns = ns(chunk) + 2.0 * LINK_NS as f64 + serialization_ns(mtu + header);
        let expected = beta_ns + 2.0 * depth as f64 * hop_ns;
        let error = (measured - expected).abs() / expected;
        assert!(
            error < 0.05,
            "{n} hosts: tree all-reduce took {measured} ns, alpha-beta says {expected:.0} ns \
             (beta {beta_ns:.0}): {:.1}% off",
            error * 100.0
        );
    }
}
