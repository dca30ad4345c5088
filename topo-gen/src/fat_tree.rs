//! k-ary fat-tree (3 tiers) and leaf-spine (2 tiers) generators.
//!
//! Numbering: hosts first, left to right (consecutive hosts share an edge switch), then
//! edge switches (pod-major), then aggregation switches (pod-major), then cores. Links:
//! host-edge in host order, then edge-agg (pod, edge, agg), then agg-core (pod, agg, core).
//! Aggregation switch j of every pod links to cores `j*k/2 .. (j+1)*k/2`.
//!
//! Multi-plane (`planes` > 1, the striped-NIC designs of Ultra Ethernet and the
//! hyperscalers): the switch layers are built `planes` times, plane-major (plane p's edge,
//! aggregation and core switches, then plane p+1's), and host h gets one port per plane,
//! port p to its edge switch in plane p. Host links come plane-major too, which is what makes
//! a host's port index its plane. The planes share no switch, so each is its own switch
//! component for routing, and a host reaches every other host through every plane.

use crate::error::TopoError;
use crate::graph::{Coords, Role, Topology, TopologyBuilder};
use crate::spec::{check_link, FatTreeParams};

/// Largest node count any generator accepts, to keep ids and memory sane.
pub(crate) const MAX_NODES: u64 = 1 << 26;
/// Largest link count any generator accepts.
pub(crate) const MAX_LINKS: u64 = 1 << 28;
/// Most planes a fat-tree may have (a host NIC striped over at most this many ports).
pub const MAX_PLANES: u32 = 8;

/// Builds the fat-tree or leaf-spine `p` describes.
pub fn build(p: &FatTreeParams) -> Result<Topology, TopoError> {
    if p.k < 2 || !p.k.is_multiple_of(2) {
        return Err(TopoError::param(
            "--k",
            format!("k must be even and >= 2, got {}", p.k),
        ));
    }
    if p.oversub == 0 {
        return Err(TopoError::param(
            "--oversub",
            "oversubscription must be >= 1",
        ));
    }
    if !(1..=MAX_PLANES).contains(&p.planes) {
        return Err(TopoError::param(
            "--planes",
            format!("planes must be 1..={MAX_PLANES}, got {}", p.planes),
        ));
    }
    check_link("--host-link-gbps", "--host-link-latency-ns", &p.host_link)?;
    check_link("--agg-link-gbps", "--agg-link-latency-ns", &p.agg_link)?;
    let k = p.k as u64;
    let half = k / 2;
    let hosts_per_edge = half * p.oversub as u64;
    // Checked first so that the products below cannot overflow.
    if hosts_per_edge + half > u16::MAX as u64 {
        return Err(TopoError::param(
            "--k",
            format!(
                "an edge switch would have {} ports (k = {}, oversubscription {}); at most {} are supported",
                hosts_per_edge + half,
                p.k,
                p.oversub,
                u16::MAX
            ),
        ));
    }
    let (edges, aggs, cores) = match p.tiers {
        3 => {
            check_link("--core-link-gbps", "--core-link-latency-ns", &p.core_link)?;
            (k * half, k * half, half * half)
        }
        2 => (k, half, 0),
        t => {
            return Err(TopoError::param(
                "--tiers",
                format!("tiers must be 2 or 3, got {t}"),
            ))
        }
    };
    let hosts = edges * hosts_per_edge;
    let planes = u64::from(p.planes);
    let nodes = hosts + planes * (edges + aggs + cores);
    if nodes > MAX_NODES {
        return Err(TopoError::param(
            "--k",
            format!(
                "k = {} with oversubscription {} and {planes} plane(s) gives {nodes} nodes; at most {MAX_NODES} are supported",
                p.k, p.oversub
            ),
        ));
    }
    let mut b = TopologyBuilder::new("fat-tree");
    let per_plane_links = hosts + edges * half + aggs * if p.tiers == 3 { half } else { 0 };
    b.reserve(nodes as usize, (planes * per_plane_links) as usize)?;
    // In 2 tiers each leaf is its own "pod" so structural partitioning has a unit to use.
    let edges_per_pod = if p.tiers == 3 { half } else { 1 };
    for h in 0..hosts {
        let pod = (h / hosts_per_edge / edges_per_pod) as u32;
        b.add_node(Role::Host, pod_coords(pod));
    }
    let shape = Shape {
        k,
        half,
        edges,
        aggs,
        cores,
        edges_per_pod,
    };
    let firsts: Vec<(u32, u32, u32)> = (0..p.planes)
        .map(|_| add_switches(&mut b, p.tiers, &shape))
        .collect();
    for &(edge0, _, _) in &firsts {
        for h in 0..hosts {
            let e = edge0 + (h / hosts_per_edge) as u32;
            b.add_link(
                h as u32,
                e,
                p.host_link.bandwidth_bps,
                p.host_link.latency_ps,
            );
        }
    }
    for &(edge0, agg0, core0) in &firsts {
        add_switch_links(&mut b, p, &shape, edge0, agg0, core0);
    }
    b.finish()
}

/// The switch counts of one plane, and k/2.
struct Shape {
    k: u64,
    half: u64,
    edges: u64,
    aggs: u64,
    cores: u64,
    edges_per_pod: u64,
}

/// Adds one plane's edge, aggregation and core switches; returns the first id of each layer.
fn add_switches(b: &mut TopologyBuilder, tiers: u32, s: &Shape) -> (u32, u32, u32) {
    let edge0 = b.node_count();
    for e in 0..s.edges {
        b.add_node(Role::Tor, pod_coords((e / s.edges_per_pod) as u32));
    }
    let agg0 = b.node_count();
    for a in 0..s.aggs {
        let coords = if tiers == 3 {
            Coords {
                pod: Some((a / s.half) as u32),
                plane: Some((a % s.half) as u32),
                ..Coords::default()
            }
        } else {
            Coords::default()
        };
        b.add_node(Role::Agg, coords);
    }
    let core0 = b.node_count();
    for c in 0..s.cores {
        b.add_node(
            Role::Core,
            Coords {
                plane: Some((c / s.half) as u32),
                ..Coords::default()
            },
        );
    }
    (edge0, agg0, core0)
}

/// Adds one plane's edge-aggregation and aggregation-core links (2 tiers: leaf-spine).
fn add_switch_links(
    b: &mut TopologyBuilder,
    p: &FatTreeParams,
    s: &Shape,
    edge0: u32,
    agg0: u32,
    core0: u32,
) {
    let half = s.half;
    if p.tiers == 3 {
        for pod in 0..s.k {
            for e in 0..half {
                for a in 0..half {
                    b.add_link(
                        edge0 + (pod * half + e) as u32,
                        agg0 + (pod * half + a) as u32,
                        p.agg_link.bandwidth_bps,
                        p.agg_link.latency_ps,
                    );
                }
            }
        }
        for a in 0..s.aggs {
            let j = a % half;
            for c in 0..half {
                b.add_link(
                    agg0 + a as u32,
                    core0 + (j * half + c) as u32,
                    p.core_link.bandwidth_bps,
                    p.core_link.latency_ps,
                );
            }
        }
    } else {
        for e in 0..s.edges {
            for sp in 0..s.aggs {
                b.add_link(
                    edge0 + e as u32,
                    agg0 + sp as u32,
                    p.agg_link.bandwidth_bps,
                    p.agg_link.latency_ps,
                );
            }
        }
    }
}

fn pod_coords(pod: u32) -> Coords {
    Coords {
        pod: Some(pod),
        ..Coords::default()
    }
}
