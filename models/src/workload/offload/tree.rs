//! The aggregation tree of a group: its leaf switches, the root closest to
//! all of them, and each leaf's shortest path up to it.

use netsim_topo::{NodeIndex, PortIndex, Role, Topology};
use std::collections::VecDeque;

/// One switch of an aggregation tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeNode {
    pub node: NodeIndex,
    /// Port toward the parent switch; `None` at the root.
    pub parent_port: Option<PortIndex>,
    /// Ports toward the children (member hosts and child switches), in port order.
    pub child_ports: Vec<PortIndex>,
}

/// Per member of an operation: `(host, port toward its leaf switch)`.
pub type Members = Vec<(NodeIndex, PortIndex)>;

/// The port of `host` toward the network (not its NVSwitch), and the switch
/// behind it.
pub fn uplink(topo: &Topology, host: NodeIndex) -> Option<(PortIndex, NodeIndex)> {
    topo.ports(host)
        .iter()
        .enumerate()
        .find(|(_, p)| topo.role(p.peer) != Role::NvSwitch)
        .map(|(i, p)| (i as PortIndex, p.peer))
}

fn is_network_switch(topo: &Topology, n: NodeIndex) -> bool {
    let role = topo.role(n);
    role != Role::Host && role != Role::NvSwitch
}

/// Hop counts from `from` over network switches.
fn hops_from(topo: &Topology, from: NodeIndex, dist: &mut [u32], queue: &mut VecDeque<NodeIndex>) {
    dist.fill(u32::MAX);
    dist[from as usize] = 0;
    queue.clear();
    queue.push_back(from);
    while let Some(n) = queue.pop_front() {
        for p in topo.ports(n) {
            if is_network_switch(topo, p.peer) && dist[p.peer as usize] == u32::MAX {
                dist[p.peer as usize] = dist[n as usize] + 1;
                queue.push_back(p.peer);
            }
        }
    }
}

/// The root of a tree over `leaves`: the network switch whose farthest leaf
/// is nearest, the lowest id among equals; `None` when no switch reaches
/// every leaf. Also returns how many searches it took.
///
/// A search from every leaf would find each switch's farthest leaf, but
/// costs leaves x links (a dragonfly with h = 255 has 16,328 routers and
/// 4.3 million ports: minutes). Instead each search bounds the rest from
/// below: a search from switch `v` gives its own farthest leaf exactly and
/// `ecc(n) >= ecc(v) - d(v, n)` for every other switch; a search from a leaf
/// `l` gives `ecc(n) >= d(n, l)`. Each round searches from the candidate
/// with the lowest bound, then from its farthest leaf, and stops when no
/// candidate's bound can beat the best found. Symmetric fabrics take a few
/// rounds; at worst every leaf is searched once and every switch's bound is
/// exact, so one more round ends it. Only switches the first leaf reaches
/// are candidates (the root reaches every leaf).
fn tree_root(
    topo: &Topology,
    leaves: &[NodeIndex],
    dist: &mut [u32],
    queue: &mut VecDeque<NodeIndex>,
) -> (Option<NodeIndex>, u32) {
    let nodes = dist.len();
    let mut is_leaf = vec![false; nodes];
    for &l in leaves {
        is_leaf[l as usize] = true;
    }
    let mut search = RootSearch {
        topo,
        leaves,
        is_leaf,
        lower: vec![0; nodes],
        searched: vec![false; nodes],
        best: None,
        searches: 0,
        dist,
        queue,
    };
    // The root reaches every leaf, so it lies in the first leaf's component:
    // switches elsewhere (a topology file may list unlinked ones) would each
    // cost a search of their own and bound nothing.
    if let Some(&first_leaf) = leaves.first() {
        search.from(first_leaf);
    }
    let candidates: Vec<NodeIndex> = (0..nodes as NodeIndex)
        .filter(|&n| leaves.is_empty() || search.dist[n as usize] != u32::MAX)
        .filter(|&n| is_network_switch(topo, n))
        .collect();
    loop {
        let next = candidates
            .iter()
            .copied()
            .filter(|&n| !search.searched[n as usize])
            .min_by_key(|&n| (search.lower[n as usize], n));
        let Some(v) = next else { break };
        let bound = (search.lower[v as usize], v);
        if bound.0 == u32::MAX || search.best.is_some_and(|best| bound > best) {
            break;
        }
        if let Some(far) = search.from(v) {
            if !search.searched[far as usize] {
                search.from(far);
            }
        }
    }
    (search.best.map(|(_, root)| root), search.searches)
}

/// The state of [`tree_root`]'s searches.
struct RootSearch<'a> {
    topo: &'a Topology,
    leaves: &'a [NodeIndex],
    is_leaf: Vec<bool>,
    /// Per node: a lower bound of its farthest leaf's distance.
    lower: Vec<u32>,
    searched: Vec<bool>,
    /// The best switch so far: (its farthest leaf's distance, id).
    best: Option<(u32, NodeIndex)>,
    searches: u32,
    dist: &'a mut [u32],
    queue: &'a mut VecDeque<NodeIndex>,
}

impl RootSearch<'_> {
    /// Searches from switch `from` and raises every node's bound; returns
    /// the farthest leaf when every leaf is in reach.
    fn from(&mut self, from: NodeIndex) -> Option<NodeIndex> {
        hops_from(self.topo, from, self.dist, self.queue);
        self.searched[from as usize] = true;
        self.searches += 1;
        let dist = &*self.dist;
        let far = self
            .leaves
            .iter()
            .copied()
            .max_by_key(|&l| (dist[l as usize], l));
        let ecc = far.map_or(0, |l| dist[l as usize]);
        let from_leaf = self.is_leaf[from as usize];
        for (lower, &d) in self.lower.iter_mut().zip(dist) {
            if d == u32::MAX {
                continue;
            }
            // A leaf out of reach of `from` is out of reach of all it reaches.
            let mut bound = if ecc == u32::MAX {
                u32::MAX
            } else {
                ecc - d.min(ecc)
            };
            if from_leaf {
                bound = bound.max(d);
            }
            *lower = (*lower).max(bound);
        }
        if ecc == u32::MAX {
            return None;
        }
        if self.best.is_none_or(|best| (ecc, from) < best) {
            self.best = Some((ecc, from));
        }
        far
    }
}

/// The aggregation tree over the leaf switches of `members`, and each
/// member's uplink port. `None` when a member has no network switch.
pub fn aggregation_tree(
    topo: &Topology,
    members: &[NodeIndex],
) -> Option<(Vec<TreeNode>, Members)> {
    let mut uplinks = Vec::with_capacity(members.len());
    let mut leaves: Vec<NodeIndex> = Vec::new();
    for &m in members {
        let (port, leaf) = uplink(topo, m)?;
        // A host linked to a host (a topology file can say so) is no tree.
        if !is_network_switch(topo, leaf) {
            return None;
        }
        uplinks.push((m, port));
        leaves.push(leaf);
    }
    leaves.sort_unstable();
    leaves.dedup();
    let nodes = topo.node_count() as usize;
    let mut dist = vec![u32::MAX; nodes];
    let mut queue = VecDeque::new();
    let root = tree_root(topo, &leaves, &mut dist, &mut queue).0?;
    // Parents toward the root: the lowest-port neighbour one hop closer.
    hops_from(topo, root, &mut dist, &mut queue);
    let mut parent_port: Vec<Option<PortIndex>> = vec![None; nodes];
    let mut in_tree = vec![false; nodes];
    in_tree[root as usize] = true;
    let mut order = vec![root];
    for &leaf in &leaves {
        let mut n = leaf;
        while !in_tree[n as usize] {
            in_tree[n as usize] = true;
            order.push(n);
            let (i, p) = topo
                .ports(n)
                .iter()
                .enumerate()
                .find(|(_, p)| {
                    is_network_switch(topo, p.peer) && dist[p.peer as usize] + 1 == dist[n as usize]
                })
                .expect("a switch off the root has a neighbour closer to it");
            parent_port[n as usize] = Some(i as PortIndex);
            n = p.peer;
        }
    }
    order.sort_unstable();
    let member_set: std::collections::BTreeSet<NodeIndex> = members.iter().copied().collect();
    let tree = order
        .iter()
        .map(|&n| {
            let child_ports = topo
                .ports(n)
                .iter()
                .enumerate()
                .filter(|(_, p)| {
                    // The link is a child's way up: a member's uplink or a
                    // tree switch's parent port.
                    if topo.is_host(p.peer) {
                        member_set.contains(&p.peer)
                            && uplink(topo, p.peer).map(|u| u.0) == Some(p.peer_port)
                    } else {
                        in_tree[p.peer as usize]
                            && parent_port[p.peer as usize] == Some(p.peer_port)
                    }
                })
                .map(|(i, _)| i as PortIndex)
                .collect();
            TreeNode {
                node: n,
                parent_port: parent_port[n as usize],
                child_ports,
            }
        })
        .collect();
    Some((tree, uplinks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_topo::{Coords, FatTreeParams, StarParams, TopoSpec};

    #[test]
    fn star_tree_is_one_switch_with_every_member() {
        let topo = netsim_topo::build(&TopoSpec::Star(StarParams {
            hosts: 5,
            ..StarParams::default()
        }))
        .unwrap();
        let (tree, members) = aggregation_tree(&topo, &[0, 2, 4]).unwrap();
        assert_eq!(tree.len(), 1);
        assert_eq!(tree[0].parent_port, None);
        assert_eq!(tree[0].child_ports.len(), 3);
        assert_eq!(members.len(), 3);
    }

    #[test]
    fn three_tier_fat_tree_tree_reaches_a_core() {
        let topo = netsim_topo::build(&TopoSpec::FatTree(FatTreeParams {
            k: 4,
            tiers: 3,
            ..FatTreeParams::default()
        }))
        .unwrap();
        let all: Vec<u32> = topo.hosts().collect();
        let (tree, _) = aggregation_tree(&topo, &all).unwrap();
        let root: Vec<_> = tree.iter().filter(|t| t.parent_port.is_none()).collect();
        assert_eq!(root.len(), 1);
        assert_eq!(topo.role(root[0].node), Role::Core);
        // 8 ToRs + 4 aggregation switches (one per pod) + the core.
        assert_eq!(tree.len(), 13);
        // Children of all switches: 16 hosts + 12 switch children.
        let edges: usize = tree.iter().map(|t| t.child_ports.len()).sum();
        assert_eq!(edges, 16 + 12);
    }

    /// The root as a search from every leaf finds it.
    fn root_by_every_leaf(topo: &Topology, leaves: &[NodeIndex]) -> Option<NodeIndex> {
        let nodes = topo.node_count() as usize;
        let (mut dist, mut worst, mut queue) = (vec![0; nodes], vec![0u32; nodes], VecDeque::new());
        for &leaf in leaves {
            hops_from(topo, leaf, &mut dist, &mut queue);
            for (w, d) in worst.iter_mut().zip(&dist) {
                *w = (*w).max(*d);
            }
        }
        (0..nodes as NodeIndex)
            .filter(|&n| is_network_switch(topo, n))
            .min_by_key(|&n| (worst[n as usize], n))
            .filter(|&n| worst[n as usize] != u32::MAX)
    }

    #[test]
    fn bounded_root_search_finds_the_root_a_search_from_every_leaf_finds() {
        let fat_tree = |k, tiers| {
            TopoSpec::FatTree(FatTreeParams {
                k,
                tiers,
                ..FatTreeParams::default()
            })
        };
        let dragonfly = |p, a, h, groups| {
            TopoSpec::Dragonfly(netsim_topo::DragonflyParams {
                p,
                a,
                h,
                groups,
                ..Default::default()
            })
        };
        let specs = [
            fat_tree(4, 2),
            fat_tree(4, 3),
            fat_tree(6, 3),
            dragonfly(2, 4, 2, None),
            dragonfly(1, 4, 2, Some(5)),
            dragonfly(2, 3, 1, Some(3)),
        ];
        let mut seed = 7u64;
        let mut compared = 0;
        for spec in &specs {
            let topo = netsim_topo::build(spec).unwrap();
            let switches: Vec<NodeIndex> = (0..topo.node_count())
                .filter(|&n| is_network_switch(&topo, n))
                .collect();
            let mut dist = vec![0; topo.node_count() as usize];
            let mut queue = VecDeque::new();
            for round in 0..40 {
                // Every switch, one, or a random subset of them.
                let leaves: Vec<NodeIndex> = match round {
                    0 => switches.clone(),
                    1 => vec![switches[switches.len() / 2]],
                    _ => switches
                        .iter()
                        .copied()
                        .filter(|_| netsim_engine::splitmix64(&mut seed).is_multiple_of(4))
                        .collect(),
                };
                assert_eq!(
                    tree_root(&topo, &leaves, &mut dist, &mut queue).0,
                    root_by_every_leaf(&topo, &leaves),
                    "{spec:?}: leaves {leaves:?}"
                );
                compared += 1;
            }
        }
        assert_eq!(compared, 240);
    }

    #[test]
    fn root_of_a_whole_dragonfly_takes_a_few_searches_not_one_per_router() {
        // A search from every router would be 520 (the fuzz campaign's h = 255
        // has 16,328 routers and took minutes).
        let topo = netsim_topo::build(&TopoSpec::Dragonfly(netsim_topo::DragonflyParams {
            p: 1,
            a: 8,
            h: 8,
            ..Default::default()
        }))
        .unwrap();
        let routers: Vec<NodeIndex> = (0..topo.node_count())
            .filter(|&n| is_network_switch(&topo, n))
            .collect();
        assert_eq!(routers.len(), 520);
        let mut dist = vec![0; topo.node_count() as usize];
        let (root, searches) = tree_root(&topo, &routers, &mut dist, &mut VecDeque::new());
        assert_eq!(root, root_by_every_leaf(&topo, &routers));
        assert!(searches <= 8, "{searches} searches");
    }

    #[test]
    fn unlinked_switches_cost_no_search_of_their_own() {
        // A SimAI file may list switches with no links; numbered before the
        // fabric they would each have been searched once (a hang at 10^5).
        let mut b = netsim_topo::TopologyBuilder::new("test");
        let hosts = [
            b.add_node(Role::Host, Coords::default()),
            b.add_node(Role::Host, Coords::default()),
        ];
        for _ in 0..300 {
            b.add_node(Role::Core, Coords::default());
        }
        let leaves = [
            b.add_node(Role::Tor, Coords::default()),
            b.add_node(Role::Tor, Coords::default()),
        ];
        let spine = b.add_node(Role::Core, Coords::default());
        for (&host, &leaf) in hosts.iter().zip(&leaves) {
            b.add_link(host, leaf, 100_000_000_000, 1_000_000);
            b.add_link(leaf, spine, 100_000_000_000, 1_000_000);
        }
        let topo = b.finish().unwrap();
        let mut dist = vec![0; topo.node_count() as usize];
        let (root, searches) = tree_root(&topo, &leaves, &mut dist, &mut VecDeque::new());
        assert_eq!(root, Some(spine));
        assert_eq!(root, root_by_every_leaf(&topo, &leaves));
        assert!(searches <= 4, "{searches} searches");
    }
}
