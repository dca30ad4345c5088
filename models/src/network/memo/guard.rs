//! The memo's guard (DESIGN.md §3c, "Guard"): from the DAG's state agreed
//! at a check, the earliest instant a flow outside a domain can start on
//! one of its resources, and lower bounds on flows' completions.

use super::key::{first_port, source, start_delay, Canon, Resource};
use crate::network::Fabric;
use crate::workload::{TaskKind, Workload};
use hashbrown::HashMap;
use netsim_engine::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What the memo's guard knows of the whole DAG at a check instant, agreed
/// by every shard (one `all_max` over three values per task): which tasks
/// start (flows scheduled or sending, `MAX - start`), which compute tasks
/// end (`MAX - end`), and how many dependencies each task's host has not
/// seen complete yet.
pub(super) struct DagView {
    pub(super) values: Vec<u64>,
}

impl DagView {
    pub(super) fn new(tasks: usize) -> DagView {
        DagView {
            values: vec![0; 3 * tasks],
        }
    }

    fn tasks(&self) -> usize {
        self.values.len() / 3
    }

    pub(super) fn starts(&mut self, task: u32, at: SimTime) {
        let v = &mut self.values[task as usize];
        *v = (*v).max(u64::MAX - at.as_ps());
    }

    pub(super) fn ends(&mut self, task: u32, at: SimTime) {
        let n = self.tasks();
        let v = &mut self.values[n + task as usize];
        *v = (*v).max(u64::MAX - at.as_ps());
    }

    pub(super) fn remaining(&mut self, task: u32, deps: u32) {
        let n = self.tasks();
        self.values[2 * n + task as usize] = u64::from(deps);
    }
}

/// The guard's walks of one round (see [`Guard::earliest_touching`]): what
/// every walk of the round starts from, computed once from the agreed DAG
/// view and the replayed tasks' completions, and scratch reused by each
/// walk, so a walk costs what it visits, not the whole workload.
#[derive(Debug)]
pub(super) struct Guard {
    /// Per task, the dependencies its host still waits for (agreed).
    remaining: Vec<u32>,
    /// Tasks that start (flows scheduled or sending), by time.
    starts: Vec<(SimTime, u32)>,
    /// Per task, how many of its missing dependencies the compute ends and
    /// the replayed tasks' completions reach, and the latest of them.
    base: Vec<(u32, SimTime)>,
    /// Tasks they make ready, by time.
    base_ready: Vec<(SimTime, u32)>,
    /// Per task: replayed (its completions are known, it sends nothing).
    replayed: Vec<bool>,
    /// Per walk: `mark[t] == walk` when `reached[t]` holds this walk's
    /// count for `t`; `seen[t] == walk` once `t` was pushed, or when it is
    /// the domain's own (neither is followed).
    walk: u32,
    mark: Vec<u32>,
    reached: Vec<(u32, SimTime)>,
    seen: Vec<u32>,
    heap: BinaryHeap<Reverse<(SimTime, u32)>>,
    scratch: Vec<Resource>,
}

impl Guard {
    /// Empty walks for a workload of `tasks` tasks, to [`Guard::prepare`].
    pub(super) fn new(tasks: usize) -> Guard {
        Guard {
            remaining: vec![0; tasks],
            starts: Vec::new(),
            base: vec![(0, SimTime::ZERO); tasks],
            base_ready: Vec::new(),
            replayed: vec![false; tasks],
            walk: 0,
            mark: vec![0; tasks],
            reached: vec![(0, SimTime::ZERO); tasks],
            seen: vec![0; tasks],
            heap: BinaryHeap::new(),
            scratch: Vec::new(),
        }
    }

    /// Prepares the walks of a round from the agreed view `dag` at check
    /// instant `now`, given the replayed tasks' completions
    /// (`completions`; `replayed`: per task, among them; `exits`: those
    /// of them with a dependent not among them when replayed, the only
    /// ones whose completions a walk can follow).
    pub(super) fn prepare(
        &mut self,
        fabric: &Fabric,
        dag: &DagView,
        completions: &HashMap<u32, (SimTime, SimTime)>,
        replayed: &[bool],
        exits: &[u32],
        now: SimTime,
    ) {
        let workload = &fabric.workload;
        let n = dag.tasks();
        for (r, &v) in self.remaining.iter_mut().zip(&dag.values[2 * n..]) {
            *r = u32::try_from(v).expect("a task's dependencies fit u32");
        }
        self.starts.clear();
        self.base.fill((0, SimTime::ZERO));
        self.base_ready.clear();
        self.replayed.copy_from_slice(replayed);
        // The same reaches in the same order as every walk would make them
        // itself: compute ends in task order, then replayed completions in
        // task order (a task is ready when the count first equals its
        // missing dependencies, at the latest so far). A replayed task's
        // dependents that are replayed too are never followed: their
        // counts do not matter.
        for t in 0..n {
            if dag.values[t] != 0 {
                self.starts
                    .push((SimTime(u64::MAX - dag.values[t]), t as u32));
            }
            if dag.values[n + t] != 0 {
                let end = SimTime(u64::MAX - dag.values[n + t]);
                for &d in workload.dependents(t as u32) {
                    self.reach_base(workload, d, end);
                }
            }
        }
        let mut order = exits.to_vec();
        order.sort_unstable();
        for t in order {
            let done = completions[&t];
            let source = source(workload, t);
            for &d in workload.dependents(t) {
                let seen = seen_by(workload, d, source, done);
                // Before `now`, its host has seen it: it no longer waits.
                if seen >= now {
                    self.reach_base(workload, d, seen);
                }
            }
        }
        self.starts.sort_unstable();
        self.base_ready.sort_unstable();
    }

    fn reach_base(&mut self, workload: &Workload, d: u32, at: SimTime) {
        let at = at + start_delay(workload, d);
        let e = &mut self.base[d as usize];
        e.0 += 1;
        e.1 = e.1.max(at);
        if e.0 == self.remaining[d as usize] {
            self.base_ready.push((e.1, d));
        }
    }

    /// Task `d` may start at `at` as far as one of its dependencies goes,
    /// in the current walk; pushed when ready before `horizon` (a task
    /// ready later is never followed: the walk stops there).
    fn reach(&mut self, workload: &Workload, d: u32, at: SimTime, horizon: SimTime) {
        let at = at + start_delay(workload, d);
        let i = d as usize;
        if self.mark[i] != self.walk {
            self.mark[i] = self.walk;
            self.reached[i] = self.base[i];
        }
        let e = &mut self.reached[i];
        e.0 += 1;
        e.1 = e.1.max(at);
        // A replayed task or the domain's own is not followed: not pushed.
        if e.0 == self.remaining[i]
            && e.1 < horizon
            && !self.replayed[i]
            && self.seen[i] != self.walk
        {
            self.seen[i] = self.walk;
            self.heap.push(Reverse((e.1, d)));
        }
    }

    /// The earliest a flow outside `canon`'s domain that uses its
    /// resources could start, before `horizon` (`SimTime::MAX`: at or
    /// after it, or never), given the round's DAG state and the replayed
    /// tasks' completions, and the domain's own (`own`, per canonical
    /// task, absolute; `None` before its record exists: then what waits
    /// for the domain is not followed, and the bound is no lower than with
    /// them).
    ///
    /// Tasks are followed in time order from what starts or ends: a task
    /// starts once its host has seen every dependency it still waits for
    /// complete (the latest of their earliest completions, plus the host
    /// overhead for a flow), a flow completes no earlier than its payload
    /// takes at its first link's rate after it starts ([`least_fct`]), a
    /// compute task its duration after. Every bound is a lower bound; the
    /// domain's own tasks and replayed ones are not followed as flows
    /// (they send nothing), their completions are. The same on every
    /// shard.
    pub(super) fn earliest_touching(
        &mut self,
        fabric: &Fabric,
        canon: &Canon,
        own: Option<&[(SimTime, SimTime)]>,
        now: SimTime,
        horizon: SimTime,
    ) -> SimTime {
        let workload = &fabric.workload;
        self.walk = self.walk.checked_add(1).expect("fewer than 2^32 walks");
        let walk = self.walk;
        let mut heap = std::mem::take(&mut self.heap);
        heap.clear();
        let before = |&&(at, _): &&(SimTime, u32)| at < horizon;
        for &t in &canon.tasks {
            self.seen[t as usize] = walk;
        }
        let seen = &mut self.seen;
        let replayed = &self.replayed;
        heap.extend(
            self.starts
                .iter()
                .take_while(before)
                .chain(self.base_ready.iter().take_while(before))
                .filter(|&&(_, t)| {
                    let i = t as usize;
                    let follow = !replayed[i] && seen[i] != walk;
                    seen[i] = walk;
                    follow
                })
                .map(|&e| Reverse(e)),
        );
        self.heap = heap;
        if let Some(own) = own {
            for (k, &t) in canon.tasks.iter().enumerate() {
                let source = source(workload, t);
                for &d in workload.dependents(t) {
                    let seen = seen_by(workload, d, source, own[k]);
                    if seen >= now {
                        self.reach(workload, d, seen, horizon);
                    }
                }
            }
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut found = SimTime::MAX;
        while let Some(Reverse((at, t))) = self.heap.pop() {
            let task = workload.tasks[t as usize];
            let done = match workload.kind(&task) {
                TaskKind::Flow(f) => {
                    if canon.touched_by(fabric, f, &mut scratch) {
                        found = at;
                        break;
                    }
                    at + least_fct(fabric, f)
                }
                TaskKind::Compute(duration) => at + duration,
            };
            for &d in workload.dependents(t) {
                self.reach(workload, d, done, horizon);
            }
        }
        self.scratch = scratch;
        found
    }
}

/// When task `d`'s host sees task `t` (started at `source`) complete,
/// given when its source and its destination see it.
fn seen_by(
    workload: &Workload,
    d: u32,
    source: u32,
    (src_done, dst_done): (SimTime, SimTime),
) -> SimTime {
    if workload.tasks[d as usize].host == source {
        src_done
    } else {
        dst_done
    }
}

/// A lower bound on flow `flow`'s completion time after its start, at its
/// source and at its destination alike: its payload serialised at its
/// first link's rate (no packet of it is sent before it starts, none
/// faster; the last acknowledgement follows the last data packet).
pub(super) fn least_fct(fabric: &Fabric, flow: u32) -> SimTime {
    let spec = fabric.workload.flows[flow as usize];
    let port = first_port(fabric, flow, spec.src, spec.dst);
    let topo = &fabric.topo;
    let rate_bps = topo.link(topo.port(spec.src, port).link).bandwidth_bps;
    let ps = u128::from(spec.size_bytes) * 8 * 1_000_000_000_000 / u128::from(rate_bps.max(1));
    SimTime(ps.min(u128::from(u64::MAX)) as u64)
}
