//! UEC plane spraying: on a host with one port into each plane of a
//! multi-plane fabric, one queue pair is scheduled on every port toward its
//! destination, so its packets leave by whichever port is free and spread
//! over the planes as UET intends. When several are free (a flow held by
//! its window), the ports are offered round robin from the one after the
//! port the queue pair last sent on, as htsim's NIC does (`findFreePort`);
//! offered lowest first, a window-bound flow would leave almost only by
//! its first plane. The queue pair paces at the ports'
//! summed rate and its NSCC window is sized for it; the load balancer keeps
//! its path state per plane (an entropy names a different path in each).

use super::super::Qp;
use crate::network::config::Transport;
use crate::network::fabric::path_timing;
use crate::network::packet::Packet;
use crate::network::Network;
use crate::telemetry::TelemetrySink;
use netsim_engine::{Context, SimTime};

use crate::network::NetEvent;

/// The host ports a queue pair is scheduled on: `port` alone when `spray`
/// is 0, else every port whose bit `spray` sets, lowest first.
pub(crate) fn qp_ports(port: u16, spray: u64) -> impl Iterator<Item = u16> {
    (spray == 0).then_some(port).into_iter().chain(bits(spray))
}

/// [`qp_ports`] for a queue pair that last sent on port `last`: a sprayed
/// one's ports after `last` first, then the rest, so that free ports take
/// turns.
pub(crate) fn qp_ports_after(port: u16, spray: u64, last: u16) -> impl Iterator<Item = u16> {
    let high = 1u64
        .checked_shl(u32::from(last) + 1)
        .map_or(0, |b| !(b - 1));
    let single = (spray == 0).then_some(port);
    single
        .into_iter()
        .chain(bits(spray & high))
        .chain(bits(spray & !high))
}

/// The set bits of `mask`, lowest first.
fn bits(mut mask: u64) -> impl Iterator<Item = u16> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let p = mask.trailing_zeros() as u16;
        mask &= mask - 1;
        Some(p)
    })
}

/// No port yet: the ports are offered lowest first.
pub(crate) const NO_PLANE: u16 = u16::MAX;

/// What spraying changes for a starting flow.
pub(crate) struct Spray {
    /// The host ports, a bit each.
    pub ports: u64,
    /// Their summed line rate.
    pub rate_bps: u64,
    /// The flow alone over all of them: its bytes split evenly over the
    /// planes' identical paths.
    pub ideal_fct: SimTime,
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Sender `i` of a UEC flow starts toward `probe.dst` from the port its
    /// hash picked (`port`): the ports it sprays over, if it sprays (plane
    /// spraying on, two or more live ports toward the destination, and the
    /// planes' entropies fit a packet's 16 bits).
    pub(crate) fn uec_plane_spray(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        i: usize,
        probe: &Packet,
        port: u16,
    ) -> Option<Spray> {
        let config = &self.fabric.config;
        if config.transport != Transport::Uec || !config.uec.plane_spray {
            return None;
        }
        let ports = self.host_live_ports_toward(ctx, probe.dst);
        if ports.count_ones() < 2 || ports >> port & 1 == 0 {
            return None;
        }
        let planes = (64 - ports.leading_zeros()) as u16;
        let s = &mut self.transport.senders[i];
        let (flow, spec) = (s.flow, s.spec);
        let Qp::Uec(u) = &mut s.qp else {
            return None;
        };
        if !u.spray_planes(flow, planes, &config.uec) {
            return None;
        }
        let local = ctx.local_index();
        let rate_bps = qp_ports(0, ports)
            .map(|p| self.ports[self.port_index(local, p)].link.rate_bps)
            .sum();
        let mut timing = path_timing(self.fabric, &spec, port);
        timing.bottleneck_bps *= u64::from(ports.count_ones());
        Some(Spray {
            ports,
            rate_bps,
            ideal_fct: timing.ideal_fct(),
        })
    }

    /// Offers every port sender `port`/`spray` is scheduled on a packet,
    /// sprayed ports from the one after `last`, the port it last sent on.
    pub(crate) fn qp_try_send(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        port: u16,
        spray: u64,
        last: u16,
    ) {
        for p in qp_ports_after(port, spray, last) {
            self.host_try_send(ctx, p);
        }
    }

    /// Takes sender `i` off every port it is scheduled on.
    pub(crate) fn qp_unschedule(&mut self, ctx: &mut Context<'_, NetEvent>, i: usize) {
        let (port, spray) = {
            let s = &self.transport.senders[i];
            (s.port, s.spray_ports)
        };
        let local = ctx.local_index();
        let after_last = self.fabric.config.qp_round_robin_after_last;
        for p in qp_ports(port, spray) {
            let gport = self.port_index(local, p);
            let host = &mut self.hosts[gport];
            let Some(pos) = host.flows.iter().position(|&f| f as usize == i) else {
                continue;
            };
            host.flows.remove(pos);
            // After-last keeps its turn on the queue pair served last, as
            // SimAI's RdmaEgressQueue remaps `m_rrlast` when it drops
            // finished queue pairs: the flows behind `pos` moved up one.
            if after_last && pos < host.round_robin {
                host.round_robin -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{qp_ports, qp_ports_after};

    #[test]
    fn a_queue_pair_is_on_its_port_or_on_every_sprayed_one() {
        assert_eq!(qp_ports(3, 0).collect::<Vec<_>>(), [3]);
        assert_eq!(qp_ports(1, 0b1011).collect::<Vec<_>>(), [0, 1, 3]);
    }

    /// htsim's NIC takes the next free port after the last it used: a
    /// window-bound flow whose ports are all free alternates planes.
    #[test]
    fn sprayed_ports_are_offered_from_the_one_after_the_last_used() {
        let after = |last| qp_ports_after(1, 0b1011, last).collect::<Vec<_>>();
        assert_eq!(after(0), [1, 3, 0]);
        assert_eq!(after(1), [3, 0, 1]);
        assert_eq!(after(3), [0, 1, 3]);
        assert_eq!(after(63), [0, 1, 3]);
        assert_eq!(qp_ports_after(2, 0, 5).collect::<Vec<_>>(), [2]);
    }
}
