//! Memoization of repeated contention domains under fast-forward
//! (DESIGN.md §3c, "Memoization"): at a check instant, the collectives
//! about to start are split into contention domains (flows that share a
//! host port or a switch, directly or through others); a domain whose
//! resources are quiet and that no other flow can reach before its end is
//! replayed from a record: its flows end at the recorded offsets as pinned
//! events and no packet is injected. A domain without a record is first
//! simulated alone, packet by packet, in a sandbox (the same fabric with
//! only its tasks), which makes the record; so two identical domains of
//! one instant cost one simulation.
//!
//! Every decision is taken in [`Network::memo_agree`] (`decide.rs`; the
//! keys and domains are `key.rs`'s, the records' simulation
//! `sandbox.rs`'s), at the engine's check barrier, from values agreed by `all_max`: the same on every
//! shard, so runs stay byte-identical for 1 to N shards.

mod decide;
pub(super) mod guard;
mod hooks;
mod key;
mod payoff;
mod predict;
mod radix;
pub(super) mod resources;
mod sandbox;
mod shard_view;
#[cfg(test)]
mod tests;
mod tolerant;

use crate::network::packet::PRIORITIES;
use crate::network::Network;
use crate::telemetry::TelemetrySink;
use crate::workload::TaskKind;
use hashbrown::{HashMap, HashSet};
use key::Canon;
use netsim_engine::{NodeId, SimTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The recorded outcome of a domain, in the canonical order of its key.
#[derive(Debug)]
struct Record {
    /// From the domain's first start until its network is quiet: its
    /// flows' last completions and its last frame's arrival (the replay's
    /// guard; compute tasks hold no resource).
    span: SimTime,
    /// Per canonical task, when its source (or compute host) and its
    /// destination saw it complete, from the domain's first start.
    done: Vec<(SimTime, SimTime)>,
    /// Per canonical flow: start offset and the flows-table counters.
    flows: Vec<FlowRecord>,
    /// Per labelled port, bytes started per priority.
    port_bytes: Vec<[u64; PRIORITIES]>,
    /// Per labelled port, when it was busy, from the domain's first start:
    /// from the first start of a flow crossing it to its last bit (a
    /// replay's samples spread its bytes over that).
    port_busy: Vec<(SimTime, SimTime)>,
    /// Per labelled port, its round-robin pointer at the end (a host
    /// port's turn, which the next domain's key holds).
    round_robin_after: Vec<usize>,
    /// RED draws its sandbox took, and [`identity`] of the domain it
    /// simulated: a draw is a hash of the packet's 5-tuple and the switch
    /// port, so a record with draws is exact only for a domain of the same
    /// hosts, ports and connections (the same group's next layer with
    /// `--ecmp-entropy connection`).
    draws: u64,
    identity: u64,
    /// [`port_numbers`] of the domain it simulated: a replay for a domain
    /// of another is one across equivalent paths (counted apart).
    port_numbers: u64,
    /// Events its sandbox handled, and the payload bytes it sent and
    /// delivered, PFC pauses it caused.
    events: u64,
    sent: u64,
    delivered: u64,
    pfc_pauses: u64,
}

impl Record {
    /// How many values [`Record::encode`] writes for `canon`'s domain.
    fn encoded_len(canon: &Canon) -> usize {
        9 + 2 * canon.tasks.len() + 4 * canon.flows.len() + (PRIORITIES + 3) * canon.ports.len()
    }

    /// Writes `record` (`None`: the key is unrecordable; its sandbox
    /// handled `events`) into `out`, of
    /// [`Record::encoded_len`] values, for `all_max` (every other shard
    /// writes zeros).
    fn encode(record: Option<&Record>, events: u64, out: &mut [u64]) {
        let Some(r) = record else {
            // Its sandbox's events count against the budget all the same.
            out[0] = 2;
            out[2] = events;
            return;
        };
        let mut values = vec![
            1,
            r.span.as_ps(),
            r.events,
            r.sent,
            r.delivered,
            r.pfc_pauses,
            r.draws,
            r.identity,
            r.port_numbers,
        ];
        for &(a, b) in &r.done {
            values.extend([a.as_ps(), b.as_ps()]);
        }
        for f in &r.flows {
            values.extend([f.start.as_ps(), f.retransmitted, f.ecn_marked, f.cnps]);
        }
        for ((bytes, &rr), &(from, to)) in r
            .port_bytes
            .iter()
            .zip(&r.round_robin_after)
            .zip(&r.port_busy)
        {
            values.extend_from_slice(bytes);
            values.extend([rr as u64, from.as_ps(), to.as_ps()]);
        }
        out.copy_from_slice(&values);
    }

    /// The record [`Record::encode`] wrote for `canon`'s domain.
    fn decode(canon: &Canon, values: &[u64]) -> Option<Record> {
        if values[0] != 1 {
            return None;
        }
        let (tasks, flows) = (canon.tasks.len(), canon.flows.len());
        let mut rest = &values[9..];
        let mut take = |n: usize| {
            let (head, tail) = rest.split_at(n);
            rest = tail;
            head
        };
        let done = take(2 * tasks)
            .chunks(2)
            .map(|d| (SimTime(d[0]), SimTime(d[1])))
            .collect();
        let flows = take(4 * flows)
            .chunks(4)
            .map(|f| FlowRecord {
                start: SimTime(f[0]),
                retransmitted: f[1],
                ecn_marked: f[2],
                cnps: f[3],
            })
            .collect();
        let mut port_bytes = Vec::with_capacity(canon.ports.len());
        let mut round_robin_after = Vec::with_capacity(canon.ports.len());
        let mut port_busy = Vec::with_capacity(canon.ports.len());
        for p in take((PRIORITIES + 3) * canon.ports.len()).chunks(PRIORITIES + 3) {
            port_bytes.push(p[..PRIORITIES].try_into().expect("PRIORITIES values"));
            round_robin_after.push(p[PRIORITIES] as usize);
            port_busy.push((SimTime(p[PRIORITIES + 1]), SimTime(p[PRIORITIES + 2])));
        }
        Some(Record {
            span: SimTime(values[1]),
            done,
            flows,
            port_bytes,
            round_robin_after,
            port_busy,
            events: values[2],
            sent: values[3],
            delivered: values[4],
            pfc_pauses: values[5],
            draws: values[6],
            identity: values[7],
            port_numbers: values[8],
        })
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct FlowRecord {
    start: SimTime,
    retransmitted: u64,
    ecn_marked: u64,
    cnps: u64,
}

/// How a replayed flow ends: after its start, at its source and at its
/// destination; its flows-table counters; whether its domain's record was
/// made for it (its collective then counts as a miss: it was simulated,
/// in the sandbox); whether the record was made on other ports of the
/// same classes (a hit across paths).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Replayed {
    source_after: SimTime,
    destination_after: SimTime,
    record: FlowRecord,
    fresh: bool,
    across_paths: bool,
}

/// What a sandbox notes while it simulates a domain (the `memo_seen` and
/// `memo_flow_start` hooks of its network).
#[derive(Debug)]
struct Recording {
    canon: Canon,
    /// Completions still to be seen (source, destination, compute ends).
    outstanding: u64,
    /// Per canonical task, completion offsets + 1.
    done: Vec<(u64, u64)>,
    flows: Vec<FlowRecord>,
    /// When the last PFC frame arrived.
    last_pfc: SimTime,
}

/// Per shard memo state. The plan, the records and the decisions are the
/// same on every shard; pending starts are this shard's hosts'.
#[derive(Debug)]
pub(crate) struct Memo {
    plan: key::Plan,
    records: HashMap<Vec<u64>, Record>,
    /// The records' keys by all but their times (`tolerant.rs`).
    near: tolerant::Near,
    /// Keys whose sandbox could not make a record (a flow did not
    /// finish): not tried again.
    unrecordable: HashSet<Vec<u64>>,
    /// Per collective: replayed already.
    replayed: Vec<bool>,
    /// Per shape (`payoff.rs`), its collectives not replayed yet.
    shape_left: Vec<u32>,
    /// Events the sandboxes handled, and the recorded events of every
    /// replay (fresh: its own sandbox's; a hit: those it avoided), both
    /// agreed (`payoff.rs`: no sandbox while the first exceeds the second).
    sandbox_events: u64,
    repaid_events: u64,
    /// Flows to replay, by flow id, until they start; then until their
    /// source sees them end.
    replay: HashMap<u32, Replayed>,
    replaying: HashSet<u32>,
    /// Tasks of replayed domains not yet complete at both ends, by the
    /// later of the two (at their replay). The same on every shard; an
    /// entry leaves at the first check after both.
    completions: BinaryHeap<Reverse<(SimTime, u32)>>,
    /// Per task: in `completions` (what the decisions test per dependent).
    completing: Vec<bool>,
    /// Per compute task outside collectives: *settled*, every dependent of
    /// it completing or settled (see [`settles`]). Kept once set.
    settled: Vec<bool>,
    /// Per task in `completions`: when its source and destination (or
    /// host) see it complete (indexed, not hashed: the prediction and the
    /// guard read it per exit every round).
    done_at: Vec<(SimTime, SimTime)>,
    /// The tasks of `completions` that had a dependent outside them when
    /// replayed: the only ones whose completions the prediction and the
    /// guard can follow (a replayed dependent has its own).
    exits: Vec<u32>,
    /// Per flow task: its destination, on this shard, has seen it
    /// complete (what the guard's DAG view agrees of a flow still sending).
    delivered: Vec<bool>,
    /// The prediction of the next starts, kept between checks (vectors
    /// of one entry per task and flow, not reallocated); made at the
    /// first check that predicts (never in a sandbox, which only records).
    predict: Option<predict::Prediction>,
    /// The guard's walks, kept between checks (vectors of one entry per
    /// task, not reallocated).
    guard: Option<guard::Guard>,
    /// Replayed domains' resources, from their first start until their
    /// network is quiet: they send nothing, so neither the quiet check nor
    /// the guard sees them; a replay overlapping one on a resource is
    /// refused. The same on every shard; an entry leaves once quiet.
    held: Vec<Held>,
    /// Flows of this shard started and not replayed, those that ended
    /// since pruned at each check: what the quiet test and the DAG view
    /// read, instead of scanning every sender of the run. Flow ids, not
    /// sender slots: a slot is reused by the next flow to start.
    sending: Vec<u32>,
    /// Flow starts and compute ends scheduled on this shard, not yet handled.
    pending_flows: HashMap<u32, SimTime>,
    pending_computes: HashMap<u32, SimTime>,
    /// The checks so far, and per domain (its collectives) the key last
    /// built for it, at which check and from which entry starts: reused
    /// while they are the same (`decide.rs`).
    check: u64,
    /// The earliest instant of the next decision round (`decide.rs`).
    pub(super) next_round: SimTime,
    canons: HashMap<Vec<u32>, CachedCanon>,
    /// Per collective, the resources its flows use, made once.
    coll_resources: resources::CollResources,
    /// The last check's DAG view's buffer, for the next one's.
    dag_spare: Vec<u64>,
    /// A sandbox's notes (only in a sandbox's network).
    recording: Option<Box<Recording>>,
    /// Random draws taken on this shard.
    draws: u64,
    /// Per port of this shard: replays whose bytes its `tx_bytes` holds
    /// from their decision on but whose records put them on the wire
    /// later; samples take back what is still to go. Empty unless sampling.
    replayed_bytes: Vec<Vec<ReplayedBytes>>,
}

impl Memo {
    pub(crate) fn new(fabric: &crate::network::Fabric, ports: usize) -> Memo {
        let plan = key::Plan::new(&fabric.workload);
        Memo {
            shape_left: plan.shape_count.clone(),
            sandbox_events: 0,
            repaid_events: 0,
            plan,
            records: HashMap::new(),
            near: tolerant::Near::default(),
            unrecordable: HashSet::new(),
            replayed: vec![false; fabric.workload.collectives.len()],
            replay: HashMap::new(),
            replaying: HashSet::new(),
            completions: BinaryHeap::new(),
            done_at: vec![(SimTime::ZERO, SimTime::ZERO); fabric.workload.tasks.len()],
            completing: vec![false; fabric.workload.tasks.len()],
            settled: vec![false; fabric.workload.tasks.len()],
            exits: Vec::new(),
            delivered: vec![false; fabric.workload.tasks.len()],
            predict: None,
            guard: None,
            held: Vec::new(),
            sending: Vec::new(),
            pending_flows: HashMap::new(),
            pending_computes: HashMap::new(),
            check: 0,
            next_round: SimTime::ZERO,
            dag_spare: Vec::new(),
            canons: HashMap::new(),
            coll_resources: resources::CollResources::new(fabric.workload.collectives.len()),
            recording: None,
            draws: 0,
            replayed_bytes: vec![Vec::new(); ports],
        }
    }

    /// Of priority `prio`'s bytes started at port `gport`, those replays
    /// have yet to put on the wire at `at`.
    pub(crate) fn unsent_bytes(&self, gport: usize, prio: usize, at: SimTime) -> u64 {
        self.replayed_bytes[gport]
            .iter()
            .map(|r| r.unsent(prio, at))
            .sum()
    }

    /// Port `gport` was sampled at `at`: replays wholly on its wire by then
    /// are in its byte counters alone.
    pub(crate) fn sampled(&mut self, gport: usize, at: SimTime) {
        self.replayed_bytes[gport].retain(|r| r.to > at);
    }
}

/// Bytes a memo replay moved through a port, spread evenly over the
/// interval its record's port was busy: from the first start of a flow
/// crossing it to its last bit (DESIGN.md §3c, "Replay").
#[derive(Clone, Copy, Debug)]
struct ReplayedBytes {
    from: SimTime,
    to: SimTime,
    bytes: [u64; PRIORITIES],
}

impl ReplayedBytes {
    /// Of priority `prio`'s bytes, those still to go at `at`.
    fn unsent(&self, prio: usize, at: SimTime) -> u64 {
        let bytes = self.bytes[prio];
        if at >= self.to {
            return 0;
        }
        if at <= self.from {
            return bytes;
        }
        let gone = u128::from(bytes) * u128::from((at - self.from).as_ps())
            / u128::from((self.to - self.from).as_ps());
        bytes - gone as u64
    }
}

/// A domain's key as last built: from its entries' agreed starts
/// `starts`, at check `check`.
#[derive(Debug)]
struct CachedCanon {
    starts: Vec<u64>,
    canon: Option<std::sync::Arc<Canon>>,
    check: u64,
}

/// A replayed domain's hold on its resources (sorted), over `[from, until)`.
#[derive(Debug)]
struct Held {
    resources: Vec<resources::Resource>,
    from: SimTime,
    until: SimTime,
}

impl Memo {
    /// Keeps the exits that are completing and have a dependent neither
    /// completing nor settled ([`settles`]): one replayed since has its own
    /// completions, one that left them is complete (its host waits for
    /// nothing), and nothing the prediction or a walk would reach through
    /// a settled one is not skipped. The prediction's count of exits it
    /// followed stays theirs (the order is kept): what the pruned ones
    /// made ready is settled, which no decision reads.
    fn prune_exits(&mut self, workload: &crate::workload::Workload) {
        let followed = self.predict.as_ref().map_or(0, |p| p.followed);
        let (completing, settled) = (&self.completing, &mut self.settled);
        let (mut k, mut kept_followed) = (0, 0);
        self.exits.retain(|&t| {
            let keep = completing[t as usize]
                && workload
                    .dependents(t)
                    .iter()
                    .any(|&d| !settles(workload, completing, settled, d, 0));
            if keep && k < followed {
                kept_followed += 1;
            }
            k += 1;
            keep
        });
        if let Some(p) = &mut self.predict {
            p.followed = kept_followed;
        }
    }

    /// Whether a replayed domain holds one of `canon`'s resources within
    /// `[canon.t0, until)`.
    fn held(&self, canon: &Canon, until: SimTime) -> bool {
        self.held.iter().any(|h| {
            h.from < until
                && canon.t0 < h.until
                && h.resources.iter().any(|r| canon.resources.contains(r))
        })
    }

    /// A random draw (RED between its thresholds) was taken on this shard.
    pub(crate) fn draw(&mut self) {
        self.draws += 1;
    }
}

impl Record {
    /// Whether replaying the record for `canon`'s domain is exact: it took
    /// no random draw, or it simulated a domain of the same identity.
    fn fits(&self, fabric: &crate::network::Fabric, canon: &Canon) -> bool {
        self.draws == 0 || self.identity == identity(fabric, canon)
    }
}

/// What RED's draws in `canon`'s domain are a function of besides its key
/// (`switch::ecn::red_draw`): its labelled ports' nodes and numbers, and its
/// flows' hosts and source ports, hashed.
fn identity(fabric: &crate::network::Fabric, canon: &Canon) -> u64 {
    let mut h = 0u64;
    let mut mix = |v: u64| {
        let mut s = h ^ v;
        h = netsim_engine::splitmix64(&mut s);
    };
    for &(node, port) in &canon.ports {
        mix(u64::from(node) << 16 | u64::from(port));
    }
    for &f in &canon.flows {
        let spec = fabric.workload.flows[f as usize];
        mix(u64::from(spec.src) << 32 | u64::from(spec.dst));
        mix(u64::from(fabric.source_port(f)));
    }
    h
}

/// The port numbers of `canon`'s labelled ports, in label order, hashed:
/// what a key held before it named ports by class (a replay of a record
/// made for other numbers is one across equivalent paths).
fn port_numbers(canon: &Canon) -> u64 {
    let mut h = 0u64;
    for &(_, port) in &canon.ports {
        let mut s = h ^ u64::from(port);
        h = netsim_engine::splitmix64(&mut s);
    }
    h
}

/// Whether task `d` is completing (replayed) or *settled*: a compute task
/// outside collectives whose every dependent is either (`settled` keeps
/// the answer once true; `depth` bounds the recursion, an answer past it
/// is false). What a prediction or a guard's walk reaches through a
/// settled task is completing tasks and settled ones only: no flow it
/// foresees or follows (completing flows are replayed, they send
/// nothing), no count of a task that is neither, and no canonical task
/// whose foreseen dependencies a key reads (a collective's task is never
/// settled; a grown compute waits only for its domain), so neither needs
/// to reach it. Kept once true: it stays so until the task is complete
/// (a dependent complete first would have waited for it), and a complete
/// task is reached by neither (its host saw every dependency complete,
/// before the check instant).
fn settles(
    workload: &crate::workload::Workload,
    completing: &[bool],
    settled: &mut [bool],
    d: u32,
    depth: u32,
) -> bool {
    if completing[d as usize] || settled[d as usize] {
        return true;
    }
    let task = workload.tasks[d as usize];
    if depth >= SETTLE_DEPTH
        || task.collective != crate::workload::NONE
        || !matches!(workload.kind(&task), TaskKind::Compute(_))
    {
        return false;
    }
    let all = workload
        .dependents(d)
        .iter()
        .all(|&e| settles(workload, completing, settled, e, depth + 1));
    settled[d as usize] = all;
    all
}

/// How deep [`settles`] follows chains of compute tasks.
const SETTLE_DEPTH: u32 = 16;

/// Encodes an optional time as `t + 1` (0: none) for `all_max`.
fn some(t: SimTime) -> u64 {
    t.as_ps() + 1
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Replays `canon`'s domain from its record (`fresh`: the record was
    /// made for it, in the sandbox).
    fn memo_replay(&mut self, canon: Canon, fresh: bool) {
        let source_is_local = self.source_is_local(canon.flows[0]);
        let m = self.ff.memo.as_mut().expect("memo on");
        let record = &m.records[&canon.key];
        m.repaid_events += record.events;
        let across_paths = record.port_numbers != port_numbers(&canon);
        for (k, &flow) in canon.flows.iter().enumerate() {
            let task = self.fabric.workload.flow_task(flow);
            let (src_done, dst_done) = record.done[canon.task_index(task).expect("domain task")];
            let start = record.flows[k].start;
            m.replay.insert(
                flow,
                Replayed {
                    source_after: src_done - start,
                    destination_after: dst_done - start,
                    record: record.flows[k],
                    fresh,
                    across_paths,
                },
            );
        }
        for (k, &t) in canon.tasks.iter().enumerate() {
            let c = self.fabric.workload.tasks[t as usize].collective;
            if c != crate::workload::NONE && !m.replayed[c as usize] {
                m.replayed[c as usize] = true;
                m.shape_left[m.plan.shape_of[c as usize] as usize] -= 1;
            }
            let (src_done, dst_done) = record.done[k];
            m.done_at[t as usize] = (canon.t0 + src_done, canon.t0 + dst_done);
            m.completions
                .push(Reverse((canon.t0 + src_done.max(dst_done), t)));
            m.completing[t as usize] = true;
        }
        let workload = &self.fabric.workload;
        let (completing, settled) = (&m.completing, &mut m.settled);
        m.exits.extend(canon.tasks.iter().copied().filter(|&t| {
            workload
                .dependents(t)
                .iter()
                .any(|&d| !settles(workload, completing, settled, d, 0))
        }));
        // The ports' byte counters and the run's totals move as the
        // sandbox moved them; the totals are counted once, by the shard of
        // the domain's first flow's source. Samples put a port's bytes on
        // the wire evenly over the interval it was busy in the sandbox,
        // from the last sample written on.
        let period = self.fabric.config.sample_period;
        for (label, &(node, port)) in canon.ports.iter().enumerate() {
            if let Ok(local) = self.nodes.binary_search(&NodeId(node)) {
                let gp = self.port_base[local] as usize + port as usize;
                let bytes = record.port_bytes[label];
                for (tx, b) in self.ports[gp]
                    .flush_tx(&mut self.tx_flushed[gp])
                    .iter_mut()
                    .zip(bytes)
                {
                    *tx += b;
                }
                self.hosts[gp].round_robin = record.round_robin_after[label];
                let (first, last) = record.port_busy[label];
                let written = SimTime(
                    self.next_sample[local]
                        .as_ps()
                        .saturating_sub(period.as_ps()),
                );
                let from = (canon.t0 + first).max(written);
                let to = canon.t0 + last;
                if period != SimTime::ZERO && to > from {
                    m.replayed_bytes[gp].push(ReplayedBytes { from, to, bytes });
                }
            }
        }
        if source_is_local {
            self.stats.sent_payload_bytes += record.sent;
            self.stats.delivered_payload_bytes += record.delivered;
            self.stats.pfc_pauses += record.pfc_pauses;
            if !fresh {
                self.stats.memo_events_avoided += record.events;
            }
        }
    }
}
