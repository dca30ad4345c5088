//! A printable summary of a topology: counts per role, links, bisection bandwidth, diameter.

use std::fmt;

use crate::graph::{Role, Topology};
use crate::routing::Routing;
use crate::units::format_decimal;

/// Counts and headline figures of a topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Generator or source kind.
    pub kind: String,
    /// Total nodes.
    pub nodes: u32,
    /// Nodes per role, for the roles present, in [`Role::ALL`] order.
    pub role_counts: Vec<(Role, u32)>,
    /// Total (full-duplex) links.
    pub links: u32,
    /// Bisection bandwidth, bits per second, one direction (see [`bisection_bps`]).
    pub bisection_bps: u64,
    /// Host-to-host diameter in links (minimum-hop paths, hosts never transit).
    pub diameter_hops: u32,
}

/// Summarises `topo`; the diameter comes from its routing tables.
pub fn summarize(topo: &Topology, routing: &Routing) -> Summary {
    Summary {
        kind: topo.kind().to_string(),
        nodes: topo.node_count(),
        role_counts: Role::ALL
            .iter()
            .map(|&r| (r, topo.count_role(r)))
            .filter(|x| x.1 > 0)
            .collect(),
        links: topo.link_count(),
        bisection_bps: bisection_bps(topo),
        diameter_hops: routing.diameter_hops(),
    }
}

/// Bisection bandwidth (bits per second, one direction) of the cut that puts the first half
/// of the hosts (in host numbering, i.e. the first half of the pods, groups or segments) on
/// one side and the rest on the other, with every switch on the side it has more link
/// bandwidth to (local search from the hosts upward, a few sweeps).
///
/// For a fat-tree this is exact: every balanced pod split crosses the same number of core
/// links, and the search moves a tier across when a lower tier is the thinner cut (e.g. an
/// oversubscribed leaf). Elsewhere it is the capacity of a good balanced cut, an upper bound
/// on the true minimum bisection.
pub fn bisection_bps(topo: &Topology) -> u64 {
    let n = topo.node_count() as usize;
    let hosts = topo.host_count();
    if hosts < 2 {
        return 0;
    }
    // side: 0 = first half, 1 = second half, 2 = not yet placed.
    let mut side: Vec<u8> = (0..n as u32)
        .map(|x| {
            if x < hosts {
                u8::from(x >= hosts / 2)
            } else {
                2
            }
        })
        .collect();
    for _ in 0..16 {
        let mut changed = false;
        for s in hosts..n as u32 {
            let mut w = [0u64; 2];
            for p in topo.ports(s) {
                let ps = side[p.peer as usize];
                if ps < 2 {
                    w[ps as usize] += topo.link(p.link).bandwidth_bps;
                }
            }
            let cur = side[s as usize];
            let new = if w[0] > w[1] {
                0
            } else if w[1] > w[0] {
                1
            } else if cur < 2 {
                cur
            } else if w[0] > 0 {
                0
            } else {
                2
            };
            if new != cur {
                side[s as usize] = new;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    topo.links()
        .iter()
        .filter(|l| {
            let (a, b) = (side[l.a as usize], side[l.b as usize]);
            a < 2 && b < 2 && a != b
        })
        .map(|l| l.bandwidth_bps)
        .sum()
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "topology:   {}", self.kind)?;
        writeln!(f, "nodes:      {}", self.nodes)?;
        for (r, c) in &self.role_counts {
            writeln!(f, "  {:<10}{}", format!("{}:", r.name()), c)?;
        }
        writeln!(f, "links:      {}", self.links)?;
        writeln!(
            f,
            "bisection:  {} Gb/s",
            format_decimal(self.bisection_bps, 9)
        )?;
        write!(f, "diameter:   {} hops (host to host)", self.diameter_hops)
    }
}
