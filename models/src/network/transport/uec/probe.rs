//! SLEEK's probes on the wire (`sleek.rs` decides): the sender's probe
//! timer, the header-sized probe it sends through the data queues, and the
//! receiver's answer with its cumulative point.

use crate::network::packet::{Packet, PacketKind};
use crate::network::transport::{Qp, RxQp};
use crate::network::{FlowTimer, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::Context;

impl<S: TelemetrySink> Network<'_, S> {
    /// Schedules sender `i`'s probe timer if SLEEK asks for it (after an
    /// ACK re-armed the probe).
    pub(crate) fn uec_arm_probe(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let s = &mut self.transport.senders[i];
        let Qp::Uec(u) = &mut s.qp else {
            return;
        };
        if let Some(at) = u.probe_timer_request() {
            let flow = s.flow;
            let timer = FlowTimer::Probe;
            ctx.schedule_self(at - ctx.now(), NetEvent::Timer { flow, timer });
        }
    }

    /// Sender `i`'s probe timer fired: send a probe if one is due (at the
    /// NIC's control priority, as htsim's `sendControlPacket`; the switches
    /// queue it with data) and schedule the timer again.
    pub(crate) fn uec_probe_timer(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let now = ctx.now();
        let header_bytes = self.fabric.config.header_bytes as u16;
        let s = &mut self.transport.senders[i];
        if s.end.is_some() || s.gave_up {
            return;
        }
        let Qp::Uec(u) = &mut s.qp else {
            return;
        };
        let Some((probe, next)) = u.on_probe_timer(now, ctx.rng()) else {
            return;
        };
        let (flow, src, dst) = (s.flow, s.spec.src, s.spec.dst);
        ctx.schedule_self(
            next - now,
            NetEvent::Timer {
                flow,
                timer: FlowTimer::Probe,
            },
        );
        if let Some((seq, entropy)) = probe {
            let pkt = Packet {
                entropy,
                ..Packet::new(PacketKind::Probe, flow, src, dst, seq.into(), header_bytes)
            };
            self.host_send_control(ctx, pkt);
        }
    }

    /// A probe reached its destination: answer with the cumulative point
    /// (htsim's sink answers a `DATA_PROBE` with a probe ACK at once).
    pub(crate) fn uec_receive_probe(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let cumulative = match self.transport.receivers.get(&pkt.flow) {
            Some(rx) => match &rx.qp {
                RxQp::Uec(qp) => qp.cumulative(),
                _ => unreachable!("flow {} mixes transports", pkt.flow),
            },
            None => 0,
        };
        let control_bytes = self.fabric.config.control_bytes as u16;
        let reply = Packet {
            ce: pkt.ce,
            util: pkt.psn as u16,
            entropy: pkt.entropy,
            ..pkt.reply(PacketKind::ProbeAck, cumulative, control_bytes)
        };
        self.host_send_control(ctx, reply);
    }
}
