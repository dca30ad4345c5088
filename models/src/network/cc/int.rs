//! HPCC's in-band telemetry as SimAI's sender reads it (`UpdateRateHp`):
//! each hop's utilisation comes from two consecutive INT records of the
//! same queue pair, `u = (bytes delta / time delta) / B + min(queue,
//! previous queue) / (B T)`, with `T` the flow's own base RTT (SimAI's
//! `m_win / m_max_rate` with `GLOBAL_T 0`).
//!
//! A netsim packet has no room for a per-hop INT stack, so each switch
//! port keeps the last record of every flow that crosses it (the record the
//! flow's previous packet would have carried) and stamps the packet with
//! the utilisation the sender would compute for that hop; the packet keeps
//! the path maximum, which is what SimAI's single-rate update (`MULTI_RATE
//! 0`) uses. A record is what the port had sent before the packet and the
//! queue it left behind, as SimAI's switch pushes it at dequeue.

use crate::network::{ideal_fct, Fabric};
use crate::traffic::FlowSpec;
use netsim_engine::SimTime;
use std::collections::HashMap;

/// One hop's INT record of one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
struct IntRecord {
    time: SimTime,
    /// Bytes the port had sent before the packet.
    tx_bytes: u64,
    /// Bytes queued at the port after the packet left.
    queue_bytes: u64,
}

/// The last INT record of each flow crossing one switch port, and each
/// flow's base RTT (looked up once, on its first packet here).
#[derive(Debug, Default)]
pub(crate) struct IntRecords {
    last: HashMap<u32, (IntRecord, SimTime)>,
}

impl IntRecords {
    /// A data packet of `flow` leaves the port at `now`: the port had sent
    /// `tx_bytes` before it at `rate_bps` and leaves `queue_bytes` behind.
    /// Returns the hop's utilisation (1.0 = a full link) against the
    /// previous record of the same flow, or `None` for its first packet
    /// here (SimAI's first ACK only stores the INT). `base_rtt` gives the
    /// flow's base RTT on its first packet; `last` forgets the flow after
    /// this packet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn stamp(
        &mut self,
        flow: u32,
        now: SimTime,
        tx_bytes: u64,
        queue_bytes: u64,
        rate_bps: u64,
        last: bool,
        base_rtt: impl FnOnce() -> SimTime,
    ) -> Option<f64> {
        let record = IntRecord {
            time: now,
            tx_bytes,
            queue_bytes,
        };
        let u = match self.last.get_mut(&flow) {
            Some((prev, rtt)) => {
                let u = utilisation(prev, &record, rate_bps, *rtt);
                *prev = record;
                u
            }
            None => {
                self.last.insert(flow, (record, base_rtt()));
                None
            }
        };
        if last {
            self.last.remove(&flow);
        }
        u
    }

    /// Flows with a record here.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.last.len()
    }
}

/// The base RTT of host `src`'s path to host `dst`, as its sender's
/// window sees it: a full-size packet out and its ACK back (SimAI's
/// `pairRtt`, the `T` of the flow's queue term); with `--window-scope
/// fabric`, the fabric's largest (SimAI 1.6's `maxRtt`).
pub(crate) fn flow_base_rtt(fabric: &Fabric, src: u32, dst: u32) -> SimTime {
    if let Some(w) = fabric.widest {
        return w.rtt;
    }
    let first_port = fabric.routing.first_next_hop(src, dst).unwrap_or(0);
    let spec = FlowSpec {
        src,
        dst,
        size_bytes: u64::from(fabric.config.mtu_bytes),
        start: SimTime::ZERO,
    };
    ideal_fct(fabric, &spec, first_port).1
}

/// SimAI's per-hop `u` from two records of one flow; `None` when no time
/// passed between them.
fn utilisation(prev: &IntRecord, now: &IntRecord, rate_bps: u64, base_rtt: SimTime) -> Option<f64> {
    let tau_ps = (now.time - prev.time).as_ps();
    if tau_ps == 0 {
        return None;
    }
    let rate = rate_bps as f64;
    let tx = (now.tx_bytes - prev.tx_bytes) as f64 * 8e12 / tau_ps as f64 / rate;
    let queue = now.queue_bytes.min(prev.queue_bytes) as f64 * 8e12
        / (rate * base_rtt.as_ps().max(1) as f64);
    Some(tx + queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBPS_100: u64 = 100_000_000_000;

    #[test]
    fn utilisation_comes_from_consecutive_records_of_the_same_flow() {
        let mut r = IntRecords::default();
        let rtt = || SimTime::from_us(8);
        // Flow 1's first packet only records: 10,000 B sent, 50,000 B queued.
        assert_eq!(
            r.stamp(1, SimTime::from_us(1), 10_000, 50_000, GBPS_100, false, rtt),
            None
        );
        // Flow 2 in between leaves flow 1's record alone; its own base RTT
        // is 4 us.
        assert_eq!(
            r.stamp(
                2,
                SimTime::from_us(2),
                12_000,
                90_000,
                GBPS_100,
                false,
                || { SimTime::from_us(4) }
            ),
            None
        );
        // 2 us later 25,000 B more went out (100 Gb/s = 25,000 B per 2 us):
        // tx = 1.0; min(40,000, 50,000) B over B T = 100 Gb/s x 8 us =
        // 100,000 B: 0.4. u = 1.4.
        let u = r.stamp(1, SimTime::from_us(3), 35_000, 40_000, GBPS_100, false, rtt);
        assert!((u.unwrap() - 1.4).abs() < 1e-12, "{u:?}");
        // Flow 2, 2 us after its first record: 25,000 B (tx 1.0) and
        // min(100,000, 90,000) B over B T = 100 Gb/s x 4 us = 50,000 B: 1.8.
        let u = r.stamp(
            2,
            SimTime::from_us(4),
            37_000,
            100_000,
            GBPS_100,
            false,
            || panic!("the RTT is looked up once per flow"),
        );
        assert!((u.unwrap() - 2.8).abs() < 1e-12, "{u:?}");
        // Half the bytes in the next 2 us, an empty queue: u = 0.5.
        let u = r.stamp(1, SimTime::from_us(5), 47_500, 0, GBPS_100, true, rtt);
        assert!((u.unwrap() - 0.5).abs() < 1e-12, "{u:?}");
        // The last packet forgot flow 1; flow 2 stays.
        assert_eq!(r.len(), 1);
        assert_eq!(
            r.stamp(1, SimTime::from_us(6), 50_000, 0, GBPS_100, false, rtt),
            None
        );
    }
}
