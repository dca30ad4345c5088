//! FIFO fluid sharing: the fluid image of output-queued FIFO switches fed
//! by senders that nothing slows down (`--cc none`, no PFC pause).
//!
//! ```text
//!  NIC (round robin: C / n each) ──> channel ──> channel ──> ... ──> last channel
//!                                    │ input rates r_f, sum R
//!                                    │ R <= C and no backlog: passes through
//!                                    └ otherwise a FIFO of segments, each the
//!                                      composition of what arrived while the
//!                                      inputs were constant; the head leaves
//!                                      at C, flow f at C r_f / R_head
//! ```
//!
//! Each flow injects its wire bytes at its share of its host port; every
//! channel it crosses either passes its rate through (no backlog, inputs
//! within capacity) or queues it: the channel keeps the segments of its
//! backlog in arrival order and serves the head one at capacity, each flow
//! in the proportion it arrived in. A flow has left a channel when its input
//! there has ended and no segment holding it remains; it has drained when it
//! has left its last channel. Unlike max-min sharing, a flow slowed upstream
//! gets less of a later bottleneck than one arriving at line rate, and bytes
//! queued while another flow hogged a link leave at full rate once it ends:
//! what lets some flows of a permutation finish early at packet level.
//!
//! Volumes are bit-picoseconds (bits x 10^12) in `u128`, rates bits per
//! second, times integer picoseconds: a run is reproducible bit for bit. A
//! flow alone injects at its NIC's rate and drains at its bottleneck's,
//! exactly as max-min sharing has it.

use super::meter::LinkMeter;
use netsim_engine::SimTime;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// What arrived at a channel while its inputs were constant.
#[derive(Clone, Copy, Debug)]
struct Segment {
    /// Its `(entry, input rate)` pairs, the front ones of `Channel::members`
    /// after those of the segments ahead of it.
    members: u32,
    rate_bps: u64,
    arrived: u128,
    served: u128,
}

impl Segment {
    fn left(&self) -> u128 {
        self.arrived - self.served
    }
}

/// A channel's inputs, backlog and outputs.
#[derive(Debug, Default)]
struct Channel {
    capacity_bps: u64,
    /// Entries (a flow at this hop) arriving at a non-zero rate, and the sum.
    inputs: Vec<u32>,
    in_bps: u64,
    /// Entries leaving at a non-zero rate.
    outputs: Vec<u32>,
    /// Entries whose input ended and that have not yet left.
    ending: Vec<u32>,
    /// The backlog, oldest first; the back one is still arriving if `open`.
    segments: VecDeque<Segment>,
    members: VecDeque<(u32, u64)>,
    open: bool,
    opened: SimTime,
    settled: SimTime,
    inputs_changed: bool,
    staged: bool,
    /// Tells the pending event from stale ones.
    version: u32,
    /// Active flows crossing it (UGAL's load).
    flows: u32,
    /// On a host port: the flows still injecting.
    injecting: Vec<u32>,
    injecting_dirty: bool,
}

/// Flows over FIFO channels; see the module doc.
#[derive(Debug)]
pub struct Fifo {
    channels: Vec<Channel>,
    /// Per flow: its channels, `path[path_start[f]..][..path_len[f]]`; an
    /// entry is an index into `path` (the flow at one hop).
    path: Vec<u32>,
    path_start: Vec<u32>,
    path_len: Vec<u8>,
    entry_flow: Vec<u32>,
    wire: Vec<u128>,
    inject_left: Vec<u128>,
    inject_bps: Vec<u64>,
    inject_since: Vec<SimTime>,
    inject_version: Vec<u32>,
    // Per entry.
    in_bps: Vec<u64>,
    in_ended: Vec<bool>,
    out_bps: Vec<u64>,
    out_since: Vec<SimTime>,
    sent: Vec<u128>,
    /// Segments of the entry's channel that hold it.
    pending: Vec<u32>,
    mark: Vec<u32>,
    epoch: u32,
    /// `(at, host channel or channel, flow or channel, version)`: 0 is an
    /// injection ending, 1 a channel's head segment or backlog emptying.
    events: BinaryHeap<Reverse<(SimTime, u8, u32, u32)>>,
    stage: Vec<u32>,
    dirty_hosts: Vec<u32>,
    /// A channel's new outputs, reused.
    scratch: Vec<(u32, u64)>,
}

impl Fifo {
    /// Channels with these capacities (> 0 each), room for `flows` flow ids.
    pub fn new(capacity_bps: Vec<u64>, flows: usize) -> Fifo {
        assert!(
            capacity_bps.iter().all(|&c| c > 0),
            "a channel without capacity"
        );
        Fifo {
            channels: capacity_bps
                .into_iter()
                .map(|capacity_bps| Channel {
                    capacity_bps,
                    ..Channel::default()
                })
                .collect(),
            path: Vec::new(),
            path_start: vec![0; flows],
            path_len: vec![0; flows],
            entry_flow: Vec::new(),
            wire: vec![0; flows],
            inject_left: vec![0; flows],
            inject_bps: vec![0; flows],
            inject_since: vec![SimTime::ZERO; flows],
            inject_version: vec![0; flows],
            in_bps: Vec::new(),
            in_ended: Vec::new(),
            out_bps: Vec::new(),
            out_since: Vec::new(),
            sent: Vec::new(),
            pending: Vec::new(),
            mark: Vec::new(),
            epoch: 0,
            events: BinaryHeap::new(),
            stage: Vec::new(),
            dirty_hosts: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Active flows crossing `channel`.
    pub fn load(&self, channel: u32) -> usize {
        self.channels[channel as usize].flows as usize
    }

    /// Flow `flow` starts injecting `wire_bit_ps` (wire bits x 10^12) over
    /// `channels` (each at most once, the first its host port) at `now`.
    pub fn add(&mut self, flow: u32, channels: &[u32], wire_bit_ps: u128, now: SimTime) {
        let f = flow as usize;
        assert!(
            !channels.is_empty() && channels.len() <= usize::from(u8::MAX),
            "flow {flow}: a path of {} channels",
            channels.len()
        );
        let start = self.path.len();
        self.path_start[f] = u32::try_from(start).expect("under 2^32 path entries");
        self.path_len[f] = channels.len() as u8;
        self.path.extend_from_slice(channels);
        let entries = self.path.len();
        self.entry_flow.resize(entries, flow);
        self.in_bps.resize(entries, 0);
        self.in_ended.resize(entries, false);
        self.out_bps.resize(entries, 0);
        self.out_since.resize(entries, now);
        self.sent.resize(entries, 0);
        self.pending.resize(entries, 0);
        self.mark.resize(entries, 0);
        for &c in channels {
            self.channels[c as usize].flows += 1;
        }
        self.wire[f] = wire_bit_ps;
        self.inject_left[f] = wire_bit_ps;
        self.inject_bps[f] = 0;
        self.inject_since[f] = now;
        let host = &mut self.channels[channels[0] as usize];
        host.injecting.push(flow);
        self.mark_host(channels[0]);
    }

    /// The earliest instant at which something is due.
    pub fn next_event(&mut self) -> Option<SimTime> {
        while let Some(&Reverse((at, kind, id, version))) = self.events.peek() {
            let current = if kind == 0 {
                self.inject_version[id as usize]
            } else {
                self.channels[id as usize].version
            };
            if current == version {
                return Some(at);
            }
            self.events.pop();
        }
        None
    }

    /// Everything due at `now` (after the instant's [`Fifo::add`]s):
    /// injections ending, segments leaving, new shares and their
    /// consequences downstream. Appends the flows that left their last
    /// channel to `drained` and meters every rate change.
    pub fn step(&mut self, now: SimTime, meter: &mut LinkMeter, drained: &mut Vec<u32>) {
        while let Some(&Reverse((at, kind, id, version))) = self.events.peek() {
            if at > now {
                break;
            }
            self.events.pop();
            if kind == 0 {
                if self.inject_version[id as usize] == version {
                    self.injected(id, now);
                }
            } else if self.channels[id as usize].version == version {
                self.settle(id, now);
                self.stage_channel(id);
            }
        }
        while let Some(host) = self.dirty_hosts.pop() {
            self.reshare_host(host, now);
        }
        while let Some(c) = self.stage.pop() {
            self.restage(c, now, meter, drained);
        }
    }

    fn mark_host(&mut self, host: u32) {
        let h = &mut self.channels[host as usize];
        if !h.injecting_dirty {
            h.injecting_dirty = true;
            self.dirty_hosts.push(host);
        }
    }

    fn stage_channel(&mut self, c: u32) {
        let ch = &mut self.channels[c as usize];
        if !ch.staged {
            ch.staged = true;
            self.stage.push(c);
        }
    }

    /// Flow `flow` has injected its last byte.
    fn injected(&mut self, flow: u32, now: SimTime) {
        let f = flow as usize;
        let elapsed = u128::from((now - self.inject_since[f]).as_ps());
        self.inject_left[f] =
            self.inject_left[f].saturating_sub(u128::from(self.inject_bps[f]) * elapsed);
        self.inject_since[f] = now;
        self.inject_bps[f] = 0;
        let e = self.path_start[f];
        let host = self.path[e as usize];
        let h = &mut self.channels[host as usize];
        let at = h
            .injecting
            .iter()
            .position(|&g| g == flow)
            .expect("injecting");
        h.injecting.swap_remove(at);
        self.mark_host(host);
        self.set_input(e, 0, true, now);
    }

    /// Host port `host` shares its capacity equally among the flows still
    /// injecting through it (the NIC serves its queue pairs round robin).
    fn reshare_host(&mut self, host: u32, now: SimTime) {
        let h = &mut self.channels[host as usize];
        h.injecting_dirty = false;
        let n = h.injecting.len() as u64;
        if n == 0 {
            return;
        }
        let rate = h.capacity_bps / n;
        for k in 0..self.channels[host as usize].injecting.len() {
            let flow = self.channels[host as usize].injecting[k];
            let f = flow as usize;
            if self.inject_bps[f] == rate.max(1) {
                continue;
            }
            let elapsed = u128::from((now - self.inject_since[f]).as_ps());
            self.inject_left[f] =
                self.inject_left[f].saturating_sub(u128::from(self.inject_bps[f]) * elapsed);
            self.inject_since[f] = now;
            self.inject_bps[f] = rate.max(1);
            self.inject_version[f] = self.inject_version[f].wrapping_add(1);
            let ps = (self.inject_left[f] / u128::from(rate.max(1))).max(1);
            let at = u64::try_from(ps).map_or(SimTime::MAX, |ps| now.saturating_add(SimTime(ps)));
            self.events
                .push(Reverse((at, 0, flow, self.inject_version[f])));
            self.set_input(self.path_start[f], rate.max(1), false, now);
        }
    }

    /// Channel `c` up to `now`: arrivals into its open segment, service of
    /// its backlog (segments served whole are dropped).
    fn settle(&mut self, c: u32, now: SimTime) {
        let ch = &mut self.channels[c as usize];
        let elapsed = u128::from((now - ch.settled).as_ps());
        ch.settled = now;
        if elapsed == 0 || ch.segments.is_empty() {
            return;
        }
        if ch.open {
            let back = ch.segments.back_mut().expect("an open segment");
            back.arrived += u128::from(ch.in_bps) * elapsed;
        }
        let capacity = u128::from(ch.capacity_bps);
        let mut budget = capacity * elapsed;
        let mut popped = false;
        while budget > 0 {
            let count = ch.segments.len();
            let Some(head) = ch.segments.front_mut() else {
                break;
            };
            let take = budget.min(head.left());
            head.served += take;
            budget -= take;
            let sealed = !(ch.open && count == 1);
            if sealed && head.left() < capacity {
                // Served whole, up to less than a picosecond's worth.
                let members = head.members;
                ch.segments.pop_front();
                for _ in 0..members {
                    let (e, _) = ch.members.pop_front().expect("segment members");
                    self.pending[e as usize] -= 1;
                }
                popped = true;
            } else {
                break;
            }
        }
        if popped || ch.open {
            self.stage_channel(c);
        }
    }

    /// Entry `e` now arrives at `rate_bps`; `ended`: it has left the channel
    /// before (its last byte has arrived).
    fn set_input(&mut self, e: u32, rate_bps: u64, ended: bool, now: SimTime) {
        let c = self.path[e as usize];
        self.settle(c, now);
        let ei = e as usize;
        let old = self.in_bps[ei];
        if old == rate_bps && !ended {
            return;
        }
        let ch = &mut self.channels[c as usize];
        ch.in_bps = ch.in_bps - old + rate_bps;
        if old == 0 && rate_bps > 0 {
            ch.inputs.push(e);
        } else if old > 0 && rate_bps == 0 {
            let at = ch.inputs.iter().position(|&g| g == e).expect("an input");
            ch.inputs.swap_remove(at);
        }
        self.in_bps[ei] = rate_bps;
        if ended {
            self.in_ended[ei] = true;
            ch.ending.push(e);
            // What the rates upstream left of the flow's last picosecond
            // arrives with it.
            let flow = self.entry_flow[ei] as usize;
            let received = if e == self.path_start[flow] {
                self.wire[flow] - self.inject_left[flow]
            } else {
                self.sent[ei - 1]
            };
            let residue = self.wire[flow].saturating_sub(received);
            if ch.open && old > 0 && ch.opened < now {
                ch.segments.back_mut().expect("an open segment").arrived += residue;
            }
        }
        ch.inputs_changed = true;
        self.stage_channel(c);
    }

    /// Entry `e` leaves its channel at `rate_bps` from `now` (`ended`: its
    /// last byte has left), and so arrives at its next hop.
    fn set_output(
        &mut self,
        e: u32,
        rate_bps: u64,
        ended: bool,
        now: SimTime,
        meter: &mut LinkMeter,
    ) {
        let ei = e as usize;
        let old = self.out_bps[ei];
        if old == rate_bps && !ended {
            return;
        }
        let c = self.path[ei];
        let elapsed = u128::from((now - self.out_since[ei]).as_ps());
        self.sent[ei] += u128::from(old) * elapsed;
        self.out_since[ei] = now;
        self.out_bps[ei] = rate_bps;
        meter.change(&[c], &[1], old, rate_bps, now);
        let flow = self.entry_flow[ei] as usize;
        if e + 1 < self.path_start[flow] + u32::from(self.path_len[flow]) {
            self.set_input(e + 1, rate_bps, ended, now);
        }
    }

    /// Channel `c` after its inputs changed or its backlog moved: reopens
    /// its arriving segment, sets every output, lets ended flows leave, and
    /// schedules its next event.
    fn restage(&mut self, c: u32, now: SimTime, meter: &mut LinkMeter, drained: &mut Vec<u32>) {
        self.settle(c, now);
        let ch = &mut self.channels[c as usize];
        ch.staged = false;
        let capacity = u128::from(ch.capacity_bps);
        if ch.inputs_changed && ch.open {
            ch.open = false;
            let back = *ch.segments.back().expect("an open segment");
            if ch.opened == now || back.arrived == 0 {
                ch.segments.pop_back();
                for _ in 0..back.members {
                    let (e, _) = ch.members.pop_back().expect("segment members");
                    self.pending[e as usize] -= 1;
                }
            }
        }
        ch.inputs_changed = false;
        // Is the backlog gone (up to less than a picosecond's worth)?
        let empty = ch.segments.iter().all(|s| s.left() < capacity);
        let passthrough = empty && u128::from(ch.in_bps) <= capacity;
        if passthrough {
            while let Some(s) = ch.segments.pop_front() {
                for _ in 0..s.members {
                    let (e, _) = ch.members.pop_front().expect("segment members");
                    self.pending[e as usize] -= 1;
                }
            }
            ch.open = false;
        } else if !ch.open && ch.in_bps > 0 {
            for &e in &ch.inputs {
                ch.members.push_back((e, self.in_bps[e as usize]));
                self.pending[e as usize] += 1;
            }
            ch.segments.push_back(Segment {
                members: ch.inputs.len() as u32,
                rate_bps: ch.in_bps,
                arrived: 0,
                served: 0,
            });
            ch.open = true;
            ch.opened = now;
        }
        // New outputs: the inputs passed through, or the head at capacity.
        if self.epoch == u32::MAX {
            // About to wrap: forget every mark.
            self.mark.fill(0);
            self.epoch = 0;
        }
        self.epoch += 1;
        let epoch = self.epoch;
        let mut next = std::mem::take(&mut self.scratch);
        next.clear();
        let ch = &self.channels[c as usize];
        if passthrough {
            for &e in &ch.inputs {
                next.push((e, self.in_bps[e as usize]));
            }
        } else if let Some(head) = ch.segments.front() {
            for &(e, r) in ch.members.iter().take(head.members as usize) {
                let share = (u128::from(ch.capacity_bps) * u128::from(r)
                    / u128::from(head.rate_bps)) as u64;
                next.push((e, share.max(1)));
            }
        }
        let old_outputs = std::mem::take(&mut self.channels[c as usize].outputs);
        for &(e, _) in &next {
            self.mark[e as usize] = epoch;
        }
        for &e in &old_outputs {
            if self.mark[e as usize] != epoch {
                self.set_output(e, 0, false, now, meter);
            }
        }
        let mut outputs = old_outputs;
        outputs.clear();
        for &(e, r) in &next {
            outputs.push(e);
            self.set_output(e, r, false, now, meter);
        }
        self.channels[c as usize].outputs = outputs;
        self.scratch = next;
        // Flows whose last byte has left.
        let mut k = 0;
        while k < self.channels[c as usize].ending.len() {
            let e = self.channels[c as usize].ending[k];
            if self.pending[e as usize] > 0 || self.in_bps[e as usize] > 0 {
                k += 1;
                continue;
            }
            self.channels[c as usize].ending.swap_remove(k);
            self.leave(e, now, meter, drained);
        }
        // The next event: the head served whole, or the backlog gone.
        let ch = &mut self.channels[c as usize];
        ch.version = ch.version.wrapping_add(1);
        if let Some(head) = ch.segments.front() {
            let head_open = ch.open && ch.segments.len() == 1;
            let ps = if !head_open {
                Some(head.left() / capacity)
            } else if u128::from(ch.in_bps) < capacity {
                Some(head.left() / (capacity - u128::from(ch.in_bps)))
            } else {
                None
            };
            if let Some(ps) = ps {
                let at = u64::try_from(ps.max(1))
                    .map_or(SimTime::MAX, |ps| now.saturating_add(SimTime(ps)));
                self.events.push(Reverse((at, 1, c, ch.version)));
            }
        }
    }

    /// Entry `e` has left its channel: its output ends (with what its rates
    /// left of its last picosecond credited), and so does its input at the
    /// next hop; past the last hop the flow has drained.
    fn leave(&mut self, e: u32, now: SimTime, meter: &mut LinkMeter, drained: &mut Vec<u32>) {
        let ei = e as usize;
        self.set_output(e, 0, true, now, meter);
        let c = self.path[ei];
        let flow = self.entry_flow[ei];
        let f = flow as usize;
        meter.credit(&[c], &[1], self.wire[f].saturating_sub(self.sent[ei]));
        if e + 1 == self.path_start[f] + u32::from(self.path_len[f]) {
            let start = self.path_start[f] as usize;
            for i in start..start + usize::from(self.path_len[f]) {
                let c = self.path[i] as usize;
                self.channels[c].flows -= 1;
            }
            drained.push(flow);
        }
    }
}

#[cfg(test)]
mod tests;
