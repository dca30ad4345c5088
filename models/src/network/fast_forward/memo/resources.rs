//! The resources a flow's packets share with others (host ports, whole
//! switches) and the static path they take on a fault-free fabric with
//! hash ECMP: what domains, keys and the guard are built from.

use crate::network::common::ecmp_pick;
use crate::network::Fabric;
use crate::workload::TaskKind;

/// A resource packets share: a host's egress port (a link is one
/// serialiser, carrying one flow's data and another's acknowledgements
/// alike) or a whole switch (its ports draw on one shared buffer, whose
/// free space sets every port's PFC and drop thresholds).
pub(in crate::network::fast_forward) type Resource = u64;

fn host_port(node: u32, port: u16) -> Resource {
    u64::from(node) << 17 | u64::from(port)
}

fn switch(node: u32) -> Resource {
    u64::from(node) << 17 | 1 << 16
}

/// The resources flow `flow`'s data and acknowledgements use on a
/// fault-free fabric with hash ECMP, appended to `out`.
pub(in crate::network::fast_forward) fn flow_resources(
    fabric: &Fabric,
    flow: u32,
    out: &mut Vec<Resource>,
) {
    let spec = fabric.workload.flows[flow as usize];
    let mut path = Vec::new();
    for (a, b) in [(spec.src, spec.dst), (spec.dst, spec.src)] {
        path.clear();
        static_path(fabric, flow, a, b, &mut path);
        out.extend(
            path.iter()
                .map(|&(node, port)| port_resource(fabric, node, port)),
        );
    }
}

/// Per collective, the resources its flows use (sorted, deduplicated),
/// made the first time a decision asks and kept for the run. They are a
/// function of the fabric alone (the static paths of a fault-free fabric
/// with hash ECMP, which no event changes: a run with faults is not
/// fast-forwarded, and a fault would not change these paths either), so
/// the cached set is exactly what recomputing it at every check gave
/// (perf report fast-forward-14).
#[derive(Debug)]
pub(super) struct CollResources {
    /// Per collective: its slice of `values` (from, to), once made.
    at: Vec<Option<(usize, usize)>>,
    values: Vec<Resource>,
}

impl CollResources {
    pub(super) fn new(collectives: usize) -> CollResources {
        CollResources {
            at: vec![None; collectives],
            values: Vec::new(),
        }
    }

    /// Collective `c`'s resources; `tasks` are its tasks (only read the
    /// first time).
    pub(super) fn of(&mut self, fabric: &Fabric, c: u32, tasks: &[u32]) -> &[Resource] {
        let (from, to) = *self.at[c as usize].get_or_insert_with(|| {
            let workload = &fabric.workload;
            let from = self.values.len();
            for &t in tasks {
                if let TaskKind::Flow(f) = workload.kind(&workload.tasks[t as usize]) {
                    flow_resources(fabric, f, &mut self.values);
                }
            }
            self.values[from..].sort_unstable();
            let mut to = from;
            for i in from..self.values.len() {
                if to == from || self.values[i] != self.values[to - 1] {
                    self.values[to] = self.values[i];
                    to += 1;
                }
            }
            self.values.truncate(to);
            (from, to)
        });
        &self.values[from..to]
    }
}

/// The resource an egress port belongs to: a host's port alone, or its
/// switch.
pub(in crate::network::fast_forward) fn port_resource(
    fabric: &Fabric,
    node: u32,
    port: u16,
) -> Resource {
    if fabric.topo.is_host(node) {
        host_port(node, port)
    } else {
        switch(node)
    }
}

/// The port a host sends flow `flow` to `dst` on (ECMP over its uplinks,
/// as `host_port_toward` picks on a fault-free fabric).
pub(in crate::network::fast_forward) fn first_port(
    fabric: &Fabric,
    flow: u32,
    src: u32,
    dst: u32,
) -> u16 {
    let hops = fabric.routing.next_hops(src, dst);
    let n = hops.len();
    let pick = if n == 1 {
        0
    } else {
        let port = fabric.source_port(flow);
        ecmp_pick(fabric.ecmp_seed(src), port, src, dst, n)
    };
    hops.get(pick)
}

/// The ports flow `flow`'s packets and acknowledgements leave by, as the
/// key labels them, into `out`.
pub(super) fn flow_ports(fabric: &Fabric, flow: u32, out: &mut Vec<(u32, u16)>) {
    let spec = fabric.workload.flows[flow as usize];
    static_path(fabric, flow, spec.src, spec.dst, out);
    static_path(fabric, flow, spec.dst, spec.src, out);
}

/// The ports (node, port) a packet of flow `flow` from `src` to `dst`
/// leaves by, on a fault-free fabric with hash ECMP.
pub(in crate::network::fast_forward) fn static_path(
    fabric: &Fabric,
    flow: u32,
    src: u32,
    dst: u32,
    out: &mut Vec<(u32, u16)>,
) {
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
            let port = fabric.source_port(flow);
            ecmp_pick(fabric.ecmp_seed(at), port, src, dst, n)
        };
        port = hops[pick];
        assert!(out.len() <= topo.node_count() as usize, "routing loop");
    }
}

#[cfg(test)]
mod tests {
    use super::{flow_resources, CollResources};
    use crate::network::config::NetConfig;
    use crate::network::Fabric;
    use crate::workload::{Builder, Collective, CollectiveOp, TaskKind, NONE};
    use netsim_engine::SimTime;

    /// Two exchanges between `hosts`, as one collective.
    fn exchange(b: &mut Builder, hosts: (u32, u32)) {
        let c = b.collective(Collective {
            name: "x".into(),
            op: CollectiveOp::AllReduce,
            algorithm: "ring",
            group_size: 2,
            size_bytes: 1000,
            offloaded: false,
            fallback_reason: None,
            tasks: 0,
            job: NONE,
        });
        let first = b.flow(hosts.0, hosts.1, 1000, c, &[]);
        b.flow(hosts.1, hosts.0, 1000, c, &[first]);
    }

    /// On a leaf-spine (hosts 0 and 1 under one leaf, 2 and 3 under the
    /// other), collectives 0 (0 <-> 1) and 1 (2 <-> 3) share nothing and
    /// 2 (1 <-> 3) crosses both leaves. The cached sets are what the
    /// flows' paths give, the domains are the same from them, and a
    /// second decision over the same collectives computes no path again.
    #[test]
    fn each_collectives_resources_are_made_once_and_are_its_flows() {
        let mut b = Builder::new(SimTime::ZERO);
        exchange(&mut b, (0, 1));
        exchange(&mut b, (2, 3));
        exchange(&mut b, (1, 3));
        let fabric = Fabric::k4_fat_tree(2, b.finish(), NetConfig::default(), 1);
        let plan = super::super::key::Plan::new(&fabric.workload);
        let mut cache = CollResources::new(3);
        let domains = |cache: &mut CollResources, colls: &[u32]| {
            super::super::key::domains(&fabric, &plan, cache, colls)
        };
        assert_eq!(domains(&mut cache, &[0, 1]), [vec![0], vec![1]]);
        assert_eq!(domains(&mut cache, &[0, 1, 2]), [vec![0, 1, 2]]);
        let made = cache.values.len();
        assert_eq!(domains(&mut cache, &[0, 1, 2]), [vec![0, 1, 2]]);
        assert_eq!(domains(&mut cache, &[1, 2]), [vec![1, 2]]);
        assert_eq!(cache.values.len(), made, "no collective's paths again");
        let workload = &fabric.workload;
        for c in 0..3 {
            let mut direct = Vec::new();
            for &t in plan.tasks(c) {
                if let TaskKind::Flow(f) = workload.kind(&workload.tasks[t as usize]) {
                    flow_resources(&fabric, f, &mut direct);
                }
            }
            direct.sort_unstable();
            direct.dedup();
            assert!(direct.len() >= 3, "a host port and a switch each way");
            assert_eq!(cache.of(&fabric, c, plan.tasks(c)), direct);
        }
    }
}
