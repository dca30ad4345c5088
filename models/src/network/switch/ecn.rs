//! ECN marking at a switch's egress: RED between a port's thresholds, with
//! a draw that is a hash of the packet and the port (never a stream shared
//! with other traffic), so that a memo record or a twin rail marks alike.

use crate::network::common::{entropy_salt, five_tuple_hash};
use crate::network::fast_forward::twin_draws::draw_identity;
use crate::network::packet::{Packet, PacketKind, PRIO_DATA};
use crate::network::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::{splitmix64, Context};

/// A switch port's ECN marking: none below `kmin_bytes` of queue, always
/// at `kmax_bytes`, with probability rising to `pmax` between (RED).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EcnMarking {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
}

/// The index of `marking` in `classes`, the distinct ECN markings of a
/// shard's ports, added if new.
///
/// # Panics
/// With more than 2^16 distinct markings (each is a link rate's profile,
/// or one a fault's rate change scaled).
pub(crate) fn ecn_class(classes: &mut Vec<EcnMarking>, marking: EcnMarking) -> u16 {
    let same = |m: &EcnMarking| {
        m.kmin_bytes == marking.kmin_bytes
            && m.kmax_bytes == marking.kmax_bytes
            && m.pmax.to_bits() == marking.pmax.to_bits()
    };
    let index = classes.iter().position(same).unwrap_or_else(|| {
        classes.push(marking);
        classes.len() - 1
    });
    u16::try_from(index).expect("more than 2^16 distinct ECN markings in a shard")
}

/// Whether a packet of `kind` may be ECN-marked: data-class payload, never
/// an ACK that queues with data (its `ce` counts marked packets).
#[inline]
pub(super) fn markable(kind: PacketKind) -> bool {
    !matches!(kind, PacketKind::Ack | PacketKind::Nack)
}

/// RED's draw for `pkt` (5-tuple hash `tuple`, with its entropy) at egress
/// port `port` of switch `node`, in a run seeded `seed`: a hash of the
/// packet's identity (5-tuple, kind, PSN) and where it is marked, as a
/// switch would hash header fields. A draw from the switch's shared stream
/// would depend on every packet the switch drew for before, so on other
/// traffic: a memo record (DESIGN.md §3c) could not be exact. Uniform over
/// packets; one packet resent at one queue depth draws alike.
#[inline]
pub(crate) fn red_draw(seed: u64, node: u32, port: u16, tuple: u64, pkt: &Packet) -> u64 {
    let mut h = seed ^ 0x5245_4400 ^ tuple ^ (u64::from(pkt.psn) << 32 | u64::from(port));
    let mut h = splitmix64(&mut h) ^ (u64::from(node) << 8 | pkt.kind as u64);
    splitmix64(&mut h)
}

/// A draw as a uniform in [0, 1) (its top 53 bits).
#[inline]
fn unit(draw: u64) -> f64 {
    (draw >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

impl<S: TelemetrySink> Network<'_, S> {
    /// The switch and 5-tuple hash RED's draw for `pkt` at switch `node`
    /// names: its own, or for a data packet of a flow with a lower twin
    /// rail, the twin's (`twin_draws.rs`: twins mark alike).
    #[inline]
    fn red_identity(&self, node: u32, pkt: &Packet) -> (u32, u64) {
        let twin = match pkt.kind {
            PacketKind::Data => draw_identity(&self.fabric.twin_draws, node, pkt.flow),
            _ => None,
        };
        match twin {
            Some((switch, lead)) => {
                let spec = self.fabric.workload.flows[lead as usize];
                let port = self.fabric.source_port(lead);
                (switch, five_tuple_hash(port, spec.src, spec.dst))
            }
            None => (
                node,
                five_tuple_hash(self.source_port(pkt), pkt.src, pkt.dst),
            ),
        }
    }

    /// RED on egress port `gport` (port `port` of the current switch) for
    /// `pkt`, its data queue at `queue_bytes`: whether to mark (counted when
    /// so). Between the thresholds the draw is [`red_draw`]'s: a function
    /// of the packet and the port alone, not of what else the switch
    /// forwarded before it.
    #[inline]
    pub(super) fn ecn_mark(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        gport: usize,
        port: u16,
        pkt: &Packet,
        queue_bytes: u64,
    ) -> bool {
        let ecn = &self.ecn[usize::from(self.ports[gport].ecn_class)];
        let mark = if queue_bytes >= ecn.kmax_bytes {
            true
        } else if queue_bytes > ecn.kmin_bytes {
            let probability = ecn.pmax * (queue_bytes - ecn.kmin_bytes) as f64
                / (ecn.kmax_bytes - ecn.kmin_bytes) as f64;
            self.memo_draw();
            let (node, tuple) = self.red_identity(ctx.node().0, pkt);
            let draw = red_draw(
                self.fabric.seed,
                node,
                port,
                tuple ^ entropy_salt(pkt.entropy),
                pkt,
            );
            unit(draw) < probability
        } else {
            false
        };
        if mark {
            self.port_side[gport].counters.ecn_marked_pkts[PRIO_DATA] += 1;
            self.rail_marked(ctx.node().0, pkt);
        }
        mark
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The draws of 100,000 packets (200 flows x 500 PSNs) at one port.
    fn draws(seed: u64, node: u32, port: u16) -> Vec<u64> {
        let mut out = Vec::new();
        for flow in 0..200 {
            let tuple = five_tuple_hash(flow, 3, 11);
            for psn in 0..500 {
                let packet = Packet::test_data(flow, psn);
                out.push(red_draw(seed, node, port, tuple, &packet));
            }
        }
        out
    }

    #[test]
    fn red_draws_are_reproducible_and_mark_at_the_probability() {
        let at = draws(7, 40, 3);
        // A function of the packet and the port: drawn again, in any
        // order, the same.
        let mut again = draws(7, 40, 3);
        assert_eq!(at, again);
        again.reverse();
        assert_ne!(at, again);
        let n = at.len() as f64;
        for p in [0.01, 0.1, 0.25, 0.5, 0.9] {
            let marked = at.iter().filter(|&&d| unit(d) < p).count() as f64;
            // Binomial: 5 standard deviations.
            let sd = (n * p * (1.0 - p)).sqrt();
            assert!(
                (marked - n * p).abs() < 5.0 * sd,
                "p = {p}: {marked} of {n} marked"
            );
        }
        // Another port, switch or seed draws independently: two packets
        // agree on a mark at p = 0.5 about half the time.
        for other in [draws(7, 40, 4), draws(7, 41, 3), draws(8, 40, 3)] {
            let agree = at
                .iter()
                .zip(&other)
                .filter(|&(&a, &b)| (unit(a) < 0.5) == (unit(b) < 0.5))
                .count() as f64;
            let sd = (n * 0.25).sqrt();
            assert!((agree - n / 2.0).abs() < 5.0 * sd, "{agree} of {n} agree");
        }
    }
}
