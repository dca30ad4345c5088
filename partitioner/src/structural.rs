//! The structural strategy: whole pods, groups or segments where that balances, single atoms
//! where it does not, placed heaviest first on the least-loaded shard (LPT).

use std::collections::BTreeMap;

use netsim_topo::{NodeIndex, Topology};

use crate::atoms::Atoms;

/// Whole blocks are kept when the largest shard then carries at most this much over the mean
/// (in per mille): a little imbalance buys shards that keep whole pods or groups together.
const WHOLE_BLOCK_SLACK_PER_MILLE: u64 = 50;

/// A placement unit: (weight, first node, atoms).
type Unit = (u64, NodeIndex, Vec<u32>);

/// Structural coordinate of a node: pod, else group, else segment.
fn block_of(topo: &Topology, n: NodeIndex) -> Option<u32> {
    let c = topo.node(n).coords;
    c.pod.or(c.group).or(c.segment)
}

/// The shard of each atom.
///
/// First try: every block (by pod, group or segment) no heavier than one shard's share stays
/// whole, heavier blocks and atoms without a block are placed one by one. If that leaves the
/// largest shard more than 5% over the mean (fewer blocks than shards, a few heavy blocks, or
/// blocks that do not divide evenly), every atom is placed on its own and the better of the two
/// placements is kept. In a rail-optimized GPU fabric the atoms are servers and single
/// switches, so the second placement balances to within about one server.
pub(crate) fn structural(topo: &Topology, atoms: &Atoms, shards: u32) -> Vec<u32> {
    let total: u64 = atoms.weight.iter().sum();
    let share = total.div_ceil(shards as u64);
    let mut blocks: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut free: Vec<Unit> = Vec::new();
    for a in 0..atoms.count() {
        // An atom belongs to the block of its first node.
        match block_of(topo, atoms.first[a as usize]) {
            Some(b) => blocks.entry(b).or_default().push(a),
            None => free.push(single(atoms, a)),
        }
    }
    let mut whole = free.clone();
    if blocks.len() as u64 >= shards as u64 {
        for members in blocks.values() {
            let w: u64 = members.iter().map(|&a| atoms.weight[a as usize]).sum();
            if w <= share {
                whole.push((w, atoms.first[members[0] as usize], members.clone()));
            } else {
                whole.extend(members.iter().map(|&a| single(atoms, a)));
            }
        }
    } else {
        whole.extend(blocks.values().flatten().map(|&a| single(atoms, a)));
    }
    let (whole_max, whole_shards) = lpt(whole, atoms.count(), shards);
    let mean = total / shards as u64;
    if whole_max.saturating_mul(1000) <= mean.saturating_mul(1000 + WHOLE_BLOCK_SLACK_PER_MILLE) {
        return whole_shards;
    }
    let units: Vec<Unit> = (0..atoms.count()).map(|a| single(atoms, a)).collect();
    let (atom_max, atom_shards) = lpt(units, atoms.count(), shards);
    if atom_max < whole_max {
        atom_shards
    } else {
        whole_shards
    }
}

fn single(atoms: &Atoms, a: u32) -> Unit {
    (atoms.weight[a as usize], atoms.first[a as usize], vec![a])
}

/// Longest-processing-time placement: units heaviest first (ties by first node) onto the
/// least-loaded shard (ties by lowest shard). Returns the largest load and the atom -> shard map.
fn lpt(mut units: Vec<Unit>, atoms: u32, shards: u32) -> (u64, Vec<u32>) {
    units.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    // A min-heap of (load, shard) keeps each placement O(log shards).
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>> =
        (0..shards).map(|s| std::cmp::Reverse((0, s))).collect();
    let mut atom_shard = vec![0u32; atoms as usize];
    for (w, _, members) in units {
        let std::cmp::Reverse((load, s)) = heap.pop().expect("at least one shard");
        for a in members {
            atom_shard[a as usize] = s;
        }
        heap.push(std::cmp::Reverse((load + w, s)));
    }
    let max = heap.into_iter().map(|r| r.0 .0).max().unwrap_or(0);
    (max, atom_shard)
}
