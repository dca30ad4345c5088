//! Whether a sandbox's record can pay (DESIGN.md §3c, "Pre-check"): a
//! record is worth making only for a domain whose shape another
//! collective still to be replayed shares. A sandbox whose record no
//! later domain can use only moves the domain's simulation out of the run,
//! at the cost of the sandbox's setup, and wastes all of it when the
//! replay is refused after all; a workload without repeats spends none.
//!
//! And a sandbox is spent only while the records so far have repaid
//! theirs: every replay repays its record's events (a fresh one its own
//! sandbox's, which the run then does not simulate; a hit the events it
//! avoids), and no sandbox starts while the sandboxes' events exceed 1.1
//! times what was repaid. A sandbox whose replay is refused, or whose key
//! never comes back (offsets that drift from layer to layer), is a debt
//! that only hits pay back. The run without memo handles at least the
//! repaid events, and the run with it about that many fewer, so the
//! sandboxes' work plus the run's stays within 10% of the run without
//! memo, plus the last round's sandboxes.

use crate::workload::{TaskKind, Workload, NONE};
use hashbrown::HashMap;

/// Per memoizable collective, a dense id of its *shape*: its tasks in id
/// order, each a flow (size, source and destination host) or a compute
/// task (duration, host), hosts relabelled in order of first appearance,
/// with its dependencies inside the collective. Two collectives of one
/// key have one shape (the key adds paths, start offsets and the state
/// around them); [`NONE`] for one that is not memoizable (`tasks[c]`
/// empty). Also returns how many collectives each shape has.
pub(super) fn shapes(
    workload: &Workload,
    tasks: &[Vec<u32>],
    internal: &[u32],
) -> (Vec<u32>, Vec<u32>) {
    let mut ids: HashMap<u64, u32> = HashMap::new();
    let mut count = Vec::new();
    let mut labels: HashMap<u32, u64> = HashMap::new();
    let shape_of = tasks
        .iter()
        .map(|members| {
            if members.is_empty() {
                return NONE;
            }
            labels.clear();
            let mut h = 0u64;
            let mut mix = |v: u64| {
                let mut s = h ^ v;
                h = netsim_engine::splitmix64(&mut s);
            };
            let mut label = |host: u32| {
                let next = labels.len() as u64;
                *labels.entry(host).or_insert(next)
            };
            for &t in members {
                let task = workload.tasks[t as usize];
                match workload.kind(&task) {
                    TaskKind::Flow(f) => {
                        let spec = workload.flows[f as usize];
                        mix(spec.size_bytes);
                        mix(label(spec.src) << 32 | label(spec.dst));
                    }
                    TaskKind::Compute(duration) => {
                        mix(1 << 63 | duration.as_ps());
                        mix(label(task.host));
                    }
                }
                mix(u64::from(internal[t as usize]));
            }
            let id = *ids.entry(h).or_insert_with(|| {
                count.push(0);
                count.len() as u32 - 1
            });
            count[id as usize] += 1;
            id
        })
        .collect();
    (shape_of, count)
}

/// Whether a record for `tasks`' domain can pay: one of its collectives
/// has a shape that another collective not yet replayed shares (`left`:
/// per shape, its collectives not replayed).
pub(super) fn pays(
    workload: &Workload,
    plan: &super::key::Plan,
    left: &[u32],
    tasks: &[u32],
) -> bool {
    tasks.iter().any(|&t| {
        let c = workload.tasks[t as usize].collective;
        c != NONE && {
            let shape = plan.shape_of[c as usize];
            shape != NONE && left[shape as usize] >= 2
        }
    })
}

/// Whether another sandbox may start after sandboxes of `sandbox_events`
/// events whose replays repaid `repaid_events` (see the module's note).
pub(super) fn within_budget(sandbox_events: u64, repaid_events: u64) -> bool {
    u128::from(sandbox_events) * 10 <= u128::from(repaid_events) * 11
}

#[cfg(test)]
mod tests {
    use super::{shapes, within_budget};
    use crate::workload::{Builder, Collective, CollectiveOp, NONE};
    use netsim_engine::SimTime;

    /// Two exchanges of `bytes` between `hosts`, as one collective.
    fn exchange(b: &mut Builder, hosts: (u32, u32), bytes: u64) {
        let c = b.collective(Collective {
            name: "x".into(),
            op: CollectiveOp::AllReduce,
            algorithm: "ring",
            group_size: 2,
            size_bytes: bytes,
            offloaded: false,
            fallback_reason: None,
            tasks: 0,
            job: NONE,
        });
        let first = b.flow(hosts.0, hosts.1, bytes, c, &[]);
        b.flow(hosts.1, hosts.0, bytes, c, &[first]);
    }

    #[test]
    fn collectives_on_other_hosts_share_a_shape_and_other_sizes_do_not() {
        let mut b = Builder::new(SimTime::ZERO);
        exchange(&mut b, (0, 1), 1000);
        exchange(&mut b, (2, 3), 1000);
        exchange(&mut b, (0, 1), 2000);
        let w = b.finish();
        let plan = super::super::key::Plan::new(&w);
        let (shape_of, count) = (plan.shape_of, plan.shape_count);
        assert_eq!(shape_of[0], shape_of[1]);
        assert_ne!(shape_of[0], shape_of[2]);
        assert_eq!(count[shape_of[0] as usize], 2);
        assert_eq!(count[shape_of[2] as usize], 1);
        // A collective that is not memoizable has none.
        assert_eq!(shapes(&w, &[Vec::new()], &[]).0, [NONE]);
    }

    #[test]
    fn the_budget_allows_a_tenth_more_than_was_repaid() {
        assert!(within_budget(0, 0));
        assert!(within_budget(110, 100));
        assert!(!within_budget(111, 100));
        assert!(!within_budget(1, 0));
        assert!(within_budget(u64::MAX, u64::MAX));
    }
}
