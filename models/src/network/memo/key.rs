//! The memo's key: which collectives may be memoized (the plan, from the
//! workload alone), the canonical description of a wave about to start
//! (its tasks, flows, the ports their packets and acknowledgements cross,
//! relabelled in order of appearance) and how early anything outside the
//! wave could start.

use super::Record;
use crate::network::Fabric;
use crate::workload::{TaskKind, Workload, NONE};
use hashbrown::HashMap;
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
        Plan {
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
}

/// A wave about to start, described so that two waves with equal keys are
/// the same input to the simulation.
#[derive(Debug)]
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
    pub(super) key: Vec<u64>,
}

impl Canon {
    /// The wave of the collectives with an agreed entry start (`entries`,
    /// time + 1, as [`Plan::entries`]); `None` when there is none or when
    /// some of their entries' starts are not known yet.
    pub(super) fn build(fabric: &Fabric, plan: &Plan, entries: &[u64]) -> Option<Canon> {
        let workload = &fabric.workload;
        let mut wave: Vec<u32> = Vec::new();
        for (c, &(lo, hi)) in plan.entry_range.iter().enumerate() {
            let slots = &entries[lo as usize..hi as usize];
            if slots.iter().any(|&s| s != 0) {
                if slots.contains(&0) {
                    return None;
                }
                wave.push(c as u32);
            }
        }
        let start = |f: u32| -> Option<SimTime> {
            let e = plan.entries.iter().position(|&x| x == f)?;
            Some(SimTime(entries[e] - 1))
        };
        let t0 = wave
            .iter()
            .flat_map(|&c| {
                let (lo, hi) = plan.entry_range[c as usize];
                entries[lo as usize..hi as usize]
                    .iter()
                    .map(|&s| SimTime(s - 1))
            })
            .min()?;
        let tasks: Vec<u32> = wave
            .iter()
            .flat_map(|&c| plan.tasks[c as usize].iter().copied())
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
        let mut key = vec![wave.len() as u64, tasks.len() as u64];
        let mut flows = Vec::new();
        let mut path = Vec::new();
        let entry_offsets: HashMap<u32, SimTime> = wave
            .iter()
            .flat_map(|&c| {
                let (lo, hi) = plan.entry_range[c as usize];
                plan.entries[lo as usize..hi as usize].iter().copied()
            })
            .filter_map(|f| Some((f, start(f)? - t0)))
            .collect();
        for (k, &t) in tasks.iter().enumerate() {
            let task = workload.tasks[t as usize];
            match workload.kind(&task) {
                TaskKind::Flow(f) => {
                    flows.push(f);
                    let spec = workload.flows[f as usize];
                    let offset = entry_offsets.get(&f).map_or(0, |o| o.as_ps() + 1);
                    key.extend([
                        0,
                        labels.node(fabric, spec.src),
                        labels.node(fabric, spec.dst),
                    ]);
                    key.extend([spec.size_bytes, offset]);
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
                    key.extend([1, labels.node(fabric, task.host), duration.as_ps()]);
                }
            }
            key.push(u64::from(task.deps - plan.internal[t as usize]));
            deps[k].sort_unstable();
            key.push(deps[k].len() as u64);
            key.extend(deps[k].iter().map(|&j| u64::from(j)));
        }
        // The classes of the nodes and ports, in label order.
        key.extend_from_slice(&labels.classes);
        let flow_index = flows
            .iter()
            .enumerate()
            .map(|(k, &f)| (f, k as u32))
            .collect();
        Some(Canon {
            t0,
            tasks,
            flows,
            task_index,
            flow_index,
            ports: labels.ports,
            key,
        })
    }

    pub(super) fn task_index(&self, task: u32) -> Option<usize> {
        self.task_index.get(&task).map(|&k| k as usize)
    }

    pub(super) fn flow_index(&self, flow: u32) -> Option<usize> {
        self.flow_index.get(&flow).map(|&k| k as usize)
    }

    /// The earliest a flow outside the wave could start because of the
    /// wave's own completions, were it replayed from `record`.
    pub(super) fn released_start(&self, fabric: &Fabric, record: &Record) -> SimTime {
        let workload = &fabric.workload;
        let mut bound = SimTime::MAX;
        for (k, &t) in self.tasks.iter().enumerate() {
            let (src_done, dst_done) = record.done[k];
            let source = match workload.kind(&workload.tasks[t as usize]) {
                TaskKind::Flow(f) => workload.flows[f as usize].src,
                TaskKind::Compute(_) => workload.tasks[t as usize].host,
            };
            for &d in workload.dependents(t) {
                if self.task_index.contains_key(&d) {
                    continue;
                }
                let seen = if workload.tasks[d as usize].host == source {
                    src_done
                } else {
                    dst_done
                };
                bound = bound.min(earliest_flow_from(workload, self, d, self.t0 + seen));
            }
        }
        bound
    }
}

/// Node and port labels in order of first appearance, with their classes.
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
        self.classes.extend([owner, u64::from(port)]);
        l
    }
}

/// The port a host sends flow `flow` to `dst` on (ECMP over its uplinks,
/// as `host_port_toward` picks on a fault-free fabric).
pub(super) fn first_port(fabric: &Fabric, flow: u32, src: u32, dst: u32) -> u16 {
    let hops = fabric.routing.next_hops(src, dst);
    let n = hops.len();
    let pick = if n == 1 {
        0
    } else {
        crate::network::ecmp_pick(fabric.ecmp_seed(src), flow, src, dst, n)
    };
    hops.get(pick)
}

/// The ports (node, port) a packet of flow `flow` from `src` to `dst`
/// leaves by, on a fault-free fabric with hash ECMP.
fn static_path(fabric: &Fabric, flow: u32, src: u32, dst: u32, out: &mut Vec<(u32, u16)>) {
    let topo = &fabric.topo;
    let mut at = src;
    let mut port = first_port(fabric, flow, src, dst);
    loop {
        out.push((at, port));
        at = topo.port(at, port).peer;
        if at == dst {
            return;
        }
        let hops = fabric.routing.switch_next_hops(at, dst);
        let n = hops.len();
        let pick = if n == 1 {
            0
        } else {
            crate::network::ecmp_pick(fabric.ecmp_seed(at), flow, src, dst, n)
        };
        port = hops[pick];
        assert!(out.len() <= topo.node_count() as usize, "routing loop");
    }
}

/// The earliest a flow outside `canon`'s wave could start once task `task`
/// is ready at `ready`: a flow after the host overhead, a compute task
/// after its duration through its dependents; never for the wave's own.
pub(super) fn earliest_flow_from(
    workload: &Workload,
    canon: &Canon,
    task: u32,
    ready: SimTime,
) -> SimTime {
    let mut bound = SimTime::MAX;
    let mut work = vec![(task, ready)];
    let mut best: HashMap<u32, SimTime> = HashMap::new();
    while let Some((t, at)) = work.pop() {
        if at >= bound || canon.task_index.contains_key(&t) {
            continue;
        }
        if best.get(&t).is_some_and(|&b| b <= at) {
            continue;
        }
        best.insert(t, at);
        let task = workload.tasks[t as usize];
        match workload.kind(&task) {
            TaskKind::Flow(_) => bound = bound.min(at + workload.host_overhead),
            TaskKind::Compute(duration) => {
                for &d in workload.dependents(t) {
                    if workload.tasks[d as usize].host == task.host {
                        work.push((d, at + duration));
                    }
                }
            }
        }
    }
    bound
}

/// The earliest a flow outside the wave could start once compute task
/// `task` ends at `end`.
pub(super) fn earliest_flow_after(
    workload: &Workload,
    canon: &Canon,
    task: u32,
    end: SimTime,
) -> SimTime {
    let host = workload.tasks[task as usize].host;
    workload
        .dependents(task)
        .iter()
        .filter(|&&d| workload.tasks[d as usize].host == host)
        .map(|&d| earliest_flow_from(workload, canon, d, end))
        .min()
        .unwrap_or(SimTime::MAX)
}
