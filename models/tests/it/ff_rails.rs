//! Rail replay (`--ff-rails on`, DESIGN.md §3c): on a rail-optimized
//! Spectrum-X fabric of 2 servers x 8 GPUs, rail switches whose traffic is
//! a lower one's flow for flow follow it. The replay is exact: every
//! flow's start, end and counters equal packet level's; the same on 1, 2
//! and 4 shards; and a rail whose flows differ is simulated, not followed.

use crate::common::{flows, layout};
use netsim_engine::SimTime;
use netsim_models::network::config::{FastForward, NetConfig};
use netsim_models::network::{simulate, Fabric, NetRun};
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::{
    build, Algorithm, Builder, Collective, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec,
    NONE,
};
use netsim_topo::{Routing, SimaiParams, SimaiTemplate, TopoSpec};

const US: u64 = 1_000_000;
const SIZE: u64 = 1 << 20;

/// Spectrum-X with 16 GPUs: hosts 0-15 (server = host / 8, rail = host %
/// 8), one rail switch per rail.
fn topo() -> TopoSpec {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 16;
    TopoSpec::Simai(p)
}

/// Rail replay with no check instant in the run (so no jump: the
/// comparison is the replay's alone), or `None`: packet level.
fn config(rails: bool) -> NetConfig {
    NetConfig {
        sample_period: SimTime::ZERO,
        fast_forward: rails.then(|| FastForward {
            rails: true,
            period: SimTime::from_us(1_000_000),
            ..FastForward::default()
        }),
        ..NetConfig::default()
    }
}

/// Two ring all-reduces of all 16 GPUs, one after the other: NVSwitch
/// stages inside each server, and each rail's two GPUs exchanging 1/8 of
/// the data across their rail switch, the same on every rail.
fn all_reduce(rails: bool) -> Fabric {
    let topo = netsim_topo::build(&topo()).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let op = OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ring,
        size_bytes: 16 * SIZE,
        group: GroupSpec::All,
        dtype: Dtype::Int32,
        reduce_op: ReduceOp::Sum,
    };
    let spec = WorkloadSpec::single(op);
    let config = config(rails);
    let workload = build(&spec, &topo, &config).unwrap();
    Fabric::with_workload(topo, routing, workload, config, 7)
}

/// Per rail, three layers of 20 us of compute on the rail's GPU of server
/// 0, then `SIZE` from it to the rail's GPU of server 1 and, 5 us later,
/// a second flow on the same port (contention); rail 3's second flow is
/// `odd` bytes longer.
fn layers(rails: bool, odd: u64) -> Fabric {
    let topo = netsim_topo::build(&topo()).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let mut b = Builder::new(SimTime(US));
    for rail in 0..8u32 {
        let (a, z) = (rail, 8 + rail);
        let mut before: Vec<u32> = Vec::new();
        for _ in 0..3 {
            let c = b.collective(Collective {
                name: "rail".into(),
                op: CollectiveOp::Send,
                algorithm: "direct",
                group_size: 2,
                size_bytes: 3 * SIZE,
                offloaded: false,
                fallback_reason: None,
                tasks: 3,
                job: NONE,
            });
            let go = b.compute(a, SimTime(20 * US), NONE, &before);
            let gap = b.compute(a, SimTime(5 * US), NONE, &[go]);
            let second = SIZE + if rail == 3 { odd } else { 0 };
            let f1 = b.flow(a, z, SIZE, c, &[go]);
            let f2 = b.flow(a, z, second, c, &[gap]);
            before = vec![b.join(a, c, &[f1, f2])];
        }
    }
    let config = config(rails);
    Fabric::with_workload(topo, routing, b.finish(), config, 7)
}

fn run(fabric: &Fabric, shards: u32) -> NetRun<MemorySink> {
    let layout = layout(&fabric.topo, shards);
    simulate(fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    })
}

/// Every flow of `on` starts and ends when it does in `off`, with its
/// counters, every byte delivered (the last events differ: a follower
/// arms no timer, and its row waits for its twin's counters).
fn same_flows(off: &NetRun<MemorySink>, on: &NetRun<MemorySink>) {
    let (a, b) = (flows(off), flows(on));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        let key = |f: &netsim_models::telemetry::FlowRecord| {
            (
                f.flow_id,
                f.start_ns,
                f.end_ns,
                f.ecn_marked_pkts,
                f.cnps,
                f.retransmitted_pkts,
                f.ideal_fct_ns,
                f.ecmp_path,
            )
        };
        assert_eq!(key(x), key(y), "packet level, then rail replay");
    }
    let (s, t) = (off.stats(), on.stats());
    assert_eq!(s.delivered_payload_bytes, t.delivered_payload_bytes);
    assert_eq!(s.flows_finished, t.flows_finished);
    assert_eq!(t.rail_diverged, 0);
}

#[test]
fn followed_rails_end_every_flow_as_packet_level_does() {
    let off = run(&all_reduce(false), 1);
    let on = run(&all_reduce(true), 1);
    same_flows(&off, &on);
    // Every flow across servers on rails 1-7 follows rail 0's twin; the
    // NVSwitch stages (NVLink too short for a mirror) are simulated.
    let across = flows(&off)
        .iter()
        .filter(|f| f.src / 8 != f.dst / 8 && f.src % 8 != 0)
        .count() as u64;
    assert!(across > 0);
    assert_eq!(on.stats().rail_followed, across);
    assert!(
        on.events() < off.events(),
        "{} events, {} at packet level",
        on.events(),
        off.events()
    );
}

#[test]
fn a_rail_whose_flows_differ_is_simulated() {
    // Rail 3's second flows are 4 KiB longer: not rail 0's twin.
    let off = run(&layers(false, 4096), 1);
    let on = run(&layers(true, 4096), 1);
    same_flows(&off, &on);
    // Six rails of 6 flows follow rail 0; rail 3 is simulated.
    assert_eq!(on.stats().rail_followed, 6 * 6);
    let twins = run(&layers(true, 0), 1);
    assert_eq!(twins.stats().rail_followed, 7 * 6);
}

#[test]
fn rail_replay_is_the_same_on_1_2_and_4_shards() {
    let fabric = all_reduce(true);
    let one = run(&fabric, 1);
    assert!(one.stats().rail_followed > 0);
    for shards in [2, 4] {
        let n = run(&fabric, shards);
        assert_eq!(flows(&one), flows(&n), "{shards} shards");
        assert_eq!(one.events(), n.events(), "{shards} shards");
        assert_eq!(one.stats().rail_followed, n.stats().rail_followed);
    }
}

/// Spectrum-X with 32 GPUs (4 servers x 8 rails): per rail, the rail's
/// GPUs of servers 1-3 each compute 20 us, then send `SIZE` to server 0's,
/// three times: a 3-to-1 incast on every rail switch's port toward server
/// 0, whose queue crosses RED's thresholds. `draws`: `--ecn-draw rail`.
fn incast(rails: bool, draws: bool) -> Fabric {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 32;
    let topo = netsim_topo::build(&TopoSpec::Simai(p)).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let mut b = Builder::new(SimTime(US));
    for rail in 0..8u32 {
        // Per source, its last flow (a source sees its flow end).
        let mut before: Vec<Vec<u32>> = vec![Vec::new(); 3];
        for _ in 0..3 {
            let c = b.collective(Collective {
                name: "incast".into(),
                op: CollectiveOp::Send,
                algorithm: "direct",
                group_size: 4,
                size_bytes: 3 * SIZE,
                offloaded: false,
                fallback_reason: None,
                tasks: 3,
                job: NONE,
            });
            for (k, server) in (1..4u32).enumerate() {
                let src = 8 * server + rail;
                let go = b.compute(src, SimTime(20 * US), NONE, &before[k]);
                before[k] = vec![b.flow(src, rail, SIZE, c, &[go])];
            }
        }
    }
    let mut config = config(rails);
    config.ecn_draw_rails = draws;
    Fabric::with_workload(topo, routing, b.finish(), config, 7)
}

/// How many flows of rails 1-7 differ from their rail 0 twin in start,
/// end, ECN marks or CNPs; asserts that RED's band was crossed.
fn unlike_twins(run: &NetRun<MemorySink>) -> usize {
    let all = flows(run);
    let rail0: Vec<_> = all.iter().filter(|f| f.dst == 0).collect();
    assert_eq!(rail0.len(), 9);
    // The queue crossed RED's band: some packets marked, not all.
    let packets = SIZE.div_ceil(u64::from(NetConfig::default().mtu_bytes));
    let marked: Vec<u64> = rail0.iter().map(|f| f.ecn_marked_pkts).collect();
    assert!(marked.iter().any(|&m| m > 0 && m < packets), "{marked:?}");
    let key = |f: &netsim_models::telemetry::FlowRecord| (f.end_ns, f.ecn_marked_pkts, f.cnps);
    all.iter()
        .filter(|f| {
            let twin = rail0
                .iter()
                .find(|t| t.src / 8 == f.src / 8 && t.start_ns == f.start_ns);
            twin.is_none_or(|t| key(t) != key(f))
        })
        .count()
}

#[test]
fn twin_rails_mark_alike_at_packet_level_with_rail_draws() {
    // RED's draw for a flow of rail r names rail 0's twin flow and
    // switch: the rails, in the same state, mark the same packets.
    assert_eq!(unlike_twins(&run(&incast(false, true), 1)), 0);
    // Drawn per packet, the rails' marks differ and they drift apart.
    assert!(unlike_twins(&run(&incast(false, false), 1)) > 0);
}

#[test]
fn followers_of_a_marked_rail_equal_packet_level_and_are_counted() {
    let off = run(&incast(false, true), 1);
    let on = run(&incast(true, true), 1);
    same_flows(&off, &on);
    assert_eq!(on.stats().rail_followed, 7 * 9);
    // Every mark of rail 0's flows was taken on its switch (one hop), and
    // counted there once for its followers.
    let leader_marks: u64 = flows(&off)
        .iter()
        .filter(|f| f.dst == 0)
        .map(|f| f.ecn_marked_pkts)
        .sum();
    assert!(leader_marks > 0);
    assert_eq!(on.stats().rail_leader_marks, leader_marks);
    assert_eq!(off.stats().rail_leader_marks, 0);
    // Drawn per packet, the rails still follow, and the marks they take
    // from their leader are counted the same.
    let per_packet = run(&incast(true, false), 1);
    assert_eq!(per_packet.stats().rail_followed, 7 * 9);
    assert_eq!(per_packet.stats().rail_leader_marks, leader_marks);
}
