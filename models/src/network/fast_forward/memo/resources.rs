//! The resources a flow's packets share with others (host ports, whole
//! switches) and the static path they take on a fault-free fabric with
//! hash ECMP: what domains, keys and the guard are built from.

use crate::network::common::ecmp_pick;
use crate::network::Fabric;

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
