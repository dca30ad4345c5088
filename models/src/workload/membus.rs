//! SimAI 1.6's extra per-flow delay on the flows it marks `processed`
//! (`--reduce-overhead-ns`), by its own rule.
//!
//! SimAI injects each flow of a collective through a `PacketBundle`: the
//! memory bus waits 10 ns (netsim's `--host-overhead-ns 10`), and a bundle
//! marked `processed` waits `mem_write + 2 mem_read` = 30 ns more. Which
//! flows are marked is `NcclTreeFlowModel::insert_packets`: one model per
//! rank and collective counts the rank's own sends per channel in rounds
//! of the group's size; the first flow of a round is never marked, the
//! others are on a reduce-scatter, and on an all-reduce while the model's
//! `toggle` is set. `toggle` is one bit per rank's collective, flipped
//! whenever *any* of its channels starts a round, so which flows pay
//! depends on the order the channels' flows become ready: a run state.

use super::{CollectiveOp, Workload, NONE};
use netsim_engine::SimTime;
use std::collections::HashMap;

/// Which flows of a rank's collective SimAI marks (past a round's first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Marks {
    Never,
    Always,
    WhileToggled,
}

/// Where SimAI 1.6 counts each flow, fixed when the workload is built.
#[derive(Clone, Debug, Default)]
pub struct ReducePlan {
    /// The extra delay of a marked flow.
    pub extra: SimTime,
    /// Per flow: its (source rank, collective, channel) round counter, or
    /// [`NONE`] (a flow outside a collective).
    counter: Vec<u32>,
    /// Per counter: its (rank, collective) toggle, and its round length.
    toggle: Vec<u32>,
    round: Vec<u32>,
    /// Per toggle: which flows it marks.
    marks: Vec<Marks>,
}

/// One run's (or shard's) progress through a [`ReducePlan`]: per toggle its
/// bit, per counter the flows left in its round.
#[derive(Clone, Debug)]
pub struct ReduceState {
    toggled: Vec<bool>,
    left: Vec<u32>,
}

impl ReducePlan {
    /// The plan of `workload`'s flows, flow `f` on channel `channel[f]`.
    pub fn new(workload: &Workload, channel: &[u8], extra: SimTime) -> ReducePlan {
        let mut counters: HashMap<(u32, u32, u8), u32> = HashMap::new();
        let mut toggles: HashMap<(u32, u32), u32> = HashMap::new();
        let mut plan = ReducePlan {
            extra,
            ..ReducePlan::default()
        };
        for (f, spec) in workload.flows.iter().enumerate() {
            let task = workload
                .flow_task
                .get(f)
                .map(|&t| workload.tasks[t as usize]);
            let Some((task, row)) = task.filter(|t| t.collective != NONE).and_then(|t| {
                workload
                    .collectives
                    .get(t.collective as usize)
                    .map(|r| (t, r))
            }) else {
                plan.counter.push(NONE);
                continue;
            };
            let next = toggles.len() as u32;
            let t = *toggles.entry((spec.src, task.collective)).or_insert(next);
            if t == next {
                plan.marks.push(match row.op {
                    CollectiveOp::ReduceScatter => Marks::Always,
                    CollectiveOp::AllReduce => Marks::WhileToggled,
                    _ => Marks::Never,
                });
            }
            let next = counters.len() as u32;
            let c = *counters
                .entry((spec.src, task.collective, channel[f]))
                .or_insert(next);
            if c == next {
                plan.toggle.push(t);
                plan.round.push(row.group_size.max(1));
            }
            plan.counter.push(c);
        }
        plan
    }

    /// A fresh state: every toggle clear, every round to start.
    pub fn state(&self) -> ReduceState {
        ReduceState {
            toggled: vec![false; self.marks.len()],
            left: vec![0; self.round.len()],
        }
    }

    /// Flow `flow` is ready at its source: counts it in `state` and says
    /// what it waits on top of the host overhead.
    pub fn extra_for(&self, state: &mut ReduceState, flow: u32) -> SimTime {
        let c = self.counter[flow as usize];
        if c == NONE {
            return SimTime::ZERO;
        }
        let t = self.toggle[c as usize] as usize;
        let left = &mut state.left[c as usize];
        let first = *left == 0;
        if first {
            *left = self.round[c as usize];
            state.toggled[t] = !state.toggled[t];
        }
        *left -= 1;
        let marked = !first
            && match self.marks[t] {
                Marks::Never => false,
                Marks::Always => true,
                Marks::WhileToggled => state.toggled[t],
            };
        if marked {
            self.extra
        } else {
            SimTime::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::algorithms::{channel_rings, HostTasks};
    use crate::workload::{Builder, Collective};

    /// A ring `op` over ranks 0-3 on two channels, SimAI's marks kept.
    fn ring(op: CollectiveOp) -> Workload {
        let mut b = Builder::new(SimTime::ZERO);
        b.track_channels(SimTime(30_000));
        let coll = b.collective(Collective {
            name: "c".into(),
            op,
            algorithm: "ring",
            group_size: 4,
            size_bytes: 4096,
            offloaded: false,
            fallback_reason: None,
            tasks: 0,
            job: NONE,
        });
        let order = vec![0, 1, 2, 3];
        let steps = if op == CollectiveOp::AllReduce { 6 } else { 3 };
        let orders = [order.clone(), order];
        channel_rings(&mut b, coll, &orders, 4, 4096, steps, 1, &HostTasks::new());
        b.finish()
    }

    /// Rank `src`'s flow of `step` on `channel` (flows are added step by
    /// step, rank by rank, channel by channel).
    fn flow(w: &Workload, src: u32, step: usize, channel: usize) -> u32 {
        let own: Vec<u32> = (0..w.flows.len() as u32)
            .filter(|&f| w.flows[f as usize].src == src)
            .collect();
        own[step * 2 + channel]
    }

    /// The extra delays, ns, of rank `src`'s flows `(step, channel)` ready
    /// in this order.
    fn extras(
        w: &Workload,
        state: &mut ReduceState,
        src: u32,
        order: &[(usize, usize)],
    ) -> Vec<u64> {
        let plan = w.reduce.as_ref().expect("marks kept");
        order
            .iter()
            .map(|&(s, c)| plan.extra_for(state, flow(w, src, s, c)).0 / 1000)
            .collect()
    }

    #[test]
    fn simais_marks_follow_one_toggle_per_rank_flipped_by_every_channels_round() {
        // All-reduce, rounds of 4 flows a channel: channel 0's first round
        // sets the toggle, channel 1's clears it, so channel 0's next three
        // go unmarked; its second round sets it again, and from then on
        // both channels' flows past a round's first pay 30 ns.
        let w = ring(CollectiveOp::AllReduce);
        let mut state = w.reduce.as_ref().unwrap().state();
        let order = [
            (0, 0),
            (0, 1),
            (1, 0),
            (2, 0),
            (3, 0),
            (4, 0),
            (5, 0),
            (1, 1),
            (2, 1),
        ];
        assert_eq!(
            extras(&w, &mut state, 0, &order),
            [0, 0, 0, 0, 0, 0, 30, 30, 30]
        );
        // Rank 1 keeps its own toggle: its first round's flows go free
        // after channel 1 clears it, as rank 0's did.
        let order = [(0, 0), (0, 1), (1, 0), (1, 1)];
        assert_eq!(extras(&w, &mut state, 1, &order), [0, 0, 0, 0]);

        // Reduce-scatter: every flow but a round's first; all-gather: none.
        let w = ring(CollectiveOp::ReduceScatter);
        let mut state = w.reduce.as_ref().unwrap().state();
        let order = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)];
        assert_eq!(extras(&w, &mut state, 0, &order), [0, 30, 30, 0, 30]);
        let w = ring(CollectiveOp::AllGather);
        let mut state = w.reduce.as_ref().unwrap().state();
        assert_eq!(extras(&w, &mut state, 0, &order), [0; 5]);
    }
}
