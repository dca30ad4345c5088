//! A queue pair keeps its DCQCN rate from one message to the next: a flow
//! queued behind another ([`Builder::queue_after`], NCCL's steps) takes
//! the state the flow ahead leaves (`NetConfig::qp_rate_kept`), handed
//! over at its first turn to send or, if the flow ahead finished first,
//! kept meanwhile and raised by the timers that would have fired.

use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::network::{Fabric, NetStats};
use netsim_models::telemetry::{FlowRecord, MemorySink};
use netsim_models::workload::{Builder, NONE};

use crate::common::{fat_tree, flows, layout};

/// DCQCN with PFC, no link sampling; `kept`: `--qp-rate kept`.
fn dcqcn(kept: bool) -> NetConfig {
    NetConfig {
        cc: CcKind::Dcqcn,
        pfc: true,
        sample_period: SimTime::ZERO,
        qp_rate_kept: kept,
        ..NetConfig::default()
    }
}

/// On a k=4 leaf-spine at 100 Gb/s: hosts 2, 4 and 6 send 500 KB each and
/// host 0 1 MB (flow A) to host 7 at once, so A is marked and cut; A ends
/// alone, below line rate. Flow B, 1 MB from host 0 to host 7, is queued
/// behind A, released at once or `gap` after A completes. The rows on
/// `shards`, by flow (A is flow 3, B flow 4).
fn after_incast(kept: bool, gap: Option<SimTime>, shards: u32) -> Vec<FlowRecord> {
    let topo = netsim_topo::build(&fat_tree(4, 2)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let mut b = Builder::new(SimTime::ZERO);
    for src in [2, 4, 6] {
        b.flow(src, 7, 500_000, NONE, &[]);
    }
    let a = b.flow(0, 7, 1_000_000, NONE, &[]);
    let deps = match gap {
        Some(gap) => vec![b.compute(0, gap, NONE, &[a])],
        None => Vec::new(),
    };
    let flow_b = b.flow(0, 7, 1_000_000, NONE, &deps);
    b.queue_after(flow_b, a);
    let fabric = Fabric::with_workload(topo, routing, b.finish(), dcqcn(kept), 3);
    run_on(&fabric, shards).0
}

/// `fabric` run on `shards`: its flows' rows by flow id, and its counters.
fn run_on(fabric: &Fabric, shards: u32) -> (Vec<FlowRecord>, NetStats) {
    let l = layout(&fabric.topo, shards);
    let run =
        netsim_models::network::simulate(fabric, &l, SimTime::MAX, None, |_| MemorySink::default());
    let mut f = flows(&run);
    f.sort_by_key(|r| r.flow_id);
    (f, run.stats())
}

/// Handed over from the flow ahead: B leaves at A's cut rate and climbs
/// back with A's timers (50-100 Mb/s a 55 us period), so it ends at least
/// 10% later after A than a B that starts at line rate (`fresh`), which
/// ends within 10% of its serialization after A.
#[test]
fn a_queued_flow_takes_the_rate_the_flow_ahead_leaves() {
    let (kept, fresh) = (after_incast(true, None, 1), after_incast(false, None, 1));
    assert!(kept[3].cnps > 0, "A was never cut");
    let serialization_ns = 1_000_000 * 8 / 100;
    let after_a = |f: &[FlowRecord]| f[4].end_ns.unwrap() - f[3].end_ns.unwrap();
    let (k, r) = (after_a(&kept), after_a(&fresh));
    eprintln!("B after A: kept {k} ns, fresh {r} ns, serialization {serialization_ns} ns");
    assert!(
        r * 10 <= serialization_ns * 11,
        "fresh: {r} ns after A, serialization {serialization_ns}"
    );
    assert!(k * 10 >= r * 11, "kept: {k} ns after A, fresh {r}");
}

/// A finished before B was released: the state waits for B and the timers
/// that would have fired meanwhile raise it, 50-100 Mb/s every 55 us
/// (netsim's profile): after 100 ms (1,818 periods) it is back at line
/// rate and B takes its ideal time; after 1 us it is still A's and B is
/// slower by at least 10%.
#[test]
fn an_idle_queue_pair_recovers_its_rate_over_the_gap() {
    let fct = |gap_ns: u64| {
        let f = after_incast(true, Some(SimTime::from_ns(gap_ns)), 1);
        assert!(f[3].cnps > 0, "A was never cut");
        assert_eq!(f[4].cnps, 0);
        (f[4].fct_ns.unwrap(), f[4].ideal_fct_ns)
    };
    let (long, ideal) = fct(100_000_000);
    let (short, _) = fct(1_000);
    eprintln!("B after a gap: 100 ms {long} ns, 1 us {short} ns, ideal {ideal} ns");
    assert!(
        long * 100 <= ideal * 101,
        "after 100 ms: {long} ns, ideal {ideal}"
    );
    assert!(
        short * 10 >= ideal * 11,
        "after 1 us: {short} ns, ideal {ideal}"
    );
}

/// Handed over live and kept over a gap, the rows are the same on 1, 2
/// and 4 shards: the state moves only between flows of one source host.
#[test]
fn kept_queue_pair_rates_are_the_same_on_1_2_4_shards() {
    for gap in [None, Some(SimTime::from_ns(20_000))] {
        let one = format!("{:?}", after_incast(true, gap, 1));
        assert_eq!(format!("{:?}", after_incast(true, gap, 2)), one);
        assert_eq!(format!("{:?}", after_incast(true, gap, 4)), one);
    }
}

/// On a 16-GPU HPN fabric (two servers, each NIC dual-homed to two ToRs),
/// GPUs 8-15 send 1 MB each to GPU 0 (flows A, cut by the incast), each
/// with a 1 MB flow B queued behind it, released 1 us later. A host
/// picks one of its two NIC ports per flow, so some B start on the other
/// port than their A and decline A's DCQCN state at their first turn; an
/// A whose B had its turn parks nothing, so no state is left parked at
/// the end of the run.
#[test]
fn a_declined_queue_pair_state_is_not_left_parked() {
    use netsim_topo::{SimaiParams, SimaiTemplate, TopoSpec};
    let mut p = SimaiParams::defaults(SimaiTemplate::Hpn);
    p.gpus = 16;
    let topo = netsim_topo::build(&TopoSpec::Simai(p)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let mut b = Builder::new(SimTime::ZERO);
    let ahead: Vec<u32> = (8..16)
        .map(|src| b.flow(src, 0, 1_000_000, NONE, &[]))
        .collect();
    for (src, &a) in (8..16).zip(&ahead) {
        // 1 us later: the flow ahead is open when this one has its turn.
        let wait = b.compute(src, SimTime::from_ns(1_000), NONE, &[]);
        let queued = b.flow(src, 0, 1_000_000, NONE, &[wait]);
        b.queue_after(queued, a);
    }
    let fabric = Fabric::with_workload(topo, routing, b.finish(), dcqcn(true), 3);
    for shards in [1, 2] {
        let (f, stats) = run_on(&fabric, shards);
        assert_eq!(f.len(), 16);
        assert!(f.iter().all(|r| r.finished), "a flow did not finish");
        assert!(f.iter().any(|r| r.cnps > 0), "no flow was cut");
        eprintln!(
            "{shards} shards: declined {}, left parked {}",
            stats.qp_rates_declined, stats.qp_rates_parked_left
        );
        assert!(stats.qp_rates_declined > 0, "no queued flow declined");
        assert_eq!(stats.qp_rates_parked_left, 0, "states left parked");
    }
}

/// The queued flow is ready before the flow ahead has opened: on a k=4
/// leaf-spine, hosts 2, 4 and 6 send 500 KB each to host 7 at once with
/// flow B (1 MB, host 0 to 7, ready at 0); flow A (1 MB, same queue pair,
/// B queued behind it) is ready 2 us later, after a compute task. A queue
/// pair runs its messages in the order posted, so B waits for A to open,
/// then for its packets: B starts no earlier than A and ends after it, A
/// is cut by the incast, and no hand-over is left (A's state goes to B).
/// On 1 and 2 shards.
#[test]
fn a_queued_flow_waits_for_its_flow_ahead_to_open() {
    let topo = netsim_topo::build(&fat_tree(4, 2)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let mut b = Builder::new(SimTime::ZERO);
    for src in [2, 4, 6] {
        b.flow(src, 7, 500_000, NONE, &[]);
    }
    let wait = b.compute(0, SimTime::from_ns(2_000), NONE, &[]);
    let a = b.flow(0, 7, 1_000_000, NONE, &[wait]);
    let queued = b.flow(0, 7, 1_000_000, NONE, &[]);
    b.queue_after(queued, a);
    let fabric = Fabric::with_workload(topo, routing, b.finish(), dcqcn(true), 3);
    for shards in [1, 2] {
        let (f, stats) = run_on(&fabric, shards);
        assert_eq!(f.len(), 5);
        assert!(f.iter().all(|r| r.finished), "a flow did not finish");
        // A is flow 3, B flow 4.
        assert!(f[3].start_ns >= 2_000, "A opened before its compute task");
        assert!(f[4].start_ns >= f[3].start_ns, "B opened before A");
        assert!(f[4].end_ns > f[3].end_ns, "B ended before A");
        assert!(f[3].cnps > 0, "A was never cut");
        eprintln!(
            "{shards} shards: A {}-{:?} ns, B {}-{:?} ns, cnps {}, left {}",
            f[3].start_ns,
            f[3].end_ns,
            f[4].start_ns,
            f[4].end_ns,
            f[3].cnps,
            stats.qp_rates_parked_left
        );
        assert_eq!(stats.qp_rates_parked_left, 0, "hand-overs left");
    }
}
