//! Fast-forward of steady states (DESIGN.md §3c): samples of every active
//! flow and port at the engine's check instants, the steady-state test and
//! the jump a shard proposes, and how a jump advances the network's state.
//!
//! The engine decides nothing about packets: it asks for a proposal, agrees
//! on the jump `delta` and the per-flow votes (packets each flow moves by,
//! from its sender's shard), moves every unpinned event by `delta`, and
//! hands the payloads and the state to this file.

use crate::network::cc::{CcState, IncreaseSource};
use crate::network::config::FastForward;
use crate::network::packet::{Packet, PacketKind, PRIORITIES, PRIO_DATA};
use crate::network::transport::{Qp, SenderReliability};
use crate::network::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::{NodeId, SimTime, SkipProposal};

/// Most CC timer steps a jump applies or looks ahead.
pub(super) const MAX_CC_STEPS: u64 = 100_000;
/// Packets a congested switch queue's half-window means may differ by
/// beyond the tolerance: instants of a queue PFC and ECN keep swinging.
const CONGESTED_QUEUE_SLACK_PKTS: u64 = 4;

/// DCQCN between cuts: timers running, no CNP since the last decrease check.
pub(super) fn d_recovering(cc: &CcState) -> bool {
    matches!(cc, CcState::Dcqcn(d) if d.timers_running && !d.cnp_since_decrease && !d.cnp_since_alpha)
}

/// The slots of the window of `periods` periods ending at `slot`, oldest
/// to newest (wrapping in a ring of `slots`), offset by `base`.
pub(super) fn oldest_to_newest(
    base: usize,
    slot: usize,
    slots: usize,
    periods: usize,
) -> impl Iterator<Item = usize> + Clone {
    (0..=periods).map(move |k| base + (slot + slots - periods + k) % slots)
}

/// A sender not sampled yet.
const UNSAMPLED: u64 = u64::MAX;

/// Per-shard fast-forward state: ring buffers of samples, one slot per
/// check instant.
#[derive(Debug)]
pub(crate) struct Steady {
    pub(super) config: FastForward,
    /// Samples kept per flow and port: the window's `W` periods need `W + 1`.
    pub(super) slots: usize,
    /// Check instants seen so far; the current one's slot is `checks % slots`.
    pub(super) checks: u64,
    /// The first check of the current contiguous history (reset by a jump
    /// or a gap between checks).
    pub(super) valid_from: u64,
    last_check: SimTime,
    /// Per sender, acknowledged packets, when the last of them was
    /// acknowledged, and retransmissions, at each slot.
    pub(super) acked: Vec<u32>,
    pub(super) ack_time: Vec<SimTime>,
    retransmitted: Vec<u64>,
    /// Per sender, its rate-based CC's rate (b/s; 0 for window-based or
    /// none) and the CNPs it received, at each slot.
    cc_rate: Vec<u64>,
    cnps: Vec<u64>,
    /// Per sender, the check it was first sampled at while active.
    pub(super) first_sample: Vec<u64>,
    /// Per port, data-queue bytes, bytes started per priority and bytes
    /// on the wire (pro rata, free of the packet quantum) at each slot.
    pub(super) qlen: Vec<u64>,
    pub(super) wire: Vec<u64>,
    pub(super) tx: Vec<[u64; PRIORITIES]>,
    /// Drops, PFC pauses and finished flows on this shard at each slot.
    disturbances: Vec<u64>,
    /// The last check at which that count had moved since the check
    /// before: a window must start a period after it (see `settled`).
    disturbed_at: u64,
    /// Per port, the check its samples count from again after a domain's
    /// jump moved it (`--ff-scope domain`; 0 otherwise).
    pub(super) port_from: Vec<u64>,
    /// The periods the whole run is judged on at this check: the short
    /// window when every flow sending is quiet (agreed), else the long.
    pub(super) run_periods: usize,
}

impl Steady {
    /// Samples of `ports` ports and of no sender yet.
    pub(crate) fn new(config: FastForward, ports: usize) -> Steady {
        let slots = config.window_periods() as usize + 1;
        Steady {
            config,
            slots,
            checks: 0,
            valid_from: 0,
            last_check: SimTime::ZERO,
            acked: Vec::new(),
            ack_time: Vec::new(),
            retransmitted: Vec::new(),
            cc_rate: Vec::new(),
            cnps: Vec::new(),
            first_sample: Vec::new(),
            qlen: vec![0; ports * slots],
            wire: vec![0; ports * slots],
            tx: vec![[0; PRIORITIES]; ports * slots],
            disturbances: vec![0; slots],
            disturbed_at: 0,
            port_from: vec![0; ports],
            run_periods: slots - 1,
        }
    }

    /// What the sample rings hold per port and per sender slot, for the
    /// memory check: a window of many periods multiplies both.
    pub(crate) fn bytes_per_port_and_sender(config: &FastForward) -> (u64, u64) {
        let slots = u64::from(config.window_periods()) + 1;
        let port = slots * (8 + 8 + 8 * PRIORITIES as u64) + 8;
        let sender = slots * (4 + 8 + 8 + 8 + 8) + 8;
        (port, sender)
    }

    /// Sender slot `i` holds a new flow: its samples are as a sender's
    /// never sampled (the slot may have held a finished flow's).
    pub(crate) fn sender_opened(&mut self, i: usize) {
        if self.first_sample.len() <= i {
            let senders = i + 1;
            self.acked.resize(senders * self.slots, 0);
            self.ack_time.resize(senders * self.slots, SimTime::ZERO);
            self.retransmitted.resize(senders * self.slots, 0);
            self.cc_rate.resize(senders * self.slots, 0);
            self.cnps.resize(senders * self.slots, 0);
            self.first_sample.resize(senders, UNSAMPLED);
        }
        let range = i * self.slots..(i + 1) * self.slots;
        self.acked[range.clone()].fill(0);
        self.ack_time[range.clone()].fill(SimTime::ZERO);
        self.retransmitted[range.clone()].fill(0);
        self.cc_rate[range.clone()].fill(0);
        self.cnps[range].fill(0);
        self.first_sample[i] = UNSAMPLED;
    }

    /// A window of `periods` periods in picoseconds.
    pub(super) fn window_ps(&self, periods: usize) -> u128 {
        u128::from(self.config.period.as_ps()) * periods as u128
    }

    /// Picoseconds between the last acknowledgements sender `i` had at the
    /// first and last check of the window of `periods` ending at `slot`
    /// (zero if none moved).
    pub(super) fn ack_span_ps(&self, i: usize, slot: usize, periods: usize) -> u128 {
        let oldest = self.back(slot, periods);
        let (new, old) = (
            self.ack_time[i * self.slots + slot],
            self.ack_time[i * self.slots + oldest],
        );
        u128::from(new.as_ps().saturating_sub(old.as_ps()))
    }

    /// Sender `i`'s rate if it is steady on its own over the window of
    /// `periods` ending at check `index` (its slot `slot`): sampled over
    /// the whole window, no retransmission in
    /// it, acknowledgements over the whole window (their first and last
    /// span it to within a period) at a per-period count varying by at
    /// most the tolerance plus one packet (acknowledgements come in whole
    /// packets). Gives the window's acknowledged packets and their span.
    fn flow_rate(
        &self,
        i: usize,
        (index, slot): (u64, usize),
        retx: u64,
        periods: usize,
    ) -> Option<(u64, u128)> {
        let oldest = self.back(slot, periods);
        if self.first_sample[i].max(self.valid_from) + periods as u64 > index
            || self.retransmitted[i * self.slots + oldest] != retx
        {
            return None;
        }
        let acked: Vec<u64> = oldest_to_newest(i * self.slots, slot, self.slots, periods)
            .map(|k| u64::from(self.acked[k]))
            .collect();
        let total = acked[periods] - acked[0];
        let span_ps = self.ack_span_ps(i, slot, periods);
        let period_ps = u128::from(self.config.period.as_ps());
        let per_period = acked.windows(2).map(|w| w[1] - w[0]);
        // Congested, a rate swings within a period (DCQCN's cuts and
        // recoveries, PFC's pauses): steady when its two half windows
        // agree, to within a packet.
        let half = periods.div_ceil(2);
        let halves = [acked[half] - acked[0], acked[periods] - acked[half]];
        let flat = if self.config.congested {
            self.steady(halves.into_iter(), 1)
        } else {
            self.steady(per_period, 1)
        };
        if total == 0 || span_ps.abs_diff(self.window_ps(periods)) > period_ps || !flat {
            return None;
        }
        Some((total, span_ps))
    }

    /// Whether a window ending at check `index` lies wholly a period past
    /// check `since` (the last disturbance) and within the history: the
    /// packets a flow's end finds queued still arrive at the old spacing
    /// for up to a period, and a window that starts on them measures the
    /// old rate into the new one (a flow left alone on a link, jumped at
    /// the first full window after its neighbour's end, ran 0.35% slow).
    /// A jump or a gap restarts the history (`valid_from`) without a
    /// change in the flows' spacing: the window may start right there.
    fn settled(&self, since: u64, index: u64) -> bool {
        let periods = self.run_periods as u64;
        since + periods < index && self.valid_from + periods <= index
    }

    /// Whether sender `i` (now at `cnps` CNPs) took cuts in both halves
    /// of the window ending at `slot`, as many in each to within one: its
    /// rate's cycle is shorter than a half window, so the halves average it.
    fn cycling(&self, i: usize, slot: usize, cnps: u64) -> bool {
        let at = |k: usize| self.cnps[i * self.slots + (slot + 1 + k) % self.slots];
        debug_assert_eq!(at(self.slots - 1), cnps);
        let half = self.slots / 2;
        let (first, second) = (at(half) - at(0), at(self.slots - 1) - at(half));
        first > 0 && second > 0 && first.abs_diff(second) <= 1
    }

    /// How far a flow with `left` packets to go, acknowledging `total` in
    /// `span_ps`, may jump: the time to its last packet at that rate less
    /// a window of `periods` and a period (its tail is simulated packet by
    /// packet); `None` when it is closer to its end than that.
    fn room_ps(&self, left: u64, (total, span_ps): (u64, u128), periods: usize) -> Option<u128> {
        let to_end_ps = u128::from(left) * span_ps / u128::from(total);
        to_end_ps.checked_sub(self.window_ps(periods) + u128::from(self.config.period.as_ps()))
    }

    /// Whether `samples` (oldest first) vary by at most the tolerance of
    /// their mean plus `slack`.
    pub(super) fn steady(&self, samples: impl Iterator<Item = u64> + Clone, slack: u64) -> bool {
        let (mut min, mut max, mut sum, mut n) = (u64::MAX, 0u64, 0u128, 0u128);
        for v in samples {
            min = min.min(v);
            max = max.max(v);
            sum += u128::from(v);
            n += 1;
        }
        let mean = sum as f64 / n.max(1) as f64;
        (max - min) as f64 <= self.config.tolerance * mean + slack as f64
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Local sender indices of the flows sending now (started, unfinished).
    pub(super) fn active_senders(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len())
            .filter(|&local| self.is_host(self.nodes[local]))
            .flat_map(move |local| {
                let ports = self.port_base[local] as usize..self.port_base[local + 1] as usize;
                ports.flat_map(move |gp| self.hosts[gp].flows.iter().map(|&i| i as usize))
            })
    }

    /// Samples this shard at check instant `now` and proposes a jump.
    pub(crate) fn ff_proposal(&mut self, now: SimTime) -> SkipProposal {
        let not_steady = |active| SkipProposal {
            max_skip: SimTime::ZERO,
            active,
        };
        let active: Vec<usize> = self.active_senders().collect();
        let replaying = self.memo_replaying();
        let (index, slot) = self.ff_sample(now, &active);
        self.ff_census(index, slot, &active);
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        if index < ff.valid_from + ff.run_periods as u64 || replaying {
            return not_steady(!active.is_empty());
        }
        if !ff.settled(ff.disturbed_at, index) || !self.ff_ports_steady(slot) {
            return not_steady(!active.is_empty());
        }
        match self.ff_max_skip(index, slot, &active) {
            Some(max_skip) => SkipProposal {
                max_skip,
                active: !active.is_empty(),
            },
            None => not_steady(true),
        }
    }

    /// Writes check `now`'s samples of every port and of the `active`
    /// senders; returns the check's index and slot.
    fn ff_sample(&mut self, now: SimTime, active: &[usize]) -> (u64, usize) {
        let dropped: u64 = self
            .port_side
            .iter()
            .map(|p| p.counters.dropped_pkts.iter().sum::<u64>())
            .sum();
        // A flow that finished in the window leaves its share of a link to
        // the others: their windowed rates, steady as they are, no longer
        // hold (a ring step ending beside a longer one doubles its rate).
        // Counted on the finished flow's sender shard; the agreed jump is
        // the minimum over shards, so whichever shard it finished on vetoes.
        // Congested, PFC pauses are part of the steady state (the rates
        // and queues they shape are judged on their averages instead).
        let ff = self.ff.steady.as_mut().expect("fast-forward is on");
        let pauses = self.stats.pfc_pauses * u64::from(!ff.config.congested);
        let disturbances = dropped + pauses + self.stats.flows_finished;
        let index = ff.checks;
        ff.checks += 1;
        if now != ff.last_check + ff.config.period {
            ff.valid_from = index;
        }
        ff.last_check = now;
        let slot = (index % ff.slots as u64) as usize;
        for (gp, p) in self.ports.iter().enumerate() {
            let tx = p.tx_bytes(&self.tx_flushed[gp]);
            ff.qlen[gp * ff.slots + slot] = p.egress.queued_bytes[PRIO_DATA];
            ff.tx[gp * ff.slots + slot] = tx;
            ff.wire[gp * ff.slots + slot] = p.wire_bytes_by(&tx, now);
        }
        let previous = (slot + ff.slots - 1) % ff.slots;
        if disturbances != ff.disturbances[previous] {
            ff.disturbed_at = index;
        }
        ff.disturbances[slot] = disturbances;
        for &i in active {
            let s = &self.transport.senders[i];
            if ff.first_sample[i] == UNSAMPLED {
                ff.first_sample[i] = index;
            }
            ff.acked[i * ff.slots + slot] = s.qp.acked();
            ff.ack_time[i * ff.slots + slot] = s.last_ack;
            ff.retransmitted[i * ff.slots + slot] = s.retransmitted_pkts;
            ff.cc_rate[i * ff.slots + slot] = match &s.cc {
                CcState::Dcqcn(d) => d.rate_bps as u64,
                CcState::Hpcc(h) => h.rate_bps as u64,
                CcState::Timely(t) => t.rate_bps as u64,
                CcState::Dctcp(_) | CcState::LineRate => 0,
            };
            ff.cnps[i * ff.slots + slot] = s.cnps;
        }
        (index, slot)
    }

    /// The census behind `flow_steady_bytes`: the packets each flow had
    /// acknowledged over the last period, counted when the flow is steady
    /// on its own, whatever the rest of the run does (what per-flow
    /// skipping, and so contention domains, could jump).
    fn ff_census(&mut self, index: u64, slot: usize, active: &[usize]) {
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let prev = (slot + ff.slots - 1) % ff.slots;
        let mtu = u64::from(self.fabric.config.mtu_bytes);
        for &i in active {
            let s = &self.transport.senders[i];
            if ff.first_sample[i].max(ff.valid_from) >= index {
                continue;
            }
            let long = ff.long();
            let steady = ff
                .flow_rate(i, (index, slot), s.retransmitted_pkts, long)
                .and_then(|rate| {
                    let left = u64::from(s.packets - s.qp.acked());
                    ff.room_ps(left, rate, long)
                });
            if steady.is_some() {
                let acked = ff.acked[i * ff.slots + slot] - ff.acked[i * ff.slots + prev];
                self.stats.ff_flow_steady_bytes += u64::from(acked) * mtu;
            }
        }
    }

    /// Whether no port is paused or pausing and every switch queue stayed
    /// within two packets over the window ending at `slot`; congested,
    /// whether every switch queue's means over the window's halves agree.
    fn ff_ports_steady(&self, slot: usize) -> bool {
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let periods = ff.run_periods;
        (0..self.nodes.len()).all(|local| {
            let ports = self.port_base[local] as usize..self.port_base[local + 1] as usize;
            ports
                .into_iter()
                .all(|gp| self.ff_port_steady(gp, self.nodes[local], slot, periods))
        })
    }

    /// [`Network::ff_ports_steady`] for port `gp` of node `node`, over the
    /// window of `periods` ending at `slot`.
    pub(super) fn ff_port_steady(
        &self,
        gp: usize,
        node: NodeId,
        slot: usize,
        periods: usize,
    ) -> bool {
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let config = &self.fabric.config;
        let packet_bytes = u64::from(config.mtu_bytes + config.header_bytes);
        let p = &self.ports[gp];
        // Moved by a domain's jump: not steady until a window after it.
        if ff.port_from[gp] + periods as u64 >= ff.checks {
            return false;
        }
        if !ff.config.congested && (p.paused || self.ingress[gp].pause_sent()) {
            return false;
        }
        // A queue falls only by sending: empty now and nothing started in
        // the window, it was empty all along (most ports, and a loop over
        // a long window's samples each at every check).
        let oldest = gp * ff.slots + ff.back(slot, periods);
        let idle =
            ff.qlen[gp * ff.slots + slot] == 0 && ff.tx[gp * ff.slots + slot] == ff.tx[oldest];
        if node.0 < self.fabric.topo.host_count() || idle {
            return true;
        }
        let queue = oldest_to_newest(gp * ff.slots, slot, ff.slots, periods).map(|k| ff.qlen[k]);
        if ff.config.congested {
            let q: Vec<u64> = queue.collect();
            let mean = |s: &[u64]| s.iter().sum::<u64>() / s.len() as u64;
            let slack = CONGESTED_QUEUE_SLACK_PKTS * packet_bytes;
            let half = periods.div_ceil(2);
            ff.steady([mean(&q[..=half]), mean(&q[half..])].into_iter(), slack)
        } else {
            ff.steady(queue, 2 * packet_bytes)
        }
    }

    /// The longest jump the `active` senders allow at check `index` (slot
    /// `slot`); `None` if a flow's rate is not steady.
    fn ff_max_skip(&self, index: u64, slot: usize, active: &[usize]) -> Option<SimTime> {
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let (max_skip, periods) = (ff.config.max_skip, ff.run_periods);
        active.iter().try_fold(max_skip, |m, &i| {
            Some(m.min(self.ff_flow_skip((index, slot), i, periods)?))
        })
    }

    /// The longest jump sender `i` allows at check `index` (slot `slot`),
    /// judged on the window of `periods` ending there: its room before it
    /// ends, and how far its rate-based CC may drift; `None` if its rate
    /// is not steady.
    pub(super) fn ff_flow_skip(
        &self,
        (index, slot): (u64, usize),
        i: usize,
        periods: usize,
    ) -> Option<SimTime> {
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let config = &self.fabric.config;
        let oldest = ff.back(slot, periods);
        let window_ps = ff.window_ps(periods);
        let mut max_skip = ff.config.max_skip;
        let s = &self.transport.senders[i];
        let rate = ff.flow_rate(i, (index, slot), s.retransmitted_pkts, periods)?;
        let left = u64::from(s.packets - s.qp.acked());
        let room_ps = ff.room_ps(left, rate, periods)?;
        max_skip = max_skip.min(SimTime(room_ps.min(u128::from(u64::MAX)) as u64));
        // A rate-based CC still moving (recovering after a cut, say):
        // jump no further than its drift over the window, extrapolated,
        // stays within the tolerance.
        let (first, last) = (
            ff.cc_rate[i * ff.slots + oldest],
            ff.cc_rate[i * ff.slots + slot],
        );
        let drift = first.abs_diff(last);
        let quiet = ff.cnps[i * ff.slots + oldest] == s.cnps;
        if let (CcState::Dcqcn(d), true) = (&s.cc, quiet && d_recovering(&s.cc)) {
            // DCQCN recovering without CNPs: its timers' steps are
            // known; jump no further than they keep the rate within
            // the tolerance (the jump applies them, see `ff_skip`).
            let c = &config.dcqcn;
            let allowed = if c.byte_counter_bytes != 0 {
                // Its byte counter would add increases that a jump
                // does not apply: no jump while it recovers.
                0
            } else {
                let mut ahead = d.clone();
                let mut steps = 0u64;
                while steps < MAX_CC_STEPS {
                    ahead.increase(c, s.line_rate_bps, IncreaseSource::Timer);
                    if (ahead.rate_bps - d.rate_bps).abs() > ff.config.tolerance * d.rate_bps {
                        break;
                    }
                    steps += 1;
                }
                c.rate_increase_timer.as_ps().saturating_mul(steps.max(1))
            };
            max_skip = max_skip.min(SimTime(allowed));
        } else if ff.config.congested
            && matches!(s.cc, CcState::Dcqcn(_))
            && ff.cycling(i, slot, s.cnps)
        {
            // DCQCN cutting and recovering within each half window: it
            // moves at its halves' steady average (its acknowledgements),
            // its state left at the window's last phase.
        } else if drift > 0 {
            let allowed = ff.config.tolerance * last as f64 / drift as f64 * window_ps as f64;
            max_skip = max_skip.min(SimTime(allowed.min(u64::MAX as f64) as u64));
        }
        Some(max_skip)
    }

    /// Per workload flow, the packets this shard's senders move by in a jump
    /// of `delta`: the window's acknowledged packets scaled to `delta`.
    pub(crate) fn ff_votes(&mut self, delta: SimTime, votes: &mut Vec<u64>) {
        votes.resize(self.fabric.workload.flows.len(), 0);
        let active: Vec<usize> = self.active_senders().collect();
        let ff = self.ff.steady.as_ref().expect("fast-forward is on");
        let slot = ((ff.checks - 1) % ff.slots as u64) as usize;
        let oldest = ff.back(slot, ff.run_periods);
        for i in active {
            let s = &self.transport.senders[i];
            let total = ff.acked[i * ff.slots + slot] - ff.acked[i * ff.slots + oldest];
            // The rate between the window's first and last acknowledgement.
            let span_ps = ff.ack_span_ps(i, slot, ff.run_periods);
            let k = u128::from(total) * u128::from(delta.as_ps()) / span_ps;
            // Never as far as the last packet (the proposal keeps a window).
            // Fast-forward runs RoCE queue pairs only (the config refuses UEC).
            let Qp::Roce(qp) = &s.qp else { continue };
            let room = s.packets.saturating_sub(qp.next_psn() + 1);
            votes[s.flow as usize] = (k as u64).min(u64::from(room));
        }
    }

    /// A pending event moving with a jump: its packet's PSN moves with its flow.
    pub(crate) fn ff_event(&self, event: &mut NetEvent, votes: &[u64]) {
        if let NetEvent::Arrive { pkt, .. } = event {
            skip_packet(pkt, votes);
        }
    }

    /// Advances this shard's state over the jump `now -> now + delta`.
    pub(crate) fn ff_skip(&mut self, now: SimTime, delta: SimTime, votes: &[u64]) {
        let periods = self
            .ff
            .steady
            .as_ref()
            .expect("fast-forward is on")
            .run_periods;
        let added: Vec<[u64; PRIORITIES]> = (0..self.ports.len())
            .map(|gp| self.ff_port_added(gp, delta, periods))
            .collect();
        let ff = self.ff.steady.as_mut().expect("fast-forward is on");
        ff.valid_from = ff.checks;
        for local in 0..self.nodes.len() {
            self.ff_samples(local, now, delta, &added);
        }
        for (gp, added) in added.iter().enumerate() {
            self.ff_advance_port(gp, delta, added, votes);
        }
        let active: Vec<usize> = self.active_senders().collect();
        for i in active {
            let k = votes[self.transport.senders[i].flow as usize] as u32;
            self.ff_advance_sender(i, delta, k);
        }
        self.ff_advance_receivers(votes, |_| delta);
    }

    /// Events whose time is absolute: a flow's or a compute task's start and
    /// end are set by the workload, not by the steady state.
    pub(crate) fn ff_pinned(event: &NetEvent) -> bool {
        matches!(
            event,
            NetEvent::FlowStart { .. }
                | NetEvent::TaskDone { .. }
                | NetEvent::InaEmit { .. }
                | NetEvent::MemoEnd { .. }
        )
    }
}

/// Moves a packet of a flow that jumped by `votes[flow]` packets.
pub(super) fn skip_packet(pkt: &mut Packet, votes: &[u64]) {
    if matches!(
        pkt.kind,
        PacketKind::Data | PacketKind::Ack | PacketKind::Nack | PacketKind::Cnp
    ) {
        pkt.psn += votes[pkt.flow as usize] as u32;
    }
}
