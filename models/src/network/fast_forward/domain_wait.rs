//! Bounds a per-domain jump by the flows waiting for dependencies on its
//! resources (`--ff-scope domain`, docs/design/fast-forward.md): instead of
//! vetoing the domain, such a flow ends its jump no later than the earliest
//! it could start, which memo's guard (`memo/guard.rs`) computes from the
//! agreed DAG view (unfinished predecessors' earliest completions).

use super::memo::guard::{DagView, Guard};
use super::memo::resources::Resource;
use crate::network::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use hashbrown::{HashMap, HashSet};
use netsim_engine::{Aborted, AllMax, SimTime};

/// A shard's share of the DAG view the guard walks, for per-domain jumps
/// (memo keeps its own: it may be off).
#[derive(Debug)]
pub(super) struct WaitBound {
    /// Per task: this shard saw flow task `t` complete at its destination.
    delivered: Vec<bool>,
    /// The last check's pending flow starts (flow) and compute ends (task).
    flow_starts: Vec<(u32, SimTime)>,
    compute_ends: Vec<(u32, SimTime)>,
    /// Made at the first bound; its per-flow paths are kept between checks.
    guard: Option<Guard>,
    /// Per task, false: nothing is replayed or settled for these walks.
    none: Vec<bool>,
    /// The last view's buffer, reused.
    spare: Vec<u64>,
}

impl WaitBound {
    pub(super) fn new(tasks: usize) -> WaitBound {
        WaitBound {
            delivered: vec![false; tasks],
            flow_starts: Vec::new(),
            compute_ends: Vec::new(),
            guard: None,
            none: vec![false; tasks],
            spare: Vec::new(),
        }
    }

    /// Flow task `task` was seen complete at its destination.
    pub(super) fn delivered(&mut self, task: u32) {
        self.delivered[task as usize] = true;
    }

    /// Forgets the last check's pending events, before noting this one's.
    pub(super) fn clear_pending(&mut self) {
        self.flow_starts.clear();
        self.compute_ends.clear();
    }

    /// Notes a pending event of this shard at `at`.
    pub(super) fn pending(&mut self, at: SimTime, event: &NetEvent) {
        match *event {
            NetEvent::FlowStart { flow } => self.flow_starts.push((flow, at)),
            NetEvent::TaskDone { task } => self.compute_ends.push((task, at)),
            _ => {}
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Bounds the jump `skip` (ps, by root) of each domain of `roots` (a
    /// flow waiting for dependencies on its resources, not downstream of
    /// it) by the earliest a flow outside it could start on its resources:
    /// the guard's walk from the agreed DAG view, the domain's own flows
    /// (`active`, those of the domain rooted at `parent`'s root) not
    /// followed (they end after the jump). The same on every shard.
    pub(super) fn ff_wait_bound(
        &mut self,
        now: SimTime,
        roots: &[u32],
        (active, ids, parent): (&[u32], &HashMap<Resource, u32>, &mut [u32]),
        skip: &mut [u64],
        all_max: AllMax<'_>,
    ) -> Result<(), Aborted> {
        let dag = self.ff_wait_view(all_max)?;
        let fabric = self.fabric;
        let workload = &fabric.workload;
        let d = self.ff.domains.as_mut().expect("domain scope");
        let w = &mut d.wait;
        let guard = w.guard.get_or_insert_with(|| Guard::new(workload));
        guard.prepare(fabric, &dag, false, &[], (&w.none, &w.none), &[], now);
        for &root in roots {
            let tasks: Vec<u32> = active
                .iter()
                .filter(|&&f| {
                    let first = d.resources[d.paths[f as usize].0 as usize];
                    super::domains::find(parent, ids[&first]) == root
                })
                .filter_map(|&f| workload.flow_info(f).map(|i| i.task))
                .collect();
            let resources: HashSet<Resource> = ids
                .iter()
                .filter(|&(_, &id)| super::domains::find(parent, id) == root)
                .map(|(&r, _)| r)
                .collect();
            let horizon = now + SimTime(skip[root as usize]);
            let earliest =
                guard.earliest_touching(fabric, (&tasks, &resources), None, now, horizon);
            if earliest < horizon {
                skip[root as usize] = earliest.as_ps().saturating_sub(now.as_ps());
            }
        }
        w.spare = dag.values;
        Ok(())
    }

    /// The DAG state the guard follows, agreed (see [`DagView`]): this
    /// shard's pending flow starts, flows sending (from their start),
    /// pending compute ends, flows its hosts received whole, and its
    /// hosts' tasks' missing dependencies.
    fn ff_wait_view(&mut self, all_max: AllMax<'_>) -> Result<DagView, Aborted> {
        let workload = &self.fabric.workload;
        let spare = std::mem::take(&mut self.ff.domains.as_mut().expect("on").wait.spare);
        let mut dag = DagView::reusing(workload.tasks.len(), spare);
        // (A flow that is no task's, background traffic, is not in it.)
        for i in self.active_senders() {
            let s = &self.transport.senders[i];
            if let Some(info) = workload.flow_info(s.flow) {
                dag.starts(info.task, s.start);
            }
        }
        let w = &self.ff.domains.as_ref().expect("on").wait;
        for &(f, at) in &w.flow_starts {
            if let Some(info) = workload.flow_info(f) {
                dag.starts(info.task, at);
            }
        }
        for &(t, at) in &w.compute_ends {
            dag.ends(t, at);
        }
        self.dag_view_locals(&mut dag, &w.delivered);
        all_max(&mut dag.values)?;
        Ok(dag)
    }
}
