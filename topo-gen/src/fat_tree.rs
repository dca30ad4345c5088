//! k-ary fat-tree (3 tiers) and leaf-spine (2 tiers) generators.
//!
//! Numbering: hosts first, left to right (consecutive hosts share an edge switch), then
//! edge switches (pod-major), then aggregation switches (pod-major), then cores. Links:
//! host-edge in host order, then edge-agg (pod, edge, agg), then agg-core (pod, agg, core).
//! Aggregation switch j of every pod links to cores `j*k/2 .. (j+1)*k/2`.

use crate::error::TopoError;
use crate::graph::{Coords, Role, Topology, TopologyBuilder};
use crate::spec::{check_link, FatTreeParams};

/// Largest node count any generator accepts, to keep ids and memory sane.
pub(crate) const MAX_NODES: u64 = 1 << 26;
/// Largest link count any generator accepts.
pub(crate) const MAX_LINKS: u64 = 1 << 28;

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
    let nodes = hosts + edges + aggs + cores;
    if nodes > MAX_NODES {
        return Err(TopoError::param(
            "--k",
            format!(
                "k = {} with oversubscription {} gives {nodes} nodes; at most {MAX_NODES} are supported",
                p.k, p.oversub
            ),
        ));
    }
    let mut b = TopologyBuilder::new("fat-tree");
    let links = hosts + edges * half + aggs * if p.tiers == 3 { half } else { 0 };
    b.reserve(nodes as usize, links as usize)?;
    // In 2 tiers each leaf is its own "pod" so structural partitioning has a unit to use.
    let edges_per_pod = if p.tiers == 3 { half } else { 1 };
    for h in 0..hosts {
        let pod = (h / hosts_per_edge / edges_per_pod) as u32;
        b.add_node(Role::Host, pod_coords(pod));
    }
    let edge0 = b.node_count();
    for e in 0..edges {
        b.add_node(Role::Tor, pod_coords((e / edges_per_pod) as u32));
    }
    let agg0 = b.node_count();
    for a in 0..aggs {
        let coords = if p.tiers == 3 {
            Coords {
                pod: Some((a / half) as u32),
                plane: Some((a % half) as u32),
                ..Coords::default()
            }
        } else {
            Coords::default()
        };
        b.add_node(Role::Agg, coords);
    }
    let core0 = b.node_count();
    for c in 0..cores {
        b.add_node(
            Role::Core,
            Coords {
                plane: Some((c / half) as u32),
                ..Coords::default()
            },
        );
    }
    for h in 0..hosts {
        let e = edge0 + (h / hosts_per_edge) as u32;
        b.add_link(
            h as u32,
            e,
            p.host_link.bandwidth_bps,
            p.host_link.latency_ps,
        );
    }
    if p.tiers == 3 {
        for pod in 0..k {
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
        for a in 0..aggs {
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
        for e in 0..edges {
            for s in 0..aggs {
                b.add_link(
                    edge0 + e as u32,
                    agg0 + s as u32,
                    p.agg_link.bandwidth_bps,
                    p.agg_link.latency_ps,
                );
            }
        }
    }
    b.finish()
}

fn pod_coords(pod: u32) -> Coords {
    Coords {
        pod: Some(pod),
        ..Coords::default()
    }
}
