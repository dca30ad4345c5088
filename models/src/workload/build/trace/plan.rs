//! What a trace's operations are to each other, worked out once before
//! any task is added: each operation's rank, who waits for it (its end or
//! its start), each send's receive and each collective's instance.

use crate::workload::spec::BuildError;
use crate::workload::trace::{OpKind, Trace};
use crate::workload::NONE;
use std::collections::HashMap;

/// What the trace's operations are to each other, worked out once.
pub(super) struct Plan {
    /// A send's receive and a receive's send; [`NONE`] for other operations.
    pub(super) partner: Vec<u32>,
    /// A collective operation's instance (its group's n-th collective).
    pub(super) instance: Vec<u32>,
    /// Each instance's operations, one per member rank in group order.
    pub(super) instance_ops: Vec<Vec<u32>>,
    /// Operations that wait for each operation's start (`true`) or end,
    /// in compressed rows: operation `j`'s are
    /// `dependents[dependent_start[j]..dependent_start[j + 1]]`.
    pub(super) dependent_start: Vec<u32>,
    pub(super) dependents: Vec<(u32, bool)>,
    /// Whether some operation waits for this one's start.
    pub(super) starts_watched: Vec<bool>,
    /// The rank of each operation.
    pub(super) rank: Vec<u32>,
}

impl Plan {
    pub(super) fn new(trace: &Trace) -> Result<Plan, BuildError> {
        let n = trace.ops.len();
        let mut rank = vec![0u32; n];
        for r in 0..trace.ranks() {
            for i in trace.rank_ops(r) {
                rank[i as usize] = r;
            }
        }
        let mut counts = vec![0u32; n + 1];
        let mut starts_watched = vec![false; n];
        for i in 0..n as u32 {
            for d in trace.op_deps(i) {
                if d.op as usize >= n || rank[d.op as usize] != rank[i as usize] {
                    return Err(op_error(
                        trace,
                        i,
                        &rank,
                        "depends on an operation of another rank",
                    ));
                }
                counts[d.op as usize + 1] += 1;
                starts_watched[d.op as usize] |= d.on_start;
            }
        }
        for j in 0..n {
            counts[j + 1] += counts[j];
        }
        let dependent_start = counts.clone();
        let mut dependents = vec![(0, false); trace.deps.len()];
        for i in 0..n as u32 {
            for d in trace.op_deps(i) {
                let slot = &mut counts[d.op as usize];
                dependents[*slot as usize] = (i, d.on_start);
                *slot += 1;
            }
        }
        let partner = match_messages(trace, &rank)?;
        let (instance, instance_ops) = collective_instances(trace, &rank)?;
        Ok(Plan {
            partner,
            instance,
            instance_ops,
            dependent_start,
            dependents,
            starts_watched,
            rank,
        })
    }

    pub(super) fn dependents_of(&self, op: u32) -> &[(u32, bool)] {
        let (a, b) = (
            self.dependent_start[op as usize],
            self.dependent_start[op as usize + 1],
        );
        &self.dependents[a as usize..b as usize]
    }
}

/// One line naming operation `op`: where its rank's program came from and its label.
pub(super) fn op_error(trace: &Trace, op: u32, rank: &[u32], message: &str) -> BuildError {
    let r = rank[op as usize];
    BuildError::Invalid(format!(
        "{} (rank {r}), operation {}: {message}",
        trace
            .sources
            .get(r as usize)
            .map_or("trace", String::as_str),
        trace.ops[op as usize].label
    ))
}

/// Each send's receive and each receive's send. Messages between a pair of
/// ranks match in program order, as MPI's do (a receive takes the first
/// unmatched send from its source with its tag); receives from any source
/// then take the sends left, source by source in rank order, since which
/// would arrive first is only known once the run has happened.
fn match_messages(trace: &Trace, rank: &[u32]) -> Result<Vec<u32>, BuildError> {
    let n = trace.ops.len();
    let ranks = trace.ranks();
    let mut partner = vec![NONE; n];
    // Per destination rank, its unmatched sends in (source, program) order.
    let mut sends_to: Vec<Vec<u32>> = vec![Vec::new(); ranks as usize];
    for i in 0..n as u32 {
        if let OpKind::Send { to, .. } = trace.ops[i as usize].kind {
            if to >= ranks {
                return Err(op_error(
                    trace,
                    i,
                    rank,
                    &format!("sends to rank {to} of {ranks}"),
                ));
            }
            if to == rank[i as usize] {
                return Err(op_error(
                    trace,
                    i,
                    rank,
                    "sends to its own rank: a local copy, which netsim does not model",
                ));
            }
            sends_to[to as usize].push(i);
        }
    }
    let sent_tag = |s: u32| match trace.ops[s as usize].kind {
        OpKind::Send { tag, .. } => tag,
        _ => unreachable!("only sends are listed"),
    };
    for (dst, sends) in sends_to.iter().enumerate() {
        // `sends` is in (source, program) order: per source, where its
        // first unmatched send is, and the same over all sources, so that
        // matching costs one pass when tags agree, not a scan per receive.
        let mut first_unmatched: HashMap<u32, usize> = HashMap::new();
        let mut any_first_unmatched = 0;
        for any_source in [false, true] {
            for i in trace.rank_ops(dst as u32) {
                let OpKind::Recv { from, tag, .. } = trace.ops[i as usize].kind else {
                    continue;
                };
                if from.is_none() != any_source {
                    continue;
                }
                let (start, end) = match from {
                    Some(f) => {
                        let start = *first_unmatched
                            .entry(f)
                            .or_insert_with(|| sends.partition_point(|&s| rank[s as usize] < f));
                        (start, sends.partition_point(|&s| rank[s as usize] <= f))
                    }
                    None => (any_first_unmatched, sends.len()),
                };
                let Some(k) = (start..end).find(|&k| {
                    let s = sends[k];
                    partner[s as usize] == NONE && tag.is_none_or(|t| t == sent_tag(s))
                }) else {
                    return Err(op_error(
                        trace,
                        i,
                        rank,
                        "a receive that no send of the trace matches",
                    ));
                };
                partner[sends[k] as usize] = i;
                partner[i as usize] = sends[k];
                let mut next = start;
                while next < end && partner[sends[next] as usize] != NONE {
                    next += 1;
                }
                match from {
                    Some(f) => {
                        first_unmatched.insert(f, next);
                    }
                    None => any_first_unmatched = next,
                }
            }
        }
    }
    if let Some(s) = (0..n as u32).find(|&s| {
        matches!(trace.ops[s as usize].kind, OpKind::Send { .. }) && partner[s as usize] == NONE
    }) {
        return Err(op_error(
            trace,
            s,
            rank,
            "a send that no receive of the trace matches",
        ));
    }
    Ok(partner)
}

/// Each collective operation's instance (the n-th collective a group's
/// members issue on it) and each instance's operations in member order;
/// an error where members disagree on what it is.
#[allow(clippy::type_complexity)]
fn collective_instances(
    trace: &Trace,
    rank: &[u32],
) -> Result<(Vec<u32>, Vec<Vec<u32>>), BuildError> {
    let mut instance = vec![NONE; trace.ops.len()];
    let mut instance_ops: Vec<Vec<u32>> = Vec::new();
    // Per group, its instances in order.
    let mut group_instances: Vec<Vec<u32>> = vec![Vec::new(); trace.groups.len()];
    for r in 0..trace.ranks() {
        let mut issued = vec![0usize; trace.groups.len()];
        for i in trace.rank_ops(r) {
            let OpKind::Collective { op, bytes, group } = trace.ops[i as usize].kind else {
                continue;
            };
            let Some(members) = trace.groups.get(group as usize) else {
                return Err(op_error(
                    trace,
                    i,
                    rank,
                    "names a process group that does not exist",
                ));
            };
            let Ok(position) = members.binary_search(&r) else {
                return Err(op_error(
                    trace,
                    i,
                    rank,
                    &format!("a {} on a process group without this rank", op.name()),
                ));
            };
            let n = issued[group as usize];
            issued[group as usize] += 1;
            let list = &mut group_instances[group as usize];
            if n == list.len() {
                list.push(instance_ops.len() as u32);
                instance_ops.push(vec![NONE; members.len()]);
            }
            let id = list[n];
            let ops = &mut instance_ops[id as usize];
            if let Some(&first) = ops.iter().find(|&&o| o != NONE) {
                let OpKind::Collective {
                    op: first_op,
                    bytes: first_bytes,
                    ..
                } = trace.ops[first as usize].kind
                else {
                    unreachable!("instances hold collectives");
                };
                if (first_op, first_bytes) != (op, bytes) {
                    return Err(op_error(
                        trace,
                        i,
                        rank,
                        &format!(
                            "collective {n} of its group is a {} of {bytes} bytes here but a {} of {first_bytes} bytes at rank {}",
                            op.name(),
                            first_op.name(),
                            rank[first as usize]
                        ),
                    ));
                }
            }
            ops[position] = i;
            instance[i as usize] = id;
        }
    }
    for ops in &instance_ops {
        if let Some(&present) = ops.iter().find(|&&o| o != NONE) {
            if let Some(missing) = ops.iter().position(|&o| o == NONE) {
                let OpKind::Collective { group, .. } = trace.ops[present as usize].kind else {
                    unreachable!("instances hold collectives");
                };
                return Err(op_error(
                    trace,
                    present,
                    rank,
                    &format!(
                        "a collective that rank {} of its group never issues",
                        trace.groups[group as usize][missing]
                    ),
                ));
            }
        }
    }
    Ok((instance, instance_ops))
}
