//! The memo's prediction (DESIGN.md §3c, "Foreseen starts"): from the
//! flow starts and compute ends this shard's hosts scheduled and the
//! replayed tasks' completions, the flows their compute chains make ready
//! and when. Kept between checks in vectors of one entry per task and per
//! flow, marked by generation, so a prediction costs what it follows, not
//! hash maps grown and dropped per round.

use super::key;
use super::Memo;
use crate::network::Fabric;
use crate::workload::progress::DagProgress;
use crate::workload::TaskKind;
use netsim_engine::{NodeId, SimTime};

/// A task reached by the current prediction (`mark`): its foreseen
/// dependencies so far and the latest of them, and the dependencies its
/// host still waits for, read once per prediction (not per reach).
#[derive(Clone, Copy, Debug, Default)]
struct Chain {
    mark: u32,
    count: u32,
    remaining: u32,
    ready: SimTime,
}

// What the memory check counts for it.
const _: () = assert!(std::mem::size_of::<Chain>() == 24);

#[derive(Debug)]
pub(super) struct Prediction {
    /// The current prediction's number: an entry below is of it when its
    /// mark equals it.
    generation: u32,
    /// Per flow: the start foreseen.
    starts: Vec<(u32, SimTime)>,
    /// Per task reached: how many of its missing dependencies are foreseen
    /// compute ends or replayed completions, and the latest of them.
    chains: Vec<Chain>,
    /// Per node: on this shard.
    local: Vec<bool>,
    /// Per task, its host: many dependents a prediction scans are another
    /// host's, and this is a quarter of the tasks' size to read.
    hosts: Vec<u32>,
    /// (task, host that sees it complete, when), to follow.
    work: Vec<(u32, u32, SimTime)>,
    /// How many of the memo's exits the current prediction followed (the
    /// first ones: [`Memo::prune_exits`] keeps their order and this count).
    pub(super) followed: usize,
}

impl Prediction {
    pub(super) fn new(fabric: &Fabric) -> Prediction {
        let workload = &fabric.workload;
        Prediction {
            generation: 0,
            starts: vec![(0, SimTime::ZERO); workload.flows.len()],
            chains: vec![Chain::default(); workload.tasks.len()],
            local: vec![false; fabric.topo.node_count() as usize],
            hosts: workload.tasks.iter().map(|t| t.host).collect(),
            work: Vec::new(),
            followed: 0,
        }
    }

    /// The start foreseen for flow `flow`.
    pub(super) fn start(&self, flow: u32) -> Option<SimTime> {
        let (mark, at) = self.starts[flow as usize];
        (mark == self.generation).then_some(at)
    }

    /// For task `task`, if reached: how many of its missing dependencies
    /// are foreseen, and when the last of them completes.
    pub(super) fn chain(&self, task: u32) -> Option<(u32, SimTime)> {
        let c = self.chains[task as usize];
        (c.mark == self.generation).then_some((c.count, c.ready))
    }

    /// Predicts at check instant `now`, for this shard's `nodes`, whose
    /// hosts' missing dependencies are `dag`'s: per flow, the start this
    /// shard foresees: a flow start scheduled, or a flow whose every
    /// missing dependency is a compute task (or a chain of them) that will
    /// end at a known time, or a replayed task, whose completions are
    /// recorded.
    pub(super) fn predict(
        &mut self,
        fabric: &Fabric,
        m: &Memo,
        dag: &DagProgress,
        nodes: &[NodeId],
        now: SimTime,
    ) {
        let workload = &fabric.workload;
        let generation = self.next_generation();
        self.local.fill(false);
        for &n in nodes {
            self.local[n.0 as usize] = true;
        }
        for (&f, &at) in &m.pending_flows {
            self.starts[f as usize] = (generation, at);
        }
        self.work.clear();
        self.work.extend(
            m.pending_computes
                .iter()
                .map(|(&t, &at)| (t, workload.tasks[t as usize].host, at)),
        );
        self.followed = 0;
        self.follow(fabric, m, dag, now);
    }

    /// The next prediction's number. After 2^32 - 1 predictions the marks
    /// restart from 1, cleared first: one left from the prediction of the
    /// same number long ago would read as this one's.
    fn next_generation(&mut self) -> u32 {
        self.generation = match self.generation.checked_add(1) {
            Some(generation) => generation,
            None => {
                for start in &mut self.starts {
                    start.0 = 0;
                }
                for chain in &mut self.chains {
                    chain.mark = 0;
                }
                1
            }
        };
        self.generation
    }

    /// Adds to the prediction what the exits added since it was made
    /// (replays at the same check instant `now`) make ready. Within a
    /// check only replays change the prediction's inputs: a replay adds
    /// exits and makes its own tasks replayed (no longer followed), and
    /// none of those was made ready before (each waits, through its
    /// collective, for a flow of its domain, and flows end chains); so
    /// this gives what a prediction from scratch gives, but for the
    /// replayed collectives' own entries, which no decision reads again.
    pub(super) fn follow(&mut self, fabric: &Fabric, m: &Memo, dag: &DagProgress, now: SimTime) {
        let workload = &fabric.workload;
        let generation = self.generation;
        let mut work = std::mem::take(&mut self.work);
        // Completions before `now` were seen already (every event before
        // the check instant is handled): their hosts no longer wait for them.
        for &t in &m.exits[self.followed..] {
            let (src_done, dst_done) = m.done_at[t as usize];
            if src_done >= now {
                work.push((t, key::source(workload, t), src_done));
            }
            if let TaskKind::Flow(f) = workload.kind(&workload.tasks[t as usize]) {
                if dst_done >= now {
                    work.push((t, workload.flows[f as usize].dst, dst_done));
                }
            }
        }
        self.followed = m.exits.len();
        while let Some((task, host, end)) = work.pop() {
            if !self.local[host as usize] {
                continue;
            }
            for &d in workload.dependents(task) {
                // A replayed task's completions come from its record; a
                // settled one makes nothing ready that is not replayed.
                if m.completing[d as usize]
                    || m.settled[d as usize]
                    || self.hosts[d as usize] != host
                {
                    continue;
                }
                let t = workload.tasks[d as usize];
                let e = &mut self.chains[d as usize];
                if e.mark != generation {
                    *e = Chain {
                        mark: generation,
                        count: 0,
                        remaining: dag.remaining(d),
                        ready: SimTime::ZERO,
                    };
                }
                e.count += 1;
                e.ready = e.ready.max(end);
                if e.count != e.remaining {
                    continue;
                }
                let ready = e.ready;
                match workload.kind(&t) {
                    TaskKind::Flow(f) => {
                        self.starts[f as usize] = (generation, ready + workload.host_overhead);
                    }
                    TaskKind::Compute(duration) => work.push((d, t.host, ready + duration)),
                }
            }
        }
        self.work = work;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fabric, Y};
    use super::super::Memo;
    use super::Prediction;
    use crate::workload::progress::DagProgress;
    use netsim_engine::{NodeId, SimTime};

    #[test]
    fn predictions_past_2_pow_32_restart_with_cleared_marks() {
        let fabric = fabric(1000);
        let mut m = Memo::new(&fabric, 0);
        let dag = DagProgress::new(&fabric.workload);
        let nodes: Vec<NodeId> = (0..fabric.topo.node_count()).map(NodeId).collect();
        let mut p = Prediction::new(&fabric);
        let at = SimTime(5_000_000);
        // Prediction 1 foresees Y's scheduled start.
        m.pending_flows.insert(Y, at);
        p.predict(&fabric, &m, &dag, &nodes, SimTime::ZERO);
        assert_eq!(p.start(Y), Some(at));
        // Y started since: the last prediction before the wrap foresees
        // nothing, and prediction 1's entry stays.
        m.pending_flows.clear();
        p.generation = u32::MAX - 1;
        p.predict(&fabric, &m, &dag, &nodes, SimTime::ZERO);
        assert_eq!((p.generation, p.start(Y)), (u32::MAX, None));
        // Prediction 1 again: that entry would read as this one's.
        p.predict(&fabric, &m, &dag, &nodes, SimTime::ZERO);
        assert_eq!((p.generation, p.start(Y)), (1, None));
    }
}
