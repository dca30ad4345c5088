//! Memoization of repeated collective waves under fast-forward
//! (DESIGN.md §3c, "Memoization"): at a check instant where the whole
//! network is quiet, the collectives about to start (a *wave*) are either
//! simulated and recorded, or, when an earlier wave had the same key and
//! nothing else can start on the network before the recorded end, replayed:
//! their flows end at the recorded offsets as pinned events and no packet
//! is injected.
//!
//! Every decision is taken in [`Network::memo_agree`], at the engine's
//! check barrier, from values agreed by `all_max`: the same on every
//! shard, so runs stay byte-identical for 1 to N shards.

mod key;

use super::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::TaskKind;
use hashbrown::{HashMap, HashSet};
use key::Canon;
use netsim_engine::{Aborted, AllMax, Context, SimTime};

/// The recorded outcome of a wave, in the canonical order of its key.
#[derive(Debug)]
struct Record {
    /// From the wave's first start to its last flow's last acknowledgement.
    span: SimTime,
    /// Per canonical task, when its source (or compute host) and its
    /// destination saw it complete, from the wave's first start.
    done: Vec<(SimTime, SimTime)>,
    /// Per canonical flow: start offset and the flows-table counters.
    flows: Vec<FlowRecord>,
    /// Per labelled port, bytes started per priority.
    port_bytes: Vec<[u64; super::packet::PRIORITIES]>,
    /// Events handled while it ran, and the payload bytes it sent and
    /// delivered, PFC pauses it caused (summed over shards).
    events: u64,
    sent: u64,
    delivered: u64,
    pfc_pauses: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct FlowRecord {
    start: SimTime,
    retransmitted: u64,
    ecn_marked: u64,
    cnps: u64,
}

/// How a replayed flow ends: after its start, at its source and at its
/// destination; its flows-table counters; events avoided charged to it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Replayed {
    source_after: SimTime,
    destination_after: SimTime,
    record: FlowRecord,
}

/// What the memo is doing, the same on every shard.
#[derive(Debug)]
enum Phase {
    Idle,
    /// Simulating wave `canon` (first start `t0`) to record it.
    Recording(Box<Recording>),
    /// Replaying until the instant after `until`.
    Replaying {
        until: SimTime,
    },
}

#[derive(Debug)]
struct Recording {
    canon: Canon,
    /// Local completions still to be seen (source, destination, compute ends).
    outstanding: u64,
    /// Local observations: per canonical task, completion offsets + 1.
    done: Vec<(u64, u64)>,
    flows: Vec<FlowRecord>,
    /// Local ports among the labelled ones: (label, global port, tx at start).
    ports: Vec<(usize, usize, [u64; super::packet::PRIORITIES])>,
    events_at_start: u64,
    draws_at_start: u64,
    stats_at_start: super::NetStats,
    foreign_starts: u64,
}

/// Per shard memo state. The plan and the records are the same on every
/// shard; pending starts are this shard's hosts'.
#[derive(Debug)]
pub(crate) struct Memo {
    plan: key::Plan,
    records: HashMap<Vec<u64>, Record>,
    /// Keys whose first run could not be recorded (something else started
    /// during it, or a random draw was taken): not tried again.
    unrecordable: HashSet<Vec<u64>>,
    phase: Phase,
    /// Flows being replayed, by flow id.
    replay: HashMap<u32, Replayed>,
    /// Flow starts and compute ends scheduled on this shard, not yet handled.
    pending_flows: HashMap<u32, SimTime>,
    pending_computes: HashMap<u32, SimTime>,
    /// Events handled and random draws taken on this shard.
    pub(crate) events: u64,
    pub(crate) draws: u64,
}

impl Memo {
    pub(crate) fn new(fabric: &super::Fabric) -> Memo {
        Memo {
            plan: key::Plan::new(&fabric.workload),
            records: HashMap::new(),
            unrecordable: HashSet::new(),
            phase: Phase::Idle,
            replay: HashMap::new(),
            pending_flows: HashMap::new(),
            pending_computes: HashMap::new(),
            events: 0,
            draws: 0,
        }
    }
}

/// Encodes an optional time as `t + 1` (0: none) for `all_max`.
fn some(t: SimTime) -> u64 {
    t.as_ps() + 1
}

impl<S: TelemetrySink> Network<'_, S> {
    /// A flow start or compute task end was scheduled at `at`.
    pub(crate) fn memo_scheduled(&mut self, event: &NetEvent, at: SimTime) {
        let Some(m) = self.memo.as_mut() else { return };
        match *event {
            NetEvent::FlowStart { flow } => {
                m.pending_flows.insert(flow, at);
            }
            NetEvent::TaskDone { task } => {
                m.pending_computes.insert(task, at);
            }
            _ => {}
        }
    }

    /// Flow `flow` starts at the current host (sender `i`): counts the
    /// collective's hit or miss at its first flow, and replays the flow
    /// when its wave is replayed (true: nothing more to do).
    pub(crate) fn memo_flow_start(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        i: usize,
        flow: u32,
    ) -> bool {
        let Some(m) = self.memo.as_mut() else {
            return false;
        };
        m.pending_flows.remove(&flow);
        let replay = m.replay.get(&flow).copied();
        if let Some(c) = self.fabric.workload.flow_collective(flow) {
            if m.plan.first_flow(c) == flow {
                if replay.is_some() {
                    self.stats.memo_hits += 1;
                } else {
                    self.stats.memo_misses += 1;
                }
            }
        }
        if let Phase::Recording(r) = &mut m.phase {
            match r.canon.flow_index(flow) {
                Some(k) => r.flows[k].start = ctx.now() - r.canon.t0,
                None => r.foreign_starts += 1,
            }
        }
        let Some(r) = replay else { return false };
        let s = &mut self.senders[i];
        s.retransmitted_pkts = r.record.retransmitted;
        s.ecn_marked_pkts = r.record.ecn_marked;
        s.cnps = r.record.cnps;
        s.skipped_bytes = s.spec.size_bytes;
        s.skipped = r.source_after;
        let (src, dst) = (s.spec.src, s.spec.dst);
        // What the flows table reports of a simulated start.
        let port = key::first_port(self.fabric, flow, src, dst);
        let gport = self.port_index(ctx.local_index(), port);
        let s = &mut self.senders[i];
        s.port = port;
        s.line_rate_bps = self.ports[gport].rate_bps;
        s.ideal_fct = super::ideal_fct(self.fabric, &s.spec, port).0;
        s.path_hash = super::five_tuple_hash(flow, src, dst);
        ctx.schedule_self(
            r.source_after,
            NetEvent::MemoEnd {
                flow,
                at_source: true,
            },
        );
        // At least the path's latency, so at least the lookahead when the
        // destination is on another shard.
        ctx.send(
            netsim_engine::NodeId(dst),
            r.destination_after,
            NetEvent::MemoEnd {
                flow,
                at_source: false,
            },
        );
        true
    }

    /// A replayed flow ends at its source or destination.
    pub(crate) fn memo_end(&mut self, ctx: &mut Context<'_, NetEvent>, flow: u32, at_source: bool) {
        let task = self.fabric.workload.flow_task(flow);
        if at_source {
            let i = self.sender_of[&flow] as usize;
            self.senders[i].end = Some(ctx.now());
            self.stats.flows_finished += 1;
            self.record_flow(i);
        }
        self.task_seen_complete(ctx, task, at_source);
    }

    /// Host `host` saw task `task` complete (hook of `task_seen_complete`).
    pub(crate) fn memo_seen(&mut self, task: u32, at_source: bool, now: SimTime) {
        let Some(m) = self.memo.as_mut() else { return };
        if matches!(
            self.fabric
                .workload
                .kind(&self.fabric.workload.tasks[task as usize]),
            TaskKind::Compute(_)
        ) {
            m.pending_computes.remove(&task);
        }
        let Phase::Recording(r) = &mut m.phase else {
            return;
        };
        let Some(k) = r.canon.task_index(task) else {
            return;
        };
        let at = some(now - r.canon.t0);
        let slot = &mut r.done[k];
        let compute = matches!(
            self.fabric
                .workload
                .kind(&self.fabric.workload.tasks[task as usize]),
            TaskKind::Compute(_)
        );
        if at_source {
            slot.0 = at;
            if compute {
                slot.1 = at;
            }
        } else {
            slot.1 = at;
        }
        r.outstanding -= 1;
        if at_source && !compute {
            // The flows-table counters, final at the source's completion.
            let flow = match self
                .fabric
                .workload
                .kind(&self.fabric.workload.tasks[task as usize])
            {
                TaskKind::Flow(f) => f,
                TaskKind::Compute(_) => unreachable!(),
            };
            let s = &self.senders[self.sender_of[&flow] as usize];
            let fk = r.canon.flow_index(flow).expect("a wave flow");
            let f = &mut r.flows[fk];
            f.retransmitted = s.retransmitted_pkts;
            f.ecn_marked = s.ecn_marked_pkts;
            f.cnps = s.cnps;
        }
    }

    /// The memo's step at check instant `now` (DESIGN.md §3c): ends a
    /// replay that is over, completes a recording whose wave finished, or,
    /// on a quiet network, decides the next wave.
    pub(crate) fn memo_agree(&mut self, now: SimTime, all_max: AllMax<'_>) -> Result<(), Aborted> {
        let Some(m) = self.memo.as_mut() else {
            return Ok(());
        };
        match &m.phase {
            Phase::Replaying { until } if now > *until => {
                m.phase = Phase::Idle;
                m.replay.clear();
            }
            Phase::Replaying { .. } => return Ok(()),
            Phase::Recording(r) => {
                let mut left = [u64::from(r.outstanding > 0)];
                all_max(&mut left)?;
                if left[0] != 0 {
                    return Ok(());
                }
                self.memo_finish_recording(all_max)?;
            }
            Phase::Idle => {}
        }
        self.memo_decide(now, all_max)
    }

    /// Whether this shard is quiet: no flow sending, nothing queued, on
    /// the wire or paused at any port, no buffer in use.
    fn memo_quiet(&self, now: SimTime) -> bool {
        self.ports.iter().all(|p| {
            p.host.flows.is_empty()
                && p.queued_bytes.iter().all(|&b| b == 0)
                && p.busy_until + p.latency <= now
                && !p.paused
                && !p.ingress.pause_sent
        }) && self.buffers.iter().all(|b| b.used_bytes == 0)
    }

    /// On a quiet network, finds the wave about to start and records or
    /// replays it.
    fn memo_decide(&mut self, now: SimTime, all_max: AllMax<'_>) -> Result<(), Aborted> {
        let mut quiet = [u64::from(!self.memo_quiet(now))];
        all_max(&mut quiet)?;
        if quiet[0] != 0 {
            return Ok(());
        }
        let fabric = self.fabric;
        let m = self.memo.as_ref().expect("memo on");
        // Entry flows' starts this shard can foresee, agreed.
        let (predicted, chains) = self.memo_predict();
        let mut entries = vec![0u64; m.plan.entries.len()];
        for (e, slot) in entries.iter_mut().enumerate() {
            if let Some(&t) = predicted.get(&m.plan.entries[e]) {
                *slot = some(t);
            }
        }
        all_max(&mut entries)?;
        let Some(canon) = Canon::build(fabric, &m.plan, &entries) else {
            return Ok(());
        };
        // Second round: the earliest start of a flow outside the wave this
        // shard foresees; per labelled port, its round-robin state; per
        // task of the wave on this shard's hosts, when the dependencies it
        // has outside the wave are met (offset + 1 from the wave's first
        // start, 1 if already; 0: not foreseeable).
        let foreign = self.memo_foreign_start(&canon, &predicted);
        let ports = canon.ports.len();
        let mut agreed = vec![0u64; 1 + ports + canon.tasks.len()];
        agreed[0] = u64::MAX - foreign.as_ps();
        for (label, &(node, port)) in canon.ports.iter().enumerate() {
            if let Ok(local) = self.nodes.binary_search(&netsim_engine::NodeId(node)) {
                let gp = self.port_index(local, port);
                agreed[1 + label] = self.ports[gp].host.round_robin as u64 + 1;
            }
        }
        for (k, &t) in canon.tasks.iter().enumerate() {
            let task = fabric.workload.tasks[t as usize];
            if self
                .nodes
                .binary_search(&netsim_engine::NodeId(task.host))
                .is_err()
            {
                continue;
            }
            let internal = m.plan.internal[t as usize];
            agreed[1 + ports + k] = if internal == 0 {
                // An entry: its start is in the key already.
                1
            } else {
                let outside = self.dag.remaining(t) - internal;
                match chains.get(&t) {
                    _ if outside == 0 => 1,
                    Some(&(n, ready)) if n == outside => some(ready.max(canon.t0) - canon.t0),
                    _ => 0,
                }
            };
        }
        all_max(&mut agreed)?;
        if agreed[1 + ports..].contains(&0) {
            return Ok(());
        }
        let mut canon = canon;
        canon.key.extend_from_slice(&agreed[1..]);
        let foreign = SimTime(u64::MAX - agreed[0]);
        let m = self.memo.as_mut().expect("memo on");
        if let Some(record) = m.records.get(&canon.key) {
            let until = canon.t0 + record.span;
            let bound = foreign.min(canon.released_start(fabric, record));
            if bound < until {
                return Ok(());
            }
            self.memo_replay(canon);
            return Ok(());
        }
        if m.unrecordable.contains(&canon.key) {
            return Ok(());
        }
        self.memo_record(canon);
        Ok(())
    }

    /// Per flow, the start this shard foresees: a flow start scheduled, or
    /// a flow whose every missing dependency is a compute task (or a chain
    /// of them) that will end at a known time.
    /// Also gives, per task reached, how many of its missing dependencies
    /// are such compute tasks and when the last of them ends.
    #[allow(clippy::type_complexity)]
    fn memo_predict(&self) -> (HashMap<u32, SimTime>, HashMap<u32, (u32, SimTime)>) {
        let m = self.memo.as_ref().expect("memo on");
        let workload = &self.fabric.workload;
        let mut out: HashMap<u32, SimTime> = m.pending_flows.clone();
        let mut seen: HashMap<u32, (u32, SimTime)> = HashMap::new();
        let mut work: Vec<(u32, SimTime)> =
            m.pending_computes.iter().map(|(&t, &at)| (t, at)).collect();
        while let Some((task, end)) = work.pop() {
            let host = workload.tasks[task as usize].host;
            for &d in workload.dependents(task) {
                let t = workload.tasks[d as usize];
                if t.host != host {
                    continue;
                }
                let e = seen.entry(d).or_insert((0, SimTime::ZERO));
                e.0 += 1;
                e.1 = e.1.max(end);
                if e.0 != self.dag.remaining(d) {
                    continue;
                }
                let ready = e.1;
                match workload.kind(&t) {
                    TaskKind::Flow(f) => {
                        out.insert(f, ready + workload.host_overhead);
                    }
                    TaskKind::Compute(duration) => work.push((d, ready + duration)),
                }
            }
        }
        (out, seen)
    }

    /// The earliest a flow outside the wave could start, from what this
    /// shard has scheduled: flow starts, and compute ends whose chains of
    /// compute tasks reach a flow.
    fn memo_foreign_start(&self, canon: &Canon, predicted: &HashMap<u32, SimTime>) -> SimTime {
        let m = self.memo.as_ref().expect("memo on");
        let mut bound = SimTime::MAX;
        for (&f, &t) in predicted {
            if canon.flow_index(f).is_none() {
                bound = bound.min(t);
            }
        }
        for (&task, &end) in &m.pending_computes {
            bound = bound.min(key::earliest_flow_after(
                &self.fabric.workload,
                canon,
                task,
                end,
            ));
        }
        bound
    }

    /// Replays `canon`'s wave from its record.
    fn memo_replay(&mut self, canon: Canon) {
        let m = self.memo.as_mut().expect("memo on");
        let record = &m.records[&canon.key];
        for (k, &flow) in canon.flows.iter().enumerate() {
            let task = self.fabric.workload.flow_task(flow);
            let (src_done, dst_done) = record.done[canon.task_index(task).expect("wave task")];
            let start = record.flows[k].start;
            m.replay.insert(
                flow,
                Replayed {
                    source_after: src_done - start,
                    destination_after: dst_done - start,
                    record: record.flows[k],
                },
            );
        }
        // The ports' byte counters and the run's totals move as the first
        // run moved them; the totals are counted once, by the shard of the
        // wave's first flow's source.
        for (label, &(node, port)) in canon.ports.iter().enumerate() {
            if let Ok(local) = self.nodes.binary_search(&netsim_engine::NodeId(node)) {
                let gp = self.port_base[local] as usize + port as usize;
                for (tx, b) in self.ports[gp]
                    .tx_bytes
                    .iter_mut()
                    .zip(record.port_bytes[label])
                {
                    *tx += b;
                }
            }
        }
        let first = self.fabric.workload.flows[canon.flows[0] as usize].src;
        if self.sender_of.contains_key(&canon.flows[0])
            && self
                .nodes
                .binary_search(&netsim_engine::NodeId(first))
                .is_ok()
        {
            self.stats.sent_payload_bytes += record.sent;
            self.stats.delivered_payload_bytes += record.delivered;
            self.stats.pfc_pauses += record.pfc_pauses;
            self.stats.memo_events_avoided += record.events;
        }
        m.phase = Phase::Replaying {
            until: canon.t0 + record.span,
        };
    }

    /// Starts recording `canon`'s wave, simulated packet by packet.
    fn memo_record(&mut self, canon: Canon) {
        let workload = &self.fabric.workload;
        let mut outstanding = 0u64;
        for &task in &canon.tasks {
            let t = workload.tasks[task as usize];
            let local = |n: u32| self.nodes.binary_search(&netsim_engine::NodeId(n)).is_ok();
            match workload.kind(&t) {
                TaskKind::Flow(f) => {
                    let spec = workload.flows[f as usize];
                    outstanding += u64::from(local(spec.src)) + u64::from(local(spec.dst));
                }
                TaskKind::Compute(_) => outstanding += u64::from(local(t.host)),
            }
        }
        let ports = canon
            .ports
            .iter()
            .enumerate()
            .filter_map(|(label, &(node, port))| {
                let local = self
                    .nodes
                    .binary_search(&netsim_engine::NodeId(node))
                    .ok()?;
                let gp = self.port_base[local] as usize + port as usize;
                Some((label, gp, self.ports[gp].tx_bytes))
            })
            .collect();
        let m = self.memo.as_mut().expect("memo on");
        let recording = Recording {
            outstanding,
            done: vec![(0, 0); canon.tasks.len()],
            flows: vec![FlowRecord::default(); canon.flows.len()],
            ports,
            events_at_start: m.events,
            draws_at_start: m.draws,
            stats_at_start: self.stats,
            foreign_starts: 0,
            canon,
        };
        m.phase = Phase::Recording(Box::new(recording));
    }

    /// Gathers the finished wave's record from every shard and keeps it
    /// when nothing else ran beside it and no random draw was taken.
    fn memo_finish_recording(&mut self, all_max: AllMax<'_>) -> Result<(), Aborted> {
        let nodes = self.fabric.topo.node_count() as usize;
        let m = self.memo.as_mut().expect("memo on");
        let Phase::Recording(r) = std::mem::replace(&mut m.phase, Phase::Idle) else {
            unreachable!("finishing a recording");
        };
        let (tasks, flows, ports) = (
            r.canon.tasks.len(),
            r.canon.flows.len(),
            r.canon.ports.len(),
        );
        const P: usize = super::packet::PRIORITIES;
        // Layout: done (2 per task), flows (4), ports (P), then per shard
        // sums at the slot of its first node: events, sent, delivered,
        // pauses, foreign starts, draws.
        let sums = 2 * tasks + 4 * flows + P * ports;
        let mut v = vec![0u64; sums + 6 * nodes];
        for (k, &(a, b)) in r.done.iter().enumerate() {
            v[2 * k] = a;
            v[2 * k + 1] = b;
        }
        for (k, f) in r.flows.iter().enumerate() {
            if self.sender_of.contains_key(&r.canon.flows[k]) {
                let base = 2 * tasks + 4 * k;
                v[base] = some(f.start);
                v[base + 1] = f.retransmitted;
                v[base + 2] = f.ecn_marked;
                v[base + 3] = f.cnps;
            }
        }
        for &(label, gp, at_start) in &r.ports {
            for prio in 0..P {
                v[2 * tasks + 4 * flows + P * label + prio] =
                    self.ports[gp].tx_bytes[prio] - at_start[prio];
            }
        }
        let slot = self.nodes[0].0 as usize;
        let shard = [
            m.events - r.events_at_start,
            self.stats.sent_payload_bytes - r.stats_at_start.sent_payload_bytes,
            self.stats.delivered_payload_bytes - r.stats_at_start.delivered_payload_bytes,
            self.stats.pfc_pauses - r.stats_at_start.pfc_pauses,
            r.foreign_starts,
            m.draws - r.draws_at_start,
        ];
        for (j, x) in shard.into_iter().enumerate() {
            v[sums + j * nodes + slot] = x;
        }
        all_max(&mut v)?;
        let total = |j: usize| -> u64 { v[sums + j * nodes..sums + (j + 1) * nodes].iter().sum() };
        if total(4) != 0 || total(5) != 0 {
            m.unrecordable.insert(r.canon.key);
            return Ok(());
        }
        let at = |x: u64| SimTime(x - 1);
        let done: Vec<(SimTime, SimTime)> = (0..tasks)
            .map(|k| (at(v[2 * k]), at(v[2 * k + 1])))
            .collect();
        let span = done
            .iter()
            .map(|d| d.0.max(d.1))
            .max()
            .unwrap_or(SimTime::ZERO);
        let record = Record {
            span,
            done,
            flows: (0..flows)
                .map(|k| {
                    let base = 2 * tasks + 4 * k;
                    FlowRecord {
                        start: at(v[base]),
                        retransmitted: v[base + 1],
                        ecn_marked: v[base + 2],
                        cnps: v[base + 3],
                    }
                })
                .collect(),
            port_bytes: (0..ports)
                .map(|label| {
                    std::array::from_fn(|prio| v[2 * tasks + 4 * flows + P * label + prio])
                })
                .collect(),
            events: total(0),
            sent: total(1),
            delivered: total(2),
            pfc_pauses: total(3),
        };
        m.records.insert(r.canon.key, record);
        Ok(())
    }
}
