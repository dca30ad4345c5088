//! A collective's structure apart from its progress (issue 32): its tasks,
//! flows and dependencies with ids from its plan's first ones and, where
//! every task and flow runs between its members, hosts as positions in its
//! group. The collectives of one shape (`build::shape`) then share one
//! template while they are live, and each holds only its own counts: the
//! 32,768-GPU GPT's data-parallel all-reduces (0.55 M tasks each, dozens
//! live at once) are held once, not once each.

use super::super::build::lazy::Expanded;
use super::super::{Task, TaskKind, Workload, NONE};
use super::counts::Counts;
use crate::traffic::FlowSpec;
use hashbrown::HashMap;

/// One collective's structure, ids relative to its plan's first ones.
#[derive(Debug)]
pub(super) struct Template {
    /// Whether hosts are positions in the group (shared by a shape) or
    /// node ids (this collective's own).
    relative: bool,
    tasks: Vec<(Task, TaskKind)>,
    flows: Vec<FlowSpec>,
    /// Per flow, its task.
    flow_task: Vec<u32>,
    /// Per task, the dependencies it waits for.
    left: Counts,
    /// Tasks inside that depend on task `i`: `inside[inside_base[i]..inside_base[i + 1]]`.
    inside_base: Vec<u32>,
    inside: Vec<u32>,
    /// `(task outside, task inside)` it waits for: the outside task as an
    /// index into the entries listed member by member when relative, a
    /// task id when not (then sorted).
    outside: Vec<(u32, u32)>,
    /// Its flows queued behind another, and the flows ahead of those.
    queued: Vec<(u32, u32)>,
    heads: Vec<u32>,
    /// Per member (relative only): the completions its host sees.
    seen_at: Vec<u32>,
}

impl Template {
    /// From `e`, expanded at `base` (task, flow, collective), of the
    /// members `group` whose entries are `entries` (listed member by
    /// member, `starts[m]` the first of member `m`'s): relative when every
    /// task, flow end and outside dependency can be named by its place.
    pub fn new(e: Expanded, base: [u32; 3], group: &[u32], entry: &Entries) -> Template {
        let position: HashMap<u32, u32> = (group.iter().enumerate())
            .map(|(i, &h)| (h, i as u32))
            .collect();
        let relative = relabels(&e, &position) && entry_of_all(&e, base[0], &position, entry);
        let host = |h: u32| if relative { position[&h] } else { h };
        let n = e.tasks.len();
        let mut seen_at = vec![0u32; if relative { group.len() } else { 0 }];
        let mut flow_task = vec![NONE; e.flows.len()];
        let mut tasks = Vec::with_capacity(n);
        for (i, &(t, kind)) in e.tasks.iter().enumerate() {
            let mut t = Task {
                host: host(t.host),
                collective: if t.collective == NONE {
                    NONE
                } else {
                    t.collective - base[2]
                },
                ..t
            };
            let kind = match kind {
                TaskKind::Flow(f) => {
                    let f = f - base[1];
                    flow_task[f as usize] = i as u32;
                    t.what = f;
                    if relative {
                        let spec = e.flows[f as usize];
                        seen_at[position[&spec.src] as usize] += 1;
                        seen_at[position[&spec.dst] as usize] += 1;
                    }
                    TaskKind::Flow(f)
                }
                TaskKind::Compute(d) => {
                    if relative {
                        seen_at[t.host as usize] += 1;
                    }
                    TaskKind::Compute(d)
                }
            };
            tasks.push((t, kind));
        }
        let flows = e
            .flows
            .iter()
            .map(|f| FlowSpec {
                src: host(f.src),
                dst: host(f.dst),
                ..*f
            })
            .collect();
        let mut outside = Vec::new();
        let mut inside_base = vec![0u32; n + 2];
        for (i, deps) in e.deps.iter().enumerate() {
            for &d in deps {
                if d >= base[0] {
                    inside_base[(d - base[0]) as usize + 2] += 1;
                } else if relative {
                    let slot = entry.slot(d, position[&e.tasks[i].0.host]);
                    outside.push((slot.expect("checked relabelable"), i as u32));
                } else {
                    outside.push((d, i as u32));
                }
            }
        }
        if !relative {
            outside.sort_unstable();
        }
        for i in 0..n {
            inside_base[i + 2] += inside_base[i + 1];
        }
        let mut inside = vec![0u32; inside_base[n + 1] as usize];
        // Filled in task order, so each list comes out ascending.
        for (i, deps) in e.deps.iter().enumerate() {
            for &d in deps.iter().filter(|&&d| d >= base[0]) {
                let at = &mut inside_base[(d - base[0]) as usize + 1];
                inside[*at as usize] = i as u32;
                *at += 1;
            }
        }
        inside_base.pop();
        let rel = |f: u32| f - base[1];
        let queued: Vec<(u32, u32)> = e.queued.iter().map(|&(f, a)| (rel(f), rel(a))).collect();
        Template {
            relative,
            left: Counts::new(e.tasks.iter().map(|t| t.0.deps)),
            heads: Workload::heads_of(&queued),
            queued,
            tasks,
            flows,
            flow_task,
            inside_base,
            inside,
            outside,
            seen_at,
        }
    }

    /// Whether collectives of its shape may share it.
    pub fn relative(&self) -> bool {
        self.relative
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Task `i` of the collective at `base` on `group`.
    pub fn task(&self, i: usize, base: [u32; 3], group: &[u32]) -> (Task, TaskKind) {
        let (mut t, kind) = self.tasks[i];
        if self.relative {
            t.host = group[t.host as usize];
        }
        if t.collective != NONE {
            t.collective += base[2];
        }
        match kind {
            TaskKind::Flow(f) => {
                t.what = f + base[1];
                (t, TaskKind::Flow(f + base[1]))
            }
            TaskKind::Compute(_) => (t, kind),
        }
    }

    /// Flow `i` of the collective on `group`, and its task (index).
    pub fn flow(&self, i: usize, group: &[u32]) -> (FlowSpec, u32) {
        let mut spec = self.flows[i];
        if self.relative {
            spec.src = group[spec.src as usize];
            spec.dst = group[spec.dst as usize];
        }
        (spec, self.flow_task[i])
    }

    /// The tasks inside that depend on task `i` (indices, ascending).
    pub fn inside(&self, i: usize) -> &[u32] {
        let (from, to) = (self.inside_base[i], self.inside_base[i + 1]);
        &self.inside[from as usize..to as usize]
    }

    /// The flow ahead of flow `i` on its queue pair (index), if any.
    pub fn queued_after(&self, i: u32) -> Option<u32> {
        let at = self.queued.binary_search_by_key(&i, |&(f, _)| f).ok()?;
        Some(self.queued[at].1)
    }

    /// Whether a flow is queued behind flow `i`.
    pub fn has_queued_behind(&self, i: u32) -> bool {
        self.heads.binary_search(&i).is_ok()
    }

    /// The initial counts, into `left`.
    pub fn counts_into(&self, left: &mut Counts) {
        left.copy_from(&self.left);
    }

    /// `(task outside, task inside)` pairs of the collective whose entries
    /// are `entry`, sorted, into `out`.
    pub fn outside_into(&self, entry: &Entries, out: &mut Vec<(u32, u32)>) {
        out.clear();
        if self.relative {
            out.extend(
                self.outside
                    .iter()
                    .map(|&(s, i)| (entry.tasks[s as usize], i)),
            );
            out.sort_unstable();
        } else {
            out.extend_from_slice(&self.outside);
        }
    }

    /// Completions the hosts `local` (sorted) will see of its tasks.
    pub fn pending(&self, group: &[u32], local: &[u32]) -> u32 {
        let is_local = |h: u32| local.binary_search(&h).is_ok();
        if self.relative {
            let at = group.iter().zip(&self.seen_at);
            return at.filter(|(&h, _)| is_local(h)).map(|(_, &n)| n).sum();
        }
        let mut pending = 0;
        for &(t, kind) in &self.tasks {
            pending += match kind {
                TaskKind::Flow(f) => {
                    let spec = self.flows[f as usize];
                    u32::from(is_local(spec.src)) + u32::from(is_local(spec.dst))
                }
                TaskKind::Compute(_) => u32::from(is_local(t.host)),
            };
        }
        pending
    }
}

/// A collective's entries listed member by member: `tasks[starts[m]..starts[m + 1]]`
/// are what member `m` waits for.
#[derive(Debug, Default)]
pub(super) struct Entries {
    pub tasks: Vec<u32>,
    pub starts: Vec<u32>,
}

impl Entries {
    /// How many tasks member `m`'s entry lists.
    pub fn len_of(&self, m: usize) -> usize {
        (self.starts[m + 1] - self.starts[m]) as usize
    }

    /// Where task `d` is listed: in member `m`'s entry if it is, else the
    /// first member's that lists it.
    fn slot(&self, d: u32, m: u32) -> Option<u32> {
        let of = |m: usize| self.starts[m] as usize..self.starts[m + 1] as usize;
        let own = of(m as usize);
        let at = self.tasks[own.clone()].iter().position(|&t| t == d);
        match at {
            Some(k) => Some((own.start + k) as u32),
            None => self.tasks.iter().position(|&t| t == d).map(|k| k as u32),
        }
    }
}

/// Whether every task's host and every flow's ends are members.
fn relabels(e: &Expanded, position: &HashMap<u32, u32>) -> bool {
    let member = |h: &u32| position.contains_key(h);
    e.tasks.iter().all(|(t, _)| member(&t.host))
        && e.flows.iter().all(|f| member(&f.src) && member(&f.dst))
}

/// Whether every dependency outside the collective is listed in an entry.
fn entry_of_all(e: &Expanded, task0: u32, position: &HashMap<u32, u32>, entry: &Entries) -> bool {
    let outside = e.deps.iter().enumerate().flat_map(|(i, deps)| {
        let own = position[&e.tasks[i].0.host];
        deps.iter().filter(|&&d| d < task0).map(move |&d| (d, own))
    });
    outside
        .into_iter()
        .all(|(d, own)| entry.slot(d, own).is_some())
}
