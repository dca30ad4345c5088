//! Atoms: the connected components of the never-cut links, the pieces both strategies place.

use netsim_topo::{NodeIndex, Topology};

use crate::is_uncuttable;

/// Connected components of the never-cut links.
pub(crate) struct Atoms {
    /// Atom of each node; atoms are numbered by their lowest node id.
    pub(crate) atom_of: Vec<u32>,
    /// Weight of each atom (sum of its nodes' weights).
    pub(crate) weight: Vec<u64>,
    /// The part of each atom's weight on its hosts (the endpoints' work).
    pub(crate) host_weight: Vec<u64>,
    /// Lowest node id of each atom.
    pub(crate) first: Vec<NodeIndex>,
}

impl Atoms {
    /// Union-find over the links [`is_uncuttable`] pins, weighted by `weights` (one per node).
    pub(crate) fn new(topo: &Topology, latency_floor_ps: u64, weights: &[u64]) -> Atoms {
        let n = topo.node_count() as usize;
        let mut parent: Vec<u32> = (0..n as u32).collect();
        fn find(parent: &mut [u32], mut x: u32) -> u32 {
            while parent[x as usize] != x {
                parent[x as usize] = parent[parent[x as usize] as usize];
                x = parent[x as usize];
            }
            x
        }
        for l in 0..topo.link_count() {
            if is_uncuttable(topo, l, latency_floor_ps) {
                let link = topo.link(l);
                let (ra, rb) = (find(&mut parent, link.a), find(&mut parent, link.b));
                if ra != rb {
                    // The lower root wins so atom numbering follows node ids.
                    let (lo, hi) = (ra.min(rb), ra.max(rb));
                    parent[hi as usize] = lo;
                }
            }
        }
        let mut atom_of = vec![u32::MAX; n];
        let mut weight: Vec<u64> = Vec::new();
        let mut host_weight: Vec<u64> = Vec::new();
        let mut first = Vec::new();
        for x in 0..n as u32 {
            let r = find(&mut parent, x);
            if atom_of[r as usize] == u32::MAX {
                atom_of[r as usize] = weight.len() as u32;
                weight.push(0);
                host_weight.push(0);
                first.push(x);
            }
            let a = atom_of[r as usize];
            atom_of[x as usize] = a;
            weight[a as usize] = weight[a as usize].saturating_add(weights[x as usize]);
            if topo.is_host(x) {
                host_weight[a as usize] =
                    host_weight[a as usize].saturating_add(weights[x as usize]);
            }
        }
        Atoms {
            atom_of,
            weight,
            host_weight,
            first,
        }
    }

    /// Number of atoms.
    pub(crate) fn count(&self) -> u32 {
        self.weight.len() as u32
    }
}
