//! RCCC, receiver credit congestion control: a receiving host paces the
//! senders toward it with credits, so an incast queues at the senders, not
//! at the last switch.
//!
//! A sender may send its first window (`rccc_initial_bdp` BDPs of its path)
//! unasked; every further new packet needs a credit of one packet, which
//! the receiver issues in a `Credit` packet. The receiver counts the credit
//! outstanding toward it (first windows and credits issued, less the data
//! and trimmed headers that came back) and issues more, round robin over
//! the flows still owed some, while that count is under its target
//! (`rccc_target_bdp` BDPs of the longest path it has heard from). Arrivals clock the credits: in steady state
//! the receiver's link carries the target and queues next to nothing.
//! A trimmed header tells the receiver its packet must come again: the
//! flow is owed one more credit. A retransmission the receiver cannot know
//! of (a packet lost on a failed link, found by reordering or the timer)
//! goes without credit, and its arrival lets one more credit out.
//!
//! ```text
//!  sender ─first window─▶ │ receiver: outstanding < target ?
//!         ◀──Credit(1)─── │   grant next flow owed (round robin)
//!  sender ─1 packet─────▶ │ arrival: outstanding -= 1
//! ```

use crate::network::packet::{Packet, PacketKind};
use crate::network::transport::Qp;
use crate::network::{ideal_fct, Fabric, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::traffic::FlowSpec;
use netsim_engine::Context;
use std::collections::VecDeque;

/// What a receiving host knows of one unfinished flow toward it.
#[derive(Debug)]
struct FlowCredit {
    flow: u32,
    /// The flow's source host (where credits go).
    src: u32,
    /// Packets the flow may not send yet: it needs a credit for each.
    owed_pkts: u32,
    /// Its credit outstanding: first window and credits issued, less arrivals.
    outstanding_pkts: u32,
    /// In the round-robin queue.
    queued: bool,
}

/// One packet's arrival at a receiving host, as [`CreditIssuer::on_arrival`] reads it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub flow: u32,
    pub src: u32,
    /// The flow's packets in all.
    pub packets: u32,
    /// Its first window.
    pub initial_pkts: u32,
    /// The target the flow's path asks for (the host keeps the largest).
    pub target_pkts: u64,
    /// A header a switch trimmed: the sender must send it again, on a credit.
    pub trimmed: bool,
    /// The flow's last missing packet: the receiver has it all.
    pub complete: bool,
}

/// One receiving host's credit state.
#[derive(Debug, Default)]
pub(crate) struct CreditIssuer {
    /// Credit outstanding toward the host (the sum over `flows`), in packets.
    outstanding_pkts: u64,
    /// The target, in packets: the largest of the flows heard from.
    target_pkts: u64,
    /// Unfinished flows, by flow id.
    flows: Vec<FlowCredit>,
    /// Flows owed credit, in round-robin order (entries of flows that
    /// finished or were paid meanwhile are skipped).
    ready: VecDeque<u32>,
    /// Flows heard from (sorted), so a flow's first window counts once.
    known: Vec<u32>,
}

impl CreditIssuer {
    /// A packet reached the host: its credit comes back; a trimmed one is
    /// owed again; a flow complete leaves, and its credit with it (what its
    /// sender held unused, or resent without asking, counts no more).
    pub(crate) fn on_arrival(&mut self, a: Arrival) {
        if let Err(at) = self.known.binary_search(&a.flow) {
            self.known.insert(at, a.flow);
            // The longest credit loop sets the target: one BDP of the
            // nearest sender would starve the link while the farthest's
            // credits are on their way.
            self.target_pkts = self.target_pkts.max(a.target_pkts).max(1);
            let initial = a.initial_pkts.min(a.packets);
            self.outstanding_pkts += u64::from(initial);
            let at = self.flows.partition_point(|f| f.flow < a.flow);
            self.flows.insert(
                at,
                FlowCredit {
                    flow: a.flow,
                    src: a.src,
                    owed_pkts: a.packets - initial,
                    outstanding_pkts: initial,
                    queued: false,
                },
            );
        }
        let Ok(i) = self.flows.binary_search_by_key(&a.flow, |f| f.flow) else {
            return; // a late duplicate of a finished flow
        };
        let f = &mut self.flows[i];
        if f.outstanding_pkts > 0 {
            f.outstanding_pkts -= 1;
            self.outstanding_pkts -= 1;
        }
        if a.trimmed {
            f.owed_pkts += 1;
        }
        if a.complete {
            self.outstanding_pkts -= u64::from(f.outstanding_pkts);
            self.flows.remove(i);
        } else if f.owed_pkts > 0 && !f.queued {
            f.queued = true;
            self.ready.push_back(a.flow);
        }
    }

    /// Whether `flow` was heard from.
    pub(crate) fn knows(&self, flow: u32) -> bool {
        self.known.binary_search(&flow).is_ok()
    }

    /// The next credit to issue, `(flow, source host)`, if the outstanding
    /// credit is under the target and a flow is owed one (round robin).
    pub(crate) fn next_grant(&mut self) -> Option<(u32, u32)> {
        if self.outstanding_pkts >= self.target_pkts {
            return None;
        }
        while let Some(flow) = self.ready.pop_front() {
            let Ok(i) = self.flows.binary_search_by_key(&flow, |f| f.flow) else {
                continue; // finished
            };
            let f = &mut self.flows[i];
            if f.owed_pkts == 0 {
                f.queued = false;
                continue;
            }
            f.owed_pkts -= 1;
            f.outstanding_pkts += 1;
            self.outstanding_pkts += 1;
            if f.owed_pkts > 0 {
                self.ready.push_back(flow);
            } else {
                f.queued = false;
            }
            return Some((f.flow, f.src));
        }
        None
    }

    /// Credit outstanding toward the host, in packets.
    #[cfg(test)]
    fn outstanding_pkts(&self) -> u64 {
        self.outstanding_pkts
    }
}

/// A sender's credit: what it may still send of new data.
#[derive(Debug)]
pub(crate) struct CreditWallet {
    /// New packets the sender may send now.
    pub(crate) pkts: u32,
}

impl CreditWallet {
    /// A wallet holding the first window.
    pub(crate) fn new(initial_pkts: u32) -> CreditWallet {
        CreditWallet { pkts: initial_pkts }
    }
}

/// A flow's first window in packets: `initial_bdp` BDPs of `bdp_bytes`,
/// at least one packet (so a credit-less start cannot stall).
pub(crate) fn initial_pkts(initial_bdp: f64, bdp_bytes: f64, mtu_bytes: u32) -> u32 {
    ((initial_bdp * bdp_bytes / f64::from(mtu_bytes)).ceil() as u32).max(1)
}

/// The BDP of flow `spec`'s path as both of its ends compute it: the
/// source's first link's rate x the base RTT of the path from that link.
pub(crate) fn path_bdp_bytes(fabric: &Fabric, spec: &FlowSpec) -> f64 {
    let topo = &fabric.topo;
    let rate_bps = topo.link(topo.port(spec.src, 0).link).bandwidth_bps;
    let (_, base_rtt) = ideal_fct(fabric, spec, 0);
    rate_bps as f64 * base_rtt.as_ps() as f64 / 8e12
}

impl<S: TelemetrySink> Network<'_, S> {
    /// A data packet or a trimmed header of a UEC flow reached its
    /// destination, the current host: the credit it used comes back, and
    /// the host issues what its target allows.
    /// `complete`: the packet completed the flow.
    pub(crate) fn rccc_arrival(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        pkt: &Packet,
        complete: bool,
    ) {
        let fabric = self.fabric;
        let config = &fabric.config;
        let spec = &fabric.workload.flows[pkt.flow as usize];
        let packets = spec.size_bytes.div_ceil(u64::from(config.mtu_bytes)) as u32;
        let issuer = self.transport.credit_issuers.entry(pkt.dst).or_default();
        let (initial, target) = if issuer.knows(pkt.flow) {
            (0, 0)
        } else {
            let bdp = path_bdp_bytes(fabric, spec);
            let u = &config.uec;
            let target = (u.rccc_target_bdp * bdp / f64::from(config.mtu_bytes)).ceil() as u64;
            (
                initial_pkts(u.rccc_initial_bdp, bdp, config.mtu_bytes),
                target,
            )
        };
        issuer.on_arrival(Arrival {
            flow: pkt.flow,
            src: pkt.src,
            packets,
            initial_pkts: initial,
            target_pkts: target,
            trimmed: pkt.kind == PacketKind::Trimmed,
            complete,
        });
        while let Some((flow, src)) = self
            .transport
            .credit_issuers
            .get_mut(&pkt.dst)
            .and_then(CreditIssuer::next_grant)
        {
            let control_bytes = config.control_bytes as u16;
            let credit = Packet::new(PacketKind::Credit, flow, pkt.dst, src, 1, control_bytes);
            self.host_send_control(ctx, credit);
        }
    }

    /// A credit reached a UEC sender: it may send `pkt.psn` more new packets.
    pub(crate) fn uec_receive_credit(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let Some(&i) = self.transport.sender_of.get(&pkt.flow) else {
            return;
        };
        let s = &mut self.transport.senders[i as usize];
        let (port, spray) = (s.port, s.spray_ports);
        let Qp::Uec(u) = &mut s.qp else {
            unreachable!("a credit for a RoCE queue pair")
        };
        u.on_credit(pkt.psn);
        let last = u.last_plane;
        if s.end.is_none() {
            self.qp_try_send(ctx, port, spray, last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(flow: u32, trimmed: bool) -> Arrival {
        Arrival {
            flow,
            src: 100 + flow,
            packets: 10,
            initial_pkts: 2,
            target_pkts: 4,
            trimmed,
            complete: false,
        }
    }

    #[test]
    fn credits_are_conserved_and_shared_round_robin() {
        // Three flows of 10 packets from hosts 100..103, 2 sent unasked
        // each, target 4; the network delivers in order and trims the
        // 5th packet it carries, which its sender sends again on a credit.
        let mut c = CreditIssuer::default();
        let mut wire: std::collections::VecDeque<u32> = [0, 1, 2, 0, 1, 2].into();
        let mut granted = [0u32; 3];
        let mut carried = 0;
        while let Some(f) = wire.pop_front() {
            carried += 1;
            c.on_arrival(arrival(f, carried == 5));
            let mut any = false;
            while let Some((g, src)) = c.next_grant() {
                assert_eq!(src, 100 + g);
                granted[g as usize] += 1;
                wire.push_back(g);
                any = true;
            }
            // First windows may exceed the target; credits never do.
            assert!(!any || c.outstanding_pkts() <= 4, "over the target");
            if carried >= 6 {
                assert_eq!(c.outstanding_pkts(), wire.len() as u64);
            }
        }
        // Each flow got what its first window did not cover; the trimmed
        // packet's flow (flow 1, the 5th on the wire) one more.
        assert_eq!(granted, [8, 9, 8]);
        assert_eq!(carried, 31);
        assert_eq!(c.outstanding_pkts(), 0);
        assert!(c.next_grant().is_none());
    }

    #[test]
    fn a_first_window_covering_the_flow_is_owed_nothing() {
        let mut c = CreditIssuer::default();
        c.on_arrival(Arrival {
            flow: 7,
            src: 1,
            packets: 3,
            initial_pkts: 8,
            target_pkts: 10,
            trimmed: false,
            complete: false,
        });
        assert!(c.next_grant().is_none());
        // Its sender holds 2 credits it will not use: they go when it completes.
        assert_eq!(c.outstanding_pkts(), 2);
        c.on_arrival(Arrival {
            complete: true,
            ..arrival(7, false)
        });
        assert_eq!(c.outstanding_pkts(), 0);
        assert_eq!(initial_pkts(1.0, 100_000.0, 4096), 25);
        assert_eq!(initial_pkts(0.0, 100_000.0, 4096), 1);
    }
}
