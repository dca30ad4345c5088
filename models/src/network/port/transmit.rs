//! Serialisation onto the link (the packet's one event, its arrival at
//! the peer), the HPCC stamp, a port's `TxDone`, and PFC frames from the
//! peer.

use crate::network::cc::flow_base_rtt;
use crate::network::common::serialization;
use crate::network::config::{CcKind, HpccUtilisation};
use crate::network::packet::{self, Packet, PacketKind, PRIORITIES, PRIO_DATA};
use crate::network::{NetEvent, Network};
use crate::telemetry::{PfcEvent, PfcRecord, TelemetrySink};
use netsim_engine::{splitmix64, Context, SimTime};

impl<S: TelemetrySink> Network<'_, S> {
    /// The bytes port `gport` has sent per priority (started serialising):
    /// those moved to `tx_flushed` and those still counted in the port.
    #[inline]
    pub(crate) fn tx_bytes(&self, gport: usize) -> [u64; PRIORITIES] {
        self.ports[gport].tx_bytes(&self.tx_flushed[gport])
    }

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
        let unflushed = &mut p.tx_unflushed[pkt.priority()];
        match unflushed.checked_add(pkt.wire_bytes) {
            Some(bytes) => *unflushed = bytes,
            None => {
                self.tx_flushed[gport][pkt.priority()] +=
                    u64::from(*unflushed) + u64::from(pkt.wire_bytes);
                *unflushed = 0;
            }
        }
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
        let sent_bytes: u64 = self.tx_bytes(gport).iter().sum();
        let p = &self.ports[gport];
        let meter = &mut self.port_side[gport].hpcc;
        if config.hpcc.utilisation == HpccUtilisation::IntDelta {
            if pkt.kind == PacketKind::Data {
                let fabric = self.fabric;
                let (src, dst) = (pkt.src, pkt.dst);
                let u = meter.int_records.stamp(
                    pkt.flow,
                    now,
                    sent_bytes,
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
