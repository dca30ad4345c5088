//! Ports: a node's egress queues per priority, serialisation onto the link,
//! the PFC pause state the peer imposes, and the HPCC telemetry stamp.
//!
//! A busy port with a queue keeps exactly one pending `TxDone` for when it
//! frees up; a packet put on the wire is one `Arrive` event at the peer,
//! after serialisation plus link latency. What to send next is the owner's
//! choice: the switch's queues (`switch.rs`) or the NIC's flows (`nic.rs`).

use super::cc::{flow_base_rtt, IntRecords};
use super::config::{CcKind, EcnProfile, HpccUtilisation};
use super::nic::HostQueue;
use super::packet::{self, Packet, PacketKind, PRIORITIES, PRIO_DATA};
use super::switch::Ingress;
use super::{NetEvent, Network};
use crate::telemetry::{PfcEvent, PfcRecord, TelemetrySink};
use netsim_engine::{splitmix64, Context, NodeId, SimTime};
use std::collections::VecDeque;

/// Bytes a memo replay moved through a port, spread evenly over the
/// interval its record's port was busy: from the first start of a flow
/// crossing it to its last bit (DESIGN.md §3c, "Replay").
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplayedBytes {
    pub from: SimTime,
    pub to: SimTime,
    pub bytes: [u64; PRIORITIES],
}

impl ReplayedBytes {
    /// Of priority `prio`'s bytes, those still to go at `at`.
    pub fn unsent(&self, prio: usize, at: SimTime) -> u64 {
        let bytes = self.bytes[prio];
        if at >= self.to {
            return 0;
        }
        if at <= self.from {
            return bytes;
        }
        let gone = u128::from(bytes) * u128::from((at - self.from).as_ps())
            / u128::from((self.to - self.from).as_ps());
        bytes - gone as u64
    }
}

/// One egress port of a node, and the ingress accounting of the same link.
#[derive(Debug)]
pub(crate) struct Port {
    pub peer: NodeId,
    pub peer_port: u16,
    pub rate_bps: u64,
    pub latency: SimTime,
    pub ecn_kmin_bytes: u64,
    pub ecn_kmax_bytes: u64,
    pub ecn_pmax: f64,
    pub queues: [VecDeque<Packet>; PRIORITIES],
    pub queued_bytes: [u64; PRIORITIES],
    /// The port is serialising until then.
    pub busy_until: SimTime,
    /// A `TxDone` is scheduled for `busy_until`.
    pub tx_pending: bool,
    /// HPCC: bytes sent since `rate_window_start`, and the rate measured
    /// over the last full window of one base RTT.
    pub rate_window_start: SimTime,
    pub rate_window_bytes: u64,
    pub measured_rate_bps: f64,
    /// HPCC under INT deltas: the last INT record of each flow crossing.
    pub int_records: IntRecords,
    /// The data class is paused by the peer's PFC.
    pub paused: bool,
    pub paused_since: SimTime,
    pub tx_bytes: [u64; PRIORITIES],
    pub ecn_marked_pkts: [u64; PRIORITIES],
    pub dropped_pkts: [u64; PRIORITIES],
    /// Data packets trimmed to their header here (UEC).
    pub trimmed_pkts: u64,
    /// Bytes on the wire by the last link sample.
    pub sampled_tx_bytes: u64,
    /// Memo replays whose bytes `tx_bytes` holds from their decision on
    /// but whose records put them on the wire later; samples take back
    /// what is still to go. Empty unless sampling.
    pub replayed: Vec<ReplayedBytes>,
    /// Switches: ingress accounting of this port for PFC.
    pub ingress: Ingress,
    /// Hosts: the NIC's queue pairs on this port and their pacing.
    pub host: HostQueue,
    /// Faults holding the link down (0: it works).
    pub down_causes: u8,
    /// When the link last failed (`ZERO` if never; a failure at time 0
    /// leaves nothing on the wire to lose).
    pub last_down: SimTime,
    /// Lossy link: a packet is lost when the link's random draw falls below
    /// this (`P * 2^64`); 0 draws nothing.
    pub error_threshold: u64,
    /// The state of this link direction's random stream.
    pub error_rng: u64,
    /// Packets lost to the link's error rate.
    pub error_dropped_pkts: u64,
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
            peer,
            peer_port,
            rate_bps,
            latency,
            ecn_kmin_bytes: ecn.kmin_bytes,
            ecn_kmax_bytes: ecn.kmax_bytes,
            ecn_pmax: ecn.pmax,
            queues: Default::default(),
            queued_bytes: [0; PRIORITIES],
            busy_until: SimTime::ZERO,
            tx_pending: false,
            rate_window_start: SimTime::ZERO,
            rate_window_bytes: 0,
            measured_rate_bps: 0.0,
            int_records: IntRecords::default(),
            paused: false,
            paused_since: SimTime::ZERO,
            tx_bytes: [0; PRIORITIES],
            ecn_marked_pkts: [0; PRIORITIES],
            dropped_pkts: [0; PRIORITIES],
            trimmed_pkts: 0,
            sampled_tx_bytes: 0,
            replayed: Vec::new(),
            ingress: Ingress::default(),
            host: HostQueue::new(),
            down_causes: 0,
            last_down: SimTime::ZERO,
            error_threshold: 0,
            error_rng: 0,
            error_dropped_pkts: 0,
        }
    }

    /// Serialisation time of `bytes` at `rate_bps`.
    #[inline]
    pub(crate) fn serialization(bytes: u64, rate_bps: u64) -> SimTime {
        SimTime(((u128::from(bytes) * 8_000_000_000_000) / u128::from(rate_bps)).max(1) as u64)
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
        if p.tx_pending || p.down_causes != 0 {
            return false;
        }
        if ctx.now() >= p.busy_until {
            return true;
        }
        p.tx_pending = true;
        ctx.schedule_self(p.busy_until - ctx.now(), NetEvent::TxDone { port });
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
        debug_assert!(ctx.now() >= p.busy_until && !p.tx_pending);
        if stamp && config.hpcc.utilisation == HpccUtilisation::IntDelta {
            if pkt.kind == PacketKind::Data {
                let fabric = self.fabric;
                let (src, dst) = (pkt.src, pkt.dst);
                let u = p.int_records.stamp(
                    pkt.flow,
                    ctx.now(),
                    p.tx_bytes.iter().sum(),
                    p.queued_bytes.iter().sum(),
                    p.rate_bps,
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
            let elapsed = now - p.rate_window_start;
            if elapsed >= t {
                p.measured_rate_bps = p.rate_window_bytes as f64 * 8e12 / elapsed.as_ps() as f64;
                p.rate_window_start = now;
                p.rate_window_bytes = 0;
            }
            p.rate_window_bytes += u64::from(pkt.wire_bytes);
            if pkt.kind == PacketKind::Data {
                let rate = p.rate_bps as f64;
                let queue_bits = (p.queued_bytes[PRIO_DATA] * 8) as f64;
                let u = queue_bits * 1e12 / (rate * t.as_ps() as f64) + p.measured_rate_bps / rate;
                let util = (u * packet::UTIL_ONE).min(f64::from(u16::MAX)) as u16;
                pkt.util = pkt.util.max(util);
            }
        }
        p.tx_bytes[pkt.priority()] += u64::from(pkt.wire_bytes);
        let serialization = Port::serialization(u64::from(pkt.wire_bytes), p.rate_bps);
        p.busy_until = ctx.now() + serialization;
        if p.error_threshold != 0 && splitmix64(&mut p.error_rng) < p.error_threshold {
            // Corrupted on the wire: the peer discards it.
            p.error_dropped_pkts += 1;
            return;
        }
        ctx.send(
            p.peer,
            serialization + p.latency,
            NetEvent::Arrive {
                port: p.peer_port,
                pkt,
            },
        );
    }

    /// Port `port` finished serialising: its owner sends the next packet.
    pub(crate) fn tx_done(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let gport = self.port_index(ctx.local_index(), port);
        self.ports[gport].tx_pending = false;
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
        let duration_ns = if pause {
            p.paused_since = now;
            None
        } else {
            Some((now - p.paused_since).as_ns())
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
