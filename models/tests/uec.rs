//! The Ultra Ethernet transport against RoCE on the same fabrics: incast
//! with trimming and no PFC, spraying against per-flow ECMP on a
//! permutation, every load balancer and loss recovery path completing.

use netsim_engine::{Layout, SimTime};
use netsim_models::network::config::{LoadBalancing, NetConfig, Transport, UecCc};
use netsim_models::network::{simulate, Fabric, NetRun};
use netsim_models::telemetry::{FlowRecord, MemorySink};
use netsim_models::traffic::{generate, TrafficPattern};
use netsim_topo::{build, FatTreeParams, Routing, TopoSpec};

fn fat_tree(k: u32) -> TopoSpec {
    TopoSpec::FatTree(FatTreeParams {
        k,
        ..FatTreeParams::default()
    })
}

/// The UEC defaults as `netsim run --transport uec` sets them: lossy, trimming.
fn uec(lb: LoadBalancing) -> NetConfig {
    let mut config = NetConfig {
        transport: Transport::Uec,
        pfc: false,
        trim: true,
        cc: netsim_models::network::config::CcKind::None,
        ..NetConfig::default()
    };
    config.uec.lb = lb;
    config
}

fn run(
    spec: &TopoSpec,
    pattern: TrafficPattern,
    size: u64,
    config: NetConfig,
) -> NetRun<MemorySink> {
    let topo = build(spec).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let flows = generate(&pattern, topo.host_count(), size, 3).unwrap();
    let fabric = Fabric::new(topo, routing, flows, config, 1);
    let layout = Layout::blocks(fabric.topo.node_count(), 1, SimTime::MAX).unwrap();
    simulate(&fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    })
}

fn flows(run: &NetRun<MemorySink>) -> Vec<FlowRecord> {
    let mut flows: Vec<FlowRecord> = run
        .shards
        .iter()
        .flat_map(|s| s.sink.flows.clone())
        .collect();
    flows.sort_by_key(|f| f.flow_id);
    flows
}

fn p99_fct_ns(flows: &[FlowRecord]) -> u64 {
    let mut fct: Vec<u64> = flows.iter().map(|f| f.fct_ns.unwrap()).collect();
    fct.sort_unstable();
    fct[(fct.len() * 99).div_ceil(100) - 1]
}

fn trimmed_at_switches(run: &NetRun<MemorySink>) -> u64 {
    // Queue samples are cumulative: the last sample of each queue counts all.
    let mut last = std::collections::BTreeMap::new();
    for s in run.shards.iter().flat_map(|s| &s.sink.queues) {
        last.insert((s.node, s.port, s.priority), s.trimmed_pkts);
    }
    last.values().sum()
}

#[test]
fn a_16_to_1_incast_on_a_k8_fat_tree_trims_and_finishes_without_pfc() {
    // 1 MB of shared buffer per switch: a k=8 switch's share of a shallow
    // ASIC; 16 senders' first windows (one BDP each) overflow it.
    let config = NetConfig {
        buffer_bytes: 1_000_000,
        ..uec(LoadBalancing::Bitmap)
    };
    let run = run(
        &fat_tree(8),
        TrafficPattern::Incast { degree: 16 },
        1 << 20,
        config,
    );
    let flows = flows(&run);
    assert_eq!(flows.len(), 16);
    assert!(flows.iter().all(|f| f.finished));
    let trimmed: u64 = flows.iter().map(|f| f.trimmed_pkts).sum();
    assert!(trimmed > 0, "no packet was trimmed");
    // Every NACK answers a header a switch cut: the senders heard of each
    // trimmed packet exactly once (control packets are never dropped).
    assert_eq!(trimmed, trimmed_at_switches(&run));
    let retransmitted: u64 = flows.iter().map(|f| f.retransmitted_pkts).sum();
    assert!(retransmitted >= trimmed);
    let stats = run.stats();
    assert_eq!(stats.pfc_pauses, 0);
    assert_eq!(stats.dropped_pkts, 0, "trimming replaces tail drop");
    assert_eq!(stats.delivered_payload_bytes, 16 << 20);
    assert!(run.shards.iter().all(|s| s.sink.pfc.is_empty()));
    // Each packet was acknowledged selectively once (duplicates get
    // cumulative acknowledgements, which are not counted).
    for f in &flows {
        assert_eq!(f.sacks, (1u64 << 20).div_ceil(4096));
    }
}

#[test]
fn spraying_beats_per_flow_ecmp_on_a_k8_permutation() {
    let roce = run(
        &fat_tree(8),
        TrafficPattern::Permutation,
        2_000_000,
        NetConfig::default(),
    );
    let uec = run(
        &fat_tree(8),
        TrafficPattern::Permutation,
        2_000_000,
        uec(LoadBalancing::Bitmap),
    );
    let (roce, uec) = (flows(&roce), flows(&uec));
    assert!(roce.iter().chain(&uec).all(|f| f.finished));
    let (p99_roce, p99_uec) = (p99_fct_ns(&roce), p99_fct_ns(&uec));
    assert!(
        p99_uec * 10 <= p99_roce * 8,
        "UEC p99 {p99_uec} ns vs RoCE {p99_roce} ns"
    );
    // RoCE flows have one path; UEC flows spread over the entropy set.
    assert!(roce.iter().all(|f| f.paths_used == 1));
    assert!(uec.iter().all(|f| f.paths_used == 256));
}

#[test]
fn every_load_balancer_completes_a_lossy_permutation() {
    for lb in [
        LoadBalancing::Oblivious,
        LoadBalancing::Bitmap,
        LoadBalancing::Reps,
    ] {
        let config = NetConfig {
            buffer_bytes: 200_000,
            ..uec(lb)
        };
        let r = run(&fat_tree(4), TrafficPattern::Permutation, 500_000, config);
        let flows = flows(&r);
        assert!(flows.iter().all(|f| f.finished), "{lb:?}");
        assert_eq!(r.stats().delivered_payload_bytes, 16 * 500_000, "{lb:?}");
        assert!(flows.iter().all(|f| f.paths_used >= 1));
    }
}

#[test]
fn without_trimming_sack_recovers_tail_drops() {
    // No congestion control and a shallow buffer: an incast overflows,
    // packets are dropped, and SACK plus the timer resend only what is missing.
    let mut config = NetConfig {
        buffer_bytes: 200_000,
        trim: false,
        ..uec(LoadBalancing::Oblivious)
    };
    config.uec.cc = UecCc::None;
    config.uec.window_pkts = 64;
    let r = run(
        &fat_tree(4),
        TrafficPattern::Incast { degree: 8 },
        300_000,
        config,
    );
    let flows = flows(&r);
    assert!(flows.iter().all(|f| f.finished));
    assert!(r.stats().dropped_pkts > 0);
    assert_eq!(flows.iter().map(|f| f.trimmed_pkts).sum::<u64>(), 0);
    let retransmitted: u64 = flows.iter().map(|f| f.retransmitted_pkts).sum();
    assert!(retransmitted >= r.stats().dropped_pkts);
    assert_eq!(r.stats().delivered_payload_bytes, 8 * 300_000);
}

#[test]
fn roce_packets_hash_as_before_under_the_uec_build() {
    // Entropy 0 adds nothing to the hash: a RoCE flow's path is its 5-tuple's.
    let r = run(
        &fat_tree(4),
        TrafficPattern::Permutation,
        100_000,
        NetConfig::default(),
    );
    for f in flows(&r) {
        assert_eq!(f.paths_used, 1);
        assert_eq!(f.sacks + f.trimmed_pkts, 0);
        assert_eq!(
            f.ecmp_path,
            netsim_models::network::five_tuple_hash(f.flow_id, f.src, f.dst)
        );
    }
}

#[test]
fn nscc_trims_less_than_an_uncontrolled_window_in_an_incast() {
    // The same 16-to-1 incast with NSCC and with only the outstanding-packet
    // limit: NSCC's delay and ECN reactions keep the queue below the buffer
    // more often, so fewer packets are trimmed and resent.
    let trimmed = |cc| {
        let mut config = NetConfig {
            buffer_bytes: 1_000_000,
            ..uec(LoadBalancing::Bitmap)
        };
        config.uec.cc = cc;
        let r = run(
            &fat_tree(8),
            TrafficPattern::Incast { degree: 16 },
            1 << 20,
            config,
        );
        let flows = flows(&r);
        assert!(flows.iter().all(|f| f.finished));
        flows.iter().map(|f| f.trimmed_pkts).sum::<u64>()
    };
    let (nscc, none) = (trimmed(UecCc::Nscc), trimmed(UecCc::None));
    assert!(nscc * 2 < none, "NSCC trimmed {nscc}, no control {none}");
}
