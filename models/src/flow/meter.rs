//! Bytes each channel carried, integrated exactly from the fluid rates, for
//! the `links` table.
//!
//! A channel's carried volume is kept in bit-picoseconds (rate in b/s times
//! time in ps), so integrating piecewise-constant rates is exact integer
//! arithmetic; a sample turns it into whole bytes.

use crate::network::link_tier;
use crate::telemetry::{LinkSample, TelemetrySink};
use netsim_engine::SimTime;
use netsim_topo::Topology;

const BIT_PS_PER_BYTE: u128 = 8_000_000_000_000;

#[derive(Debug)]
pub struct LinkMeter {
    /// Per channel: the sum of its flows' rates.
    rate_bps: Vec<u64>,
    /// Per channel: volume carried up to `settled_at`, in bit-ps.
    carried: Vec<u128>,
    settled_at: Vec<SimTime>,
    /// Per channel: whole bytes already reported.
    sampled_bytes: Vec<u64>,
    /// Per channel: the channel whose volume it reports (a folded replica
    /// copy's host channel reports its kept host's, [`super::classes`]);
    /// empty: each its own.
    mirror: Vec<u32>,
    /// Write a row for a channel that carried nothing in the interval too.
    keep_idle_rows: bool,
}

impl LinkMeter {
    /// `keep_idle_rows`: rows of intervals without bytes are written too.
    pub fn new(channels: u32, keep_idle_rows: bool) -> LinkMeter {
        let n = channels as usize;
        LinkMeter {
            rate_bps: vec![0; n],
            carried: vec![0; n],
            settled_at: vec![SimTime::ZERO; n],
            sampled_bytes: vec![0; n],
            mirror: Vec::new(),
            keep_idle_rows,
        }
    }

    /// Channel `c` reports the volume of channel `mirror[c]`.
    pub fn set_mirrors(&mut self, mirror: Vec<u32>) {
        self.mirror = mirror;
    }

    fn settle(&mut self, channel: usize, now: SimTime) {
        let dt = now.as_ps() - self.settled_at[channel].as_ps();
        self.carried[channel] += u128::from(self.rate_bps[channel]) * u128::from(dt);
        self.settled_at[channel] = now;
    }

    /// A flow (a class of `weights[i]` members on `channels[i]`) goes from
    /// `old_bps` to `new_bps` per member at `now`.
    pub fn change(
        &mut self,
        channels: &[u32],
        weights: &[u32],
        old_bps: u64,
        new_bps: u64,
        now: SimTime,
    ) {
        for (&c, &w) in channels.iter().zip(weights) {
            let c = c as usize;
            self.settle(c, now);
            let w = u64::from(w);
            self.rate_bps[c] = self.rate_bps[c] - old_bps * w + new_bps * w;
        }
    }

    /// Adds `bit_ps` per member a flow over `channels` carried beyond its
    /// rate: what is left of its last picosecond when it drains, so that
    /// every channel carries exactly the members' wire bytes.
    pub fn credit(&mut self, channels: &[u32], weights: &[u32], bit_ps: u128) {
        for (&c, &w) in channels.iter().zip(weights) {
            self.carried[c as usize] += bit_ps * u128::from(w);
        }
    }

    /// One row per channel for the interval `(from, to]`, node by node and
    /// port by port (the order channels are numbered in); none for a
    /// channel that carried nothing unless idle rows are kept.
    pub fn sample(
        &mut self,
        topo: &Topology,
        from: SimTime,
        to: SimTime,
        sink: &mut impl TelemetrySink,
    ) {
        debug_assert!(from < to);
        let interval_ps = (to - from).as_ps() as f64;
        let mut c = 0;
        for node in 0..topo.node_count() {
            for (port, p) in topo.ports(node).iter().enumerate() {
                let m = self.mirror.get(c).map_or(c, |&m| m as usize);
                self.settle(m, to);
                let bytes = (self.carried[m] / BIT_PS_PER_BYTE) as u64;
                let tx_bytes = bytes - self.sampled_bytes[c];
                self.sampled_bytes[c] = bytes;
                c += 1;
                if tx_bytes == 0 && !self.keep_idle_rows {
                    continue;
                }
                let rate_bps = topo.link(p.link).bandwidth_bps;
                sink.link(LinkSample {
                    time_ns: to.as_ns(),
                    interval_ns: to.as_ns() - from.as_ns(),
                    link: p.link,
                    src: node,
                    src_port: port as u32,
                    dst: p.peer,
                    tier: link_tier(topo, node, p.peer),
                    tx_bytes,
                    utilization: tx_bytes as f64 * 8e12 / (rate_bps as f64 * interval_ps),
                });
            }
        }
    }
}
