//! What the network writes to the telemetry sink besides PFC events: queue
//! samples (`queues`), link samples (`links`) and flow records (`flows`).
//!
//! Samples are taken without events: a node's ports change only when it
//! handles an event, so before handling one at time `t` the node writes the
//! samples due up to `t`, and `finish` writes the rest.
//!
//! Idle rows: unless the configuration keeps them, a queue row that would
//! repeat the previous one of its port and priority with nothing queued and
//! no pause (so nothing sent, marked, dropped or trimmed in between) and a
//! link row with no bytes are left out; a missing row reads as "as before,
//! idle" (docs/reference/telemetry.md says how to fill the gaps).
//!
//! Link samples: a port counts a packet's bytes when it starts serialising
//! it. At a sampling instant the part of the packet still to go is taken
//! back out, pro rata, so an interval holds exactly the bytes that crossed
//! the wire in it and a line-rate link reads 1, never more but for the
//! byte a jump's interpolated counters may round over (fast_forward/jumps.rs).

use super::packet::{PRIORITIES, PRIO_DATA};
use super::port::Port;
use super::transport::Qp;
use super::Network;
use crate::telemetry::{FlowRecord, LinkSample, QueueSample, TelemetrySink};
use netsim_engine::{NodeId, SimTime};
use netsim_topo::{Role, Topology};

/// `<src role>-<dst role>` for every pair of roles, indexed like [`Role::ALL`].
const TIERS: [[&str; 6]; 6] = [
    [
        "host-host",
        "host-nvswitch",
        "host-tor",
        "host-agg",
        "host-core",
        "host-router",
    ],
    [
        "nvswitch-host",
        "nvswitch-nvswitch",
        "nvswitch-tor",
        "nvswitch-agg",
        "nvswitch-core",
        "nvswitch-router",
    ],
    [
        "tor-host",
        "tor-nvswitch",
        "tor-tor",
        "tor-agg",
        "tor-core",
        "tor-router",
    ],
    [
        "agg-host",
        "agg-nvswitch",
        "agg-tor",
        "agg-agg",
        "agg-core",
        "agg-router",
    ],
    [
        "core-host",
        "core-nvswitch",
        "core-tor",
        "core-agg",
        "core-core",
        "core-router",
    ],
    [
        "router-host",
        "router-nvswitch",
        "router-tor",
        "router-agg",
        "router-core",
        "router-router",
    ],
];

/// The tier of the link direction from `src` to `dst`: `<src role>-<dst
/// role>` (`host-tor` up, `tor-host` down, ...), except between dragonfly
/// routers, where `local` (one group) and `global` (two groups) say more.
pub fn link_tier(topo: &Topology, src: u32, dst: u32) -> &'static str {
    let (a, b) = (topo.node(src), topo.node(dst));
    if a.role == Role::Router && b.role == Role::Router {
        return if a.coords.group == b.coords.group {
            "local"
        } else {
            "global"
        };
    }
    let index = |role| {
        Role::ALL
            .iter()
            .position(|&r| r == role)
            .expect("Role::ALL lists every role")
    };
    TIERS[index(a.role)][index(b.role)]
}

impl Port {
    /// Bytes this port has put on the wire by `at`: everything it started
    /// (`tx_bytes`, its entry of `Network::tx_bytes`), less what is still
    /// to serialise of the packet in flight.
    pub(super) fn wire_bytes_by(&self, tx_bytes: &[u64; PRIORITIES], at: SimTime) -> u64 {
        let started: u64 = tx_bytes.iter().sum();
        if self.egress.busy_until <= at {
            return started;
        }
        let left_ps = u128::from((self.egress.busy_until - at).as_ps());
        let left_bytes = (left_ps * u128::from(self.link.rate_bps)).div_ceil(8_000_000_000_000);
        // Saturating: a port a domain's jump moved is busy past a check
        // inside that jump by up to the jump (docs/design/fast-forward.md).
        started.saturating_sub(left_bytes as u64)
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Writes the samples of local node `local` due at or before `now`:
    /// queues of switches, links of every node.
    pub(crate) fn sample_until(&mut self, local: usize, now: SimTime) {
        let period = self.fabric.config.sample_period;
        let node = self.nodes[local].0;
        let (lo, hi) = (
            self.port_base[local] as usize,
            self.port_base[local + 1] as usize,
        );
        // Queues are sampled at switches only: a host's data waits in its
        // flows, not in a port queue.
        let queue_ports = if self.is_host(NodeId(node)) {
            lo..lo
        } else {
            lo..hi
        };
        while self.next_sample[local] <= now {
            let at = self.next_sample[local];
            if self.idle_rows.quiet[local] {
                // Every row up to `now` would be idle: skip the instants.
                let periods = (now - at).as_ps() / period.as_ps() + 1;
                self.next_sample[local] = at + SimTime(periods * period.as_ps());
                break;
            }
            if at > SimTime::ZERO {
                self.sample_links(local, at - period, at);
            }
            let time_ns = at.as_ns();
            for (port, p) in self.ports[queue_ports.clone()].iter().enumerate() {
                let gport = lo + port;
                let counters = &self.port_side[gport].counters;
                for prio in 0..PRIORITIES {
                    let sample = QueueSample {
                        time_ns,
                        node,
                        port: port as u32,
                        priority: prio as u8,
                        qlen_bytes: p.egress.queued_bytes[prio],
                        tx_bytes: self.tx_bytes(gport)[prio]
                            - self.ff.unsent_bytes(gport, prio, at),
                        ecn_marked_pkts: counters.ecn_marked_pkts[prio],
                        dropped_pkts: counters.dropped_pkts[prio],
                        trimmed_pkts: if prio == PRIO_DATA {
                            counters.trimmed_pkts
                        } else {
                            0
                        },
                        paused: prio == PRIO_DATA && p.paused,
                    };
                    if self.idle_rows.changed(gport, prio, &sample) {
                        self.sink.queue(sample);
                    }
                }
            }
            // Replays wholly on the wire by now are in `tx_bytes` alone.
            for gport in lo..hi {
                self.ff.sampled(gport, at);
            }
            self.next_sample[local] += period;
            let ports = &self.ports[lo..hi];
            self.idle_rows.quiet[local] = self.idle_rows.fast
                && ports.iter().all(|p| {
                    p.egress.busy_until <= at
                        && p.egress.queued_bytes.iter().all(|&q| q == 0)
                        && !p.paused
                });
        }
    }

    /// Records every flow of this shard that did not finish, in the order
    /// of their source node, then flow id: started and unfinished, and
    /// without tasks the flows that never started (a workload's flows
    /// whose dependencies never completed did not exist yet).
    pub(super) fn record_unfinished(&mut self) {
        let mut unfinished: Vec<(u32, u32, usize)> = (self.transport.senders.iter().enumerate())
            .filter(|(_, s)| s.start != SimTime::MAX && s.end.is_none())
            .map(|(i, s)| (s.spec.src, s.flow, i))
            .collect();
        for k in 0..self.transport.traffic.len() {
            let flow = self.transport.traffic[k];
            if !self.transport.started(flow) {
                let spec = self.fabric.workload.flows[flow as usize];
                let i = self.transport.open(flow, spec, None, self.fabric);
                let s = &self.transport.senders[i];
                unfinished.push((s.spec.src, flow, i));
            }
        }
        unfinished.sort_unstable();
        for (_, _, i) in unfinished {
            self.record_flow(i);
        }
    }

    /// Writes sender `i`'s row of the flows table.
    pub(crate) fn record_flow(&mut self, i: usize) {
        let s = &self.transport.senders[i];
        let start_ns = s.start.as_ns();
        let end_ns = s.end.map(SimTime::as_ns);
        let fct_ns = s.end.map(|e| (e - s.start).as_ns());
        let ideal_fct_ns = s.ideal_fct.as_ns();
        let uec = match &s.qp {
            Qp::Uec(u) => Some(u),
            Qp::Roce(_) => None,
        };
        let (collective_id, job) = (self.flow_collective(s.flow), self.flow_job(s.flow));
        self.sink.flow(FlowRecord {
            flow_id: s.flow,
            src: s.spec.src,
            dst: s.spec.dst,
            size_bytes: s.spec.size_bytes,
            start_ns,
            end_ns,
            fct_ns,
            ideal_fct_ns,
            slowdown: fct_ns
                .filter(|_| ideal_fct_ns > 0)
                .map(|f| f as f64 / ideal_fct_ns as f64),
            ecmp_path: s.path_hash,
            ecn_marked_pkts: s.ecn_marked_pkts,
            cnps: s.cnps,
            retransmitted_pkts: s.retransmitted_pkts,
            skipped_bytes: s.skipped_bytes,
            skipped_ns: s.skipped.as_ns(),
            trimmed_pkts: uec.map_or(0, |u| u.trimmed_pkts),
            sacks: uec.map_or(0, |u| u.sacks),
            paths_used: uec.map_or(1, |u| u.paths_used()),
            finished: s.end.is_some(),
            collective_id,
            job,
            reason: match (s.end, s.gave_up) {
                (Some(_), _) => None,
                (None, true) => Some("retry-limit"),
                (None, false) => Some("time-limit"),
            },
        });
    }

    /// Writes one row per port of local node `local` for the interval
    /// `(from, to]`, which must be non-empty and follow the previous one.
    pub(super) fn sample_links(&mut self, local: usize, from: SimTime, to: SimTime) {
        debug_assert!(from < to);
        let topo = &self.fabric.topo;
        let node = self.nodes[local].0;
        let (lo, hi) = (
            self.port_base[local] as usize,
            self.port_base[local + 1] as usize,
        );
        let interval_ps = (to - from).as_ps() as f64;
        for (port, p) in self.ports[lo..hi].iter().enumerate() {
            let gport = lo + port;
            let replayed: u64 = (0..PRIORITIES)
                .map(|prio| self.ff.unsent_bytes(gport, prio, to))
                .sum();
            let sent = p.wire_bytes_by(&self.tx_bytes(gport), to) - replayed;
            let counters = &mut self.port_side[gport].counters;
            let tx_bytes = sent - counters.sampled_tx_bytes;
            counters.sampled_tx_bytes = sent;
            if tx_bytes == 0 && !self.idle_rows.keep {
                continue;
            }
            self.sink.link(LinkSample {
                time_ns: to.as_ns(),
                interval_ns: to.as_ns() - from.as_ns(),
                link: topo.port(node, port as u16).link,
                src: node,
                src_port: port as u32,
                dst: p.link.peer.0,
                tier: link_tier(topo, node, p.link.peer.0),
                tx_bytes,
                utilization: tx_bytes as f64 * 8e12 / (p.link.rate_bps as f64 * interval_ps),
            });
        }
    }
}

/// The counters of the last queue row written per port and priority, to
/// leave out rows of idle queues.
#[derive(Debug)]
pub(super) struct IdleRows {
    /// Write every row (`keep_idle_rows`).
    pub(super) keep: bool,
    /// Per shard port and priority: `tx_bytes`, `ecn_marked_pkts`,
    /// `dropped_pkts`, `trimmed_pkts` of its last row (zero before any);
    /// empty when `keep`.
    last: Vec<[[u64; 4]; PRIORITIES]>,
    /// Idle rows are left out and only a node's own events change its
    /// ports (no fast-forward, whose jumps and replays move counters).
    fast: bool,
    /// Per local node: at its last sampling instant every port was empty,
    /// unpaused and off the wire, and it has handled no event since, so
    /// every row it would write until its next event is idle.
    pub(super) quiet: Vec<bool>,
}

impl IdleRows {
    /// For `nodes` local nodes with `ports` ports (0: sampling off);
    /// `fast_forward`: whether jumps or replays may move counters.
    pub(super) fn new(keep: bool, fast_forward: bool, nodes: usize, ports: usize) -> IdleRows {
        let fast = !keep && !fast_forward && ports > 0;
        IdleRows {
            keep,
            last: if keep {
                Vec::new()
            } else {
                vec![[[0; 4]; PRIORITIES]; ports]
            },
            fast,
            quiet: vec![false; nodes],
        }
    }

    /// Local node `local` handles an event: its ports may change.
    #[inline]
    pub(super) fn touched(&mut self, local: usize) {
        if self.fast {
            self.quiet[local] = false;
        }
    }

    /// Whether `sample` of shard port `gport` must be written: always when
    /// kept, else when its queue holds bytes, is paused, or a counter moved
    /// since the port's last row (which it then becomes).
    fn changed(&mut self, gport: usize, prio: usize, sample: &QueueSample) -> bool {
        if self.keep {
            return true;
        }
        let counts = [
            sample.tx_bytes,
            sample.ecn_marked_pkts,
            sample.dropped_pkts,
            sample.trimmed_pkts,
        ];
        let last = &mut self.last[gport][prio];
        if sample.qlen_bytes == 0 && !sample.paused && *last == counts {
            return false;
        }
        *last = counts;
        true
    }
}
