//! Host NICs: scheduling a free port over its flows (control first, then
//! data round robin, each flow paced by its rate or window) and handing
//! what arrives to the transport. A flow's sender is opened, started and
//! finished in `senders.rs`; DCQCN's reaction point (CNPs and its timers)
//! is `reaction_point.rs`. Sequence numbers and acknowledgements are the
//! transport's.
//!
//! A host port does not queue data: when it is free it pulls the next packet
//! from its flows; when none may send yet it schedules one `Wake` for the
//! earliest pacing deadline (stale ones are told apart by a generation).

mod reaction_point;
mod senders;

use super::cc::{window_bytes, CcState, IncreaseSource};
use super::common::serialization;
use super::config::{NetConfig, Transport};
use super::packet::{Packet, PacketKind, PRIO_CONTROL};
use super::transport::Sender;
use super::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::NONE as NO_TASK;
use netsim_engine::Context;
use netsim_engine::SimTime;
use reaction_point::take_rate;

/// No `Wake` pending on a host port.
pub(crate) const NO_WAKE: SimTime = SimTime::MAX;

/// A host port's share of the NIC: the queue pairs (local sender indices)
/// sending through it, whose turn is next, and the pending `Wake`.
#[derive(Debug)]
pub(crate) struct HostQueue {
    pub flows: Vec<u32>,
    pub round_robin: usize,
    /// Tells the current `Wake` from stale ones.
    pub wake_generation: u32,
    /// When the pending `Wake` fires; `NO_WAKE` if none is pending.
    pub wake_at: SimTime,
}

impl HostQueue {
    /// No queue pairs, no `Wake` pending.
    pub(crate) fn new() -> HostQueue {
        HostQueue {
            flows: Vec::new(),
            round_robin: 0,
            wake_generation: 0,
            wake_at: NO_WAKE,
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Sends the next packet on a free host port: control first, then data
    /// from the flows round robin, as their rate or window allows.
    pub(crate) fn host_try_send(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        let now = ctx.now();
        if !self.port_ready(ctx, gport, port) {
            return;
        }
        let p = &mut self.ports[gport];
        if let Some(pkt) = p.pop_front(PRIO_CONTROL) {
            p.egress.queued_bytes[PRIO_CONTROL] -= u64::from(pkt.wire_bytes);
            self.transmit(ctx, gport, pkt);
            self.host_continue(ctx, gport, port);
            return;
        }
        let host = &mut self.hosts[gport];
        if p.paused || host.flows.is_empty() {
            return;
        }
        let config = &self.fabric.config;
        let mss = f64::from(config.mtu_bytes);
        let n = host.flows.len();
        let mut earliest = NO_WAKE;
        for k in 0..n {
            let slot = (host.round_robin + k) % n;
            let i = host.flows[slot] as usize;
            let next_psn = self.transport.sendable_psn(i);
            let s = &mut self.transport.senders[i];
            if next_psn >= s.packets {
                continue;
            }
            if s.after != NO_TASK && !s.rate_taken && config.qp_rate_kept {
                take_rate(&mut self.transport, ctx, &config.dcqcn, i);
            }
            let s = &mut self.transport.senders[i];
            let ina = s.ina_op != NO_TASK;
            if ina && next_psn >= s.qp.acked() + s.ina_window {
                // Every aggregation slot of the operation is in use.
                continue;
            }
            if window_full(s, config) {
                continue;
            }
            let rate_bps = match &s.cc {
                CcState::Dcqcn(d) => d.rate_bps as u64,
                CcState::Hpcc(h) => h.rate_bps as u64,
                CcState::Timely(t) => t.rate_bps as u64,
                CcState::Dctcp(d) => {
                    let in_flight_bytes = f64::from(s.qp.in_flight()) * mss;
                    if in_flight_bytes >= d.cwnd_bytes {
                        continue;
                    }
                    s.line_rate_bps
                }
                CcState::LineRate => s.line_rate_bps,
            };
            if s.next_send > now {
                earliest = earliest.min(s.next_send);
                continue;
            }
            // A sprayed queue pair's plane is the port it leaves by.
            let plane = if s.spray_ports != 0 { port } else { 0 };
            let (psn, retransmission, entropy) = s.qp.on_send(now, ctx.rng(), plane);
            let payload = (s.spec.size_bytes - u64::from(psn) * u64::from(config.mtu_bytes))
                .min(u64::from(config.mtu_bytes));
            let wire_bytes = (payload + u64::from(config.header_bytes)) as u16;
            let (kind, flow) = if ina {
                (PacketKind::InaUp, s.ina_op)
            } else {
                (PacketKind::Data, s.flow)
            };
            let pkt = Packet {
                last: psn + 1 == s.packets,
                util: s.qp.data_util(),
                entropy,
                ..Packet::new(kind, flow, s.spec.src, s.spec.dst, psn, wire_bytes)
            };
            if retransmission {
                s.retransmitted_pkts += 1;
            } else {
                self.stats.sent_payload_bytes += payload;
            }
            s.next_send = now + serialization(u64::from(wire_bytes), rate_bps.max(1));
            if let CcState::Dcqcn(d) = &mut s.cc {
                if d.on_sent(&config.dcqcn, u64::from(wire_bytes)) {
                    d.increase(&config.dcqcn, s.line_rate_bps, IncreaseSource::Bytes);
                }
            }
            if let CcState::Timely(t) = &mut s.cc {
                t.on_sent(psn, now);
            }
            host.round_robin = if config.qp_round_robin_after_last {
                slot + 1
            } else {
                (slot + 1) % n
            };
            self.transmit(ctx, gport, pkt);
            self.host_continue(ctx, gport, port);
            return;
        }
        if earliest != NO_WAKE && earliest < host.wake_at {
            host.wake_generation = host.wake_generation.wrapping_add(1);
            host.wake_at = earliest;
            let generation = host.wake_generation;
            ctx.schedule_self(earliest - now, NetEvent::Wake { port, generation });
        }
    }

    /// A pacing deadline of host port `port` came; a `Wake` whose
    /// generation moved on was superseded by an earlier one and is ignored.
    pub(crate) fn host_wake(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        port: u16,
        generation: u32,
    ) {
        let gport = self.port_index(ctx.local_index(), port);
        let host = &mut self.hosts[gport];
        if host.wake_generation == generation {
            host.wake_at = NO_WAKE;
            self.host_try_send(ctx, port);
        }
    }

    /// After a host port started a packet: if it has more to send, come back
    /// when the port is free.
    #[inline]
    pub(crate) fn host_continue(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        gport: usize,
        port: u16,
    ) {
        if self.ports[gport].has_queued(PRIO_CONTROL) || !self.hosts[gport].flows.is_empty() {
            self.port_ready(ctx, gport, port);
        }
    }

    /// Queues a control packet at the current host toward `pkt.dst`.
    pub(crate) fn host_send_control(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let port = self.host_port_toward(ctx, &pkt);
        let gport = self.port_index(ctx.local_index(), port);
        let p = &mut self.ports[gport];
        p.egress.queued_bytes[PRIO_CONTROL] += u64::from(pkt.wire_bytes);
        p.push_back(PRIO_CONTROL, pkt);
        self.host_try_send(ctx, port);
    }

    /// A packet reached its destination host: hand it to the transport, the
    /// congestion control or the aggregation stream it belongs to.
    pub(crate) fn host_receive(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        debug_assert_eq!(pkt.dst, ctx.node().0);
        let uec = self.fabric.config.transport == Transport::Uec;
        match pkt.kind {
            PacketKind::Data if uec => self.uec_receive_data(ctx, pkt),
            PacketKind::Data => self.receive_data(ctx, pkt),
            PacketKind::Nack if uec => self.uec_receive_feedback(ctx, pkt),
            PacketKind::Sack => self.uec_receive_feedback(ctx, pkt),
            PacketKind::Trimmed => self.uec_receive_trimmed(ctx, pkt),
            PacketKind::Probe => self.uec_receive_probe(ctx, pkt),
            PacketKind::ProbeAck => self.uec_receive_feedback(ctx, pkt),
            PacketKind::Credit => self.uec_receive_credit(ctx, pkt),
            PacketKind::Ack | PacketKind::Nack => self.receive_ack(ctx, pkt),
            PacketKind::Cnp => self.receive_cnp(ctx, pkt),
            PacketKind::InaDown => self.ina_result(ctx, pkt),
            PacketKind::External => self.external_receive(ctx, pkt),
            PacketKind::InaUp => unreachable!("aggregation packets go up to switches"),
        }
    }
}

/// HAS_WIN / VAR_WIN: whether sender `s`, paced by a rate, has its
/// window's bytes in flight.
fn window_full(s: &Sender, config: &NetConfig) -> bool {
    let rate = match &s.cc {
        CcState::Dcqcn(d) => d.rate_bps,
        CcState::Hpcc(h) => h.rate_bps,
        CcState::Timely(t) => t.rate_bps,
        _ => return false,
    };
    let window = window_bytes(config.window, s.bdp_bytes, rate, s.line_rate_bps);
    let in_flight_bytes = u64::from(s.qp.in_flight()) * u64::from(config.mtu_bytes);
    window.is_some_and(|w| in_flight_bytes >= w)
}
