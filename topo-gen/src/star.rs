//! Star generator: N hosts on one switch, the single-switch testbed of in-network
//! computing papers.

use crate::error::TopoError;
use crate::graph::{Coords, Role, Topology, TopologyBuilder};
use crate::spec::{check_link, StarParams};

/// Builds `p.hosts` hosts (nodes `0..N`) linked to one ToR switch (node `N`).
pub fn build(p: &StarParams) -> Result<Topology, TopoError> {
    if p.hosts == 0 || p.hosts > u16::MAX as u32 {
        return Err(TopoError::param(
            "--hosts",
            format!(
                "a star needs 1..={} hosts (one switch port each), got {}",
                u16::MAX,
                p.hosts
            ),
        ));
    }
    check_link("--host-link-gbps", "--host-link-latency-ns", &p.host_link)?;
    let mut b = TopologyBuilder::new("star");
    for _ in 0..p.hosts {
        b.add_node(Role::Host, Coords::default());
    }
    let s = b.add_node(Role::Tor, Coords::default());
    for h in 0..p.hosts {
        b.add_link(h, s, p.host_link.bandwidth_bps, p.host_link.latency_ps);
    }
    b.finish()
}
