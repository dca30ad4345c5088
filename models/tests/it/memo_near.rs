//! Tolerant memo keys (DESIGN.md §3c, "Tolerant keys"): a layer whose
//! collective's entries start at offsets that differ from the last
//! layer's by less than `--ff-tolerance` of the record's span replays the
//! last layer's record, though no two layers' exact keys are equal; the
//! result stays within the bounds of packet level and is the same
//! on 1, 2 and 4 shards. On a leaf-spine, where ECMP sends each layer's
//! cross-leaf flow up a spine of its own, keys over path classes ("Path
//! classes") replay a record made on one spine on another, and the
//! replayed bytes land on the links each layer really uses.

use crate::common::{fat_tree, flows, star};
use netsim_engine::{Layout, SimTime};
use netsim_models::network::config::{FastForward, NetConfig};
use netsim_models::network::{simulate, Fabric, NetRun};
use netsim_models::telemetry::{LinkSample, MemorySink};
use netsim_models::workload::{Builder, Collective, CollectiveOp, NONE};
use netsim_topo::{Routing, TopoSpec};
use std::collections::BTreeMap;

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

/// `LAYERS` layers on `topo` (of 8 hosts, to lay out on 4 shards):
/// host 0 computes ~20 us, then sends `SIZE` to host 1 and, after ~5 us
/// more of compute, `SIZE` to host 2; both share host 0's port. The two
/// flows and a join on host 0 (waiting for both) are one collective; the
/// next layer's compute waits for it. On a star every layer's flows take
/// the same ports; on a k = 4 leaf-spine host 2 is on the next leaf, and
/// ECMP sends each layer's flow to it (each its own 5-tuple) and its
/// acknowledgements up spines of their own. Links are sampled every
/// `sample_us` (0: not).
fn fabric(topo: &TopoSpec, fast_forward: Option<FastForward>, sample_us: u64) -> Fabric {
    let topo = netsim_topo::build(topo).unwrap();
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
        sample_period: SimTime(sample_us * US),
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

/// The bounds against packet level: `misses` misses and the
/// other layers hits, every byte delivered, the end within 1%, every FCT
/// within 5%.
fn within_bounds(full: &NetRun<MemorySink>, on: &NetRun<MemorySink>, misses: u64) {
    let stats = on.stats();
    // The first layer of each key makes the record (a miss); each later
    // one, whose exact key differs from every record's, replays the
    // nearest.
    let hits = LAYERS as u64 - misses;
    assert_eq!(
        (stats.memo_hits, stats.memo_misses),
        (hits, misses),
        "{stats:?}"
    );
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
    let (a, b) = (flows(full), flows(on));
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
fn a_layer_within_the_tolerance_replays_the_record_of_the_last() {
    let full = run(&fabric(&star(8), None, 0), 1);
    let on = run(&fabric(&star(8), Some(memo()), 0), 1);
    within_bounds(&full, &on, 1);
    // One switch: every replay on the record's own ports.
    assert_eq!(on.stats().memo_path_hits, 0);
}

/// Per link direction (node, port) and per layer, the bytes its samples
/// hold; a sample is the layer's whose end falls after the layer's first
/// flow start (`starts`, ns) and by the next's (the ~20 us of compute
/// between layers, longer than a sample, leaves no byte of one layer in
/// the next one's samples).
fn bytes_by_link_and_layer(
    links: &[LinkSample],
    starts: &[u64],
) -> BTreeMap<(u32, u32, usize), u64> {
    let mut out = BTreeMap::new();
    for s in links.iter().filter(|s| s.tx_bytes > 0) {
        let layer = starts
            .iter()
            .rposition(|&t| t < s.time_ns)
            .expect("after the first start");
        *out.entry((s.src, s.src_port, layer)).or_insert(0) += s.tx_bytes;
    }
    out
}

/// The link samples of every shard of `run`.
fn links(run: &NetRun<MemorySink>) -> Vec<LinkSample> {
    run.shards
        .iter()
        .flat_map(|s| s.sink.links.iter().cloned())
        .collect()
}

#[test]
fn a_layer_on_another_spine_replays_the_record_made_on_the_first() {
    // k = 4: hosts 0-7 (2 per leaf), leaves 8-11, spines 12 and 13.
    let topo = fat_tree(4, 2);
    let full = run(&fabric(&topo, None, 10), 1);
    let on = run(&fabric(&topo, Some(memo()), 10), 1);
    // Each layer's replayed bytes are on the links that layer really
    // uses: per link direction and layer, the links with bytes at packet
    // level, and their bytes within 1% (a record's byte counters are its
    // sandbox's, which jumped: within 0.4% here).
    let starts: Vec<u64> = flows(&full).iter().step_by(2).map(|f| f.start_ns).collect();
    assert_eq!(starts.len(), LAYERS);
    let bytes = bytes_by_link_and_layer(&links(&full), &starts);
    let replayed = bytes_by_link_and_layer(&links(&on), &starts);
    assert!(
        replayed.keys().eq(bytes.keys()),
        "{replayed:?} with memo, {bytes:?} at packet level"
    );
    for (link, b) in &bytes {
        let r = replayed[link];
        assert!(
            r.abs_diff(*b) * 100 <= *b,
            "{link:?}: {r} B with memo, {b} B at packet level"
        );
    }
    // Per layer, the uplink (2: to spine 12, 3: to spine 13) its flow to
    // host 2 leaves leaf 8 by, and its acknowledgements leaf 9 by, at
    // packet level. Data and acknowledgements through one spine (one
    // shared buffer) or two are different domains: one record each. A
    // layer like an earlier one but on the other spine(s) replays its
    // record across paths (a key naming port numbers missed it).
    let uplink = |leaf: u32, layer: usize| {
        let used: Vec<u32> = bytes
            .keys()
            .filter(|&&(n, p, l)| n == leaf && p >= 2 && l == layer)
            .map(|&(_, p, _)| p)
            .collect();
        assert_eq!(used.len(), 1, "leaf {leaf}, layer {layer}: {used:?}");
        used[0]
    };
    let paths: Vec<(u32, u32)> = (0..LAYERS).map(|l| (uplink(8, l), uplink(9, l))).collect();
    let class = |&(data, ack): &(u32, u32)| data == ack;
    let mut firsts: Vec<(u32, u32)> = Vec::new();
    let mut across = 0;
    for p in &paths {
        match firsts.iter().find(|f| class(f) == class(p)) {
            Some(first) => across += u64::from(first != p),
            None => firsts.push(*p),
        }
    }
    within_bounds(&full, &on, firsts.len() as u64);
    assert!(across >= 1, "no layer on other spines: {paths:?}");
    assert_eq!(on.stats().memo_path_hits, across, "{paths:?}");
}

#[test]
fn tolerant_replays_are_the_same_on_1_2_and_4_shards() {
    for topo in [star(8), fat_tree(4, 2)] {
        same_on_1_2_and_4_shards(&fabric(&topo, Some(memo()), 0));
    }
}

fn same_on_1_2_and_4_shards(fabric: &Fabric) {
    let one = run(fabric, 1);
    for shards in [2, 4] {
        let n = run(fabric, shards);
        assert_eq!(one.stats().memo_hits, n.stats().memo_hits);
        assert_eq!(one.stats().memo_path_hits, n.stats().memo_path_hits);
        assert_eq!(one.stats().memo_misses, n.stats().memo_misses);
        assert_eq!(
            one.stats().delivered_payload_bytes,
            n.stats().delivered_payload_bytes
        );
        assert_eq!(one.sim_end, n.sim_end, "{shards} shards");
        assert_eq!(flows(&one), flows(&n), "{shards} shards");
    }
}

/// At a 2 us check period (five checks per 10 us) the memo decides at
/// most once per 10 us of simulated time, so no more often than at the
/// default 10 us period (29 decisions against 14 on this run if it
/// decided at every check), and still replays every layer after the
/// first within the bounds, alike on 1, 2 and 4 shards.
#[test]
fn at_a_2_us_period_the_memo_decides_at_most_once_per_10_us() {
    let at = |period_us: u64| FastForward {
        period: SimTime(period_us * US),
        ..memo()
    };
    let full = run(&fabric(&star(8), None, 0), 1);
    let default = run(&fabric(&star(8), Some(at(10)), 0), 1);
    let fabric = fabric(&star(8), Some(at(2)), 0);
    let on = run(&fabric, 1);
    within_bounds(&full, &on, 1);
    let (rounds, most) = (on.stats().memo_rounds, default.stats().memo_rounds);
    assert!(
        rounds > 0 && rounds <= most,
        "{rounds} decisions at 2 us, {most} at 10 us"
    );
    assert!(rounds <= on.sim_end.as_ps() / (10 * US) + 1);
    same_on_1_2_and_4_shards(&fabric);
    for shards in [2, 4] {
        assert_eq!(run(&fabric, shards).stats().memo_rounds, rounds);
    }
}
