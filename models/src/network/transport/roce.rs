//! RoCEv2 reliability: go-back-N with cumulative ACKs and NACKs, and the
//! retransmission timer, as the NICs' queue pairs run it.
//!
//! The receiver accepts only the next expected packet, acknowledges every
//! `ack_interval` packets (and the last), NACKs the first gap once, and
//! repeats the cumulative ACK on duplicates. The sender goes back to the
//! NACKed psn, or to the first unacknowledged one when the timer fires
//! twice without progress.

use super::{Qp, Receiver, ReceiverReliability, RxQp, RxVerdict, SenderReliability};
use crate::network::cc::CcState;
use crate::network::common::serialization;
use crate::network::config::{CcKind, CnpMode};
use crate::network::packet::{self, Packet, PacketKind};
use crate::network::{FlowTimer, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::{Context, SimTime};

/// Sender side of a go-back-N queue pair.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GoBackNSender {
    next_psn: u32,
    /// First unacknowledged psn.
    una: u32,
    /// Highest psn sent + 1 (retransmissions are sends below it).
    max_sent: u32,
    /// `una` when the retransmission timer last fired.
    rto_una: u32,
}

impl SenderReliability for GoBackNSender {
    #[inline]
    fn next_psn(&self) -> u32 {
        self.next_psn
    }

    #[inline]
    fn acked(&self) -> u32 {
        self.una
    }

    #[inline]
    fn on_send(&mut self) -> bool {
        let retransmission = self.next_psn < self.max_sent;
        self.next_psn += 1;
        self.max_sent = self.max_sent.max(self.next_psn);
        retransmission
    }

    #[inline]
    fn on_ack(&mut self, psn: u32) -> u32 {
        if psn <= self.una {
            return 0;
        }
        let acked = psn - self.una;
        self.una = psn;
        // After a go-back, ACKs for packets sent before it can overtake.
        self.next_psn = self.next_psn.max(self.una);
        acked
    }

    #[inline]
    fn on_nack(&mut self, psn: u32) {
        if psn >= self.una && psn < self.next_psn {
            // Go back N: resend everything from the first missing packet.
            self.next_psn = psn;
        }
    }

    fn on_timeout(&mut self, packets: u32) {
        if self.una == self.rto_una && self.una < packets && self.next_psn > self.una {
            self.next_psn = self.una;
        }
        self.rto_una = self.una;
    }
}

impl GoBackNSender {
    /// Fast-forward: `packets` more were sent and acknowledged in order.
    pub(crate) fn skip_ahead(&mut self, packets: u32) {
        self.next_psn += packets;
        self.una += packets;
        self.max_sent += packets;
        self.rto_una += packets;
    }
}

/// Receiver side of a go-back-N queue pair.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GoBackNReceiver {
    expected_psn: u32,
    since_ack: u32,
    ce_since_ack: u32,
    nacked_psn: Option<u32>,
}

impl GoBackNReceiver {
    /// Fast-forward: `packets` more arrived in order.
    pub(crate) fn skip_ahead(&mut self, packets: u32) {
        self.expected_psn += packets;
        if let Some(psn) = &mut self.nacked_psn {
            *psn += packets;
        }
    }
}

impl ReceiverReliability for GoBackNReceiver {
    fn on_data(&mut self, pkt: &Packet, ack_interval: u32) -> RxVerdict {
        let mut verdict = RxVerdict {
            in_order: false,
            reply: None,
        };
        if pkt.psn == self.expected_psn {
            self.expected_psn += 1;
            verdict.in_order = true;
            self.since_ack += 1;
            self.ce_since_ack += u32::from(pkt.ce);
            self.nacked_psn = None;
            if self.since_ack >= ack_interval || pkt.last {
                verdict.reply = Some((
                    PacketKind::Ack,
                    self.expected_psn,
                    self.ce_since_ack.min(255) as u8,
                ));
                self.since_ack = 0;
                self.ce_since_ack = 0;
            }
        } else if pkt.psn > self.expected_psn {
            // A gap: packets were dropped or overtaken (spraying).
            if self.nacked_psn != Some(self.expected_psn) {
                self.nacked_psn = Some(self.expected_psn);
                verdict.reply = Some((PacketKind::Nack, self.expected_psn, 0));
            }
        } else {
            // A duplicate after go-back-N: repeat the cumulative ACK.
            verdict.reply = Some((PacketKind::Ack, self.expected_psn, 0));
        }
        verdict
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// A data packet reached its destination host: the transport decides
    /// what to acknowledge; DCQCN's notification point may add a CNP.
    pub(crate) fn receive_data(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let config = &self.fabric.config;
        let (header_bytes, ack_interval, cnp_interval, control_bytes, cnp_packets) = (
            config.header_bytes,
            config.ack_interval,
            config.dcqcn.cnp_interval,
            config.control_bytes as u16,
            config.cc == CcKind::Dcqcn && config.dcqcn.cnp_mode == CnpMode::Packet,
        );
        let now = ctx.now();
        let reply = |kind, psn, ce| Packet {
            ce,
            util: pkt.util,
            ..pkt.reply(kind, psn, control_bytes)
        };
        // Under `CnpMode::AckFlag` the ACK's count of marked packets is the
        // CNP flag; no separate packet.
        let marked = cnp_packets && pkt.ce != 0;
        let (verdict, cnp) = if self.transport.received(pkt.flow) {
            // A late duplicate of a message received whole: what its freed
            // receiver would answer (its cumulative ACK again).
            let packets = self
                .flow_spec(pkt.flow)
                .size_bytes
                .div_ceil(u64::from(self.fabric.config.mtu_bytes)) as u32;
            let verdict = RxVerdict {
                in_order: false,
                reply: Some((PacketKind::Ack, packets, 0)),
            };
            let cnp = marked && self.transport.received_cnp_due(pkt.flow, now, cnp_interval);
            (verdict, cnp)
        } else {
            let rx: &mut Receiver =
                self.transport
                    .receivers
                    .entry(pkt.flow)
                    .or_insert_with(|| Receiver {
                        qp: RxQp::Roce(GoBackNReceiver::default()),
                        last_cnp: None,
                    });
            let RxQp::Roce(qp) = &mut rx.qp else {
                unreachable!("flow {} mixes transports", pkt.flow)
            };
            let verdict = qp.on_data(&pkt, ack_interval);
            let cnp = marked && rx.last_cnp.is_none_or(|t| now >= t + cnp_interval);
            if cnp {
                rx.last_cnp = Some(now);
            }
            if verdict.in_order && pkt.last {
                self.transport.receiver_done(pkt.flow, now, cnp_interval);
            }
            (verdict, cnp)
        };
        if verdict.in_order {
            self.stats.delivered_payload_bytes +=
                u64::from(pkt.wire_bytes) - u64::from(header_bytes);
        }
        let mut out: [Option<Packet>; 2] = [None, None];
        out[0] = verdict.reply.map(|(kind, psn, ce)| reply(kind, psn, ce));
        if cnp {
            out[1] = Some(reply(PacketKind::Cnp, pkt.psn, 0));
        }
        for reply in out.into_iter().flatten() {
            self.host_send_control(ctx, reply);
        }
        if verdict.in_order && pkt.last {
            // The destination has the whole message: its dependents may start
            // (as SimAI, once the sender has the last ACK: `sender_finished`).
            if let Some(info) = self.flow_info(pkt.flow) {
                if !self.fabric.config.recv_complete_at_ack {
                    self.task_seen_complete(ctx, info.task, false);
                }
            }
        }
    }

    /// An ACK or NACK reached the sender: advance the window, feed the
    /// window- and INT-based congestion controls, maybe go back.
    pub(crate) fn receive_ack(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let Some(&i) = self.transport.sender_of.get(&pkt.flow) else {
            return;
        };
        let i = i as usize;
        let config = &self.fabric.config;
        let (g, mss) = (config.dctcp_g, f64::from(config.mtu_bytes));
        let s = &mut self.transport.senders[i];
        if s.end.is_some() {
            return;
        }
        let port = s.port;
        let cnp_flag = pkt.kind == PacketKind::Ack
            && pkt.ce > 0
            && config.cc == CcKind::Dcqcn
            && config.dcqcn.cnp_mode == CnpMode::AckFlag;
        let qp = s.qp.roce();
        let acked = qp.on_ack(pkt.psn);
        if acked > 0 {
            s.last_ack = ctx.now();
            s.ecn_marked_pkts += u64::from(pkt.ce);
            let (una, next_psn) = (qp.acked(), qp.next_psn());
            match &mut s.cc {
                CcState::Dctcp(d) => d.on_ack(g, mss, acked, u32::from(pkt.ce), una, next_psn),
                CcState::Hpcc(h) => {
                    let old_rate_bps = h.rate_bps;
                    h.on_ack(
                        &config.hpcc,
                        s.base_rtt,
                        ctx.now(),
                        f64::from(pkt.util) / packet::UTIL_ONE,
                        una,
                        next_psn,
                        s.line_rate_bps,
                        config.dcqcn.min_rate_bps,
                    );
                    if config.hpcc.retime_on_rate_change && h.rate_bps != old_rate_bps {
                        let wire = u64::from(config.mtu_bytes) + u64::from(config.header_bytes);
                        let old = serialization(wire, old_rate_bps.max(1.0) as u64);
                        let new = serialization(wire, h.rate_bps.max(1.0) as u64);
                        // Earlier never than zero: a packet due in the past goes now.
                        s.next_send =
                            SimTime((s.next_send + new).as_ps().saturating_sub(old.as_ps()));
                    }
                }
                CcState::Timely(t) => t.on_ack(
                    &config.timely,
                    ctx.now(),
                    una,
                    next_psn,
                    s.line_rate_bps,
                    config.dcqcn.min_rate_bps,
                ),
                _ => {}
            }
        }
        let qp = s.qp.roce();
        if pkt.kind == PacketKind::Nack {
            qp.on_nack(pkt.psn);
        }
        if cnp_flag {
            // SimAI's receiver flags the ACK of a marked packet as a CNP.
            self.dcqcn_notified(ctx, i);
        }
        let s = &mut self.transport.senders[i];
        if s.qp.roce().acked() >= s.packets {
            self.sender_finished(ctx, i);
        }
        self.host_try_send(ctx, port);
    }

    /// The retransmission timer of sender `i` fired: go back to the first
    /// unacknowledged packet if nothing was acknowledged since last time
    /// (UEC: resend what is outstanding). After `retry_limit` timeouts in a
    /// row without progress (no packet newly acknowledged, cumulatively or
    /// selectively) the queue pair gives up, like a NIC's retry
    /// counter (its flow stays unfinished).
    pub(crate) fn retransmit_timer(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let (rto, retry_limit) = (self.fabric.config.rto, self.fabric.config.retry_limit);
        let s = &mut self.transport.senders[i];
        if matches!(s.qp, Qp::Roce(_)) && s.qp.in_flight() == 0 && s.next_send > ctx.now() {
            // Nothing outstanding and the next packet not yet due: the queue
            // pair waits on its pacing (at DCQCN's rate floor a packet can be
            // milliseconds apart), not on the network. A NIC's transport
            // timer runs only for packets in flight; this one just re-arms.
            // A queue pair whose due packet cannot leave (its port is down)
            // still counts towards --retry-limit.
            s.stalled_timeouts = 0;
            s.timeout_acked_packets = s.qp.acked_packets();
            let flow = s.flow;
            ctx.schedule_self(
                rto,
                NetEvent::Timer {
                    flow,
                    timer: FlowTimer::Retransmit,
                },
            );
            return;
        }
        let per_packet = self.fabric.config.uec.rto_per_packet && matches!(s.qp, Qp::Uec(_));
        let acked_packets = s.qp.acked_packets();
        if per_packet
            && acked_packets == s.timeout_acked_packets
            && !s.qp.uec_expired(ctx.now(), rto)
        {
            // A packet timer that finds nothing expired is no stall.
        } else if acked_packets == s.timeout_acked_packets {
            s.stalled_timeouts += 1;
        } else {
            s.stalled_timeouts = 0;
            s.timeout_acked_packets = acked_packets;
        }
        if s.stalled_timeouts > retry_limit {
            s.gave_up = true;
            self.qp_unschedule(ctx, i);
            return;
        }
        let due = match &mut s.qp {
            Qp::Roce(q) => {
                q.on_timeout(s.packets);
                rto
            }
            Qp::Uec(u) => u.on_timeout(ctx.now(), rto, per_packet).1 - ctx.now(),
        };
        let (flow, port, spray, last) = (s.flow, s.port, s.spray_ports, s.qp.last_port());
        ctx.schedule_self(
            due,
            NetEvent::Timer {
                flow,
                timer: FlowTimer::Retransmit,
            },
        );
        self.qp_try_send(ctx, port, spray, last);
    }
}
