//! The FIFO fluid model against closed-form drain times.

use super::*;

const GBPS: u64 = 1_000_000_000;
/// 10^6 wire bits, in bit-picoseconds: 10 us at 100 Gb/s.
const WIRE: u128 = 1_000_000 * 1_000_000_000_000;

/// Runs every flow added at time zero to the end: when each drained.
fn run(capacity_bps: Vec<u64>, paths: &[&[u32]]) -> Vec<SimTime> {
    let channels = capacity_bps.len() as u32;
    let mut fifo = Fifo::new(capacity_bps, paths.len());
    let mut meter = LinkMeter::new(channels, true);
    for (flow, path) in paths.iter().enumerate() {
        fifo.add(flow as u32, path, WIRE, SimTime::ZERO);
    }
    let mut ends = vec![SimTime::MAX; paths.len()];
    let mut drained = Vec::new();
    let mut now = SimTime::ZERO;
    loop {
        fifo.step(now, &mut meter, &mut drained);
        for &flow in &drained {
            ends[flow as usize] = now;
        }
        drained.clear();
        match fifo.next_event() {
            Some(at) => now = at,
            None => break,
        }
    }
    ends
}

#[test]
fn a_flow_alone_drains_at_its_bottleneck_rate() {
    // A 400 Gb/s host port, then a 100 Gb/s link: the backlog builds
    // behind the slow link and leaves at its rate.
    let ends = run(vec![400 * GBPS, 100 * GBPS], &[&[0, 1]]);
    assert_eq!(ends, vec![SimTime::from_us(10)]);
}

#[test]
fn n_flows_into_one_port_drain_together_at_n_times_the_serialisation() {
    // Three hosts (channels 0-2) into one 100 Gb/s port (3).
    let ends = run(vec![100 * GBPS; 4], &[&[0, 3], &[1, 3], &[2, 3]]);
    assert_eq!(ends, vec![SimTime::from_us(30); 3]);
}

#[test]
fn a_flow_at_line_rate_takes_more_of_a_bottleneck_than_one_slowed_upstream() {
    // A and B (hosts 0, 1) share link 3; A then meets C (host 2) on link
    // 4; B goes on over link 5. Max-min would give each half of every
    // link, all three draining at 20 us. FIFO: link 4 serves A (arriving
    // at 50 Gb/s) and C (100) in proportion, 1/3 and 2/3, so C's bytes
    // are out at 15 us; A's, queued behind, leave at the full rate then
    // and A still drains at 20 us, with B.
    let ends = run(vec![100 * GBPS; 6], &[&[0, 3, 4], &[1, 3, 5], &[2, 4]]);
    assert_eq!(
        ends,
        vec![
            SimTime::from_us(20),
            SimTime::from_us(20),
            SimTime::from_us(15)
        ]
    );
}
