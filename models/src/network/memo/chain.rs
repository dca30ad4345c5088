//! Chains (DESIGN.md §3c, "Chains"): inside a collective already running,
//! the flows one server's NVSwitch carries in a row (a ring's hops between
//! the GPUs of one server: each waits only for the one before), decided
//! when the first of them starts, by the shard that holds the server.
//!
//! A server (its GPUs and NVSwitches) is one partition atom, never cut, so
//! everything a chain's decision reads (the NVSwitch's ports and buffer,
//! the GPUs' queue pairs and the DAG as they see it) is on one shard in
//! every partition, in the same state at the chain's first start: the
//! decision, its record and its replay are the same for 1 to N shards.

use super::key::{self, Canon, Resource};
use super::{Held, Record, Replayed};
use crate::network::Network;
use crate::telemetry::TelemetrySink;
use crate::workload::TaskKind;
use hashbrown::{HashMap, HashSet};
use netsim_engine::{NodeId, SimTime};
use netsim_topo::Role;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Most flows in one chain.
const MAX_CHAIN: usize = 64;

/// Per shard chain state (only this shard's servers').
#[derive(Debug, Default)]
pub(super) struct Chains {
    /// Records by key (the key names the server: a record is made by the
    /// first chain of its key on that server, the same in every partition).
    records: HashMap<Vec<u64>, Record>,
    unrecordable: HashSet<Vec<u64>>,
    /// Replayed chains' resources until their network is quiet.
    pub(super) held: Vec<Held>,
    /// Replayed chain flows not yet complete at both ends: (source,
    /// destination) completion.
    pub(super) completions: HashMap<u32, (SimTime, SimTime)>,
    /// Flows whose destination saw them complete, on this shard.
    pub(super) delivered: HashSet<u32>,
    /// Computed at the first chain's decision.
    index: Option<Index>,
}

/// What a chain's decision looks up, from the workload and the topology.
#[derive(Debug)]
struct Index {
    /// The NVSwitches a flow from outside their server uses (its data or
    /// its acknowledgements cross them or leave a server GPU's port toward
    /// them): no chain on those.
    open: HashSet<u32>,
    /// Flows into host `h`: `into[into_base[h]..into_base[h + 1]]`.
    into_base: Vec<u32>,
    into: Vec<u32>,
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Flow `flow` starts now at its source: replays it and the flows of
    /// its server's NVSwitch that wait only for it (a chain) when they can
    /// be, making their record in a sandbox first. True when `flow` is now
    /// to be replayed.
    pub(super) fn memo_chain(&mut self, now: SimTime, flow: u32) -> bool {
        let m = self.memo.as_mut().expect("memo on");
        if m.recording.is_some() || m.replay.contains_key(&flow) {
            return false;
        }
        m.chains.held.retain(|h| h.until > now);
        m.chains
            .completions
            .retain(|_, &mut (a, b)| a.max(b) >= now);
        let fabric = self.fabric;
        let workload = &fabric.workload;
        let task = workload.flow_task(flow);
        let c = workload.tasks[task as usize].collective;
        if c == crate::workload::NONE || m.plan.tasks(c).is_empty() || m.replayed[c as usize] {
            return false;
        }
        let Some((switches, hosts)) = self.chain_server(flow) else {
            return false;
        };
        let tasks = self.chain_tasks(task, &switches);
        let canon = Canon::chain(fabric, tasks, now);
        if self.chain_busy(now, &canon, &hosts) {
            return false;
        }
        // The key: the chain's, its server, its labelled host ports'
        // round-robin pointers (+ 1, as the sandbox takes them) and every
        // task's outside dependencies met already (1).
        let mut canon = canon;
        let round_robin: Vec<u64> = canon
            .ports
            .iter()
            .map(|&(node, port)| {
                let local = self
                    .nodes
                    .binary_search(&NodeId(node))
                    .expect("server is local");
                self.ports[self.port_index(local, port)].host.round_robin as u64 + 1
            })
            .collect();
        canon.key.push(u64::from(hosts[0]));
        canon.key.extend_from_slice(&round_robin);
        canon.key.extend(std::iter::repeat_n(1, canon.tasks.len()));
        let chains = &self.memo.as_ref().expect("memo on").chains;
        if chains.unrecordable.contains(&canon.key) {
            return false;
        }
        let fresh = !chains.records.contains_key(&canon.key);
        if fresh {
            // The pre-check: refused even at the least span its flows allow.
            let least = canon
                .flows
                .iter()
                .map(|&f| key::least_fct(fabric, f))
                .max()
                .unwrap_or(SimTime::ZERO);
            if self.chain_refused(now, &canon, &hosts, None, now + least) {
                return false;
            }
            let ready: Vec<SimTime> = (0..canon.tasks.len())
                .map(|k| {
                    if k == 0 {
                        now - workload.host_overhead
                    } else {
                        now
                    }
                })
                .collect();
            let record = self.memo_sandbox(&canon, &round_robin, &ready);
            let chains = &mut self.memo.as_mut().expect("memo on").chains;
            match record {
                Some(r) => {
                    chains.records.insert(canon.key.clone(), r);
                }
                None => {
                    chains.unrecordable.insert(canon.key.clone());
                    return false;
                }
            }
        }
        let record = &self.memo.as_ref().expect("memo on").chains.records[&canon.key];
        let until = now + record.span;
        let own: Vec<(SimTime, SimTime)> = record
            .done
            .iter()
            .map(|&(a, b)| (now + a, now + b))
            .collect();
        if self.chain_refused(now, &canon, &hosts, Some(&own), until) {
            return false;
        }
        self.chain_replay(canon, own, until, fresh);
        true
    }

    /// The NVSwitches flow `flow`'s packets cross and the hosts of their
    /// server (ascending), when they cross nothing else and no flow from
    /// outside the server uses them.
    fn chain_server(&mut self, flow: u32) -> Option<(Vec<u32>, Vec<u32>)> {
        let fabric = self.fabric;
        let topo = &fabric.topo;
        let mut res = Vec::new();
        key::flow_resources(fabric, flow, &mut res);
        let spec = fabric.workload.flows[flow as usize];
        let mut switches: Vec<u32> = Vec::new();
        for &r in &res {
            let node = (r >> 17) as u32;
            if topo.is_host(node) {
                if node != spec.src && node != spec.dst {
                    return None;
                }
            } else if topo.role(node) == Role::NvSwitch {
                switches.push(node);
            } else {
                return None;
            }
        }
        if switches.is_empty() {
            return None;
        }
        switches.sort_unstable();
        switches.dedup();
        let m = self.memo.as_mut().expect("memo on");
        let index = m.chains.index.get_or_insert_with(|| Index::new(fabric));
        if switches.iter().any(|s| index.open.contains(s)) {
            return None;
        }
        let mut hosts: Vec<u32> = switches
            .iter()
            .flat_map(|&s| topo.ports(s).iter().map(|p| p.peer))
            .collect();
        hosts.sort_unstable();
        hosts.dedup();
        // Hosts only behind an NVSwitch: a server.
        if hosts.iter().any(|&h| !topo.is_host(h)) {
            return None;
        }
        Some((switches, hosts))
    }

    /// Task `first` and the flows that wait only for it or for each other
    /// and cross only `switches` (canonical order: task ids).
    fn chain_tasks(&self, first: u32, switches: &[u32]) -> Vec<u32> {
        let fabric = self.fabric;
        let workload = &fabric.workload;
        let m = self.memo.as_ref().expect("memo on");
        let mut tasks = vec![first];
        let mut at = 0;
        let mut res = Vec::new();
        while at < tasks.len() && tasks.len() < MAX_CHAIN {
            let t = tasks[at];
            at += 1;
            for &d in workload.dependents(t) {
                let task = workload.tasks[d as usize];
                let TaskKind::Flow(f) = workload.kind(&task) else {
                    continue;
                };
                if tasks.contains(&d)
                    || self.dag.remaining(d) != 1
                    || m.replay.contains_key(&f)
                    || task.collective == crate::workload::NONE
                    || m.replayed[task.collective as usize]
                {
                    continue;
                }
                res.clear();
                key::flow_resources(fabric, f, &mut res);
                let spec = workload.flows[f as usize];
                let inside = res.iter().all(|&r| {
                    let node = (r >> 17) as u32;
                    node == spec.src || node == spec.dst || switches.contains(&node)
                });
                if inside && res.iter().any(|&r| switches.contains(&((r >> 17) as u32))) {
                    tasks.push(d);
                }
            }
        }
        tasks.sort_unstable();
        tasks
    }

    /// Whether the chain's resources are in use: a flow of the server
    /// sending through them, a replayed domain or chain holding them, or at
    /// one of their ports a byte queued, a packet on the wire, a pause.
    fn chain_busy(&self, now: SimTime, canon: &Canon, hosts: &[u32]) -> bool {
        let m = self.memo.as_ref().expect("memo on");
        if m.held(canon, SimTime::MAX) || m.chain_held(canon, now) {
            return true;
        }
        let mut active = Vec::new();
        for &h in hosts {
            let local = self
                .nodes
                .binary_search(&NodeId(h))
                .expect("server is local");
            let range = self.sender_base[local] as usize..self.sender_base[local + 1] as usize;
            for s in &self.senders[range] {
                if s.start != SimTime::MAX
                    && s.end.is_none()
                    && !s.gave_up
                    && !m.replaying.contains(&s.flow)
                    && canon.flow_index(s.flow).is_none()
                {
                    key::flow_resources(self.fabric, s.flow, &mut active);
                }
            }
        }
        active.sort_unstable();
        active.dedup();
        self.memo_busy(now, canon, &active)
    }

    /// Whether a flow outside the chain that uses its resources could start
    /// before `horizon`, from what the server's hosts know now (see
    /// [`Network::chain_earliest_touching`]).
    fn chain_refused(
        &self,
        now: SimTime,
        canon: &Canon,
        hosts: &[u32],
        own: Option<&[(SimTime, SimTime)]>,
        horizon: SimTime,
    ) -> bool {
        self.chain_earliest_touching(now, canon, hosts, own, horizon) < horizon
    }

    /// The earliest a flow outside `canon`'s chain that uses its resources
    /// could start (`SimTime::MAX`: not before `horizon`). Such a flow
    /// starts at a host of the server (no flow from outside uses them), once
    /// that host has seen every dependency it waits for complete; so the
    /// server's tasks are followed in time order, as the memo's guard
    /// follows the whole DAG, from lower bounds on every completion they
    /// can wait for: a flow into the server from outside, its bytes not yet
    /// received at the destination's fastest link rate after now; a flow of
    /// the server sending, now; a compute task running, its end; a flow
    /// start scheduled, its start; replayed tasks, their recorded
    /// completions (`own`: the chain's, absolute; `None` before its record
    /// exists).
    fn chain_earliest_touching(
        &self,
        now: SimTime,
        canon: &Canon,
        hosts: &[u32],
        own: Option<&[(SimTime, SimTime)]>,
        horizon: SimTime,
    ) -> SimTime {
        let fabric = self.fabric;
        let workload = &fabric.workload;
        let topo = &fabric.topo;
        let m = self.memo.as_ref().expect("memo on");
        let mtu = u64::from(fabric.config.mtu_bytes);
        // (when, task, host that sees it complete) or a start (host NONE).
        let mut heap: BinaryHeap<Reverse<(SimTime, u32, u32)>> = BinaryHeap::new();
        const START: u32 = u32::MAX;
        let push = |heap: &mut BinaryHeap<_>, at: SimTime, t: u32, h: u32| {
            if at < horizon {
                heap.push(Reverse((at, t, h)));
            }
        };
        let in_server = |n: u32| hosts.binary_search(&n).is_ok();
        for &h in hosts {
            let local = self
                .nodes
                .binary_search(&NodeId(h))
                .expect("server is local");
            let range = self.sender_base[local] as usize..self.sender_base[local + 1] as usize;
            for s in &self.senders[range] {
                let t = workload.flow_task(s.flow);
                let replayed =
                    m.chains.completions.contains_key(&t) || m.completions.contains_key(&t);
                if s.end.is_some() || s.gave_up || replayed || canon.task_index(t).is_some() {
                    continue;
                }
                if s.start != SimTime::MAX {
                    push(&mut heap, now, t, h);
                    if in_server(s.spec.dst) {
                        push(&mut heap, now, t, s.spec.dst);
                    }
                } else if let Some(&at) = m.pending_flows.get(&s.flow) {
                    push(&mut heap, at, t, START);
                }
            }
            let index = m.chains.index.as_ref().expect("made at the decision");
            let into =
                index.into_base[h as usize] as usize..index.into_base[h as usize + 1] as usize;
            for &f in &index.into[into] {
                let spec = workload.flows[f as usize];
                if in_server(spec.src) {
                    continue;
                }
                let t = workload.flow_task(f);
                if t == crate::workload::NONE || m.chains.delivered.contains(&f) {
                    continue;
                }
                let received = match self.receivers.get(&f).map(|r| &r.qp) {
                    Some(crate::network::transport::RxQp::Roce(q)) => q.in_order(),
                    _ => 0,
                };
                let left = spec.size_bytes.saturating_sub(u64::from(received) * mtu);
                let rate_bps = topo
                    .ports(h)
                    .iter()
                    .map(|p| topo.link(p.link).bandwidth_bps)
                    .max()
                    .unwrap_or(1);
                let ps = u128::from(left) * 8 * 1_000_000_000_000 / u128::from(rate_bps.max(1));
                let at = now + SimTime(ps.min(u128::from(u64::MAX - now.as_ps())) as u64);
                if !m.completions.contains_key(&t) {
                    push(&mut heap, at, t, h);
                }
            }
        }
        // Replayed tasks: their recorded completions, where not yet seen.
        for (&t, &(a, b)) in m.chains.completions.iter().chain(&m.completions) {
            if canon.task_index(t).is_some() {
                continue;
            }
            let src = key::source(workload, t);
            if in_server(src) && a >= now {
                push(&mut heap, a, t, src);
            }
            if let TaskKind::Flow(f) = workload.kind(&workload.tasks[t as usize]) {
                let dst = workload.flows[f as usize].dst;
                if in_server(dst) && b >= now {
                    push(&mut heap, b, t, dst);
                }
            }
        }
        for (&t, &at) in &m.pending_computes {
            if in_server(workload.tasks[t as usize].host) {
                push(&mut heap, at, t, workload.tasks[t as usize].host);
            }
        }
        if let Some(own) = own {
            for (k, &t) in canon.tasks.iter().enumerate() {
                let (a, b) = own[k];
                let src = key::source(workload, t);
                push(&mut heap, a, t, src);
                if let TaskKind::Flow(f) = workload.kind(&workload.tasks[t as usize]) {
                    push(&mut heap, b, t, workload.flows[f as usize].dst);
                }
            }
        }
        let mut waiting: HashMap<u32, (u32, SimTime)> = HashMap::new();
        let mut started: HashSet<u32> = HashSet::new();
        let mut scratch = Vec::new();
        while let Some(Reverse((at, t, h))) = heap.pop() {
            if h == START {
                if canon.task_index(t).is_some() || !started.insert(t) {
                    continue;
                }
                let task = workload.tasks[t as usize];
                match workload.kind(&task) {
                    TaskKind::Flow(f) => {
                        let spec = workload.flows[f as usize];
                        if let Some(r) = m.replay.get(&f) {
                            // Replayed: it sends nothing; it ends as recorded.
                            push(&mut heap, at + r.source_after, t, spec.src);
                            if in_server(spec.dst) {
                                push(&mut heap, at + r.destination_after, t, spec.dst);
                            }
                            continue;
                        }
                        if canon.touched_by(fabric, f, &mut scratch) {
                            return at;
                        }
                        let done = at + key::least_fct(fabric, f);
                        push(&mut heap, done, t, spec.src);
                        if in_server(spec.dst) {
                            push(&mut heap, done, t, spec.dst);
                        }
                    }
                    TaskKind::Compute(duration) => push(&mut heap, at + duration, t, task.host),
                }
                continue;
            }
            // Host `h` sees task `t` complete at `at`.
            for &d in workload.dependents(t) {
                let task = workload.tasks[d as usize];
                if task.host != h {
                    continue;
                }
                let e = waiting.entry(d).or_insert((0, SimTime::ZERO));
                e.0 += 1;
                e.1 = e.1.max(at);
                if e.0 == self.dag.remaining(d) {
                    let ready = e.1 + key::start_delay(workload, d);
                    push(&mut heap, ready, d, START);
                }
            }
        }
        SimTime::MAX
    }

    /// Replays `canon`'s chain from its record (`own`: its tasks'
    /// completions, absolute), holding its resources until `until`.
    fn chain_replay(
        &mut self,
        canon: Canon,
        own: Vec<(SimTime, SimTime)>,
        until: SimTime,
        fresh: bool,
    ) {
        let m = self.memo.as_mut().expect("memo on");
        let record = &m.chains.records[&canon.key];
        for (k, &flow) in canon.flows.iter().enumerate() {
            let task = self.fabric.workload.flow_task(flow);
            let i = canon.task_index(task).expect("chain task");
            let (src_done, dst_done) = record.done[i];
            let start = record.flows[k].start;
            m.replay.insert(
                flow,
                Replayed {
                    source_after: src_done - start,
                    destination_after: dst_done - start,
                    record: record.flows[k],
                    fresh,
                },
            );
        }
        for (k, &t) in canon.tasks.iter().enumerate() {
            m.chains.completions.insert(t, own[k]);
        }
        let mut resources: Vec<Resource> = canon.resources.iter().copied().collect();
        resources.sort_unstable();
        m.chains.held.push(Held {
            resources,
            from: canon.t0,
            until,
        });
        let (sent, delivered, pauses, events) = (
            record.sent,
            record.delivered,
            record.pfc_pauses,
            record.events,
        );
        for (label, &(node, port)) in canon.ports.iter().enumerate() {
            let local = self
                .nodes
                .binary_search(&NodeId(node))
                .expect("server is local");
            let gp = self.port_index(local, port);
            let record = &self.memo.as_ref().expect("memo on").chains.records[&canon.key];
            let (bytes, rr) = (record.port_bytes[label], record.round_robin_after[label]);
            for (tx, b) in self.ports[gp].tx_bytes.iter_mut().zip(bytes) {
                *tx += b;
            }
            self.ports[gp].host.round_robin = rr;
        }
        self.stats.sent_payload_bytes += sent;
        self.stats.delivered_payload_bytes += delivered;
        self.stats.pfc_pauses += pauses;
        if !fresh {
            self.stats.memo_events_avoided += events;
        }
    }
}

impl Index {
    fn new(fabric: &crate::network::Fabric) -> Index {
        let topo = &fabric.topo;
        let workload = &fabric.workload;
        let mut open = HashSet::new();
        let mut res = Vec::new();
        for (f, spec) in workload.flows.iter().enumerate() {
            res.clear();
            key::flow_resources(fabric, f as u32, &mut res);
            for &r in &res {
                let node = (r >> 17) as u32;
                // A host's port: the switch it leads to.
                let s = if topo.is_host(node) {
                    topo.port(node, (r & 0xffff) as u16).peer
                } else {
                    node
                };
                if !topo.is_host(s)
                    && topo.role(s) == Role::NvSwitch
                    && !topo.ports(s).iter().any(|p| p.peer == spec.src)
                {
                    open.insert(s);
                }
            }
        }
        let hosts = topo.host_count() as usize;
        let mut into_base = vec![0u32; hosts + 1];
        for spec in &workload.flows {
            into_base[spec.dst as usize + 1] += 1;
        }
        for h in 0..hosts {
            into_base[h + 1] += into_base[h];
        }
        let mut fill = into_base.clone();
        let mut into = vec![0u32; workload.flows.len()];
        for (f, spec) in workload.flows.iter().enumerate() {
            into[fill[spec.dst as usize] as usize] = f as u32;
            fill[spec.dst as usize] += 1;
        }
        Index {
            open,
            into_base,
            into,
        }
    }
}
