//! A contention domain's tasks as a workload of their own, for the memo's
//! sandbox (DESIGN.md §3c, "Memoization"): the same flows (same ids, so the
//! same ECMP paths), their dependencies inside the domain, and what they
//! wait for outside it replaced by compute tasks that end when it is met.

use super::{Task, Workload, COMPUTE, NONE};
use netsim_engine::SimTime;

impl Workload {
    /// The workload of `tasks` (task ids of `self`, in the order they get
    /// in the result: task `k` of the result is `tasks[k]`), where task `k`
    /// may not start before `ready[k]`: a compute task on its host that
    /// ends then, starting at time zero, stands for its dependencies
    /// outside `tasks`. Flows keep their ids; only those of `tasks` have a
    /// task, and none a collective.
    pub(crate) fn sandbox(&self, tasks: &[u32], ready: &[SimTime]) -> Workload {
        let n = tasks.len();
        let index: std::collections::HashMap<u32, u32> = tasks
            .iter()
            .enumerate()
            .map(|(k, &t)| (t, k as u32))
            .collect();
        // The stand-ins' durations first (stand-in `k` is `n + k`), then
        // the domain's compute tasks' own.
        let mut durations = ready.to_vec();
        let mut out_tasks = Vec::with_capacity(2 * n);
        // A flow outside the domain is no task's: it never starts.
        let mut flow_task = vec![NONE; self.flows.len()];
        // Per task of the domain, its dependencies in the result's ids:
        // its stand-in, then those inside the domain.
        let mut deps: Vec<Vec<u32>> = (0..n).map(|k| vec![(n + k) as u32]).collect();
        for (k, &t) in tasks.iter().enumerate() {
            let task = self.tasks[t as usize];
            let what = if task.what & COMPUTE == 0 {
                flow_task[task.what as usize] = k as u32;
                task.what
            } else {
                durations.push(self.durations[(task.what & !COMPUTE) as usize]);
                COMPUTE | (durations.len() - 1) as u32
            };
            out_tasks.push(Task {
                host: task.host,
                deps: 1,
                collective: NONE,
                what,
            });
            for &d in self.dependents(t) {
                if let Some(&j) = index.get(&d) {
                    deps[j as usize].push(k as u32);
                }
            }
        }
        for (k, &t) in tasks.iter().enumerate() {
            out_tasks.push(Task {
                host: self.tasks[t as usize].host,
                deps: 0,
                collective: NONE,
                what: COMPUTE | k as u32,
            });
        }
        for (k, d) in deps.iter().enumerate() {
            out_tasks[k].deps = d.len() as u32;
        }
        let listed = || deps.iter().flatten().copied();
        let base = super::dependent_starts(out_tasks.len(), listed());
        let (dependents, dependent_base) = super::dependents_csr(&out_tasks, base, listed());
        Workload {
            flows: self.flows.clone(),
            flow_task,
            ina_flows: Vec::new(),
            queued_flows: self.queued_flows.clone(),
            queue_heads: self.queue_heads.clone(),
            tasks: out_tasks,
            dependents,
            dependent_base,
            collectives: Default::default(),
            durations,
            jobs: Vec::new(),
            ina_ops: Vec::new(),
            fallbacks: Vec::new(),
            host_overhead: self.host_overhead,
            host_overhead_jitter: self.host_overhead_jitter,
            jitter_seed: self.jitter_seed,
            reduce: None,
            folds: Vec::new(),
            lazy: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Builder, TaskKind, NONE};
    use netsim_engine::SimTime;

    /// The domain's compute tasks keep their own durations; each task waits
    /// for its stand-in, which ends when its outside dependencies are met.
    #[test]
    fn a_sandbox_keeps_its_compute_durations() {
        let mut b = Builder::new(SimTime::ZERO);
        let before = b.compute(0, SimTime(7), NONE, &[]);
        let a = b.flow(0, 1, 10, NONE, &[before]);
        let reduce = b.compute(1, SimTime(5), NONE, &[a]);
        let w = b.finish();
        let s = w.sandbox(&[a, reduce], &[SimTime(100), SimTime(0)]);
        assert_eq!(s.kind(&s.tasks[1]), TaskKind::Compute(SimTime(5)));
        assert_eq!(s.kind(&s.tasks[0]), w.kind(&w.tasks[a as usize]));
        // Stand-ins: task 2 stands for the flow's outside dependency.
        assert_eq!(s.kind(&s.tasks[2]), TaskKind::Compute(SimTime(100)));
        assert_eq!(s.kind(&s.tasks[3]), TaskKind::Compute(SimTime(0)));
        assert_eq!(s.dependents(2), &[0]);
        assert_eq!(s.dependents(0), &[1]);
        assert_eq!(s.tasks[1].deps, 2);
    }
}
