//! Switches: shared-buffer or fixed per-port admission (tail drop, or UEC
//! trimming of the arriving or the newest queued packet, in lossy mode), ECN
//! marking (at enqueue, or at dequeue as SimAI does; RED's draw is
//! `ecn.rs`), PFC thresholds toward upstream ports (with a per-port reserve
//! and headroom), and strict-priority scheduling of the egress queues. Where
//! a packet goes is `forwarding.rs`.
//!
//! State: per switch, its [`SharedBuffer`]; per port, its [`Ingress`]
//! (`Network::ingress`, a dense array beside the ports).

mod ecn;

use super::packet::{Packet, PacketKind, PRIO_CONTROL, PRIO_DATA};
use super::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use ecn::markable;
pub(crate) use ecn::{ecn_class, EcnMarking};
use netsim_engine::Context;

/// A switch's shared packet buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedBuffer {
    /// Bytes of queued packets.
    pub used_bytes: u64,
    /// Taken off the shared pool: headroom for bytes in flight after a
    /// pause and the ingress reserve, over all ports.
    pub headroom_bytes: u64,
}

/// A switch port's ingress side: the data bytes buffered that entered
/// through it (low 63 bits) and whether its upstream is paused by us (the
/// top bit: a PFC pause went upstream and no resume yet). Eight bytes, so
/// eight ports share a line: every data packet a switch queues or sends
/// reads its in-port's entry, and a 16-byte entry missed 1.1 M times on
/// the k=16 permutation with htsim's buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ingress(u64);

impl Ingress {
    const PAUSE_SENT: u64 = 1 << 63;

    /// Data bytes buffered that entered through this port.
    #[inline]
    pub fn bytes(self) -> u64 {
        self.0 & !Self::PAUSE_SENT
    }

    /// A PFC pause went upstream and no resume yet.
    #[inline]
    pub fn pause_sent(self) -> bool {
        self.0 & Self::PAUSE_SENT != 0
    }

    #[inline]
    pub fn set_pause_sent(&mut self, sent: bool) {
        self.0 = self.bytes() | if sent { Self::PAUSE_SENT } else { 0 };
    }

    /// # Panics
    /// If the bytes would reach 2^63 (a debug build's check).
    #[inline]
    pub fn add(&mut self, bytes: u64) {
        debug_assert!(
            self.bytes() + bytes < Self::PAUSE_SENT,
            "ingress bytes overflow"
        );
        self.0 += bytes;
    }

    /// # Panics
    /// If fewer bytes are buffered (a debug build's check).
    #[inline]
    pub fn sub(&mut self, bytes: u64) {
        debug_assert!(self.bytes() >= bytes, "ingress bytes underflow");
        self.0 -= bytes;
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// The egress class of `pkt` at a switch: ACKs and NACKs queue with
    /// data unless `ack_high_priority`.
    #[inline]
    fn switch_class(&self, pkt: &Packet) -> usize {
        match pkt.kind {
            PacketKind::Ack | PacketKind::Nack if !self.fabric.config.ack_high_priority => {
                PRIO_DATA
            }
            _ => pkt.priority(),
        }
    }

    /// Dynamic PFC threshold of the current switch.
    #[inline]
    pub(crate) fn pfc_xoff(&self, local: usize) -> u64 {
        let config = &self.fabric.config;
        let free = config
            .buffer_bytes
            .saturating_sub(self.buffers[local].headroom_bytes)
            .saturating_sub(self.buffers[local].used_bytes);
        (free as f64 * config.pfc_alpha) as u64
    }

    /// Resumes the upstream of ingress port `in_port` if we paused it and
    /// its buffered bytes fell below the XON threshold.
    #[inline]
    pub(crate) fn resume_if_below(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        local: usize,
        in_port: u16,
    ) {
        let gin = self.port_index(local, in_port);
        if !self.ingress[gin].pause_sent() {
            return;
        }
        let xoff = self.pfc_xoff(local);
        let offset = self.fabric.config.pfc_xon_offset_bytes;
        let reserve = self.fabric.config.pfc_reserve_bytes;
        let shared = self.ingress[gin].bytes().saturating_sub(reserve);
        if shared + offset <= xoff || shared <= offset {
            self.ingress[gin].set_pause_sent(false);
            let up = &self.ports[gin];
            ctx.send(
                up.link.peer,
                up.link.latency,
                NetEvent::Pfc {
                    port: up.link.peer_port,
                    pause: false,
                },
            );
        }
    }

    /// A packet arrived at a switch: aggregation packets go to the
    /// aggregator, every other packet is forwarded and queued.
    pub(crate) fn switch_receive(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        in_port: u16,
        mut pkt: Packet,
    ) {
        match pkt.kind {
            PacketKind::InaUp => return self.ina_aggregate(ctx, in_port, pkt),
            PacketKind::InaDown => return self.ina_down(ctx, in_port, pkt),
            _ => {}
        }
        let out = self.route(ctx, in_port, &mut pkt);
        self.switch_enqueue(ctx, in_port, out, pkt);
    }

    /// Queues `pkt`, which entered on `in_port`, on egress port `out`: tail
    /// drop (lossy), ECN marking, buffer and PFC ingress accounting.
    pub(crate) fn switch_enqueue(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        in_port: u16,
        out: u16,
        mut pkt: Packet,
    ) {
        let local = ctx.local_index();
        let fabric = self.fabric;
        let config = &fabric.config;
        let gout = self.port_index(local, out);
        let prio = self.switch_class(&pkt);
        let wire = u64::from(pkt.wire_bytes);
        if self.ports[gout].down_causes != 0 {
            // No live route: the packet is lost at the dead port.
            self.port_side[gout].counters.dropped_pkts[prio] += 1;
            return;
        }
        if prio == PRIO_DATA {
            if !config.pfc {
                let limit = match config.port_buffer_bytes {
                    Some(bytes) => self.health[gout].queue_limit_bytes.unwrap_or(bytes),
                    None => {
                        let free = config
                            .buffer_bytes
                            .saturating_sub(self.buffers[local].used_bytes);
                        (free as f64 * config.dt_alpha) as u64
                    }
                };
                // At `busy_until` itself the next packet starts at once
                // (its `TxDone` is due now): the port is still serving.
                let e = &self.ports[gout].egress;
                let in_service = if config.queue_counts_in_service && ctx.now() <= e.busy_until {
                    u64::from(e.in_service_data_bytes)
                } else {
                    0
                };
                if e.queued_bytes[prio] + in_service + wire > limit {
                    if !(config.trim && pkt.kind == PacketKind::Data) {
                        self.port_side[gout].counters.dropped_pkts[prio] += 1;
                        return;
                    }
                    let queued_instead =
                        config.trim_queued && ctx.rng().below(2) == 0 && self.trim_newest(ctx, out);
                    if !queued_instead {
                        return self.switch_trim(ctx, in_port, out, pkt);
                    }
                }
            }
            if !config.ecn_at_dequeue && markable(pkt.kind) {
                let q = self.ports[gout].egress.queued_bytes[prio];
                if self.ecn_mark(ctx, gout, out, &pkt, q) {
                    pkt.ce = 1;
                }
            }
            let gin = self.port_index(local, in_port);
            self.ingress[gin].add(wire);
        }
        pkt.in_port = in_port;
        self.buffers[local].used_bytes += wire;
        let p = &mut self.ports[gout];
        p.push_back(prio, pkt);
        p.egress.queued_bytes[prio] += wire;
        if prio == PRIO_DATA && config.pfc {
            let gin = self.port_index(local, in_port);
            let xoff = self.pfc_xoff(local);
            let reserve = config.pfc_reserve_bytes;
            let ingress = &mut self.ingress[gin];
            if !ingress.pause_sent() && ingress.bytes().saturating_sub(reserve) > xoff {
                ingress.set_pause_sent(true);
                let up = &self.ports[gin];
                ctx.send(
                    up.link.peer,
                    up.link.latency,
                    NetEvent::Pfc {
                        port: up.link.peer_port,
                        pause: true,
                    },
                );
            }
        }
        self.switch_try_send(ctx, out);
    }

    /// Trimming (UEC): `pkt` would overflow egress port `out`, so it goes
    /// on as its header alone, at control priority, for the receiver to NACK.
    /// Counted against the data class it was cut from.
    fn switch_trim(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        in_port: u16,
        out: u16,
        mut pkt: Packet,
    ) {
        let local = ctx.local_index();
        let gout = self.port_index(local, out);
        self.port_side[gout].counters.trimmed_pkts += 1;
        pkt.kind = PacketKind::Trimmed;
        pkt.wire_bytes = self.fabric.config.header_bytes as u16;
        self.switch_enqueue(ctx, in_port, out, pkt);
    }

    /// htsim's trimming: the newest data packet queued on egress port `out`
    /// is trimmed (its header goes on at control priority) to make room for
    /// an arrival; false if the newest is not data.
    fn trim_newest(&mut self, ctx: &mut Context<'_, NetEvent>, out: u16) -> bool {
        let local = ctx.local_index();
        let gout = self.port_index(local, out);
        let port = &mut self.ports[gout];
        if port.queues[PRIO_DATA]
            .back()
            .is_none_or(|p| p.kind != PacketKind::Data)
        {
            return false;
        }
        let pkt = port.pop_back(PRIO_DATA).expect("back checked");
        let wire = u64::from(pkt.wire_bytes);
        self.ports[gout].egress.queued_bytes[PRIO_DATA] -= wire;
        self.buffers[local].used_bytes -= wire;
        let gin = self.port_index(local, pkt.in_port);
        self.ingress[gin].sub(wire);
        self.switch_trim(ctx, pkt.in_port, out, pkt);
        true
    }

    /// Starts the next packet on a free switch port: control first, then
    /// data unless the peer paused it; releases buffer and may resume upstream.
    pub(crate) fn switch_try_send(&mut self, ctx: &mut Context<'_, NetEvent>, port: u16) {
        let local = ctx.local_index();
        let gport = self.port_index(local, port);
        if !self.port_ready(ctx, gport, port) {
            return;
        }
        let p = &mut self.ports[gport];
        let prio = if p.has_queued(PRIO_CONTROL) {
            PRIO_CONTROL
        } else if !p.paused && p.has_queued(PRIO_DATA) {
            PRIO_DATA
        } else {
            return;
        };
        // The packet behind moves to the front after the transmit, by when
        // its line has come in.
        let mut pkt = p.take_front(prio).expect("queue checked non-empty");
        let wire = u64::from(pkt.wire_bytes);
        p.egress.queued_bytes[prio] -= wire;
        let left_bytes = p.egress.queued_bytes[prio];
        p.egress.in_service_data_bytes = if prio == PRIO_DATA { wire as u32 } else { 0 };
        self.buffers[local].used_bytes -= wire;
        if prio == PRIO_DATA
            && self.fabric.config.ecn_at_dequeue
            && markable(pkt.kind)
            && self.ecn_mark(ctx, gport, port, &pkt, left_bytes)
        {
            pkt.ce = 1;
        }
        if prio == PRIO_DATA {
            let gin = self.port_index(local, pkt.in_port);
            self.ingress[gin].sub(wire);
            self.resume_if_below(ctx, local, pkt.in_port);
        }
        self.transmit(ctx, gport, pkt);
        let p = &mut self.ports[gport];
        p.refill_front(prio);
        if p.any_queued() {
            self.port_ready(ctx, gport, port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pause bit and the byte count share a word and never touch:
    /// setting or clearing one leaves the other, at counts up to the bit.
    #[test]
    fn ingress_packs_bytes_beside_the_pause_bit() {
        let mut ingress = Ingress::default();
        assert_eq!((ingress.bytes(), ingress.pause_sent()), (0, false));
        ingress.add(9_048);
        ingress.set_pause_sent(true);
        ingress.add((1 << 63) - 9_049);
        assert_eq!(
            (ingress.bytes(), ingress.pause_sent()),
            ((1 << 63) - 1, true)
        );
        ingress.sub((1 << 63) - 1);
        assert_eq!((ingress.bytes(), ingress.pause_sent()), (0, true));
        ingress.add(64);
        ingress.set_pause_sent(false);
        assert_eq!((ingress.bytes(), ingress.pause_sent()), (64, false));
        ingress.set_pause_sent(false);
        assert_eq!(ingress, Ingress(64));
        assert_eq!(std::mem::size_of::<Ingress>(), 8);
    }
}
