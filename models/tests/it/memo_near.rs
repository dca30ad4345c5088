//! Tolerant memo keys (DESIGN.md §3c, "Tolerant keys"): a layer whose
//! collective's entries start at offsets that differ from the last
//! layer's by less than `--ff-tolerance` of the record's span replays the
//! last layer's record, though no two layers' exact keys are equal; the
//! result stays within the bounds of packet level and is the same
//! on 1, 2 and 4 shards.

use crate::common::{flows, star};
use netsim_engine::{Layout, SimTime};
use netsim_models::network::config::{FastForward, NetConfig};
use netsim_models::network::{simulate, Fabric, NetRun};
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::{Builder, Collective, CollectiveOp, NONE};
use netsim_topo::Routing;

const US: u64 = 1_000_000;
/// Each flow's payload: ~84 us at 100 Gb/s alone.
const SIZE: u64 = 1_048_576;
const LAYERS: usize = 4;
/// Per layer, how much (ps) the 5 us of compute between the two flows'
/// starts differs from 5 us, as profiled times do: the second flow's
/// start offset in the key, so no two layers' exact keys are equal, each
/// within 0.1 us of the others: well within 1% of the domain's span
/// (~170 us).
const JITTER_B: [i64; LAYERS] = [0, 37_000, -19_000, 62_000];
/// Per layer, how much the 20 us of compute before the layer differs: it
/// moves the whole domain in time, which no key holds.
const JITTER_A: [i64; LAYERS] = [0, 410_000, -230_000, 120_000];

/// `LAYERS` layers on one switch (of 8 hosts, to lay out on 4 shards):
/// host 0 computes ~20 us, then sends `SIZE` to host 1 and, after ~5 us
/// more of compute, `SIZE` to host 2; both share host 0's port. The two flows and a join on host 0 (waiting
/// for both) are one collective; the next layer's compute waits for it.
/// One switch, so every layer's flows take the same ports: on a
/// leaf-spine, ECMP sends each layer's flows (each its own 5-tuple) up its
/// own spine, and a key holds the ports it crosses, which no tolerance
/// forgives.
fn fabric(fast_forward: Option<FastForward>) -> Fabric {
    let topo = netsim_topo::build(&star(8)).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let mut b = Builder::new(SimTime(US));
    let mut before: Vec<u32> = Vec::new();
    for layer in 0..LAYERS {
        let c = b.collective(Collective {
            name: "incast".into(),
            op: CollectiveOp::Send,
            algorithm: "direct",
            group_size: 3,
            size_bytes: 2 * SIZE,
            offloaded: false,
            fallback_reason: None,
            tasks: 3,
            job: NONE,
        });
        let ps = |base: u64, jitter: i64| SimTime((base as i64 + jitter) as u64);
        let a = b.compute(0, ps(20 * US, JITTER_A[layer]), NONE, &before);
        let gap = b.compute(0, ps(5 * US, JITTER_B[layer]), NONE, &[a]);
        let fa = b.flow(0, 1, SIZE, c, &[a]);
        let fb = b.flow(0, 2, SIZE, c, &[gap]);
        before = vec![b.join(0, c, &[fa, fb])];
    }
    let config = NetConfig {
        fast_forward,
        sample_period: SimTime::ZERO,
        ..NetConfig::default()
    };
    Fabric::with_workload(topo, routing, b.finish(), config, 1)
}

fn memo() -> FastForward {
    FastForward {
        memo: true,
        ..FastForward::default()
    }
}

/// `fabric` on `shards` shards, its nodes dealt in blocks (the partitioner
/// keeps a star whole): hosts 0-2 and the switch on different shards from
/// 2 shards on, so every packet crosses; the lookahead is a link's 1 us.
fn run(fabric: &Fabric, shards: u32) -> NetRun<MemorySink> {
    let layout = Layout::blocks(fabric.topo.node_count(), shards, SimTime(US)).unwrap();
    simulate(fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    })
}

#[test]
fn a_layer_within_the_tolerance_replays_the_record_of_the_last() {
    let full = run(&fabric(None), 1);
    let ff = memo();
    let on = run(&fabric(Some(ff)), 1);
    let stats = on.stats();
    // The first layer makes the record (a miss); each later one, whose
    // exact key differs from every record's, replays the nearest.
    assert_eq!((stats.memo_hits, stats.memo_misses), (3, 1), "{stats:?}");
    assert!(stats.memo_events_avoided > 0);
    assert!(on.events() < full.events());
    // Every byte delivered, as at packet level.
    let payload = (2 * LAYERS) as u64 * SIZE;
    assert_eq!(stats.sent_payload_bytes, payload);
    assert_eq!(stats.delivered_payload_bytes, payload);
    assert_eq!(full.stats().delivered_payload_bytes, payload);
    // The bounds: the end within 1%, every FCT within 5%.
    let (end_full, end_on) = (full.sim_end.as_ps() as f64, on.sim_end.as_ps() as f64);
    assert!(
        (end_on - end_full).abs() <= 0.01 * end_full,
        "end {end_on} ps with memo, {end_full} ps at packet level"
    );
    let (a, b) = (flows(&full), flows(&on));
    assert_eq!(a.len(), 2 * LAYERS);
    assert_eq!(b.len(), 2 * LAYERS);
    for (x, y) in a.iter().zip(&b) {
        let (fx, fy) = (x.fct_ns.unwrap() as f64, y.fct_ns.unwrap() as f64);
        assert!(
            (fx - fy).abs() <= 0.05 * fx,
            "flow {}: {fx} ns packet level, {fy} ns with memo",
            x.flow_id
        );
    }
}

#[test]
fn tolerant_replays_are_the_same_on_1_2_and_4_shards() {
    let fabric = fabric(Some(memo()));
    let one = run(&fabric, 1);
    for shards in [2, 4] {
        let n = run(&fabric, shards);
        assert_eq!(one.stats().memo_hits, n.stats().memo_hits);
        assert_eq!(one.stats().memo_misses, n.stats().memo_misses);
        assert_eq!(
            one.stats().delivered_payload_bytes,
            n.stats().delivered_payload_bytes
        );
        assert_eq!(one.sim_end, n.sim_end, "{shards} shards");
        assert_eq!(flows(&one), flows(&n), "{shards} shards");
    }
}
