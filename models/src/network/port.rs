//! Ports: a node's egress queues per priority, serialisation onto the link,
//! the PFC pause state the peer imposes, and the HPCC telemetry stamp.
//!
//! A busy port with a queue keeps exactly one pending `TxDone` for when it
//! frees up; a packet put on the wire is one `Arrive` event at the peer,
//! after serialisation plus link latency. What to send next is the owner's
//! choice: the switch's queues (`switch.rs`) or the NIC's flows (`nic.rs`).

use super::cc::{flow_base_rtt, IntRecords};
use super::common::{prefetch, serialization};
use super::config::{CcKind, EcnProfile, HpccUtilisation};
use super::faults::LinkHealth;
use super::nic::HostQueue;
use super::packet::{self, Packet, PacketKind, PRIORITIES, PRIO_DATA};
use super::switch::{EcnMarking, SharedBuffer};
use super::{Fabric, NetEvent, Network};
use crate::telemetry::{PfcEvent, PfcRecord, TelemetrySink};
use netsim_engine::{splitmix64, Context, NodeId, SimTime};
use std::collections::VecDeque;

/// One egress port of a node: its state by concern, each part changed by
/// the file that owns it. The ingress accounting of the same link is
/// `Network::ingress`, a dense array beside the ports (every switch hop
/// touches its in-port's; a 16-byte entry misses the cache less than a
/// whole `Port`).
#[derive(Debug)]
pub(crate) struct Port {
    /// The link and its peer (a fault may slow it).
    pub link: Link,
    /// The egress queues and the serialiser.
    pub egress: Egress,
    /// The PFC pause the peer imposes on the data class.
    pub pause: Pause,
    /// Packet, byte and drop counters, for telemetry.
    pub counters: PortCounters,
    /// HPCC's rate measurement and INT records (`transmit` stamps packets).
    pub hpcc: RateMeter,
    /// Switches: ECN marking thresholds (`switch.rs`).
    pub ecn: EcnMarking,
    /// Hosts: the NIC's queue pairs on this port and their pacing (`nic.rs`).
    pub host: HostQueue,
    /// Faults holding the link down, and its bit errors (`faults.rs`).
    pub health: LinkHealth,
}

/// Where a port's packets go, and how fast.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Link {
    pub peer: NodeId,
    pub peer_port: u16,
    pub rate_bps: u64,
    pub latency: SimTime,
}

/// A port's egress queues per priority and its serialiser.
#[derive(Debug, Default)]
pub(crate) struct Egress {
    pub queues: [PacketQueue; PRIORITIES],
    pub queued_bytes: [u64; PRIORITIES],
    /// The port is serialising until then.
    pub busy_until: SimTime,
    /// A `TxDone` is scheduled for `busy_until`.
    pub tx_pending: bool,
    /// Wire bytes of the data packet being serialised until `busy_until`
    /// (0 for a control packet): what a queue that counts the packet in
    /// service holds beyond `queued_bytes`.
    pub in_service_data_bytes: u32,
}

/// A FIFO of packets whose front packet lives in the port itself, the
/// rest in a ring buffer. A port's next `TxDone` reads its front: kept
/// apart, that read was a second cache miss after the port's own, on a
/// line last touched a whole queue of serialisation times earlier (half of
/// `switch_try_send`'s time on k=16). The packet behind is moved into the
/// front as the front leaves, while its port is being worked on anyway.
#[derive(Debug, Default)]
pub(crate) struct PacketQueue {
    /// The front packet; `None` only when `rest` is empty too.
    front: Option<Packet>,
    rest: VecDeque<Packet>,
}

impl PacketQueue {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.front.is_none()
    }

    #[inline]
    pub fn back(&self) -> Option<&Packet> {
        self.rest.back().or(self.front.as_ref())
    }

    #[inline]
    pub fn push_back(&mut self, pkt: Packet) {
        if self.front.is_none() {
            self.front = Some(pkt);
        } else {
            self.rest.push_back(pkt);
        }
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<Packet> {
        let pkt = self.front.take()?;
        self.front = self.rest.pop_front();
        Some(pkt)
    }

    /// Takes the front packet out and asks for the line of the one behind
    /// it; its place stays empty (the queue reads as empty if it was alone)
    /// until [`PacketQueue::refill_front`], which the caller makes before
    /// anything else reads the queue: a transmit later, the line is in.
    #[inline]
    pub fn take_front(&mut self) -> Option<Packet> {
        let pkt = self.front.take()?;
        if let Some(next) = self.rest.front() {
            prefetch(next);
        }
        Some(pkt)
    }

    /// Moves the packet behind into the place [`PacketQueue::take_front`] emptied.
    #[inline]
    pub fn refill_front(&mut self) {
        if self.front.is_none() {
            self.front = self.rest.pop_front();
        }
    }

    #[inline]
    pub fn pop_back(&mut self) -> Option<Packet> {
        self.rest.pop_back().or_else(|| self.front.take())
    }

    /// The packets, front first.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Packet> {
        self.front.iter_mut().chain(self.rest.iter_mut())
    }
}

/// The PFC pause state the peer imposes on the data class.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pause {
    pub paused: bool,
    pub since: SimTime,
}

/// What a port counts for the queue and link samples and the run's totals.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortCounters {
    pub tx_bytes: [u64; PRIORITIES],
    pub ecn_marked_pkts: [u64; PRIORITIES],
    pub dropped_pkts: [u64; PRIORITIES],
    /// Data packets trimmed to their header here (UEC).
    pub trimmed_pkts: u64,
    /// Packets lost to the link's error rate.
    pub error_dropped_pkts: u64,
    /// Bytes on the wire by the last link sample.
    pub sampled_tx_bytes: u64,
}

/// HPCC: bytes sent since `window_start`, the rate measured over the last
/// full window of one base RTT, and under INT deltas the last INT record
/// of each flow crossing.
#[derive(Debug, Default)]
pub(crate) struct RateMeter {
    pub window_start: SimTime,
    pub window_bytes: u64,
    pub measured_rate_bps: f64,
    pub int_records: IntRecords,
}

impl Port {
    /// An idle, empty port toward `peer`'s port `peer_port` over a link of
    /// `rate_bps` and `latency`, marking ECN by `ecn`.
    pub(crate) fn new(
        peer: NodeId,
        peer_port: u16,
        rate_bps: u64,
        latency: SimTime,
        ecn: EcnProfile,
    ) -> Port {
        Port {
            link: Link {
                peer,
                peer_port,
                rate_bps,
                latency,
            },
            egress: Egress::default(),
            pause: Pause::default(),
            counters: PortCounters::default(),
            hpcc: RateMeter::default(),
            ecn: EcnMarking {
                kmin_bytes: ecn.kmin_bytes,
                kmax_bytes: ecn.kmax_bytes,
                pmax: ecn.pmax,
            },
            host: HostQueue::new(),
            health: LinkHealth::default(),
        }
    }
}

/// The ports of the shard's nodes `nodes` (increasing ids), with where
/// each node's begin (`port_base`, one more entry than nodes), and each
/// node's shared buffer with its PFC headroom taken off.
pub(crate) fn shard_ports(
    fabric: &Fabric,
    nodes: &[NodeId],
) -> (Vec<u32>, Vec<Port>, Vec<SharedBuffer>) {
    let topo = &fabric.topo;
    let config = &fabric.config;
    let mut port_base = Vec::with_capacity(nodes.len() + 1);
    // Sized up front: growing a vector of ports reallocates and zeroes
    // pages again at each doubling.
    let port_count = nodes.iter().map(|n| topo.ports(n.0).len()).sum();
    let mut ports = Vec::with_capacity(port_count);
    let mut buffers = Vec::with_capacity(nodes.len());
    for &node in nodes {
        port_base.push(ports.len() as u32);
        let mut headroom = 0;
        for p in topo.ports(node.0) {
            let link = topo.link(p.link);
            let ecn = config.ecn_for(link.bandwidth_bps);
            // Fixed headroom, rate x latency headroom (SimAI: 3 x) and
            // the ingress reserve, all off the shared pool.
            let in_flight_bytes =
                u128::from(link.bandwidth_bps) * u128::from(link.latency_ps) / 8_000_000_000_000;
            let scaled = in_flight_bytes * u128::from(config.pfc_headroom_latency_factor);
            headroom = [
                config.pfc_headroom_bytes,
                config.pfc_reserve_bytes,
                u64::try_from(scaled).unwrap_or(u64::MAX),
            ]
            .into_iter()
            .fold(headroom, u64::saturating_add);
            let mut port = Port::new(
                NodeId(p.peer),
                p.peer_port,
                link.bandwidth_bps,
                SimTime(link.latency_ps),
                ecn,
            );
            // Bit errors on every link (the flag) and on this one (a SimAI
            // file's error_rate column), independent of each other.
            let loss = 1.0 - (1.0 - config.link_error_rate) * (1.0 - topo.link_error_rate(p.link));
            if loss > 0.0 {
                // Each link direction draws from its own stream.
                let direction = u64::from(link.a != node.0);
                let mut seed =
                    fabric.seed ^ (u64::from(p.link) << 1 | direction) ^ 0x1055_E7E5 << 32;
                port.health.error_rng = netsim_engine::splitmix64(&mut seed);
                port.health.error_threshold = (loss * 18_446_744_073_709_551_616.0) as u64;
            }
            ports.push(port);
        }
        buffers.push(SharedBuffer {
            used_bytes: 0,
            headroom_bytes: headroom,
        });
    }
    port_base.push(ports.len() as u32);
    (port_base, ports, buffers)
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Whether port `port` can start a packet now. When it is still
    /// serialising, makes sure one `TxDone` will call again when it is free.
    #[inline]
    pub(crate) fn port_ready(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        gport: usize,
        port: u16,
    ) -> bool {
        let p = &mut self.ports[gport];
        if p.egress.tx_pending || p.health.down_causes != 0 {
            return false;
        }
        if ctx.now() >= p.egress.busy_until {
            return true;
        }
        p.egress.tx_pending = true;
        ctx.schedule_self(p.egress.busy_until - ctx.now(), NetEvent::TxDone { port });
        false
    }

    /// Serialises `pkt` on port `gport` from now on. The packet's arrival at
    /// the peer is the only event it needs: serialisation plus latency.
    #[inline]
    pub(crate) fn transmit(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        gport: usize,
        mut pkt: Packet,
    ) {
        let config = &self.fabric.config;
        let stamp = config.cc == CcKind::Hpcc && !self.is_host(ctx.node());
        let p = &mut self.ports[gport];
        debug_assert!(ctx.now() >= p.egress.busy_until && !p.egress.tx_pending);
        if stamp && config.hpcc.utilisation == HpccUtilisation::IntDelta {
            if pkt.kind == PacketKind::Data {
                let fabric = self.fabric;
                let (src, dst) = (pkt.src, pkt.dst);
                let u = p.hpcc.int_records.stamp(
                    pkt.flow,
                    ctx.now(),
                    p.counters.tx_bytes.iter().sum(),
                    p.egress.queued_bytes.iter().sum(),
                    p.link.rate_bps,
                    pkt.last,
                    || flow_base_rtt(fabric, src, dst),
                );
                if let Some(u) = u {
                    let util = (u * packet::UTIL_ONE).min(f64::from(u16::MAX)) as u16;
                    pkt.util = pkt.util.max(util);
                }
            }
        } else if stamp {
            let now = ctx.now();
            let t = config.hpcc.base_rtt;
            let elapsed = now - p.hpcc.window_start;
            if elapsed >= t {
                p.hpcc.measured_rate_bps =
                    p.hpcc.window_bytes as f64 * 8e12 / elapsed.as_ps() as f64;
                p.hpcc.window_start = now;
                p.hpcc.window_bytes = 0;
            }
            p.hpcc.window_bytes += u64::from(pkt.wire_bytes);
            if pkt.kind == PacketKind::Data {
                let rate = p.link.rate_bps as f64;
                let queue_bits = (p.egress.queued_bytes[PRIO_DATA] * 8) as f64;
                let u =
                    queue_bits * 1e12 / (rate * t.as_ps() as f64) + p.hpcc.measured_rate_bps / rate;
                let util = (u * packet::UTIL_ONE).min(f64::from(u16::MAX)) as u16;
                pkt.util = pkt.util.max(util);
            }
        }
        p.counters.tx_bytes[pkt.priority()] += u64::from(pkt.wire_bytes);
        let serialization = serialization(u64::from(pkt.wire_bytes), p.link.rate_bps);
        p.egress.busy_until = ctx.now() + serialization;
        if p.health.error_threshold != 0
            && splitmix64(&mut p.health.error_rng) < p.health.error_threshold
        {
            // Corrupted on the wire: the peer discards it.
            p.counters.error_dropped_pkts += 1;
            return;
        }
        let (peer, peer_port, delay) = (
            p.link.peer,
            p.link.peer_port,
            serialization + p.link.latency,
        );
        ctx.send(
            peer,
            delay,
            NetEvent::Arrive {
                port: peer_port,
                pkt,
            },
        );
        self.rail_mirror(ctx, &pkt, delay);
    }

    /// Port `port` finished serialising: its owner sends the next packet.
    pub(crate) fn tx_done(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let gport = self.port_index(ctx.local_index(), port);
        self.ports[gport].egress.tx_pending = false;
        if self.is_host(ctx.node()) {
            self.host_try_send(ctx, port);
        } else {
            self.switch_try_send(ctx, port);
        }
    }

    /// A PFC frame from the peer pauses or resumes the data class of port
    /// `port`; the change is recorded in the `pfc` table.
    pub(crate) fn pfc_frame(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16, pause: bool) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let now = ctx.now();
        self.memo_pfc(now);
        let p = &mut self.ports[gport];
        if p.pause.paused == pause || p.health.down_causes != 0 {
            return;
        }
        p.pause.paused = pause;
        self.stats.pfc_pauses += u64::from(pause);
        let duration_ns = if pause {
            p.pause.since = now;
            None
        } else {
            Some((now - p.pause.since).as_ns())
        };
        self.sink.pfc(PfcRecord {
            time_ns: now.as_ns(),
            node: ctx.node().0,
            port: u32::from(port),
            priority: PRIO_DATA as u8,
            event: if pause {
                PfcEvent::Pause
            } else {
                PfcEvent::Resume
            },
            duration_ns,
        });
        if !pause {
            if self.is_host(ctx.node()) {
                self.host_try_send(ctx, port);
            } else {
                self.switch_try_send(ctx, port);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_engine::NodeRng;

    /// Seeded random pushes, pops from either end and the switch's
    /// take-then-refill against a `VecDeque`: the same packets in the same
    /// order, the same emptiness, through fills and drains.
    #[test]
    fn packet_queue_matches_a_vecdeque() {
        for seed in 0..10 {
            let mut rng = NodeRng::new(seed, NodeId(3));
            let mut queue = PacketQueue::default();
            let mut reference = VecDeque::new();
            for psn in 0..5_000 {
                match rng.below(8) {
                    0..=3 => {
                        queue.push_back(Packet::test_data(1, psn));
                        reference.push_back(Packet::test_data(1, psn));
                    }
                    4 | 5 => assert_eq!(queue.pop_front(), reference.pop_front()),
                    6 => {
                        assert_eq!(queue.take_front(), reference.pop_front());
                        queue.refill_front();
                    }
                    _ => assert_eq!(queue.pop_back(), reference.pop_back()),
                }
                assert_eq!(queue.is_empty(), reference.is_empty());
                assert_eq!(queue.back(), reference.back());
                let psns: Vec<u32> = queue.iter_mut().map(|p| p.psn).collect();
                let expected: Vec<u32> = reference.iter().map(|p| p.psn).collect();
                assert_eq!(psns, expected);
            }
        }
    }
}
