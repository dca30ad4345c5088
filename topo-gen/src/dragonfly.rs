//! Dragonfly generator: p hosts per router, a routers per group, h global links per router,
//! g groups, with absolute, relative or circulant global-link arrangements.
//!
//! Numbering: hosts first (host `(G*a + r)*p + i` is host i of router r in group G), then
//! routers (`H + G*a + r`). Links: host-router in host order, then local all-to-all links
//! (group, then router pairs i < j), then global links in order of their lower end
//! (group, global port).

use crate::error::TopoError;
use crate::fat_tree::{MAX_LINKS, MAX_NODES};
use crate::graph::{Coords, NodeIndex, Role, Topology, TopologyBuilder};
use crate::routing::Routing;
use crate::spec::{check_link, Arrangement, DragonflyParams};

/// The flag with the largest value: the one to blame when a product of them
/// is too large.
fn largest(flags: &[(&'static str, u32)]) -> &'static str {
    flags.iter().max_by_key(|f| f.1).map_or("--a", |f| f.0)
}

/// Builds the dragonfly `p` describes.
pub fn build(p: &DragonflyParams) -> Result<Topology, TopoError> {
    for (flag, v) in [("--p", p.p), ("--a", p.a), ("--h", p.h)] {
        if v == 0 {
            return Err(TopoError::param(flag, "must be >= 1"));
        }
    }
    // Checked first so that the products below cannot overflow.
    if p.p as u64 + p.a as u64 + p.h as u64 > u16::MAX as u64 {
        return Err(TopoError::param(
            largest(&[("--p", p.p), ("--a", p.a), ("--h", p.h)]),
            format!(
                "a router would have p + a-1 + h = {} ports; at most {} are supported",
                p.p as u64 + p.a as u64 - 1 + p.h as u64,
                u16::MAX
            ),
        ));
    }
    let max_groups = p.a as u64 * p.h as u64 + 1;
    let g = p.groups.map_or(max_groups, |g| g as u64);
    if g == 0 || g > max_groups {
        return Err(TopoError::param(
            "--groups",
            format!(
                "groups must be between 1 and a*h+1 = {max_groups} (a = {}, h = {}), got {g}",
                p.a, p.h
            ),
        ));
    }
    check_link("--host-link-gbps", "--host-link-latency-ns", &p.host_link)?;
    check_link(
        "--local-link-gbps",
        "--local-link-latency-ns",
        &p.local_link,
    )?;
    check_link(
        "--global-link-gbps",
        "--global-link-latency-ns",
        &p.global_link,
    )?;
    let (pp, a, h) = (p.p as u64, p.a as u64, p.h as u64);
    // Blamed only when given: by default the count follows from a and h.
    let given_groups = p.groups.unwrap_or(0);
    let routers = g * a;
    let hosts = routers * pp;
    if hosts + routers > MAX_NODES {
        return Err(TopoError::param(
            largest(&[("--p", p.p), ("--a", p.a), ("--groups", given_groups)]),
            format!(
                "{hosts} hosts and {routers} routers exceed the supported size ({MAX_NODES} nodes)"
            ),
        ));
    }
    let links = hosts + g * a * (a - 1) / 2 + g * a * h / 2;
    if links > MAX_LINKS {
        return Err(TopoError::param(
            largest(&[
                ("--p", p.p),
                ("--a", p.a),
                ("--h", p.h),
                ("--groups", given_groups),
            ]),
            format!("{links} links exceed the supported {MAX_LINKS}"),
        ));
    }
    let mut b = TopologyBuilder::new("dragonfly");
    b.reserve((hosts + routers) as usize, links as usize)?;
    for x in 0..hosts {
        b.add_node(Role::Host, group_coords((x / pp / a) as u32));
    }
    let r0 = b.node_count();
    for r in 0..routers {
        b.add_node(Role::Router, group_coords((r / a) as u32));
    }
    for x in 0..hosts {
        b.add_link(
            x as u32,
            r0 + (x / pp) as u32,
            p.host_link.bandwidth_bps,
            p.host_link.latency_ps,
        );
    }
    for grp in 0..g {
        for i in 0..a {
            for j in i + 1..a {
                b.add_link(
                    r0 + (grp * a + i) as u32,
                    r0 + (grp * a + j) as u32,
                    p.local_link.bandwidth_bps,
                    p.local_link.latency_ps,
                );
            }
        }
    }
    let ports = a * h;
    for grp in 0..g {
        for q in 0..ports {
            if let Some((t, tq)) = global_peer(p.arrangement, g, ports, grp, q) {
                // Each link is seen from both ends; add it from its lower end only.
                if (grp, q) < (t, tq) {
                    b.add_link(
                        r0 + (grp * a + q / h) as u32,
                        r0 + (t * a + tq / h) as u32,
                        p.global_link.bandwidth_bps,
                        p.global_link.latency_ps,
                    );
                }
            }
        }
    }
    b.finish()
}

/// The group and global port at the far end of global port `q` of group `grp`, or `None`
/// if the port is unused (a partial last round when `a*h` is not a multiple of `g - 1`).
pub(crate) fn global_peer(
    arr: Arrangement,
    g: u64,
    ports: u64,
    grp: u64,
    q: u64,
) -> Option<(u64, u64)> {
    let others = g - 1;
    if others == 0 {
        return None;
    }
    let round = q / others;
    let i = q % others;
    let (t, ti) = match arr {
        Arrangement::Absolute => {
            let t = if i < grp { i } else { i + 1 };
            let ti = if grp < t { grp } else { grp - 1 };
            (t, ti)
        }
        Arrangement::Relative => ((grp + i + 1) % g, g - i - 2),
        Arrangement::Circulant => {
            let off = i / 2 + 1;
            if i.is_multiple_of(2) {
                let ti = if 2 * off == g { i } else { i + 1 };
                ((grp + off) % g, ti)
            } else {
                ((grp + g - off) % g, i - 1)
            }
        }
    };
    let tq = round * others + ti;
    (tq < ports).then_some((t, tq))
}

/// Group structure of a dragonfly built by [`build`], for minimal and Valiant routing.
#[derive(Clone, Debug)]
pub struct DragonflyIndex {
    /// `routers[router_offsets[g]..router_offsets[g + 1]]` are group g's routers.
    router_offsets: Vec<u32>,
    routers: Vec<NodeIndex>,
    /// For each router (indexed by position in `routers`), a host attached to it.
    proxy_host: Vec<NodeIndex>,
}

impl DragonflyIndex {
    /// Indexes the routers of `topo` by group; `None` if `topo` has no routers with a group
    /// coordinate or a router without a host.
    pub fn new(topo: &Topology) -> Option<DragonflyIndex> {
        let mut by_group: Vec<(u32, NodeIndex)> = (0..topo.node_count())
            .filter(|&n| topo.role(n) == Role::Router)
            .map(|n| topo.node(n).coords.group.map(|g| (g, n)))
            .collect::<Option<_>>()?;
        if by_group.is_empty() {
            return None;
        }
        by_group.sort_unstable();
        let groups = by_group.last()?.0 as usize + 1;
        let mut router_offsets = vec![0u32; groups + 1];
        for &(g, _) in &by_group {
            router_offsets[g as usize + 1] += 1;
        }
        for g in 0..groups {
            router_offsets[g + 1] += router_offsets[g];
        }
        let routers: Vec<NodeIndex> = by_group.iter().map(|x| x.1).collect();
        let proxy_host = routers
            .iter()
            .map(|&r| {
                topo.ports(r)
                    .iter()
                    .map(|p| p.peer)
                    .find(|&x| topo.is_host(x))
            })
            .collect::<Option<_>>()?;
        Some(DragonflyIndex {
            router_offsets,
            routers,
            proxy_host,
        })
    }

    /// Number of groups.
    pub fn groups(&self) -> u32 {
        (self.router_offsets.len() - 1) as u32
    }

    /// Group `g`'s routers.
    pub fn routers(&self, g: u32) -> &[NodeIndex] {
        &self.routers
            [self.router_offsets[g as usize] as usize..self.router_offsets[g as usize + 1] as usize]
    }

    /// A Valiant intermediate router drawn from `r` (any random `u64`): a router of a group
    /// other than `src_group` and `dst_group`, uniformly. `None` when no such group exists.
    pub fn intermediate_router(&self, src_group: u32, dst_group: u32, r: u64) -> Option<NodeIndex> {
        let eligible: u64 = (0..self.groups())
            .filter(|&g| g != src_group && g != dst_group)
            .map(|g| self.routers(g).len() as u64)
            .sum();
        if eligible == 0 {
            return None;
        }
        let mut i = r % eligible;
        for g in (0..self.groups()).filter(|&g| g != src_group && g != dst_group) {
            let rs = self.routers(g);
            if i < rs.len() as u64 {
                return Some(rs[i as usize]);
            }
            i -= rs.len() as u64;
        }
        None
    }

    /// A host attached to `router`: routing toward it leads minimally to `router`.
    fn proxy(&self, router: NodeIndex) -> NodeIndex {
        let i = self
            .routers
            .iter()
            .position(|&r| r == router)
            .expect("intermediate is a router of this dragonfly");
        self.proxy_host[i]
    }
}

/// A Valiant path from host `src` to host `dst`: minimal to router `intermediate`, then
/// minimal to `dst`; `choose(n)` picks among `n` ECMP ports. Returns the nodes visited.
pub fn valiant_path(
    topo: &Topology,
    routing: &Routing,
    index: &DragonflyIndex,
    src: NodeIndex,
    dst: NodeIndex,
    intermediate: NodeIndex,
    choose: &mut impl FnMut(usize) -> usize,
) -> Vec<NodeIndex> {
    let mut path = routing.walk(
        topo,
        src,
        index.proxy(intermediate),
        Some(intermediate),
        choose,
    );
    let rest = routing.walk(topo, intermediate, dst, None, choose);
    path.extend_from_slice(&rest[1..]);
    path
}

fn group_coords(group: u32) -> Coords {
    Coords {
        group: Some(group),
        ..Coords::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_peer_is_an_involution() {
        for arr in [
            Arrangement::Absolute,
            Arrangement::Relative,
            Arrangement::Circulant,
        ] {
            for (g, ports) in [(33, 32), (9, 8), (8, 8), (5, 8), (4, 9), (2, 3)] {
                for grp in 0..g {
                    for q in 0..ports {
                        if let Some((t, tq)) = global_peer(arr, g, ports, grp, q) {
                            assert_ne!(t, grp, "{arr:?} g={g} grp={grp} q={q}");
                            assert_eq!(
                                global_peer(arr, g, ports, t, tq),
                                Some((grp, q)),
                                "{arr:?} g={g} ports={ports} grp={grp} q={q}"
                            );
                        }
                    }
                }
            }
        }
    }
}
