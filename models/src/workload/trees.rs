//! NCCL's double binary tree: its shape over a group (NCCL 2.19
//! `src/graph/trees.cc`, `ncclGetBtree` and `ncclGetDtree`) and the
//! all-reduce that reduces up each tree and broadcasts back down.
//!
//! ```text
//!   tree 0 (n = 8)             tree 1, mirrored (n even)
//!   0                          7
//!    \                        /
//!     4                      3
//!    / \                    / \
//!   2   6                  5   1
//!  / \ / \                / \ / \
//! 1  3 5  7              6  4 2  0
//! ```
//!
//! Position `p`'s parent is `p` with its lowest set bit `b` cleared and
//! the next bit set, `(p ^ b) | 2b`, or `p ^ b` when that is past the
//! group; the root, 0, has one child. The second tree is the first
//! mirrored (`n - 1 - p`) when `n` is even and shifted by one (`p + 1`)
//! when it is odd, so most inner nodes of one are leaves of the other.
//! Each tree carries half the data. A node's NIC carries, each way, the
//! tree's data once per tree edge it touches: from 4 nodes the inner nodes
//! of tree 0 (even, not 0) and of tree 1 each touch 3 edges in one tree and
//! 1 in the other, 2 shards of the data over the two trees.

use super::algorithms::{after_entry, part, HostTasks, Pieces};
use super::{Builder, NONE};
use netsim_topo::NodeIndex;

/// One tree over the positions `0..n` of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// Each position's parent; `None` at the root.
    pub parent: Vec<Option<usize>>,
    /// Each position's children, in ascending order (at most two).
    pub children: Vec<Vec<usize>>,
    /// Every position, each after its parent (breadth first from the root).
    pub order: Vec<usize>,
}

impl Tree {
    fn from_parents(parent: Vec<Option<usize>>) -> Tree {
        let n = parent.len();
        let mut children = vec![Vec::new(); n];
        let mut root = 0;
        for (pos, up) in parent.iter().enumerate() {
            match up {
                Some(up) => children[*up].push(pos),
                None => root = pos,
            }
        }
        let mut order = Vec::with_capacity(n);
        if n > 0 {
            order.push(root);
        }
        let mut next = 0;
        while next < order.len() {
            order.extend_from_slice(&children[order[next]]);
            next += 1;
        }
        assert_eq!(order.len(), n, "every position is under the root");
        Tree {
            parent,
            children,
            order,
        }
    }

    /// The tree edges `pos` touches (to its parent and children): each
    /// carries the tree's data once each way through `pos`'s NIC.
    pub fn degree(&self, pos: usize) -> usize {
        self.children[pos].len() + usize::from(self.parent[pos].is_some())
    }

    /// Edges on the longest path from the root to a leaf.
    pub fn depth(&self) -> usize {
        let mut depth = vec![0; self.parent.len()];
        for &pos in &self.order {
            if let Some(up) = self.parent[pos] {
                depth[pos] = depth[up] + 1;
            }
        }
        depth.into_iter().max().unwrap_or(0)
    }
}

/// NCCL's binary tree's parent of position `pos` among `n` (root 0).
fn btree_parent(pos: usize, n: usize) -> Option<usize> {
    if pos == 0 {
        return None;
    }
    let low = pos & pos.wrapping_neg();
    let up = (pos ^ low) | (low << 1);
    Some(if up < n { up } else { pos ^ low })
}

/// NCCL's binary tree over `n` positions (`ncclGetBtree`).
pub fn binary_tree(n: usize) -> Tree {
    Tree::from_parents((0..n).map(|p| btree_parent(p, n)).collect())
}

/// NCCL's two trees over `n` positions (`ncclGetDtree`): the binary tree,
/// and the same tree mirrored (`n` even) or shifted by one (`n` odd).
pub fn double_tree(n: usize) -> [Tree; 2] {
    // Position p of the second tree stands where `into(p)` stands in the first.
    let mirror = n.is_multiple_of(2);
    let into = |p: usize| if mirror { n - 1 - p } else { (p + n - 1) % n };
    let back = |q: usize| if mirror { n - 1 - q } else { (q + 1) % n };
    let second = (0..n).map(|p| btree_parent(into(p), n).map(back)).collect();
    [binary_tree(n), Tree::from_parents(second)]
}

/// Double binary tree all-reduce (NCCL): `2 x channels` trees over the
/// group, alternately NCCL's first and second tree, each reducing its part
/// of every chunk up to its root and broadcasting it back down. Each edge
/// sends its chunks in order, as NCCL's one connection per peer and
/// channel does, so a chunk moves up while the previous one comes down.
pub fn double_binary_tree(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    size_bytes: u64,
    pieces: Pieces,
    entry: &HostTasks,
) {
    let mut trees = TreePipeline::new(group, pieces.channels);
    let chunks = u64::from(pieces.chunks);
    for chunk in 0..chunks {
        if b.over() {
            return;
        }
        trees.piece(b, coll, part(size_bytes, chunks, chunk), entry);
    }
}

/// Per position, the last flow up to its parent and down from it.
struct Edges<'a> {
    up: &'a mut [u32],
    down: &'a mut [u32],
}

/// `bytes` reduced up `tree` (children before parents) and broadcast back
/// down from the root. A flow on an edge waits for the one in `edges`
/// (the previous piece there, `NONE` for none) and takes its place.
fn pass(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    tree: &Tree,
    bytes: u64,
    entry: &HostTasks,
    edges: Edges,
) {
    let Edges { up, down } = edges;
    let live = |mut deps: Vec<u32>| {
        deps.retain(|&d| d != NONE);
        deps
    };
    for &pos in tree.order.iter().rev() {
        let Some(parent) = tree.parent[pos] else {
            continue;
        };
        let mut deps: Vec<u32> = tree.children[pos].iter().map(|&c| up[c]).collect();
        deps.push(up[pos]);
        let deps = after_entry(entry, group[pos], &live(deps));
        up[pos] = b.flow(group[pos], group[parent], bytes, coll, &deps);
    }
    for &pos in &tree.order {
        let received: Vec<u32> = match tree.parent[pos] {
            None => tree.children[pos].iter().map(|&c| up[c]).collect(),
            Some(_) => vec![down[pos]],
        };
        for &c in &tree.children[pos] {
            let mut deps = received.clone();
            deps.push(down[c]);
            let deps = after_entry(entry, group[pos], &live(deps));
            down[c] = b.flow(group[pos], group[c], bytes, coll, &deps);
        }
    }
}

/// A double binary tree that takes its data one piece at a time, as a
/// pipeline stage does (and [`double_binary_tree`] its chunks): each
/// piece is split among the trees, and each edge sends its pieces in order
/// (a piece's flow on an edge waits for the previous piece's there), so
/// pieces leave the tree in the order they entered rather than all at the
/// end, sharing it.
pub struct TreePipeline {
    group: Vec<NodeIndex>,
    shapes: [Tree; 2],
    /// Per tree (even: NCCL's first, odd: its second), the previous
    /// piece's flow up from and down to each position.
    up: Vec<Vec<u32>>,
    down: Vec<Vec<u32>>,
}

impl TreePipeline {
    /// `channels` tree pairs over `group`, nothing sent yet.
    pub fn new(group: &[NodeIndex], channels: u32) -> TreePipeline {
        let trees = 2 * channels.max(1) as usize;
        TreePipeline {
            group: group.to_vec(),
            shapes: double_tree(group.len()),
            up: vec![vec![NONE; group.len()]; trees],
            down: vec![vec![NONE; group.len()]; trees],
        }
    }

    /// The next piece, `size_bytes` all-reduced over the group after
    /// `entry`; returns its first task.
    pub fn piece(&mut self, b: &mut Builder, coll: u32, size_bytes: u64, entry: &HostTasks) -> u32 {
        let first = b.task_count();
        let trees = self.up.len() as u64;
        for (t, (up, down)) in self.up.iter_mut().zip(&mut self.down).enumerate() {
            let bytes = part(size_bytes, trees, t as u64);
            let tree = &self.shapes[t % 2];
            pass(b, coll, &self.group, tree, bytes, entry, Edges { up, down });
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parents(t: &Tree) -> Vec<Option<usize>> {
        t.parent.clone()
    }

    /// `ncclGetBtree`'s illustration, 14 ranks: 0-8, 8-{4,12}, 4-{2,6},
    /// 12-{10,13}, 2-{1,3}, 6-{5,7}, 10-{9,11}.
    #[test]
    fn binary_tree_is_nccls_illustration() {
        let t = binary_tree(14);
        let want = [
            None,
            Some(2),
            Some(4),
            Some(2),
            Some(8),
            Some(6),
            Some(4),
            Some(6),
            Some(0),
            Some(10),
            Some(12),
            Some(10),
            Some(8),
            Some(12),
        ];
        assert_eq!(parents(&t), want);
        assert_eq!(t.children[0], [8], "the root has one child");
        assert_eq!(t.children[12], [10, 13]);
        assert_eq!(t.depth(), 4);
    }

    /// `ncclGetDtree`'s illustrations: 12 ranks mirrored (root 11, whose
    /// child is 3), 13 ranks shifted (root 1, whose child is 9; 0 under 9).
    #[test]
    fn second_tree_is_mirrored_or_shifted() {
        let [_, mirrored] = double_tree(12);
        assert_eq!(mirrored.order[0], 11);
        assert_eq!(mirrored.children[11], [3]);
        assert_eq!(mirrored.children[3], [1, 7]);
        assert_eq!(mirrored.children[7], [5, 9]);
        assert_eq!(mirrored.children[1], [0, 2]);
        let [_, shifted] = double_tree(13);
        assert_eq!(shifted.order[0], 1);
        assert_eq!(shifted.children[1], [9]);
        assert_eq!(shifted.children[9], [0, 5]);
        assert_eq!(shifted.children[0], [11]);
        assert_eq!(shifted.children[11], [10, 12]);
    }

    /// Small groups: 1 is a root alone, 2 an edge each way round, 4 a
    /// chain-like 0-2-{1,3} whose inner node 2 touches 3 edges.
    #[test]
    fn small_groups() {
        assert_eq!(double_tree(1)[1].order, [0]);
        let [a, b] = double_tree(2);
        assert_eq!((a.order.clone(), b.order.clone()), (vec![0, 1], vec![1, 0]));
        let [a, b] = double_tree(4);
        assert_eq!(parents(&a), [None, Some(2), Some(0), Some(2)]);
        assert_eq!(parents(&b), [Some(1), Some(3), Some(1), None]);
        let load: Vec<usize> = (0..4).map(|p| a.degree(p) + b.degree(p)).collect();
        assert_eq!(load, [2, 4, 4, 2]);
    }
}
