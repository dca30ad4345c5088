//! A NIC's round robin over its queue pairs, `after-last`
//! (`NetConfig::qp_round_robin_after_last`, SimAI's `RdmaEgressQueue`):
//! the next turn starts after the queue pair served last, also when a
//! queue pair ahead of it in the list finishes and leaves it.

use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::network::Fabric;
use netsim_models::telemetry::MemorySink;
use netsim_models::workload::{Builder, NONE};

use crate::common::{fat_tree, flows, layout};

/// Line rate, no PFC, no sampling; round robin after the last served.
fn after_last() -> NetConfig {
    NetConfig {
        cc: CcKind::None,
        sample_period: SimTime::ZERO,
        qp_round_robin_after_last: true,
        ..NetConfig::default()
    }
}

/// Host 0 of a k=4 leaf-spine at 100 Gb/s starts three flows to host 7 at
/// once: A of one packet, then B and C of 20 full packets each. A's ACK
/// comes back while B and C alternate and takes A off the list ahead of
/// them; they keep alternating, so C, listed after B, ends one packet's
/// serialization after B. (Before the fix the turn index stayed put when A
/// left, one of B and C was served twice in a row, and the ends were two
/// packets apart or C ended first.)
#[test]
fn a_finished_queue_pair_ahead_does_not_move_the_turn() {
    let config = after_last();
    let packet_ns = u64::from(config.mtu_bytes + config.header_bytes) * 8 / 100;
    let topo = netsim_topo::build(&fat_tree(4, 2)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let mut b = Builder::new(SimTime::ZERO);
    b.flow(0, 7, 1_000, NONE, &[]);
    let full = 20 * u64::from(config.mtu_bytes);
    b.flow(0, 7, full, NONE, &[]);
    b.flow(0, 7, full, NONE, &[]);
    let fabric = Fabric::with_workload(topo, routing, b.finish(), config, 3);
    let l = layout(&fabric.topo, 1);
    let run = netsim_models::network::simulate(&fabric, &l, SimTime::MAX, None, |_| {
        MemorySink::default()
    });
    let mut f = flows(&run);
    f.sort_by_key(|r| r.flow_id);
    let end = |i: usize| f[i].end_ns.unwrap();
    assert!(end(0) < end(1), "A ends before B and C: {f:?}");
    let (b_end, c_end) = (end(1), end(2));
    assert!(
        c_end > b_end && c_end - b_end <= packet_ns + 1,
        "C ends {} ns after B, one packet is {packet_ns} ns",
        c_end as i64 - b_end as i64
    );
}
