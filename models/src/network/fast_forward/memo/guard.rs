//! The memo's guard (DESIGN.md §3c, "Guard"): from the DAG's state agreed
//! at a check, the earliest instant a flow outside a domain can start on
//! one of its resources, and lower bounds on flows' completions. Shared
//! with per-domain jumps (`domain_wait.rs`), which bound a jump by it.

use super::key::{source, start_delay};
use super::radix::RadixHeap;
use super::resources::{first_port, flow_resources, Resource};
use crate::network::Fabric;
use crate::workload::{TaskKind, Workload};
use hashbrown::HashSet;
use netsim_engine::SimTime;

/// What the memo's guard knows of the whole DAG at a check instant, agreed
/// by every shard (one `all_max` over three values per task): which tasks
/// start (flows scheduled or sending, `MAX - start`), which compute tasks
/// end (`MAX - end`) and which flows their destination has seen complete
/// (1: delivered, the last acknowledgement maybe not back), and how many
/// dependencies each task's host has not seen complete yet.
pub(in crate::network::fast_forward) struct DagView {
    pub(in crate::network::fast_forward) values: Vec<u64>,
}

impl DagView {
    #[cfg(test)]
    pub(super) fn new(tasks: usize) -> DagView {
        DagView::reusing(tasks, Vec::new())
    }

    /// A view for `tasks` tasks in `values`, a buffer an earlier view
    /// left (zeroed here: three values per task each check would
    /// otherwise be fresh pages for the kernel to clear).
    pub(in crate::network::fast_forward) fn reusing(tasks: usize, mut values: Vec<u64>) -> DagView {
        values.clear();
        values.resize(3 * tasks, 0);
        DagView { values }
    }

    fn tasks(&self) -> usize {
        self.values.len() / 3
    }

    pub(in crate::network::fast_forward) fn starts(&mut self, task: u32, at: SimTime) {
        let v = &mut self.values[task as usize];
        *v = (*v).max(u64::MAX - at.as_ps());
    }

    pub(in crate::network::fast_forward) fn ends(&mut self, task: u32, at: SimTime) {
        let n = self.tasks();
        let v = &mut self.values[n + task as usize];
        *v = (*v).max(u64::MAX - at.as_ps());
    }

    /// Flow task `task`'s destination has seen it complete (the second
    /// value, a compute task's end, is unused for a flow).
    pub(in crate::network::fast_forward) fn delivered(&mut self, task: u32) {
        let n = self.tasks();
        self.values[n + task as usize] = 1;
    }

    pub(in crate::network::fast_forward) fn remaining(&mut self, task: u32, deps: u32) {
        let n = self.tasks();
        self.values[2 * n + task as usize] = u64::from(deps);
    }
}

/// One task's entry in the guard's walks: what the round agreed and
/// prepared for it, and the current walk's state (one cache line read per
/// task reached, not several vectors).
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Slot {
    /// The dependencies its host still waits for (agreed).
    remaining: u32,
    /// `mark == walk` when `reached` holds this walk's count.
    mark: u32,
    /// `seen == walk` once pushed in this walk, or when it is the
    /// domain's own (neither is followed).
    seen: u32,
    /// How many of its missing dependencies the compute ends and the
    /// replayed tasks' completions reach, and the latest of them.
    base: (u32, SimTime),
    /// The same in the current walk.
    reached: (u32, SimTime),
    /// When it starts (a flow scheduled or sending) or is made ready by
    /// `base`: its time in [`Guard::initial`]; `SimTime::MAX` if in none.
    initial: SimTime,
    /// How long after it is ready it starts ([`start_delay`]).
    delay: SimTime,
    /// A flow that starts (still sending) whose destination has seen it
    /// complete (agreed): the destination's dependents no longer wait for
    /// it, so a walk reaches only its source's.
    delivered: bool,
}

// One cache line per task: what the memory check counts for it.
const _: () = assert!(std::mem::size_of::<Slot>() == 64);

const EMPTY: Slot = Slot {
    remaining: 0,
    mark: 0,
    seen: 0,
    base: (0, SimTime::ZERO),
    reached: (0, SimTime::ZERO),
    initial: SimTime::MAX,
    delay: SimTime::ZERO,
    delivered: false,
};

/// The guard's walks of one round (see [`Guard::earliest_touching`]): what
/// every walk of the round starts from, computed once from the agreed DAG
/// view and the replayed tasks' completions, and scratch reused by each
/// walk, so a walk costs what it visits, not the whole workload.
#[derive(Debug)]
pub(in crate::network::fast_forward) struct Guard {
    slots: Vec<Slot>,
    /// Per task: replayed (its completions are known, it sends nothing),
    /// apart from the slots: a walk tests it before touching a slot.
    replayed: Vec<bool>,
    /// What every walk starts from, by time: tasks that start (flows
    /// scheduled or sending) and tasks the compute ends and the exits
    /// make ready (disjoint: a task that starts waits for nothing), not
    /// replayed. A walk merges it with its heap instead of pushing it.
    initial: Vec<(SimTime, u32)>,
    /// The tasks the view starts or ends (or delivered), in task order,
    /// and the slots the last preparation set: a later preparation from
    /// the same view (a round after a replay) costs what they are, not
    /// the whole workload.
    view: Vec<u32>,
    dirty: Vec<u32>,
    /// The current walk's number, which the slots' marks compare to.
    walk: u32,
    heap: RadixHeap,
    /// Per flow, once a walk followed it: its resources (a range of
    /// `resources`, at most [`PATH_RESOURCES`] of them; more are found
    /// again each time) and its [`least_fct`], both functions of the flow
    /// and the fabric alone, so walks do not trace its path again.
    paths: Vec<Path>,
    resources: Vec<Resource>,
    scratch: Vec<Resource>,
}

/// A flow's entry in [`Guard::paths`]; `len` [`UNTRACED`] before a walk
/// follows it, [`LONG`] if its path has more than [`PATH_RESOURCES`].
#[derive(Clone, Copy, Debug)]
struct Path {
    from: u32,
    len: u32,
    least_fct: SimTime,
}

const UNTRACED: u32 = u32::MAX;
const LONG: u32 = u32::MAX - 1;

/// The most resources a flow's cached path holds (a host port at each end
/// and the switches between, deduplicated: six switches between hosts).
pub(super) const PATH_RESOURCES: usize = 8;

// What the memory check counts for it.
const _: () = assert!(std::mem::size_of::<Path>() == 16);

impl Guard {
    /// Empty walks for `workload`'s tasks, to [`Guard::prepare`].
    pub(in crate::network::fast_forward) fn new(workload: &Workload) -> Guard {
        let mut slots = vec![EMPTY; workload.tasks.len()];
        for (t, slot) in slots.iter_mut().enumerate() {
            slot.delay = start_delay(workload, t as u32);
        }
        Guard {
            slots,
            replayed: vec![false; workload.tasks.len()],
            initial: Vec::new(),
            view: Vec::new(),
            dirty: Vec::new(),
            walk: 0,
            heap: RadixHeap::new(),
            paths: vec![
                Path {
                    from: 0,
                    len: UNTRACED,
                    least_fct: SimTime::ZERO,
                };
                workload.flows.len()
            ],
            resources: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Prepares the walks of a round from the agreed view `dag` at check
    /// instant `now`, given the replayed tasks' completions
    /// (`done_at`, per task; `replayed.0`: per task, among them; `exits`:
    /// those of them with a dependent neither among them nor settled, the
    /// only ones whose completions a walk can follow). A settled task
    /// (`replayed.1`, per task; the memo's `settles`) is not followed
    /// either: all a walk reaches through it is replayed or settled.
    /// `same_view`: the last preparation was from `dag` too (a round after
    /// a replay, at the same check): then only the slots it set are reset.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::network::fast_forward) fn prepare(
        &mut self,
        fabric: &Fabric,
        dag: &DagView,
        same_view: bool,
        done_at: &[(SimTime, SimTime)],
        (replayed, settled): (&[bool], &[bool]),
        exits: &[u32],
        now: SimTime,
    ) {
        let workload = &fabric.workload;
        let n = dag.tasks();
        for ((r, &a), &b) in self.replayed.iter_mut().zip(replayed).zip(settled) {
            *r = a || b;
        }
        if same_view {
            for &t in &self.dirty {
                let slot = &mut self.slots[t as usize];
                slot.base = (0, SimTime::ZERO);
                slot.initial = SimTime::MAX;
                slot.delivered = false;
            }
        } else {
            for (slot, &v) in self.slots.iter_mut().zip(&dag.values[2 * n..]) {
                slot.remaining = u32::try_from(v).expect("a task's dependencies fit u32");
                slot.base = (0, SimTime::ZERO);
                slot.initial = SimTime::MAX;
                slot.delivered = false;
            }
            self.view.clear();
            self.view.extend(
                (0..n as u32).filter(|&t| dag.values[t as usize] | dag.values[n + t as usize] != 0),
            );
        }
        self.dirty.clear();
        self.initial.clear();
        // The same reaches in the same order as every walk would make them
        // itself: compute ends in task order, then replayed completions in
        // task order (a task is ready when the count first equals its
        // missing dependencies, at the latest so far). A replayed task's
        // dependents that are replayed too are never followed: their
        // counts do not matter.
        let view = std::mem::take(&mut self.view);
        for &t in &view {
            let t = t as usize;
            if dag.values[t] != 0 {
                self.start(SimTime(u64::MAX - dag.values[t]), t as u32);
            }
            if dag.values[n + t] != 0 {
                match workload.kind(&workload.tasks[t]) {
                    TaskKind::Compute(_) => {
                        let end = SimTime(u64::MAX - dag.values[n + t]);
                        for &d in workload.dependents(t as u32) {
                            self.reach_base(workload, d, end);
                        }
                    }
                    TaskKind::Flow(_) => {
                        self.touch(t as u32);
                        self.slots[t].delivered = true;
                    }
                }
            }
        }
        self.view = view;
        let mut order = exits.to_vec();
        order.sort_unstable();
        for t in order {
            let done = done_at[t as usize];
            let source = source(workload, t);
            for &d in workload.dependents(t) {
                let seen = seen_by(workload, d, source, done);
                // Before `now`, its host has seen it: it no longer waits.
                if seen >= now {
                    self.reach_base(workload, d, seen);
                }
            }
        }
        self.initial.sort_unstable();
    }

    /// Notes slot `t` in `dirty` before a preparation first sets it.
    fn touch(&mut self, t: u32) {
        let slot = &self.slots[t as usize];
        if slot.base.0 == 0 && slot.initial == SimTime::MAX && !slot.delivered {
            self.dirty.push(t);
        }
    }

    /// Task `t` starts, or is made ready, at `at` in every walk.
    fn start(&mut self, at: SimTime, t: u32) {
        self.touch(t);
        let slot = &mut self.slots[t as usize];
        debug_assert_eq!(slot.initial, SimTime::MAX, "starts and base disjoint");
        slot.initial = at;
        if !self.replayed[t as usize] {
            self.initial.push((at, t));
        }
    }

    fn reach_base(&mut self, workload: &Workload, d: u32, at: SimTime) {
        self.touch(d);
        let at = at + start_delay(workload, d);
        let slot = &mut self.slots[d as usize];
        slot.base.0 += 1;
        slot.base.1 = slot.base.1.max(at);
        if slot.base.0 == slot.remaining {
            let ready = slot.base.1;
            self.start(ready, d);
        }
    }

    /// Task `d` may start at `at` as far as one of its dependencies goes,
    /// in the current walk; pushed when ready before `horizon` (a task
    /// ready later is never followed: the walk stops there) and not in
    /// the walk's initial tasks (those are merged in from
    /// [`Guard::initial`]).
    /// Its count in the walk matters only if it can be pushed, so a reach
    /// at or after the horizon (the task's latest is then past it for
    /// good) or of a replayed task leaves the slot alone. Exact because no
    /// task is reached more often than its agreed missing dependencies (a
    /// delivered flow reaches only its source's dependents): a skipped
    /// reach leaves the count short of them for the whole walk.
    fn reach(&mut self, d: u32, at: SimTime, horizon: SimTime) {
        if at >= horizon || self.replayed[d as usize] {
            return;
        }
        let walk = self.walk;
        let slot = &mut self.slots[d as usize];
        let at = at + slot.delay;
        if slot.mark != walk {
            slot.mark = walk;
            slot.reached = slot.base;
        }
        slot.reached.0 += 1;
        slot.reached.1 = slot.reached.1.max(at);
        // The domain's own is not followed: not pushed.
        if slot.reached.0 == slot.remaining
            && slot.reached.1 < horizon
            && slot.seen != walk
            && slot.initial >= horizon
        {
            slot.seen = walk;
            self.heap.push(slot.reached.1, d);
        }
    }

    /// The next walk's number. After 2^32 - 1 walks the marks restart
    /// from 1, cleared first: one left from the walk of the same number
    /// long ago would read as this walk's.
    fn next_walk(&mut self) -> u32 {
        self.walk = match self.walk.checked_add(1) {
            Some(walk) => walk,
            None => {
                for slot in &mut self.slots {
                    slot.mark = 0;
                    slot.seen = 0;
                }
                1
            }
        };
        self.walk
    }

    /// The earliest a flow outside a domain (its tasks `tasks`) that uses
    /// its `resources` could start, before `horizon` (`SimTime::MAX`: at
    /// or after it, or never), given the round's DAG state and the
    /// replayed tasks' completions, and the domain's own (`own`, per task
    /// of `tasks`, absolute; `None` when unknown: then what waits for the
    /// domain is not followed, and the bound is no lower than with them).
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
    pub(in crate::network::fast_forward) fn earliest_touching(
        &mut self,
        fabric: &Fabric,
        (tasks, resources): (&[u32], &HashSet<Resource>),
        own: Option<&[(SimTime, SimTime)]>,
        now: SimTime,
        horizon: SimTime,
    ) -> SimTime {
        let workload = &fabric.workload;
        let walk = self.next_walk();
        self.heap.clear();
        for &t in tasks {
            self.slots[t as usize].seen = walk;
        }
        if let Some(own) = own {
            for (k, &t) in tasks.iter().enumerate() {
                let source = source(workload, t);
                for &d in workload.dependents(t) {
                    let seen = seen_by(workload, d, source, own[k]);
                    if seen >= now {
                        self.reach(d, seen, horizon);
                    }
                }
            }
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut found = SimTime::MAX;
        // The initial tasks before the horizon and the heap, merged in
        // time order (every task is in one of them at most once, so the
        // order is the one a heap of both would give).
        let mut next = 0;
        loop {
            let from_initial = self
                .initial
                .get(next)
                .filter(|&&(at, _)| at < horizon)
                .copied();
            let (at, t) = match from_initial {
                Some(i) => match self.heap.pop_before(i) {
                    Some(h) => h,
                    None => {
                        next += 1;
                        // The domain's own: not followed.
                        if self.slots[i.1 as usize].seen == walk {
                            continue;
                        }
                        i
                    }
                },
                None => match self.heap.pop() {
                    Some(h) => h,
                    None => break,
                },
            };
            let task = workload.tasks[t as usize];
            // A delivered flow reaches only its source's dependents (its
            // destination's do not count it among their missing ones).
            let (done, only) = match workload.kind(&task) {
                TaskKind::Flow(f) => {
                    let path = self.path(fabric, f, &mut scratch);
                    let touched = if path.len == LONG {
                        scratch.clear();
                        flow_resources(fabric, f, &mut scratch);
                        scratch.iter().any(|r| resources.contains(r))
                    } else {
                        let from = path.from as usize;
                        self.resources[from..from + path.len as usize]
                            .iter()
                            .any(|r| resources.contains(r))
                    };
                    if touched {
                        found = at;
                        break;
                    }
                    let only = self.slots[t as usize]
                        .delivered
                        .then_some(workload.flows[f as usize].src);
                    (at + path.least_fct, only)
                }
                TaskKind::Compute(duration) => (at + duration, None),
            };
            for &d in workload.dependents(t) {
                if only.is_none_or(|src| workload.tasks[d as usize].host == src) {
                    self.reach(d, done, horizon);
                }
            }
        }
        self.scratch = scratch;
        found
    }
}

impl Guard {
    /// Flow `flow`'s entry in [`Guard::paths`], traced at its first walk.
    fn path(&mut self, fabric: &Fabric, flow: u32, scratch: &mut Vec<Resource>) -> Path {
        let path = &mut self.paths[flow as usize];
        if path.len == UNTRACED {
            path.least_fct = least_fct(fabric, flow);
            scratch.clear();
            flow_resources(fabric, flow, scratch);
            scratch.sort_unstable();
            scratch.dedup();
            if scratch.len() <= PATH_RESOURCES {
                path.from = u32::try_from(self.resources.len()).expect("paths fit u32 indices");
                path.len = scratch.len() as u32;
                self.resources.extend_from_slice(scratch);
            } else {
                path.len = LONG;
            }
        }
        *path
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

#[cfg(test)]
mod tests {
    use super::super::tests::{prepared, KB_FCT, NOW, OVERHEAD, US};
    use netsim_engine::SimTime;

    #[test]
    fn walks_past_2_pow_32_restart_with_cleared_marks() {
        let (fabric, mut guard, canon) = prepared(1000, true);
        let walk = |guard: &mut super::Guard, horizon| {
            guard.earliest_touching(&fabric, canon.region(), None, NOW, horizon)
        };
        // Walk 1 pushes X, which touches the domain.
        let touches = KB_FCT + OVERHEAD;
        assert_eq!(walk(&mut guard, SimTime(50 * US)), touches);
        // The last walk before the wrap stops before X is ready: X's slot
        // keeps walk 1's marks.
        guard.walk = u32::MAX - 1;
        assert_eq!(walk(&mut guard, SimTime(US)), SimTime::MAX);
        assert_eq!(guard.walk, u32::MAX);
        // Walk 1 again: those marks would read as this walk's (X pushed
        // already, its count past its missing dependencies).
        assert_eq!(walk(&mut guard, SimTime(50 * US)), touches);
        assert_eq!(guard.walk, 1);
    }
}
