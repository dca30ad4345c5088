//! UEC packets reaching a host: data at the receiver (acknowledged
//! selectively, SACKs coalesced), trimmed headers (NACKed at once), and the
//! SACKs and NACKs back at the sender, which feed its window and resends.
use super::sack::{CoalescedAck, SackReceiver, SackVerdict};
use crate::network::packet::{Packet, PacketKind};
use crate::network::transport::{Qp, Receiver, RxQp};
use crate::network::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::Context;

impl<S: TelemetrySink> Network<'_, S> {
    /// A UEC data packet reached its destination: acknowledge it
    /// selectively (a duplicate with the cumulative point).
    pub(crate) fn uec_receive_data(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let config = &self.fabric.config;
        let mtu = u64::from(config.mtu_bytes);
        let packets = self.fabric.workload.flows[pkt.flow as usize]
            .size_bytes
            .div_ceil(mtu) as u32;
        let rx = self
            .transport
            .receivers
            .entry(pkt.flow)
            .or_insert_with(|| Receiver {
                qp: RxQp::Uec(SackReceiver::new(packets)),
                last_cnp: None,
            });
        let RxQp::Uec(qp) = &mut rx.qp else {
            unreachable!("flow {} mixes transports", pkt.flow)
        };
        let verdict = qp.on_data(pkt.psn);
        let mut reply = Packet {
            ce: pkt.ce,
            // An empty mask: a SACK keeps its mask in `via` and `util`.
            via: 0,
            entropy: pkt.entropy,
            ..pkt.reply(PacketKind::Sack, pkt.psn, config.control_bytes as u16)
        };
        let mut complete = false;
        // ACK coalescing: whether held psns are acknowledged now.
        let mut coalesced = None;
        match verdict {
            SackVerdict::New { complete: c } => {
                self.stats.delivered_payload_bytes +=
                    u64::from(pkt.wire_bytes) - u64::from(config.header_bytes);
                complete = c;
                let ack_bytes = config.uec.ack_bytes;
                if ack_bytes > 0 {
                    let first = !qp.started;
                    qp.hold(pkt.psn, u32::from(pkt.wire_bytes));
                    let asked = qp.ack_now_for_request(pkt.util != 0);
                    // htsim's sink: at once for the first packet, a marked
                    // one, one that asks or fills the holes below one that
                    // asked; else every `ack_bytes`.
                    let now = first || c || pkt.ce != 0 || asked;
                    coalesced = Some(now || qp.pending_bytes >= ack_bytes);
                }
            }
            SackVerdict::Duplicate { cumulative } => {
                reply.psn = cumulative;
                reply.last = true;
                reply.ce = 0;
            }
        }
        match coalesced {
            None => self.host_send_control(ctx, reply),
            Some(true) => self.uec_send_coalesced(ctx, reply),
            Some(false) => {}
        }
        if self.fabric.config.uec.cc.rccc() {
            self.rccc_arrival(ctx, &pkt, complete);
        }
        if complete {
            // The destination has the whole message: its dependents may start.
            if let Some(info) = self.fabric.workload.flow_info(pkt.flow) {
                self.task_seen_complete(ctx, info.task, false);
            }
        }
    }

    /// ACK coalescing: acknowledges every psn the receiver of `reply.flow`
    /// holds, `reply.psn` first, in as few SACKs as their windows allow.
    /// Only the first echoes the trigger's ECN mark: the others name held
    /// psns that uet-htsim's cumulative point would cover.
    fn uec_send_coalesced(&mut self, ctx: &mut Context<'_, NetEvent>, mut reply: Packet) {
        let first = reply.psn;
        loop {
            let Some(rx) = self.transport.receivers.get_mut(&reply.flow) else {
                return;
            };
            let RxQp::Uec(qp) = &mut rx.qp else {
                unreachable!("flow {} mixes transports", reply.flow)
            };
            let Some(CoalescedAck { psn, base, mask }) = qp.take_ack(first) else {
                return;
            };
            if psn != first {
                reply.ce = 0;
            }
            reply.psn = psn;
            reply.sack_offset = (psn - base) as u8;
            reply.set_sack_mask(mask);
            self.host_send_control(ctx, reply);
        }
    }

    /// A trimmed header reached the destination: NACK its psn on the path
    /// back, echoing the entropy so the sender can avoid it.
    pub(crate) fn uec_receive_trimmed(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let control_bytes = self.fabric.config.control_bytes as u16;
        let reply = Packet {
            entropy: pkt.entropy,
            ..pkt.reply(PacketKind::Nack, pkt.psn, control_bytes)
        };
        self.host_send_control(ctx, reply);
        if self.fabric.config.uec.cc.rccc() {
            self.rccc_arrival(ctx, &pkt, false);
        }
    }

    /// A SACK or NACK reached a UEC sender.
    pub(crate) fn uec_receive_feedback(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let Some(&i) = self.transport.sender_of.get(&pkt.flow) else {
            return;
        };
        let i = i as usize;
        let ooo = self.fabric.config.uec.ooo_pkts;
        let s = &mut self.transport.senders[i];
        if s.end.is_some() {
            return;
        }
        let (port, spray) = (s.port, s.spray_ports);
        let Qp::Uec(u) = &mut s.qp else {
            unreachable!("UEC feedback for a RoCE queue pair")
        };
        if pkt.kind == PacketKind::Sack && pkt.ce != 0 && !pkt.last {
            s.ecn_marked_pkts += 1;
        }
        u.on_feedback(&pkt, ctx.now(), ooo);
        let last = u.last_plane;
        if u.done() {
            self.sender_finished(ctx, i);
        } else {
            self.uec_arm_probe(ctx, i);
        }
        self.qp_try_send(ctx, port, spray, last);
    }
}
