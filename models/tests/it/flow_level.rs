//! Flow level (the fluid model) against closed forms, conservation, and
//! packet level on the cases where both run.

use netsim_engine::SimTime;
use netsim_models::flow::{self, FlowModeError};
use netsim_models::network::config::{DragonflyRouting, EcmpMode, NetConfig};
use netsim_models::network::{collective_records, Fabric, NetRun};
use netsim_models::telemetry::{FlowRecord, MemorySink};
use netsim_models::traffic::{generate, FlowSpec, TrafficPattern};
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::{Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec};
use netsim_topo::{Arrangement, DragonflyParams, Routing, TopoSpec};

use crate::common::{
    cc_none as config, fat_tree, flow, flows, fluid, link, packets, star,
    workload_fabric as workload,
};

const GBPS: u64 = 1_000_000_000;

fn traffic(topo: &TopoSpec, flows: Vec<FlowSpec>, config: NetConfig) -> Fabric {
    let topo = netsim_topo::build(topo).unwrap();
    let routing = Routing::build(&topo).unwrap();
    Fabric::new(topo, routing, flows, config, 3)
}

/// Wire bytes of a message: payload plus one header per MTU-sized packet.
fn wire_bytes(config: &NetConfig, size_bytes: u64) -> u64 {
    size_bytes + size_bytes.div_ceil(u64::from(config.mtu_bytes)) * u64::from(config.header_bytes)
}

#[test]
fn a_flow_alone_finishes_at_exactly_the_ideal_time() {
    // Across pods of a k=4 fat-tree (six hops), sizes below, at and above
    // one MTU: the fluid drain plus the path's tail is packet mode's ideal.
    for size in [1, 4096, 1_000_000, 3_333_333] {
        let fabric = traffic(&fat_tree(4, 3), vec![flow(0, 15, size)], config());
        let f = &flows(&fluid(&fabric))[0];
        assert!(f.finished);
        assert_eq!(f.fct_ns, Some(f.ideal_fct_ns), "{size} bytes");
    }
}

#[test]
fn flows_on_one_bottleneck_share_it_exactly() {
    // n senders into one receiver of a star: each drains at 1/n of the
    // receiver's link, so each takes (n - 1) more serialisations of its
    // bytes than alone.
    let config = config();
    let size = 1_000_000;
    let serialisation_ps = wire_bytes(&config, size) * 8_000_000_000_000 / (100 * GBPS);
    for n in [2u32, 4, 7] {
        let senders = (1..=n).map(|s| flow(s, 0, size)).collect();
        let fabric = traffic(&star(n + 1), senders, config.clone());
        for f in flows(&fluid(&fabric)) {
            let expected_ps = f.ideal_fct_ns * 1000 + u64::from(n - 1) * serialisation_ps;
            let fct_ns = f.fct_ns.unwrap();
            assert!(
                fct_ns.abs_diff(expected_ps / 1000) <= 1,
                "n={n}: flow {} took {fct_ns} ns, expected {} ns",
                f.flow_id,
                expected_ps / 1000
            );
        }
    }
}

#[test]
fn a_short_flow_leaves_its_share_to_a_long_one() {
    // Sizes S and 3S on one bottleneck: the short one drains at half rate
    // (2 S of link time), the long one then has the link alone for what it
    // has left: S + 3S of link time in all.
    let config = config();
    let size = 900_000;
    let fabric = traffic(
        &star(3),
        vec![flow(1, 0, size), flow(2, 0, 3 * size)],
        config.clone(),
    );
    let f = flows(&fluid(&fabric));
    let ser_ns = |bytes: u64| wire_bytes(&config, bytes) as f64 * 8.0 / 100.0;
    let tail_ns = |f: &FlowRecord| f.ideal_fct_ns as f64 - ser_ns(f.size_bytes);
    let short = f[0].fct_ns.unwrap() as f64 - tail_ns(&f[0]);
    let long = f[1].fct_ns.unwrap() as f64 - tail_ns(&f[1]);
    assert!(
        (short - 2.0 * ser_ns(size)).abs() < 2.0,
        "short flow {short} ns"
    );
    let expected = ser_ns(size) + ser_ns(3 * size);
    assert!(
        (long - expected).abs() < 2.0,
        "long flow {long} ns, expected {expected}"
    );
}

#[test]
fn links_carry_every_wire_byte_and_never_exceed_their_rate() {
    let config = NetConfig {
        sample_period: SimTime::from_us(20),
        ..config()
    };
    let size = 2_000_000;
    let senders = (1..=4).map(|s| flow(s, 0, size)).collect();
    let fabric = traffic(&star(5), senders, config.clone());
    let run = fluid(&fabric);
    let links = &run.shards[0].sink.links;
    assert!(links.iter().all(|l| l.utilization <= 1.0 + 1e-9));
    let carried = |src: u32, dst: u32| -> u64 {
        links
            .iter()
            .filter(|l| l.src == src && l.dst == dst)
            .map(|l| l.tx_bytes)
            .sum()
    };
    let wire = wire_bytes(&config, size);
    let switch = 5;
    for s in 1..=4 {
        assert_eq!(carried(s, switch), wire, "uplink of host {s}");
    }
    assert_eq!(carried(switch, 0), 4 * wire, "the receiver's downlink");
    // The receiver's link is full while all four drain together.
    let busiest = links
        .iter()
        .filter(|l| l.src == switch && l.dst == 0)
        .map(|l| l.utilization)
        .fold(0.0, f64::max);
    assert!(busiest > 0.999, "receiver link at most {busiest}");
    let stats = run.stats();
    assert_eq!(stats.sent_payload_bytes, 4 * size);
    assert_eq!(stats.delivered_payload_bytes, 4 * size);
}

fn all_reduce(algorithm: Algorithm, ranks: u32, size_bytes: u64) -> WorkloadSpec {
    let mut spec = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm,
        size_bytes,
        group: GroupSpec::Ranks((0..ranks).collect()),
        dtype: Dtype::Int32,
        reduce_op: ReduceOp::Sum,
    });
    spec.host_overhead = SimTime::from_ns(500);
    spec
}

fn collective_ns(fabric: &Fabric, run: &NetRun<MemorySink>) -> f64 {
    let records = collective_records(&fabric.workload, &run.spans());
    records[0].duration_ns.expect("the collective completes") as f64
}

#[test]
fn ring_all_reduce_agrees_with_packet_level() {
    // 16 ranks across a k=4 fat-tree, every step bandwidth-bound.
    let fabric = workload(
        &fat_tree(4, 3),
        &all_reduce(Algorithm::Ring, 16, 4 << 20),
        config(),
    );
    let fluid_ns = collective_ns(&fabric, &fluid(&fabric));
    let packet_ns = collective_ns(&fabric, &packets(&fabric));
    let error = (fluid_ns - packet_ns).abs() / packet_ns;
    assert!(
        error < 0.05,
        "flow level {fluid_ns} ns, packet level {packet_ns} ns: {:.1}% apart",
        error * 100.0
    );
}

#[test]
fn tree_all_reduce_pipeline_agrees_with_packet_level() {
    // A double binary tree's 512 KiB chunks pipeline through the switches'
    // queues: packet level lets the first chunks through ahead of the
    // rest, which FIFO sharing reproduces. Max-min sharing kept them abreast
    // and was 14% to 21% late over five ECMP seeds (20% with this one's);
    // FIFO sharing is -5% to +13% (+12.5% here): what is left is the NIC's
    // round robin, which at packet level finishes chunks started together
    // a few packets apart, so their successors start staggered.
    let fabric = workload(
        &fat_tree(4, 3),
        &all_reduce(Algorithm::Tree, 16, 4 << 20),
        config(),
    );
    let fluid_ns = collective_ns(&fabric, &fluid(&fabric));
    let packet_ns = collective_ns(&fabric, &packets(&fabric));
    let error = (fluid_ns - packet_ns).abs() / packet_ns;
    assert!(
        error < 0.15,
        "flow level {fluid_ns} ns, packet level {packet_ns} ns: {:.1}% apart",
        error * 100.0
    );
}

#[test]
fn permutation_on_a_fat_tree_takes_packet_levels_paths_and_agrees_on_average() {
    let config = NetConfig {
        mtu_bytes: 9000,
        // One sampling interval for the whole run: bytes per link direction.
        sample_period: SimTime::from_us(100_000),
        ..config()
    };
    let size = 1_000_000;
    let flows_spec = generate(&TrafficPattern::Permutation, 128, size, 5).unwrap();
    let fabric = traffic(&fat_tree(8, 3), flows_spec, config.clone());
    let (fluid_run, packet_run) = (fluid(&fabric), packets(&fabric));
    let (fluid, packet) = (flows(&fluid_run), flows(&packet_run));
    let mean =
        |f: &[FlowRecord]| f.iter().map(|r| r.fct_ns.unwrap() as f64).sum::<f64>() / f.len() as f64;
    let (a, b) = (mean(&fluid), mean(&packet));
    assert!(
        (a - b).abs() / b < 0.05,
        "mean FCT: flow level {a:.0} ns, packet level {b:.0} ns"
    );
    // The distribution too: without congestion control the switches' FIFO
    // queues, not max-min fairness, decide which flows finish first.
    let quantile = |f: &[FlowRecord], q: f64| {
        let mut fct: Vec<u64> = f.iter().map(|r| r.fct_ns.unwrap()).collect();
        fct.sort_unstable();
        fct[((fct.len() - 1) as f64 * q) as usize] as f64
    };
    // The shortest FCTs are the flows that met no one: fluid flows there
    // skip the packet-level jitter of sharing a NIC and a queue, hence the
    // wider bound at the 10th percentile.
    let quantiles = [(0.1, 0.10), (0.5, 0.05), (0.9, 0.05), (0.99, 0.05)]
        .map(|(q, bound)| (q, bound, quantile(&fluid, q), quantile(&packet, q)));
    assert!(
        quantiles
            .iter()
            .all(|&(_, bound, a, b)| (a - b).abs() / b < bound),
        "FCT quantiles (q, bound, flow level ns, packet level ns): {quantiles:?}"
    );
    // The same paths: every link direction carries the same data in both
    // (packet level adds the ACKs of flows the other way, under 2% here).
    let carried = |run: &NetRun<MemorySink>| {
        let mut bytes = std::collections::BTreeMap::new();
        for l in run.shards.iter().flat_map(|s| &s.sink.links) {
            *bytes.entry((l.src, l.src_port)).or_insert(0u64) += l.tx_bytes;
        }
        bytes
    };
    let (by_fluid, by_packet) = (carried(&fluid_run), carried(&packet_run));
    let wire = wire_bytes(&config, size);
    let mut loaded = 0;
    for (port, &fluid_bytes) in &by_fluid {
        let packet_bytes = by_packet[port];
        assert_eq!(fluid_bytes % wire, 0, "{port:?} carries part of a flow");
        assert!(
            packet_bytes >= fluid_bytes && packet_bytes - fluid_bytes < wire / 2,
            "{port:?}: {fluid_bytes} bytes at flow level, {packet_bytes} at packet level"
        );
        loaded += usize::from(fluid_bytes > 0);
    }
    assert!(loaded > 128, "only {loaded} link directions carried data");
}

#[test]
fn dragonfly_routings_deliver_every_byte() {
    let topo = TopoSpec::Dragonfly(DragonflyParams {
        p: 2,
        a: 4,
        h: 2,
        groups: Some(9),
        arrangement: Arrangement::Absolute,
        host_link: link(),
        local_link: link(),
        global_link: link(),
    });
    for routing in [
        DragonflyRouting::Minimal,
        DragonflyRouting::Valiant,
        DragonflyRouting::Ugal,
    ] {
        let config = NetConfig {
            dragonfly_routing: routing,
            ..config()
        };
        // Every host of group 0 sends to group 1: one global link minimally.
        let senders = (0..8).map(|h| flow(h, 8 + h, 500_000)).collect();
        let fabric = traffic(&topo, senders, config);
        let run = fluid(&fabric);
        let stats = run.stats();
        assert_eq!(stats.flows_finished, 8, "{routing:?}");
        assert_eq!(stats.delivered_payload_bytes, 8 * 500_000, "{routing:?}");
    }
}

#[test]
fn spraying_is_refused() {
    let sprayed = NetConfig {
        ecmp: EcmpMode::Spray,
        ..config()
    };
    let fabric = traffic(&fat_tree(4, 3), vec![flow(0, 15, 1000)], sprayed);
    assert!(matches!(
        flow::check(&fabric),
        Err(FlowModeError::Unsupported(_))
    ));
}
