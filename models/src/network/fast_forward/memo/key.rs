//! The memo's key: which collectives may be memoized (the plan, from the
//! workload alone), the resources a flow's packets use (its contention
//! domain's members), the canonical description of a domain about to start
//! (its tasks, flows, the ports their packets and acknowledgements cross,
//! relabelled in order of appearance) and how a domain grows; how early a
//! flow that uses its resources could start is `guard.rs`.

use super::resources::{flow_resources, static_path, CollResources, Resource};
use crate::network::Fabric;
use crate::workload::{TaskKind, Workload, NONE};
use hashbrown::{HashMap, HashSet};
use netsim_engine::SimTime;

/// Which collectives a wave may hold, from the workload alone (the same on
/// every shard).
#[derive(Debug)]
pub(super) struct Plan {
    /// Per collective, its tasks in id order (empty: not memoizable).
    tasks: Vec<Vec<u32>>,
    /// Per collective, its lowest flow id ([`NONE`] without flows).
    first_flow: Vec<u32>,
    /// Entry flows (started by tasks outside their collective), grouped by
    /// collective; `entry_range[c]` is collective `c`'s slice of them.
    pub(super) entries: Vec<u32>,
    entry_range: Vec<(u32, u32)>,
    /// Per task, its dependencies inside its own collective.
    pub(super) internal: Vec<u32>,
    /// Per collective, its shape ([`super::payoff::shapes`]), and per
    /// shape how many collectives have it.
    pub(super) shape_of: Vec<u32>,
    pub(super) shape_count: Vec<u32>,
}

impl Plan {
    /// A collective is memoizable when it has flows, none streams into an
    /// aggregation tree, and every task of it that waits for no task of
    /// the collective (an entry) is a flow.
    pub(super) fn new(workload: &Workload) -> Plan {
        let n = workload.tasks.len();
        let mut internal = vec![0u32; n];
        for (t, task) in workload.tasks.iter().enumerate() {
            for &d in workload.dependents(t as u32) {
                let c = workload.tasks[d as usize].collective;
                if c != NONE && c == task.collective {
                    internal[d as usize] += 1;
                }
            }
        }
        let colls = workload.collectives.len();
        let mut tasks = vec![Vec::new(); colls];
        let mut first_flow = vec![NONE; colls];
        let mut ok = vec![true; colls];
        for (t, task) in workload.tasks.iter().enumerate() {
            let c = task.collective;
            if c == NONE {
                continue;
            }
            let c = c as usize;
            tasks[c].push(t as u32);
            match workload.kind(task) {
                TaskKind::Flow(f) => {
                    first_flow[c] = first_flow[c].min(f);
                    let ina = workload.flow_ina_op(f) != NONE;
                    ok[c] &= !ina;
                }
                TaskKind::Compute(_) => ok[c] &= internal[t] != 0,
            }
        }
        let mut entries = Vec::new();
        let mut entry_range = vec![(0, 0); colls];
        for c in 0..colls {
            if !ok[c] || first_flow[c] == NONE {
                tasks[c].clear();
                continue;
            }
            let lo = entries.len() as u32;
            for &t in &tasks[c] {
                if let TaskKind::Flow(f) = workload.kind(&workload.tasks[t as usize]) {
                    if internal[t as usize] == 0 {
                        entries.push(f);
                    }
                }
            }
            entry_range[c] = (lo, entries.len() as u32);
        }
        let (shape_of, shape_count) = super::payoff::shapes(workload, &tasks, &internal);
        Plan {
            shape_of,
            shape_count,
            tasks,
            first_flow,
            entries,
            entry_range,
            internal,
        }
    }

    /// Collective `c`'s lowest flow id (where its hit or miss is counted).
    pub(super) fn first_flow(&self, c: u32) -> u32 {
        self.first_flow[c as usize]
    }

    /// The collectives whose every entry has an agreed start in `entries`
    /// (time + 1, as [`Plan::entries`]; 0: not foreseen), in id order.
    pub(super) fn foreseen(&self, entries: &[u64]) -> Vec<u32> {
        let mut out = Vec::new();
        for (c, &(lo, hi)) in self.entry_range.iter().enumerate() {
            let slots = &entries[lo as usize..hi as usize];
            if !slots.is_empty() && !slots.contains(&0) {
                out.push(c as u32);
            }
        }
        out
    }

    /// Collective `c`'s slice of `entries` (agreed starts, as
    /// [`Plan::entries`]).
    pub(super) fn entry_starts<'a>(&self, c: u32, entries: &'a [u64]) -> &'a [u64] {
        let (lo, hi) = self.entry_range[c as usize];
        &entries[lo as usize..hi as usize]
    }

    /// Collective `c`'s tasks in id order.
    pub(super) fn tasks(&self, c: u32) -> &[u32] {
        &self.tasks[c as usize]
    }
}

/// The contention domains of `colls`: collectives whose flows use a
/// common resource, directly or through others, end up in one domain
/// (union-find over the collectives and the resources they use, rebuilt
/// for every decision, so departures split domains; each collective's
/// resources from `cache`). Each domain's collectives in id order;
/// domains ordered by their first collective.
pub(super) fn domains(
    fabric: &Fabric,
    plan: &Plan,
    cache: &mut CollResources,
    colls: &[u32],
) -> Vec<Vec<u32>> {
    let mut parent: Vec<u32> = (0..colls.len() as u32).collect();
    fn root(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            parent[x as usize] = parent[parent[x as usize] as usize];
            x = parent[x as usize];
        }
        x
    }
    let mut owner: HashMap<Resource, u32> = HashMap::new();
    for (i, &c) in colls.iter().enumerate() {
        for &r in cache.of(fabric, c, plan.tasks(c)) {
            let other = *owner.entry(r).or_insert(i as u32);
            let (a, b) = (root(&mut parent, other), root(&mut parent, i as u32));
            if a != b {
                parent[a.max(b) as usize] = a.min(b);
            }
        }
    }
    let mut by_root: HashMap<u32, usize> = HashMap::new();
    let mut out: Vec<Vec<u32>> = Vec::new();
    for (i, &c) in colls.iter().enumerate() {
        let r = root(&mut parent, i as u32);
        let d = *by_root.entry(r).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[d].push(c);
    }
    out
}

/// A wave about to start, described so that two waves with equal keys are
/// the same input to the simulation.
#[derive(Clone, Debug)]
pub(super) struct Canon {
    /// The wave's first start.
    pub(super) t0: SimTime,
    /// Its tasks and flows in canonical order.
    pub(super) tasks: Vec<u32>,
    pub(super) flows: Vec<u32>,
    task_index: HashMap<u32, u32>,
    flow_index: HashMap<u32, u32>,
    /// The ports its packets cross (data and acknowledgements), by label.
    pub(super) ports: Vec<(u32, u16)>,
    /// The resources its packets use.
    pub(super) resources: HashSet<Resource>,
    /// Per canonical task: its dependencies inside the domain; whether it
    /// is a flow whose start is in the key (an entry).
    pub(super) inside: Vec<u32>,
    pub(super) entry: Vec<bool>,
    pub(super) key: Vec<u64>,
    /// The positions in `key` that hold times (an entry's start offset, a
    /// compute task's duration, when an outside dependency is met): a
    /// repeat may differ there within the run's tolerance
    /// ([`super::tolerant`]).
    pub(super) times: Vec<u32>,
}

impl Canon {
    /// The domain of collectives `wave` and compute tasks `computes`
    /// (collectives with every entry's start agreed in `entries`, time +
    /// 1, as [`Plan::entries`], and those they start through computes).
    pub(super) fn build(
        fabric: &Fabric,
        plan: &Plan,
        wave: &[u32],
        computes: &[u32],
        entries: &[u64],
    ) -> Canon {
        let workload = &fabric.workload;
        let t0 = wave
            .iter()
            .flat_map(|&c| {
                let (lo, hi) = plan.entry_range[c as usize];
                entries[lo as usize..hi as usize]
                    .iter()
                    .filter(|&&s| s != 0)
                    .map(|&s| SimTime(s - 1))
            })
            .min()
            .expect("a domain has entries");
        let tasks: Vec<u32> = wave
            .iter()
            .flat_map(|&c| plan.tasks[c as usize].iter().copied())
            .chain(computes.iter().copied())
            .collect();
        let task_index: HashMap<u32, u32> = tasks
            .iter()
            .enumerate()
            .map(|(k, &t)| (t, k as u32))
            .collect();
        let mut deps: Vec<Vec<u32>> = vec![Vec::new(); tasks.len()];
        for (k, &t) in tasks.iter().enumerate() {
            for d in workload.dependents(t) {
                if let Some(&j) = task_index.get(d) {
                    deps[j as usize].push(k as u32);
                }
            }
        }
        let mut labels = Labels::default();
        let mut resources = Vec::new();
        let mut key = vec![wave.len() as u64, tasks.len() as u64];
        let mut flows = Vec::new();
        let mut path = Vec::new();
        let entry_offsets: HashMap<u32, SimTime> = wave
            .iter()
            .flat_map(|&c| {
                let (lo, hi) = plan.entry_range[c as usize];
                lo as usize..hi as usize
            })
            .filter(|&e| entries[e] != 0)
            .map(|e| (plan.entries[e], SimTime(entries[e] - 1) - t0))
            .collect();
        let mut entry = vec![false; tasks.len()];
        let mut times = Vec::new();
        for (k, &t) in tasks.iter().enumerate() {
            let task = workload.tasks[t as usize];
            match workload.kind(&task) {
                TaskKind::Flow(f) => {
                    flows.push(f);
                    entry[k] = entry_offsets.contains_key(&f);
                    let spec = workload.flows[f as usize];
                    let offset = entry_offsets.get(&f).map_or(0, |o| o.as_ps() + 1);
                    key.extend([
                        0,
                        labels.node(fabric, spec.src),
                        labels.node(fabric, spec.dst),
                    ]);
                    key.push(spec.size_bytes);
                    if entry[k] {
                        times.push(key.len() as u32);
                    }
                    key.push(offset);
                    flow_resources(fabric, f, &mut resources);
                    for (a, b) in [(spec.src, spec.dst), (spec.dst, spec.src)] {
                        path.clear();
                        static_path(fabric, f, a, b, &mut path);
                        key.push(path.len() as u64);
                        for &(node, port) in &path {
                            key.push(labels.port(fabric, node, port));
                        }
                    }
                }
                TaskKind::Compute(duration) => {
                    key.extend([1, labels.node(fabric, task.host)]);
                    times.push(key.len() as u32);
                    key.push(duration.as_ps());
                }
            }
            key.push(u64::from(task.deps) - deps[k].len() as u64);
            deps[k].sort_unstable();
            key.push(deps[k].len() as u64);
            key.extend(deps[k].iter().map(|&j| u64::from(j)));
        }
        // The classes of the nodes and ports, in label order, and the
        // nodes' order by id (how equal-time events at a node are ordered).
        key.extend_from_slice(&labels.classes);
        key.extend(labels.id_order());
        let flow_index = flows
            .iter()
            .enumerate()
            .map(|(k, &f)| (f, k as u32))
            .collect();
        resources.sort_unstable();
        resources.dedup();
        Canon {
            t0,
            inside: deps.iter().map(|d| d.len() as u32).collect(),
            entry,
            tasks,
            flows,
            task_index,
            flow_index,
            ports: labels.ports,
            resources: resources.into_iter().collect(),
            key,
            times,
        }
    }

    /// The domain of `flows` alone, starting at `t0`, as far as the
    /// guard reads it: its tasks and resources (no key, no labelled port).
    #[cfg(test)]
    pub(super) fn of_flows(fabric: &Fabric, flows: &[u32], t0: SimTime) -> Canon {
        let mut resources = Vec::new();
        for &f in flows {
            flow_resources(fabric, f, &mut resources);
        }
        let tasks: Vec<u32> = flows
            .iter()
            .map(|&f| fabric.workload.flow_task(f))
            .collect();
        Canon {
            t0,
            task_index: tasks
                .iter()
                .enumerate()
                .map(|(k, &t)| (t, k as u32))
                .collect(),
            flow_index: flows
                .iter()
                .enumerate()
                .map(|(k, &f)| (f, k as u32))
                .collect(),
            inside: vec![0; tasks.len()],
            entry: vec![true; tasks.len()],
            tasks,
            flows: flows.to_vec(),
            ports: Vec::new(),
            resources: resources.into_iter().collect(),
            key: Vec::new(),
            times: Vec::new(),
        }
    }

    /// The same domain with its tasks renumbered `0..n` in canonical
    /// order, as the sandbox's workload holds them.
    pub(super) fn renumbered(&self) -> Canon {
        Canon {
            t0: self.t0,
            tasks: (0..self.tasks.len() as u32).collect(),
            flows: self.flows.clone(),
            task_index: (0..self.tasks.len() as u32).map(|k| (k, k)).collect(),
            inside: self.inside.clone(),
            entry: self.entry.clone(),
            flow_index: self.flow_index.clone(),
            ports: self.ports.clone(),
            resources: self.resources.clone(),
            key: Vec::new(),
            times: Vec::new(),
        }
    }

    /// Its tasks and resources, as the guard's walks take them.
    pub(super) fn region(&self) -> (&[u32], &HashSet<Resource>) {
        (&self.tasks, &self.resources)
    }

    pub(super) fn task_index(&self, task: u32) -> Option<usize> {
        self.task_index.get(&task).map(|&k| k as usize)
    }

    pub(super) fn flow_index(&self, flow: u32) -> Option<usize> {
        self.flow_index.get(&flow).map(|&k| k as usize)
    }
}

/// Node and port labels in order of first appearance, with their classes.
/// A port's class is its owner's label and its link's rate and latency,
/// not its number: two domains whose paths differ only by which of
/// equivalent ports (a leaf's uplinks to symmetric spines) they cross
/// have one key, and a replay maps the record's labelled ports onto the
/// domain's own (DESIGN.md §3c, "Path classes").
#[derive(Default)]
struct Labels {
    nodes: HashMap<u32, u64>,
    port_labels: HashMap<(u32, u16), u64>,
    ports: Vec<(u32, u16)>,
    classes: Vec<u64>,
}

impl Labels {
    /// Node `n`'s label; its class (host or switch, its ports' rates and
    /// latencies) goes into the key the first time.
    fn node(&mut self, fabric: &Fabric, n: u32) -> u64 {
        if let Some(&l) = self.nodes.get(&n) {
            return l;
        }
        let l = self.nodes.len() as u64;
        self.nodes.insert(n, l);
        let topo = &fabric.topo;
        self.classes.push(u64::from(topo.is_host(n)));
        self.classes.push(topo.ports(n).len() as u64);
        for p in topo.ports(n) {
            let link = topo.link(p.link);
            self.classes.extend([link.bandwidth_bps, link.latency_ps]);
        }
        l
    }

    /// Port `port` of `node`'s label; its node's label goes into the key
    /// the first time.
    fn port(&mut self, fabric: &Fabric, node: u32, port: u16) -> u64 {
        if let Some(&l) = self.port_labels.get(&(node, port)) {
            return l;
        }
        let l = self.ports.len() as u64;
        self.port_labels.insert((node, port), l);
        self.ports.push((node, port));
        let owner = self.node(fabric, node);
        let topo = &fabric.topo;
        let link = topo.link(topo.port(node, port).link);
        self.classes
            .extend([owner, link.bandwidth_bps, link.latency_ps]);
        l
    }

    /// The node labels in order of their node ids: equal-time events at a
    /// node are ordered by their source's id (DESIGN.md §3), so two
    /// domains of one key order them alike.
    fn id_order(&self) -> Vec<u64> {
        let mut by_id: Vec<(u32, u64)> = self.nodes.iter().map(|(&n, &l)| (n, l)).collect();
        by_id.sort_unstable();
        by_id.into_iter().map(|(_, l)| l).collect()
    }
}

/// Most tasks a domain grows to (a bound on the sandbox's work per key).
const MAX_DOMAIN_TASKS: usize = 1 << 14;

/// Grows the domain of collectives `colls` (using `resources`) by what its
/// own completions start on its resources: compute tasks (outside any
/// collective) that wait only for the domain, and memoizable collectives
/// not yet replayed whose every task waits only for the domain and for
/// each other, and whose flows use the domain's resources (directly or
/// through such computes); none that uses `foreign` resources (another
/// domain's). A collective chained to the last one with no gap (the next
/// tensor-parallel step on the same NVSwitch, whose first ranks start while
/// the last ranks of this one finish) thus joins its domain instead of
/// cutting its replay short. Returns the computes, in id order; `colls`
/// and `resources` grow.
pub(super) fn extend(
    fabric: &Fabric,
    plan: &Plan,
    replayed: &[bool],
    colls: &mut Vec<u32>,
    resources: &mut HashSet<Resource>,
    foreign: &HashSet<Resource>,
    cache: &mut CollResources,
) -> Vec<u32> {
    let workload = &fabric.workload;
    let mut members: HashSet<u32> = colls
        .iter()
        .flat_map(|&c| plan.tasks(c).iter().copied())
        .collect();
    let mut frontier: Vec<u32> = colls
        .iter()
        .flat_map(|&c| plan.tasks(c).iter().copied())
        .collect();
    frontier.sort_unstable();
    frontier.reverse();
    // Per task outside the domain: its dependencies inside it.
    let mut incoming: HashMap<u32, u32> = HashMap::new();
    let mut computes = Vec::new();
    while let Some(t) = frontier.pop() {
        for &d in workload.dependents(t) {
            if members.contains(&d) || members.len() >= MAX_DOMAIN_TASKS {
                continue;
            }
            let e = incoming.entry(d).or_insert(0);
            *e += 1;
            let task = workload.tasks[d as usize];
            if *e != task.deps {
                continue;
            }
            match workload.kind(&task) {
                TaskKind::Compute(_) if task.collective == NONE => {
                    members.insert(d);
                    computes.push(d);
                    frontier.push(d);
                }
                TaskKind::Compute(_) => {}
                TaskKind::Flow(_) => {
                    let c = task.collective;
                    if c == NONE || replayed[c as usize] || plan.tasks(c).is_empty() {
                        continue;
                    }
                    // Every task of `c` waits only for the domain and `c`.
                    let ok = plan.tasks(c).iter().all(|&u| {
                        let from_domain = incoming.get(&u).copied().unwrap_or(0);
                        from_domain + plan.internal[u as usize] == workload.tasks[u as usize].deps
                    });
                    if !ok {
                        continue;
                    }
                    let res = cache.of(fabric, c, plan.tasks(c));
                    if !res.iter().any(|r| resources.contains(r))
                        || res.iter().any(|r| foreign.contains(r))
                    {
                        continue;
                    }
                    resources.extend(res.iter().copied());
                    colls.push(c);
                    for &u in plan.tasks(c) {
                        members.insert(u);
                        frontier.push(u);
                    }
                }
            }
        }
    }
    colls.sort_unstable();
    computes.sort_unstable();
    computes
}

/// Where task `task` starts: a flow's source, a compute task's host.
pub(super) fn source(workload: &Workload, task: u32) -> u32 {
    let t = workload.tasks[task as usize];
    match workload.kind(&t) {
        TaskKind::Flow(f) => workload.flows[f as usize].src,
        TaskKind::Compute(_) => t.host,
    }
}

/// How long after it is ready task `task` starts to use the network: a
/// flow after the host overhead, a compute task at once.
pub(super) fn start_delay(workload: &Workload, task: u32) -> SimTime {
    match workload.kind(&workload.tasks[task as usize]) {
        TaskKind::Flow(_) => workload.host_overhead,
        TaskKind::Compute(_) => SimTime::ZERO,
    }
}
