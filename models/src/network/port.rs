//! Ports: a node's egress queues per priority, serialisation onto the link,
//! the PFC pause state the peer imposes, and the HPCC telemetry stamp.
//!
//! A busy port with a queue keeps exactly one pending `TxDone` for when it
//! frees up; a packet put on the wire is one `Arrive` event at the peer,
//! after serialisation plus link latency. What to send next is the owner's
//! choice: the switch's queues (`switch.rs`) or the NIC's flows (`nic.rs`).

use super::cc::{flow_base_rtt, IntRecords};
use super::common::{prefetch, serialization};
use super::config::{CcKind, HpccUtilisation};
use super::faults::LinkHealth;
use super::packet::{self, Packet, PacketKind, PRIORITIES, PRIO_DATA};
use super::switch::{EcnMarking, SharedBuffer};
use super::{Fabric, NetEvent, Network};
use crate::telemetry::{PfcEvent, PfcRecord, TelemetrySink};
use netsim_engine::{splitmix64, Context, NodeId, SimTime};
use std::collections::VecDeque;

/// One egress port of a node: what a packet crossing it reads, in three
/// cache lines. The first holds the link, the serialiser's state, the
/// peer's pause and whether a fault holds the link down; each priority's
/// queue has a line of its own (its front packet and the ring's header).
/// What no per-packet step reads lives in side arrays by the same index
/// (`Network::port_side`, `tx_bytes`, `ecn`, `hosts`, `health`): with them
/// in, a port was 464 bytes, and on k=16 the out-port's first line was
/// the largest miss of a switch hop (two thirds of `switch_enqueue`).
/// The ingress accounting of the same link is `Network::ingress`.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Port {
    /// The link and its peer (a fault may slow it).
    pub link: Link,
    /// The serialiser and the bytes queued.
    pub egress: Egress,
    /// The peer paused the data class (PFC); since when is in `PortSide`.
    pub paused: bool,
    /// Faults holding the link down, 0 when it works (`faults.rs`; the
    /// rest of the link's health is `Network::health`).
    pub down_causes: u8,
    /// The egress queues per priority, a cache line each.
    pub queues: [PacketQueue; PRIORITIES],
}

// The layout the comment above promises: a first line of state, then the
// queues on lines of their own.
const _: () = assert!(std::mem::size_of::<Port>() == 192);
const _: () = assert!(std::mem::offset_of!(Port, queues) == 64);

/// The port's state that no per-packet step reads (rarely, or only under
/// HPCC): counters for telemetry, when the peer's pause began, HPCC's meter.
#[derive(Debug, Default)]
pub(crate) struct PortSide {
    /// Packet and drop counters, for telemetry (bytes sent: `Network::tx_bytes`).
    pub counters: PortCounters,
    /// When the current PFC pause began (`Port::paused`).
    pub pause_since: SimTime,
    /// HPCC's rate measurement and INT records (`transmit` stamps packets).
    pub hpcc: RateMeter,
}

/// Where a port's packets go, and how fast.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Link {
    pub peer: NodeId,
    pub peer_port: u16,
    pub rate_bps: u64,
    pub latency: SimTime,
}

/// A port's serialiser and the bytes in its egress queues per priority
/// (0 exactly when the queue is empty: every packet has wire bytes).
#[derive(Debug, Default)]
pub(crate) struct Egress {
    pub queued_bytes: [u64; PRIORITIES],
    /// The port is serialising until then.
    pub busy_until: SimTime,
    /// A `TxDone` is scheduled for `busy_until`.
    pub tx_pending: bool,
    /// Wire bytes of the data packet being serialised until `busy_until`
    /// (0 for a control packet): what a queue that counts the packet in
    /// service holds beyond `queued_bytes`.
    pub in_service_data_bytes: u32,
    /// Bit `prio` set: that queue holds a packet (kept by `Port`'s queue
    /// methods, so that a sender learns it without the queue's line).
    pub nonempty: u8,
}

/// A FIFO of packets whose front packet lives in the port itself, the
/// rest in a ring buffer. A port's next `TxDone` reads its front: kept
/// apart, that read was a second cache miss after the port's own, on a
/// line last touched a whole queue of serialisation times earlier (half of
/// `switch_try_send`'s time on k=16). The packet behind is moved into the
/// front as the front leaves, while its port is being worked on anyway.
/// A queue fills one cache line of its port.
#[derive(Debug, Default)]
#[repr(align(64))]
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

/// What a port counts for the queue and link samples and the run's totals
/// besides the bytes it sent (`Network::tx_bytes`, added to by every
/// transmit, dense).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortCounters {
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
    /// `rate_bps` and `latency`.
    pub(crate) fn new(peer: NodeId, peer_port: u16, rate_bps: u64, latency: SimTime) -> Port {
        Port {
            link: Link {
                peer,
                peer_port,
                rate_bps,
                latency,
            },
            egress: Egress::default(),
            paused: false,
            down_causes: 0,
            queues: Default::default(),
        }
    }

    /// Whether priority `prio`'s queue holds a packet (from the first line).
    #[inline]
    pub(crate) fn has_queued(&self, prio: usize) -> bool {
        self.egress.nonempty & 1 << prio != 0
    }

    /// Whether any queue holds a packet (from the first line).
    #[inline]
    pub(crate) fn any_queued(&self) -> bool {
        self.egress.nonempty != 0
    }

    /// Keeps `nonempty`'s bit for `prio` in step with its queue.
    #[inline]
    fn note_queue(&mut self, prio: usize) {
        let bit = 1 << prio;
        if self.queues[prio].is_empty() {
            self.egress.nonempty &= !bit;
        } else {
            self.egress.nonempty |= bit;
        }
    }

    /// Queues `pkt` at the back of priority `prio`.
    #[inline]
    pub(crate) fn push_back(&mut self, prio: usize, pkt: Packet) {
        self.queues[prio].push_back(pkt);
        self.egress.nonempty |= 1 << prio;
    }

    /// The front packet of priority `prio`, taken out.
    #[inline]
    pub(crate) fn pop_front(&mut self, prio: usize) -> Option<Packet> {
        let pkt = self.queues[prio].pop_front();
        self.note_queue(prio);
        pkt
    }

    /// The newest packet of priority `prio`, taken out.
    #[inline]
    pub(crate) fn pop_back(&mut self, prio: usize) -> Option<Packet> {
        let pkt = self.queues[prio].pop_back();
        self.note_queue(prio);
        pkt
    }

    /// [`PacketQueue::take_front`] of priority `prio`; the queue's bit
    /// stays until [`Port::refill_front`].
    #[inline]
    pub(crate) fn take_front(&mut self, prio: usize) -> Option<Packet> {
        self.queues[prio].take_front()
    }

    /// [`PacketQueue::refill_front`] of priority `prio`.
    #[inline]
    pub(crate) fn refill_front(&mut self, prio: usize) {
        self.queues[prio].refill_front();
        self.note_queue(prio);
    }
}

/// A shard's ports and, by the same index, their side arrays.
pub(crate) struct ShardPorts {
    /// Where each node's ports begin (one more entry than nodes).
    pub port_base: Vec<u32>,
    pub ports: Vec<Port>,
    /// Per node, its shared buffer with its PFC headroom taken off.
    pub buffers: Vec<SharedBuffer>,
    /// Per port, its ECN marking thresholds.
    pub ecn: Vec<EcnMarking>,
    /// Per port, its link's health besides `down_causes` (bit errors).
    pub health: Vec<LinkHealth>,
    /// Some port's link loses packets to bit errors.
    pub lossy: bool,
}

/// The ports of the shard's nodes `nodes` (increasing ids).
pub(crate) fn shard_ports(fabric: &Fabric, nodes: &[NodeId]) -> ShardPorts {
    let topo = &fabric.topo;
    let config = &fabric.config;
    let mut port_base = Vec::with_capacity(nodes.len() + 1);
    // Sized up front: growing a vector of ports reallocates and zeroes
    // pages again at each doubling.
    let port_count = nodes.iter().map(|n| topo.ports(n.0).len()).sum();
    let mut ports = Vec::with_capacity(port_count);
    let mut ecns = Vec::with_capacity(port_count);
    let mut healths = Vec::with_capacity(port_count);
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
            ports.push(Port::new(
                NodeId(p.peer),
                p.peer_port,
                link.bandwidth_bps,
                SimTime(link.latency_ps),
            ));
            ecns.push(EcnMarking {
                kmin_bytes: ecn.kmin_bytes,
                kmax_bytes: ecn.kmax_bytes,
                pmax: ecn.pmax,
            });
            let mut health = LinkHealth::default();
            // Bit errors on every link (the flag) and on this one (a SimAI
            // file's error_rate column), independent of each other.
            let loss = 1.0 - (1.0 - config.link_error_rate) * (1.0 - topo.link_error_rate(p.link));
            if loss > 0.0 {
                // Each link direction draws from its own stream.
                let direction = u64::from(link.a != node.0);
                let mut seed =
                    fabric.seed ^ (u64::from(p.link) << 1 | direction) ^ 0x1055_E7E5 << 32;
                health.error_rng = netsim_engine::splitmix64(&mut seed);
                health.error_threshold = (loss * 18_446_744_073_709_551_616.0) as u64;
            }
            healths.push(health);
        }
        buffers.push(SharedBuffer {
            used_bytes: 0,
            headroom_bytes: headroom,
        });
    }
    port_base.push(ports.len() as u32);
    let lossy = healths.iter().any(|h| h.error_threshold != 0);
    ShardPorts {
        port_base,
        ports,
        buffers,
        ecn: ecns,
        health: healths,
        lossy,
    }
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
        if p.egress.tx_pending || p.down_causes != 0 {
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
        let now = ctx.now();
        let p = &self.ports[gport];
        debug_assert!(now >= p.egress.busy_until && !p.egress.tx_pending);
        if stamp {
            self.hpcc_stamp(gport, now, &mut pkt);
        }
        let p = &mut self.ports[gport];
        self.tx_bytes[gport][pkt.priority()] += u64::from(pkt.wire_bytes);
        let serialization = serialization(u64::from(pkt.wire_bytes), p.link.rate_bps);
        p.egress.busy_until = now + serialization;
        let (peer, latency, peer_port) = (p.link.peer, p.link.latency, p.link.peer_port);
        if self.lossy_links {
            let health = &mut self.health[gport];
            if health.error_threshold != 0
                && splitmix64(&mut health.error_rng) < health.error_threshold
            {
                // Corrupted on the wire: the peer discards it.
                self.port_side[gport].counters.error_dropped_pkts += 1;
                return;
            }
        }
        let delay = serialization + latency;
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

    /// HPCC: stamps data packet `pkt` leaving port `gport` at `now` with
    /// the link's utilisation (windowed rate, or INT deltas), and counts
    /// its bytes in the port's window.
    fn hpcc_stamp(&mut self, gport: usize, now: SimTime, pkt: &mut Packet) {
        let config = &self.fabric.config;
        let p = &self.ports[gport];
        let meter = &mut self.port_side[gport].hpcc;
        if config.hpcc.utilisation == HpccUtilisation::IntDelta {
            if pkt.kind == PacketKind::Data {
                let fabric = self.fabric;
                let (src, dst) = (pkt.src, pkt.dst);
                let u = meter.int_records.stamp(
                    pkt.flow,
                    now,
                    self.tx_bytes[gport].iter().sum(),
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
            return;
        }
        let t = config.hpcc.base_rtt;
        let elapsed = now - meter.window_start;
        if elapsed >= t {
            meter.measured_rate_bps = meter.window_bytes as f64 * 8e12 / elapsed.as_ps() as f64;
            meter.window_start = now;
            meter.window_bytes = 0;
        }
        meter.window_bytes += u64::from(pkt.wire_bytes);
        if pkt.kind == PacketKind::Data {
            let rate = p.link.rate_bps as f64;
            let queue_bits = (p.egress.queued_bytes[PRIO_DATA] * 8) as f64;
            let u = queue_bits * 1e12 / (rate * t.as_ps() as f64) + meter.measured_rate_bps / rate;
            let util = (u * packet::UTIL_ONE).min(f64::from(u16::MAX)) as u16;
            pkt.util = pkt.util.max(util);
        }
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
        if p.paused == pause || p.down_causes != 0 {
            return;
        }
        p.paused = pause;
        self.stats.pfc_pauses += u64::from(pause);
        if pause {
            self.rail_paused(ctx.node().0, port);
        }
        let since = &mut self.port_side[gport].pause_since;
        let duration_ns = if pause {
            *since = now;
            None
        } else {
            Some((now - *since).as_ns())
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

    /// A port's `nonempty` bits, which switch senders read instead of the
    /// queues' lines, say exactly which of its queues hold packets through
    /// seeded random pushes and pops at both priorities.
    #[test]
    fn port_bits_follow_its_queues() {
        for seed in 0..10 {
            let mut rng = NodeRng::new(seed, NodeId(5));
            let mut port = Port::new(NodeId(1), 0, 100_000_000_000, SimTime(1_000));
            let mut reference = [VecDeque::new(), VecDeque::new()];
            for psn in 0..5_000 {
                let prio = rng.below(2) as usize;
                match rng.below(8) {
                    0..=3 => {
                        port.push_back(prio, Packet::test_data(1, psn));
                        reference[prio].push_back(Packet::test_data(1, psn));
                    }
                    4 => assert_eq!(port.pop_front(prio), reference[prio].pop_front()),
                    5 | 6 => {
                        assert_eq!(port.take_front(prio), reference[prio].pop_front());
                        port.refill_front(prio);
                    }
                    _ => assert_eq!(port.pop_back(prio), reference[prio].pop_back()),
                }
                for (prio, queue) in reference.iter().enumerate() {
                    assert_eq!(port.has_queued(prio), !queue.is_empty());
                }
                assert_eq!(port.any_queued(), reference.iter().any(|q| !q.is_empty()));
            }
        }
    }

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
