//! The Ultra Ethernet transport against RoCE on the same fabrics: incast
//! with trimming and no PFC, spraying against per-flow ECMP on a
//! permutation, a link failure mid-run, every load balancer and loss
//! recovery path completing.

use netsim_engine::SimTime;
use netsim_models::faults::parse_fault;
use netsim_models::network::config::{LoadBalancing, NetConfig, Transport, UecCc};
use netsim_models::network::{simulate, Fabric, FaultPlan, NetRun};
use netsim_models::telemetry::{FlowRecord, MemorySink};
use netsim_models::traffic::{generate, TrafficPattern};
use netsim_topo::{build, FatTreeParams, Routing, TopoSpec};

use crate::common::{flows, layout};

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
    run_with_faults(spec, pattern, size, config, &[], 1)
}

/// A run with faults (`--fault` specs, routes repaired after the default
/// 100 us) on `shards` shards.
fn run_with_faults(
    spec: &TopoSpec,
    pattern: TrafficPattern,
    size: u64,
    config: NetConfig,
    faults: &[&str],
    shards: u32,
) -> NetRun<MemorySink> {
    let topo = build(spec).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let flows = generate(&pattern, topo.host_count(), size, 3).unwrap();
    let faults = faults
        .iter()
        .map(|f| parse_fault(f, &topo).unwrap())
        .collect();
    let plan = FaultPlan::new(&topo, faults, SimTime::from_us(100), |dead| {
        Routing::build_avoiding(&topo, None, dead, u64::MAX)
    })
    .unwrap();
    let mut fabric = Fabric::new(topo, routing, flows, config, 1);
    fabric.faults = plan;
    let layout = layout(&fabric.topo, shards);
    simulate(&fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    })
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

fn max_fct_ns(flows: &[FlowRecord]) -> u64 {
    flows.iter().map(|f| f.fct_ns.unwrap()).max().unwrap()
}

#[test]
fn with_reps_a_link_failure_costs_uec_less_than_roce() {
    // A k=8 fat-tree 2 MB permutation; the link between the first edge
    // switch (128) and its first aggregation switch (160) fails at 50 us,
    // while every flow is sending. Packets on it and queued for it are
    // lost. RoCE's go-back-N resends each loss's whole window and the
    // flows the failure rehashes collide; UEC resends only what SACKs and
    // NACKs show missing and sprays around the dead link.
    const FAILURE: &str = "link-down:128-160@50us";
    let reps = uec(LoadBalancing::Reps);
    let spec = fat_tree(8);
    let perm = |config: NetConfig, faults: &[&str]| {
        let r = run_with_faults(
            &spec,
            TrafficPattern::Permutation,
            2_000_000,
            config,
            faults,
            1,
        );
        let f = flows(&r);
        assert!(f.iter().all(|f| f.finished), "{faults:?}");
        assert_eq!(r.stats().delivered_payload_bytes, 128 * 2_000_000);
        (r, f)
    };
    let (_, roce_clean) = perm(NetConfig::default(), &[]);
    let (roce_fail_run, roce_fail) = perm(NetConfig::default(), &[FAILURE]);
    let (_, uec_clean) = perm(reps.clone(), &[]);
    let (uec_fail_run, uec_fail) = perm(reps.clone(), &[FAILURE]);
    // The failure lost packets under both transports.
    assert!(roce_fail_run.stats().dropped_pkts > 0);
    assert!(uec_fail_run.stats().dropped_pkts > 0);
    // The cost of the failure: how much later the last flow finishes,
    // relative to the same transport without it.
    let cost = |clean: &[FlowRecord], failed: &[FlowRecord]| {
        max_fct_ns(failed) as f64 / max_fct_ns(clean) as f64
    };
    let (cost_roce, cost_uec) = (cost(&roce_clean, &roce_fail), cost(&uec_clean, &uec_fail));
    assert!(
        cost_uec < cost_roce,
        "the failure slowed UEC {cost_uec:.3}x, RoCE {cost_roce:.3}x"
    );
    // And in absolute time, and in what was resent: selective
    // retransmission against go-back-N.
    let extra = |clean: &[FlowRecord], failed: &[FlowRecord]| {
        max_fct_ns(failed).saturating_sub(max_fct_ns(clean))
    };
    assert!(extra(&uec_clean, &uec_fail) < extra(&roce_clean, &roce_fail));
    assert!(uec_fail_run.stats().retransmitted_pkts < roce_fail_run.stats().retransmitted_pkts);
    // The same tables on two shards.
    let two = run_with_faults(
        &spec,
        TrafficPattern::Permutation,
        2_000_000,
        reps,
        &[FAILURE],
        2,
    );
    assert_eq!(flows(&two), uec_fail);
    assert_eq!(two.stats(), uec_fail_run.stats());
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

#[test]
fn rccc_credits_hold_an_incast_queue_near_the_target() {
    // The 16-to-1 incast above with receiver credits: after the first
    // windows (sent unasked) drain, the receiver issues a credit per
    // arrival while its outstanding credit is under one BDP, so the queue
    // at its ToR's downlink stays under one BDP and the link stays busy.
    let mut config = NetConfig {
        buffer_bytes: 1_000_000,
        sample_period: SimTime::from_us(5),
        ..uec(LoadBalancing::Bitmap)
    };
    config.uec.cc = UecCc::Rccc;
    let spec = fat_tree(8);
    let r = run(
        &spec,
        TrafficPattern::Incast { degree: 16 },
        1 << 20,
        config.clone(),
    );
    let flows = flows(&r);
    assert!(flows.iter().all(|f| f.finished));
    let stats = r.stats();
    assert_eq!(stats.delivered_payload_bytes, 16 << 20);
    assert_eq!(stats.sent_payload_bytes, 16 << 20);
    assert_eq!(stats.pfc_pauses, 0);
    // The target in wire bytes: one BDP of the longest of the senders'
    // paths, in whole packets.
    let topo = build(&spec).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let dst = flows[0].dst;
    let specs = generate(&TrafficPattern::Incast { degree: 16 }, 128, 1 << 20, 3).unwrap();
    let fabric = Fabric::new(topo, routing, specs.clone(), config.clone(), 1);
    let rtt = specs
        .iter()
        .map(|s| netsim_models::network::ideal_fct(&fabric, s, 0).1)
        .max()
        .unwrap();
    let bdp_bytes = 100e9 * rtt.as_ps() as f64 / 8e12;
    let wire_pkt = u64::from(config.mtu_bytes + config.header_bytes);
    let target_bytes = (bdp_bytes / f64::from(config.mtu_bytes)).ceil() as u64 * wire_pkt;
    // The receiver's ToR and its port toward the receiver.
    let down = fabric.topo.port(dst, 0);
    let (tor, port) = (down.peer, u32::from(down.peer_port));
    let late_max = r
        .shards
        .iter()
        .flat_map(|s| &s.sink.queues)
        .filter(|q| q.node == tor && q.port == port && q.priority == 1 && q.time_ns >= 200_000)
        .map(|q| q.qlen_bytes)
        .max()
        .unwrap();
    assert!(
        late_max <= target_bytes + wire_pkt,
        "queue {late_max} B after the first windows, target {target_bytes} B"
    );
    // The credits keep the last hop busy: the incast ends within 10% of
    // its 16 MiB crossing one 100 Gb/s link back to back.
    let wire_total = (16u64 << 20).div_ceil(u64::from(config.mtu_bytes)) * wire_pkt;
    let ideal_ns = wire_total as f64 * 8.0 / 100.0;
    let last = flows.iter().map(|f| f.end_ns.unwrap()).max().unwrap();
    assert!(
        (last as f64) < ideal_ns * 1.1,
        "the incast ended at {last} ns, back to back {ideal_ns:.0} ns"
    );
    // Every trimmed packet was sent again.
    for f in &flows {
        assert!(f.retransmitted_pkts >= f.trimmed_pkts, "flow {}", f.flow_id);
    }
    // The same tables on two shards.
    let two = run_with_faults(
        &spec,
        TrafficPattern::Incast { degree: 16 },
        1 << 20,
        config,
        &[],
        2,
    );
    assert_eq!(crate::common::flows(&two), flows);
}

#[test]
fn a_sender_whose_later_packets_are_acknowledged_is_not_given_up() {
    // A 15-to-1 incast with a 10 us retransmission timeout: the senders'
    // first missing packets wait behind the queue for many timeouts while
    // later ones are SACKed. The retry counter counted only the cumulative
    // point as progress and gave 10 of the 15 flows up (issue 33); any
    // newly acknowledged packet is progress.
    let config = NetConfig {
        buffer_bytes: 1_000_000,
        rto: SimTime::from_us(10),
        ..uec(NetConfig::default().uec.lb)
    };
    let run = run(
        &fat_tree(4),
        TrafficPattern::Incast { degree: 15 },
        200_000,
        config,
    );
    let flows = flows(&run);
    assert_eq!(flows.len(), 15);
    let given_up = flows.iter().filter(|f| !f.finished).count();
    assert_eq!(given_up, 0, "{given_up} of 15 flows were given up");
    assert_eq!(run.stats().delivered_payload_bytes, 15 * 200_000);
}
