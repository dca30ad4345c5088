//! Per-domain jumps (`--ff-scope domain`, docs/design/fast-forward.md):
//! at a check without a whole-run jump, the active flows are split into
//! contention domains (flows united by the host ports and switches they
//! share, both ways); a domain whose own flows and resources are steady
//! jumps alone, ending before its next transient, while the rest of the
//! run goes on. This file agrees on the jumps; `advance.rs` makes them.

use super::domain_agree::{Agreed, FlowIndex};
use super::domain_wait::WaitBound;
use super::memo::resources::{flow_resources, Resource};
use crate::network::transport::{Qp, SenderReliability};
use crate::network::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use hashbrown::HashMap;
use netsim_engine::{Aborted, AllMax, SimTime};

const UNTRACED: u32 = u32::MAX;

/// A shard's state for per-domain jumps.
#[derive(Debug)]
pub(crate) struct Domains {
    /// Flows whose sender started on this shard since the last agreement.
    opened: Vec<u32>,
    /// Flows whose sender finished on this shard since the last check.
    finished: Vec<u32>,
    /// Per node: `k + 1` where check `k` is the last at which this shard
    /// saw a flow through it end or a packet dropped at it (0: never).
    disturbed: Vec<u64>,
    /// Per local port: its drops at the last check; the run's PFC pauses.
    dropped: Vec<u64>,
    pauses: u64,
    /// Per flow: its resources, `resources[from..from + len]`, traced once.
    pub(super) paths: Vec<(u32, u32)>,
    pub(super) resources: Vec<Resource>,
    /// The workload's flows by resource, and which have started.
    pub(super) index: FlowIndex,
    /// Per task, the walk that last reached it (downstream of a domain).
    mark: Vec<u32>,
    walk: u32,
    /// What bounds a jump by the flows waiting on its resources.
    pub(super) wait: WaitBound,
    /// The jumps agreed at the last check, until `advance.rs` made them:
    /// per flow its shift (ps) and packets moved, the flows with the
    /// periods of the window their domain was judged on, and the shift of
    /// each resource of a jumped domain with those periods.
    pub(super) shift_ps: Vec<u64>,
    pub(super) votes: Vec<u64>,
    pub(super) jumped: Vec<(u32, usize)>,
    pub(super) resource_shift: HashMap<Resource, (SimTime, usize)>,
}

impl Domains {
    pub(crate) fn new(flows: usize, tasks: usize, nodes: usize, ports: usize) -> Domains {
        Domains {
            opened: Vec::new(),
            finished: Vec::new(),
            disturbed: vec![0; nodes],
            dropped: vec![0; ports],
            pauses: 0,
            paths: vec![(0, UNTRACED); flows],
            resources: Vec::new(),
            index: FlowIndex::new(flows),
            mark: vec![0; tasks],
            walk: 0,
            wait: WaitBound::new(tasks),
            shift_ps: vec![0; flows],
            votes: vec![0; flows],
            jumped: Vec::new(),
            resource_shift: HashMap::new(),
        }
    }

    pub(crate) fn sender_opened(&mut self, flow: u32) {
        self.opened.push(flow);
    }

    pub(crate) fn sender_finished(&mut self, flow: u32) {
        self.finished.push(flow);
    }

    /// Flow task `task` was seen complete at its destination on this shard.
    pub(crate) fn delivered(&mut self, task: u32) {
        self.wait.delivered(task);
    }
}

/// A shard's share of a check's agreement (see [`Agreed`]).
pub(super) struct Local {
    pub(super) replaying: bool,
    pub(super) active: Vec<(u32, u64, u64)>,
    pub(super) opened: Vec<u32>,
    pub(super) node_values: Vec<u64>,
}

/// Union-find over dense resource ids.
pub(super) fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        let up = parent[parent[x as usize] as usize];
        parent[x as usize] = up;
        x = up;
    }
    x
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Flow `flow`'s resources (traced at first use).
    pub(super) fn ff_flow_path(&mut self, flow: u32) -> (usize, usize) {
        let d = self.ff.domains.as_mut().expect("domain scope");
        if d.paths[flow as usize].1 == UNTRACED {
            let from = d.resources.len();
            flow_resources(self.fabric, flow, &mut d.resources);
            let mut own: Vec<Resource> = d.resources.drain(from..).collect();
            own.sort_unstable();
            own.dedup();
            d.resources.extend(&own);
            d.paths[flow as usize] = (from as u32, own.len() as u32);
        }
        let (from, len) = d.paths[flow as usize];
        (from as usize, len as usize)
    }

    /// This shard's share of check `index`'s (slot `slot`) agreement: a
    /// veto, its flows sending with their own jumps (over the long window,
    /// and over the short one where quiet), those started since the last
    /// agreement, and per node (`node_values`: whether a port of it is
    /// unsteady over the long window, bit 0, or the short one, bit 1, then
    /// when it was last disturbed).
    pub(super) fn ff_domain_local(&mut self, index: u64, slot: usize) -> Local {
        let nodes = self.fabric.topo.node_count() as usize;
        let finished = std::mem::take(&mut self.ff.domains.as_mut().expect("on").finished);
        for &f in &finished {
            let (from, len) = self.ff_flow_path(f);
            let d = self.ff.domains.as_mut().expect("on");
            for k in from..from + len {
                d.disturbed[(d.resources[k] >> 17) as usize] = index + 1;
            }
        }
        let congested = self.ff.steady.as_ref().expect("on").config.congested;
        let replaying = self.memo_replaying();
        let d = self.ff.domains.as_mut().expect("on");
        let pauses_now = self.stats.pfc_pauses;
        let paused = !congested && pauses_now != d.pauses;
        d.pauses = pauses_now;
        for (local, &node) in self.nodes.iter().enumerate() {
            let ports = self.port_base[local] as usize..self.port_base[local + 1] as usize;
            for gp in ports {
                let drops: u64 = self.port_side[gp].counters.dropped_pkts.iter().sum();
                if drops != d.dropped[gp] || paused {
                    d.disturbed[node.0 as usize] = index + 1;
                }
                d.dropped[gp] = drops;
            }
        }
        let mut node_values = vec![0u64; 2 * nodes];
        node_values[nodes..].copy_from_slice(&d.disturbed);
        let opened = std::mem::take(&mut d.opened);
        let steady = self.ff.steady.as_ref().expect("on");
        let (long, short) = (steady.long(), steady.short());
        let own = |i, periods| {
            self.ff_flow_skip((index, slot), i, periods)
                .map_or(0, |t| t.as_ps())
        };
        let active: Vec<usize> = self.active_senders().collect();
        let active = active
            .into_iter()
            .map(|i| {
                let quiet = short < long && self.ff_flow_quiet(i);
                let short_own = if quiet { own(i, short) } else { 0 };
                (self.transport.senders[i].flow, own(i, long), short_own)
            })
            .collect();
        for (local, &node) in self.nodes.iter().enumerate() {
            let ports = self.port_base[local] as usize..self.port_base[local + 1] as usize;
            // Bit 0 over the long window, bit 1 over the short (one test
            // sets both where they are one window).
            let windows: &[(u64, usize)] = if short < long {
                &[(1, long), (2, short)]
            } else {
                &[(3, long)]
            };
            for &(bit, periods) in windows {
                if ports
                    .clone()
                    .any(|gp| !self.ff_port_steady(gp, node, slot, periods))
                {
                    node_values[node.0 as usize] |= bit;
                }
            }
        }
        Local {
            replaying,
            active,
            opened,
            node_values,
        }
    }

    /// At check `now` without a whole-run jump: agrees on the domains that
    /// jump (each by the least of its flows' own jumps, the time to the
    /// next start of a flow on its resources and to `end`, at least a
    /// period) and the packets their flows move by; gives how many jump
    /// and the sum of their jumps, the same on every shard.
    pub(crate) fn ff_domain_jumps(
        &mut self,
        now: SimTime,
        end: SimTime,
        pending: &mut dyn Iterator<Item = (SimTime, NetEvent)>,
        all_max: AllMax<'_>,
    ) -> Result<(u64, SimTime), Aborted> {
        let Some(ff) = self.ff.steady.as_ref() else {
            return Ok((0, SimTime::ZERO));
        };
        let (index, period) = (ff.checks - 1, ff.config.period);
        // The same on every shard: checks and their gaps are agreed.
        if self.ff.domains.is_none() || index < ff.valid_from + ff.short() as u64 {
            return Ok((0, SimTime::ZERO));
        }
        let slot = (index % ff.slots as u64) as usize;
        let agreed = self.ff_domain_agree(index, slot, all_max)?;
        let jumps = if agreed.replaying {
            Vec::new()
        } else {
            self.ff_decide((now, end), (index, period), &agreed, pending, all_max)?
        };
        if jumps.is_empty() {
            return Ok((0, SimTime::ZERO));
        }
        self.ff_domain_votes(index, slot, all_max)?;
        let total = jumps.iter().fold(SimTime::ZERO, |t, &j| t + j);
        Ok((jumps.len() as u64, total))
    }

    /// From the `agreed` values: the domains' jumps (their lengths), with
    /// each jumped flow's shift and each jumped resource's noted.
    fn ff_decide(
        &mut self,
        (now, end): (SimTime, SimTime),
        (index, period): (u64, SimTime),
        agreed: &Agreed,
        pending: &mut dyn Iterator<Item = (SimTime, NetEvent)>,
        all_max: AllMax<'_>,
    ) -> Result<Vec<SimTime>, Aborted> {
        // Domains: union-find over the active flows' resources.
        let mut ids: HashMap<Resource, u32> = HashMap::new();
        let mut parent: Vec<u32> = Vec::new();
        let active: Vec<u32> = agreed.active.iter().map(|&(f, _, _)| f).collect();
        for &f in &active {
            let (from, len) = self.ff_flow_path(f);
            let d = self.ff.domains.as_ref().expect("on");
            let mut first = None;
            for &r in &d.resources[from..from + len] {
                let next = parent.len() as u32;
                let id = *ids.entry(r).or_insert(next);
                if id == next {
                    parent.push(id);
                }
                let (a, b) = (
                    find(&mut parent, id),
                    find(&mut parent, *first.get_or_insert(id)),
                );
                parent[a.max(b) as usize] = a.min(b);
            }
        }
        let mut ok = vec![true; parent.len()];
        let mut skip = vec![(end - now).as_ps(); parent.len()];
        // A domain is quiet, judged on the short window, when every flow of
        // it is quiet and steady over it; otherwise on the long one.
        let mut quiet = vec![true; parent.len()];
        let d = self.ff.domains.as_ref().expect("on");
        let root_of = |f: u32, parent: &mut [u32]| {
            find(parent, ids[&d.resources[d.paths[f as usize].0 as usize]]) as usize
        };
        for &(f, _, short) in &agreed.active {
            quiet[root_of(f, &mut parent)] &= short != 0;
        }
        let steady = self.ff.steady.as_ref().expect("on");
        let (long, short) = (steady.long() as u64, steady.short() as u64);
        for (&r, &id) in &ids {
            let node = (r >> 17) as usize;
            let root = find(&mut parent, id) as usize;
            let (bit, window) = if quiet[root] { (2, short) } else { (1, long) };
            let (unsteady, at) = (agreed.unsteady[node], agreed.disturbed[node]);
            if unsteady & bit != 0 || at + window > index + 1 {
                ok[root] = false;
            }
        }
        for &(f, long_own, short_own) in &agreed.active {
            let root = root_of(f, &mut parent);
            let own = if quiet[root] { short_own } else { long_own };
            if own == 0 {
                ok[root] = false;
            }
            skip[root] = skip[root].min(own);
        }
        let view = (active.as_slice(), &ids, parent.as_mut_slice());
        let waited = self.ff_bound_by_others(now, view, (&mut ok, &mut skip), pending, all_max)?;
        if !waited.is_empty() {
            let view = (active.as_slice(), &ids, parent.as_mut_slice());
            self.ff_wait_bound(now, &waited, view, &mut skip, all_max)?;
        }
        let d = self.ff.domains.as_mut().expect("on");
        let mut jumps = Vec::new();
        let mut shift = vec![0u64; parent.len()];
        for root in 0..parent.len() {
            if find(&mut parent, root as u32) == root as u32
                && ok[root]
                && skip[root] >= period.as_ps()
            {
                shift[root] = skip[root];
                jumps.push(SimTime(skip[root]));
            }
        }
        let periods = |root: usize| if quiet[root] { short } else { long } as usize;
        for (&r, &id) in &ids {
            let root = find(&mut parent, id) as usize;
            if shift[root] > 0 {
                d.resource_shift
                    .insert(r, (SimTime(shift[root]), periods(root)));
            }
        }
        for &f in &active {
            let first = d.resources[d.paths[f as usize].0 as usize];
            let root = find(&mut parent, ids[&first]) as usize;
            if shift[root] > 0 {
                d.shift_ps[f as usize] = shift[root];
                d.jumped.push((f, periods(root)));
            }
        }
        Ok(jumps)
    }

    /// Bounds each candidate domain (`ok`, its longest jump `skip`, by
    /// root) by the flows not started that use its resources: one
    /// scheduled bounds it by its start; one waiting for dependencies does
    /// not bound it if it is downstream of one of the domain's flows (the
    /// `active` ones, which end after the jump), and otherwise gives its
    /// root, returned (in order, once), for `ff_wait_bound` to bound by
    /// when it can start. Agrees the pending starts only at a check with a
    /// candidate.
    fn ff_bound_by_others(
        &mut self,
        now: SimTime,
        (active, ids, parent): (&[u32], &HashMap<Resource, u32>, &mut [u32]),
        (ok, skip): (&mut [bool], &mut [u64]),
        pending: &mut dyn Iterator<Item = (SimTime, NetEvent)>,
        all_max: AllMax<'_>,
    ) -> Result<Vec<u32>, Aborted> {
        let mut waited = Vec::new();
        if !ok.iter().any(|&o| o) {
            return Ok(waited);
        }
        let mut candidates: Vec<(Resource, u32)> = ids
            .iter()
            .map(|(&r, &id)| (r, find(parent, id)))
            .filter(|&(_, root)| ok[root as usize])
            .collect();
        candidates.sort_unstable();
        let not_started = self.ff_not_started_on(&candidates);
        let mut flows: Vec<u32> = not_started.iter().map(|&(_, f)| f).collect();
        flows.sort_unstable();
        flows.dedup();
        let starts = self.ff_agree_starts(&flows, pending, all_max)?;
        let mut waiting: Vec<(u32, u32)> = Vec::new();
        for (root, f) in not_started {
            let at = starts[flows.binary_search(&f).expect("listed")];
            if at != 0 {
                let to = (at - 1).saturating_sub(now.as_ps());
                skip[root as usize] = skip[root as usize].min(to);
            } else {
                waiting.push((root, f));
            }
        }
        let mut walked = u32::MAX;
        for (root, f) in waiting {
            if !ok[root as usize] {
                continue;
            }
            // A flow that is no task's: no DAG bounds its start.
            let Some(task) = self.fabric.workload.flow_info(f).map(|i| i.task) else {
                ok[root as usize] = false;
                continue;
            };
            if walked != root {
                self.ff_walk_downstream(root, active, ids, parent);
                walked = root;
            }
            let d = self.ff.domains.as_ref().expect("on");
            if d.mark[task as usize] != d.walk && waited.last() != Some(&root) {
                waited.push(root);
            }
        }
        // Vetoed since by a flow that is no task's: not bounded.
        waited.retain(|&root| ok[root as usize]);
        Ok(waited)
    }

    /// Marks every task downstream of the `active` flows of the domain
    /// rooted at `root` with a fresh walk number.
    fn ff_walk_downstream(
        &mut self,
        root: u32,
        active: &[u32],
        ids: &HashMap<Resource, u32>,
        parent: &mut [u32],
    ) {
        let workload = &self.fabric.workload;
        let d = self.ff.domains.as_mut().expect("on");
        d.walk = d.walk.wrapping_add(1);
        if d.walk == 0 {
            d.mark.fill(0);
            d.walk = 1;
        }
        let mut stack: Vec<u32> = Vec::new();
        for &f in active {
            let first = d.resources[d.paths[f as usize].0 as usize];
            if find(parent, ids[&first]) != root {
                continue;
            }
            if let Some(info) = workload.flow_info(f) {
                stack.push(info.task);
            }
        }
        while let Some(t) = stack.pop() {
            for &dep in workload.dependents(t) {
                if d.mark[dep as usize] != d.walk {
                    d.mark[dep as usize] = d.walk;
                    stack.push(dep);
                }
            }
        }
    }

    /// Agrees the packets each jumped flow moves by (its sender's window
    /// rate times its domain's jump, short of its end).
    fn ff_domain_votes(
        &mut self,
        index: u64,
        slot: usize,
        all_max: AllMax<'_>,
    ) -> Result<(), Aborted> {
        let ff = self.ff.steady.as_ref().expect("on");
        let d = self.ff.domains.as_mut().expect("on");
        debug_assert_eq!(index % ff.slots as u64, slot as u64);
        let mut votes = vec![0u64; d.jumped.len()];
        for (k, &(f, periods)) in d.jumped.iter().enumerate() {
            let Some(&i) = self.transport.sender_of.get(&f) else {
                continue;
            };
            let (i, delta_ps) = (i as usize, d.shift_ps[f as usize]);
            let s = &self.transport.senders[i];
            let oldest = ff.back(slot, periods);
            let total = ff.acked[i * ff.slots + slot] - ff.acked[i * ff.slots + oldest];
            let span_ps = ff.ack_span_ps(i, slot, periods);
            // To the nearest packet: truncating made each jump end its
            // flow up to a packet late, and a ring's steps add that up.
            let moved = (u128::from(total) * u128::from(delta_ps) + span_ps / 2) / span_ps;
            let Qp::Roce(qp) = &s.qp else { continue };
            let room = s.packets.saturating_sub(qp.next_psn() + 1);
            votes[k] = (moved as u64).min(u64::from(room));
        }
        all_max(&mut votes)?;
        for (&(f, _), v) in d.jumped.iter().zip(votes) {
            d.votes[f as usize] = v;
        }
        Ok(())
    }
}
