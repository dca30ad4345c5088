//! In-network aggregation at flow level: an operation alone against its
//! closed form, the members' window, fallbacks and determinism, each
//! against packet level.

use crate::common::{
    cc_none as config, collectives, fat_tree, flows, fluid, offload, packets, star,
    workload_fabric as fabric,
};
use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::{
    Algorithm, CollectiveOp, Dtype, OpSpec, Phase, PhaseKind, ReduceOp, SwitchProfile, WorkloadSpec,
};

const GBPS: u64 = 1_000_000_000;
const LATENCY_PS: u64 = 1_000_000;

fn ina(ranks: u32, size_bytes: u64) -> OpSpec {
    OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ina,
        size_bytes,
        group: GroupSpec::Ranks((0..ranks).collect()),
        dtype: Dtype::Int32,
        reduce_op: ReduceOp::Sum,
    }
}

/// Serialisation of `bytes` at 100 Gb/s.
fn ser(bytes: u64) -> SimTime {
    SimTime(bytes * 8_000_000_000_000 / (100 * GBPS))
}

/// An 8-rank reduction of `chunks` full chunks, alone: every member's
/// stream drains at line rate, then pays its last chunk's loop: `links`
/// up (each one's latency, every one's store-and-forward but the first)
/// and down again (latency and store-and-forward each), and the processing
/// of `links` switches.
fn closed_form(chunks: u64, links: u64, config: &NetConfig) -> SimTime {
    let chunk_wire = u64::from(config.mtu_bytes + config.header_bytes);
    ser(chunks * chunk_wire)
        + processing(links)
        + SimTime(2 * links * LATENCY_PS)
        + ser(chunk_wire).saturating_mul(2 * links - 1)
}

/// The Tofino profile's processing at `switches` switches.
fn processing(switches: u64) -> SimTime {
    SwitchProfile::tofino().processing.saturating_mul(switches)
}

#[test]
fn a_reduction_alone_finishes_at_its_closed_form_on_a_star_and_a_leaf_spine() {
    let config = config();
    let size = 256 * u64::from(config.mtu_bytes);
    // One switch (one link up and down), then leaf and spine (two).
    for (topo, links) in [(star(8), 1), (fat_tree(4, 2), 2)] {
        let spec = WorkloadSpec::single(ina(8, size));
        let fabric = fabric(&topo, &spec, config.clone());
        let want = closed_form(256, links, &config).as_ns();
        let fluid_flows = flows(&fluid(&fabric));
        assert_eq!(fluid_flows.len(), 8);
        for f in &fluid_flows {
            assert_eq!(f.fct_ns, Some(want), "{topo:?}");
            // Packet level's ideal for the stream: the same closed form.
            assert_eq!(f.ideal_fct_ns, want, "{topo:?}");
        }
        // Packet level streams chunk by chunk: the same, up to rounding.
        for f in flows(&packets(&fabric)) {
            let packet_ns = f.fct_ns.expect("finished");
            assert!(
                packet_ns.abs_diff(want) <= 2,
                "{topo:?}: {packet_ns} ns against {want}"
            );
        }
    }
}

#[test]
fn a_reduction_shorter_than_a_chunk_pays_its_own_store_and_forward() {
    // 1 KiB in one chunk of a 4 KiB MTU: packet level's ideal charges a full
    // chunk on the way down; its packets, and flow level, do not.
    let config = config();
    let fabric = fabric(
        &star(4),
        &WorkloadSpec::single(ina(4, 1024)),
        config.clone(),
    );
    let wire = 1024 + u64::from(config.header_bytes);
    let want = ser(wire) + processing(1) + SimTime(2 * LATENCY_PS) + ser(wire);
    let fluid = flows(&fluid(&fabric));
    let packet = flows(&packets(&fabric));
    for (f, p) in fluid.iter().zip(&packet) {
        assert_eq!(f.fct_ns, Some(want.as_ns()));
        assert_eq!(f.fct_ns, p.fct_ns);
        assert_eq!(f.ideal_fct_ns, p.ideal_fct_ns);
    }
}

#[test]
fn too_few_slots_slow_the_reduction_as_at_packet_level() {
    // 4 slots cannot cover the tree's loop (about 8 us for a chunk up to
    // the spine and back, 3 us per switch): the members' window, not the
    // links, sets the rate, about 4 chunks per loop.
    let config = config();
    let mut spec = WorkloadSpec::single(ina(8, 256 * u64::from(config.mtu_bytes)));
    spec.profile.slots_per_group = 4;
    let fabric = fabric(&fat_tree(4, 2), &spec, config.clone());
    let fluid_ns = collectives(&fabric, &fluid(&fabric))[0]
        .duration_ns
        .unwrap() as f64;
    let packet_ns = collectives(&fabric, &packets(&fabric))[0]
        .duration_ns
        .unwrap() as f64;
    let line_rate_ns = closed_form(256, 2, &config).as_ns() as f64;
    assert!(
        fluid_ns > 5.0 * line_rate_ns,
        "{fluid_ns} ns: the window did not bind"
    );
    let error = (fluid_ns - packet_ns).abs() / packet_ns;
    assert!(
        error < 0.05,
        "flow level {fluid_ns} ns, packet level {packet_ns} ns: {:.1}% apart",
        error * 100.0
    );
}

#[test]
fn an_operation_without_slots_falls_back_as_at_packet_level() {
    // Two reductions one after the other on a switch with slots for one:
    // the second runs as a ring, at both levels, and both count it.
    let config = config();
    let mut spec = WorkloadSpec::single(ina(8, 1 << 20));
    spec.profile.slots_total = spec.profile.slots_per_group;
    let mut second = spec.phases[0].clone();
    second.name = "second".into();
    second.after = vec![0];
    spec.phases.push(second);
    let fabric = fabric(&star(8), &spec, config);
    let (fluid_run, packet_run) = (fluid(&fabric), packets(&fabric));
    let (fluid_rows, packet_rows) = (
        collectives(&fabric, &fluid_run),
        collectives(&fabric, &packet_run),
    );
    assert_eq!(fluid_rows.len(), 2);
    assert!(fluid_rows[0].offloaded);
    assert_eq!(fluid_rows[1].algorithm, "ring");
    assert!(fluid_rows[1]
        .fallback_reason
        .as_deref()
        .is_some_and(|r| r.contains("no aggregation slots left")));
    for (f, p) in fluid_rows.iter().zip(&packet_rows) {
        assert_eq!(
            (&f.algorithm, f.offloaded, &f.fallback_reason),
            (&p.algorithm, p.offloaded, &p.fallback_reason)
        );
        let (f_ns, p_ns) = (f.duration_ns.unwrap() as f64, p.duration_ns.unwrap() as f64);
        assert!(
            (f_ns - p_ns).abs() / p_ns < 0.05,
            "{}: flow level {f_ns} ns, packet level {p_ns} ns",
            f.name
        );
    }
    // The switch's counters: one reduction offloaded (every chunk
    // aggregated), one fallen back.
    assert_eq!(offload(&fluid_run), offload(&packet_run));
    assert_eq!(offload(&fluid_run)[0].reductions_fallback, 1);
}

#[test]
fn barriers_and_reductions_are_identical_from_run_to_run() {
    let config = config();
    let mut spec = WorkloadSpec::single(ina(16, 3 << 20));
    spec.phases.push(Phase {
        name: "sync".into(),
        kind: PhaseKind::Collective(OpSpec {
            op: CollectiveOp::Barrier,
            ..ina(16, 0)
        }),
        after: vec![0],
        stage: None,
    });
    let fabric = fabric(&fat_tree(8, 2), &spec, config);
    let (a, b) = (fluid(&fabric), fluid(&fabric));
    assert_eq!(flows(&a), flows(&b));
    assert_eq!(collectives(&fabric, &a), collectives(&fabric, &b));
    assert_eq!(offload(&a), offload(&b));
    assert_eq!(a.sim_end, b.sim_end);
    let rows = collectives(&fabric, &a);
    assert!(rows.iter().all(|r| r.offloaded && r.end_ns.is_some()));
    // Barriers pay the same loop as a one-chunk reduction, at both levels.
    let packet = collectives(&fabric, &packets(&fabric));
    assert_eq!(rows[1].duration_ns, packet[1].duration_ns);
}

#[test]
fn a_reduction_shares_its_members_links_with_host_flows_under_congestion_control() {
    // 4 MiB in the switch from hosts 0-7 while a 4 MiB ring all-reduce runs
    // over all 16 at once (DCQCN: max-min sharing at flow level). The stream
    // gets an equal share of every tree link a ring flow crosses; at packet
    // level it has no congestion control (as a SwitchML stream) while the
    // ring's flows back off on ECN, so it takes more. Measured: 1,135.6 us
    // against 838.5 (+35%); alone 346 us. Where in-network operations run
    // beside congestion-controlled traffic, flow level is pessimistic for
    // them (docs/models/flow-level.md).
    let dcqcn = NetConfig {
        sample_period: SimTime::ZERO,
        ..NetConfig::default()
    };
    let mut spec = WorkloadSpec::single(ina(8, 4 << 20));
    let mut ring = spec.phases[0].clone();
    ring.name = "ring".into();
    ring.kind = PhaseKind::Collective(OpSpec {
        algorithm: Algorithm::Ring,
        group: GroupSpec::Ranks((0..16).collect()),
        ..ina(16, 4 << 20)
    });
    spec.phases.push(ring);
    let alone = fabric(
        &star(16),
        &WorkloadSpec::single(ina(8, 4 << 20)),
        dcqcn.clone(),
    );
    let fabric = fabric(&star(16), &spec, dcqcn);
    let fluid_ns = collectives(&fabric, &fluid(&fabric))[0]
        .duration_ns
        .unwrap() as f64;
    let packet_ns = collectives(&fabric, &packets(&fabric))[0]
        .duration_ns
        .unwrap() as f64;
    let alone_ns = collectives(&alone, &fluid(&alone))[0].duration_ns.unwrap() as f64;
    assert!(
        fluid_ns > 1.3 * alone_ns,
        "{fluid_ns} ns: the ring took nothing"
    );
    let late = fluid_ns / packet_ns - 1.0;
    assert!(
        (0.2..0.5).contains(&late),
        "flow level {fluid_ns} ns, packet level {packet_ns} ns: {:+.1}%",
        late * 100.0
    );
}
