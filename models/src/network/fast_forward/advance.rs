//! What a jump does to the network's state, shared by whole-run jumps
//! (`jumps.rs`) and per-domain ones (`domains.rs`): a port's counters,
//! queued packets and absolute times, a sender's and a receiver's
//! sequence state and CC, the samples due over the jump; and, for a
//! domain's jump, which pending events move with it and by how much.

use super::jumps::{d_recovering, skip_packet, MAX_CC_STEPS};
use crate::network::cc::{CcState, IncreaseSource};
use crate::network::nic::NO_WAKE;
use crate::network::packet::{PacketKind, PRIORITIES};
use crate::network::port::PacketQueue;
use crate::network::transport::RxQp;
use crate::network::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::{NodeId, SimTime};

impl<S: TelemetrySink> Network<'_, S> {
    /// The bytes port `gp` puts on the wire over a jump of `delta` at its
    /// rate over the last window of `periods` (pro rata), shared among the
    /// priorities as the packets started in that window were.
    pub(super) fn ff_port_added(
        &self,
        gp: usize,
        delta: SimTime,
        periods: usize,
    ) -> [u64; PRIORITIES] {
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let slot = ((ff.checks - 1) % ff.slots as u64) as usize;
        let oldest = ff.back(slot, periods);
        let (new, old) = (ff.tx[gp * ff.slots + slot], ff.tx[gp * ff.slots + oldest]);
        let started: u64 = (0..PRIORITIES).map(|prio| new[prio] - old[prio]).sum();
        let wire = ff.wire[gp * ff.slots + slot] - ff.wire[gp * ff.slots + oldest];
        let bytes = u128::from(wire) * u128::from(delta.as_ps()) / ff.window_ps(periods);
        std::array::from_fn(|prio| {
            let share = u128::from(new[prio] - old[prio]);
            (bytes * share)
                .checked_div(u128::from(started))
                .unwrap_or(0) as u64
        })
    }

    /// Moves port `gp` over a jump of `delta`: `added` bytes on its wire,
    /// its queued packets' PSNs by their flows' `votes`, its absolute times.
    pub(super) fn ff_advance_port(
        &mut self,
        gp: usize,
        delta: SimTime,
        added: &[u64; PRIORITIES],
        votes: &[u64],
    ) {
        for (tx, bytes) in self.ports[gp]
            .flush_tx(&mut self.tx_flushed[gp])
            .iter_mut()
            .zip(added)
        {
            *tx += bytes;
        }
        let p = &mut self.ports[gp];
        for pkt in p.queues.iter_mut().flat_map(PacketQueue::iter_mut) {
            skip_packet(pkt, votes);
        }
        p.egress.busy_until += delta;
        // A pause held over the jump: the `pfc` table's duration is
        // what was simulated (a jump writes no pause of its own).
        let side = &mut self.port_side[gp];
        side.pause_since += delta;
        side.hpcc.window_start += delta;
        let host = &mut self.hosts[gp];
        if host.wake_at != NO_WAKE {
            host.wake_at += delta;
        }
    }

    /// Moves sender `i` over a jump of `delta` by `k` packets.
    pub(super) fn ff_advance_sender(&mut self, i: usize, delta: SimTime, k: u32) {
        let mtu = u64::from(self.fabric.config.mtu_bytes);
        let c = &self.fabric.config.dcqcn;
        let s = &mut self.transport.senders[i];
        s.qp.roce().skip_ahead(k);
        let line_rate_bps = s.line_rate_bps;
        if d_recovering(&s.cc) {
            if let CcState::Dcqcn(d) = &mut s.cc {
                // The timers that would have fired, without CNPs.
                let increases = (delta.as_ps() / c.rate_increase_timer.as_ps()).min(MAX_CC_STEPS);
                for _ in 0..increases {
                    d.increase(c, line_rate_bps, IncreaseSource::Timer);
                }
                let updates = (delta.as_ps() / c.alpha_update.as_ps()).min(MAX_CC_STEPS);
                for _ in 0..updates {
                    d.update_alpha(c);
                }
            }
        }
        match &mut s.cc {
            CcState::Dctcp(d) => d.window_end_psn += k,
            CcState::Hpcc(h) => h.update_psn += k,
            CcState::Timely(t) => {
                t.update_psn += k;
                t.probe_sent_at += delta;
            }
            CcState::Dcqcn(_) | CcState::LineRate => {}
        }
        s.next_send += delta;
        s.last_ack += delta;
        s.skipped_bytes += u64::from(k) * mtu;
        s.skipped += delta;
        self.stats.sent_payload_bytes += u64::from(k) * mtu;
        self.stats.ff_flow_steady_bytes += u64::from(k) * mtu;
    }

    /// Moves the local receivers by their flows' `votes` and their last
    /// CNPs (freed receivers' too) by their flows' `shift`.
    pub(super) fn ff_advance_receivers(&mut self, votes: &[u64], shift: impl Fn(u32) -> SimTime) {
        let mtu = u64::from(self.fabric.config.mtu_bytes);
        for (&flow, rx) in self.transport.receivers.iter_mut() {
            let k = votes[flow as usize] as u32;
            if k > 0 {
                if let RxQp::Roce(qp) = &mut rx.qp {
                    qp.skip_ahead(k);
                }
                self.stats.delivered_payload_bytes += u64::from(k) * mtu;
            }
            if let Some(t) = &mut rx.last_cnp {
                *t += shift(flow);
            }
        }
        for (&flow, t) in self.transport.received_cnp.iter_mut() {
            *t += shift(flow);
        }
    }

    /// How far a pending event for `target` moves with the domains' jumps
    /// agreed at the last check: a packet of a jumped flow (its PSN moving
    /// with it) or its timer by its domain's jump; a transmission, a wake
    /// or a PFC frame at a port of a jumped domain (any packet there too)
    /// by that domain's; anything else not at all.
    pub(crate) fn ff_domain_event(&self, target: NodeId, event: &mut NetEvent) -> SimTime {
        let Some(d) = self.ff.domains.as_ref() else {
            return SimTime::ZERO;
        };
        let at_port = |port: u16| {
            let r = super::memo::resources::port_resource(self.fabric, target.0, port);
            d.resource_shift
                .get(&r)
                .map_or(SimTime::ZERO, |&(shift, _)| shift)
        };
        match event {
            NetEvent::Arrive { port, pkt, .. } => {
                let flow_kind = matches!(
                    pkt.kind,
                    PacketKind::Data | PacketKind::Ack | PacketKind::Nack | PacketKind::Cnp
                );
                let shift = d.shift_ps.get(pkt.flow as usize).copied().unwrap_or(0);
                if flow_kind && shift > 0 {
                    skip_packet(pkt, &d.votes);
                    SimTime(shift)
                } else {
                    at_port(*port)
                }
            }
            NetEvent::TxDone { port }
            | NetEvent::Wake { port, .. }
            | NetEvent::Pfc { port, .. } => at_port(*port),
            NetEvent::Timer { flow, .. } => SimTime(d.shift_ps[*flow as usize]),
            _ => SimTime::ZERO,
        }
    }

    /// Makes the domains' jumps agreed at check `now`: their ports,
    /// senders and receivers move (samples due over a jump written where
    /// a node's ports all moved alike); each moved flow and port counts
    /// as unsampled until a window after its jump.
    pub(crate) fn ff_domain_advance(&mut self, now: SimTime) {
        let Some(d) = self.ff.domains.as_mut() else {
            return;
        };
        let votes = std::mem::take(&mut d.votes);
        let shift_ps = std::mem::take(&mut d.shift_ps);
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let (index, period_ps) = (ff.checks - 1, ff.config.period.as_ps());
        // The first check at or after the jump's end.
        let resume = |delta: SimTime| index + delta.as_ps().div_ceil(period_ps);
        let mut added = vec![[0u64; PRIORITIES]; self.ports.len()];
        let mut moved = vec![SimTime::ZERO; self.ports.len()];
        for (local, &node) in self.nodes.iter().enumerate() {
            for gp in self.port_base[local] as usize..self.port_base[local + 1] as usize {
                let port = (gp - self.port_base[local] as usize) as u16;
                let r = super::memo::resources::port_resource(self.fabric, node.0, port);
                let d = self.ff.domains.as_ref().expect("on");
                if let Some(&(delta, periods)) = d.resource_shift.get(&r) {
                    moved[gp] = delta;
                    added[gp] = self.ff_port_added(gp, delta, periods);
                }
            }
        }
        for local in 0..self.nodes.len() {
            let ports = &moved[self.port_base[local] as usize..self.port_base[local + 1] as usize];
            let first = ports.first().copied().unwrap_or(SimTime::ZERO);
            if first > SimTime::ZERO && ports.iter().all(|&m| m == first) {
                self.ff_samples(local, now, first, &added);
            }
        }
        for gp in 0..self.ports.len() {
            if moved[gp] > SimTime::ZERO {
                self.ff_advance_port(gp, moved[gp], &added[gp], &votes);
                let ff = self.ff.steady.as_mut().expect("on");
                ff.port_from[gp] = resume(moved[gp]);
            }
        }
        let active: Vec<usize> = self.active_senders().collect();
        for i in active {
            let flow = self.transport.senders[i].flow as usize;
            if shift_ps[flow] > 0 {
                let delta = SimTime(shift_ps[flow]);
                self.ff_advance_sender(i, delta, votes[flow] as u32);
                let ff = self.ff.steady.as_mut().expect("on");
                ff.first_sample[i] = resume(delta);
            }
        }
        self.ff_advance_receivers(&votes, |flow| SimTime(shift_ps[flow as usize]));
        let d = self.ff.domains.as_mut().expect("on");
        let (mut votes, mut shift_ps) = (votes, shift_ps);
        for &(f, _) in &d.jumped {
            votes[f as usize] = 0;
            shift_ps[f as usize] = 0;
        }
        d.jumped.clear();
        d.resource_shift.clear();
        (d.votes, d.shift_ps) = (votes, shift_ps);
    }

    /// Writes local node `local`'s samples due in `(now, now + delta]` as
    /// the steady state gives them: queues as they are, byte counters and
    /// the packet on the wire moved on at the windowed rates (`added` over
    /// the whole jump, per port).
    pub(super) fn ff_samples(
        &mut self,
        local: usize,
        now: SimTime,
        delta: SimTime,
        added: &[[u64; PRIORITIES]],
    ) {
        self.sample_until(local, now);
        let end = now + delta;
        if self.next_sample[local] > end {
            return;
        }
        let ports = self.port_base[local] as usize..self.port_base[local + 1] as usize;
        let base: Vec<([u64; PRIORITIES], SimTime)> = ports
            .clone()
            .map(|gp| {
                (
                    self.ports[gp].tx_bytes(&self.tx_flushed[gp]),
                    self.ports[gp].egress.busy_until,
                )
            })
            .collect();
        while self.next_sample[local] <= end {
            let at = self.next_sample[local];
            let elapsed = at - now;
            for (gp, &(tx, busy)) in ports.clone().zip(&base) {
                for prio in 0..PRIORITIES {
                    let part = u128::from(added[gp][prio]) * u128::from(elapsed.as_ps())
                        / u128::from(delta.as_ps());
                    self.ports[gp].flush_tx(&mut self.tx_flushed[gp])[prio] =
                        tx[prio] + part as u64;
                }
                self.ports[gp].egress.busy_until = busy + elapsed;
            }
            self.sample_until(local, at);
        }
        for (gp, &(tx, busy)) in ports.zip(&base) {
            *self.ports[gp].flush_tx(&mut self.tx_flushed[gp]) = tx;
            self.ports[gp].egress.busy_until = busy;
        }
    }
}
