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
//!
//! On GPU servers NCCL does not put every GPU in one tree: per channel it
//! chains the GPUs inside each server and builds the two trees among the
//! servers, through the chain's first GPU and its rail NIC ([`chained`]).
//! Channel `h` starts its chain at local rank `h`, so every rail carries
//! its share:
//!
//! ```text
//!   channel h = 0, 2 servers of 4 (NCCL's log, nccl-tests issue 128)
//!   tree 0:  0 ----- 4          tree 1:  0 ----- 4
//!           (root)   |                   |      (root)
//!            1       5                   1       5
//!            2       6                   2       6
//!            3       7                   3       7
//!   chain up 3 -> 2 -> 1 -> 0, server 1's first GPU 4 under 0 (tree 0)
//!   or 0 under 4 (tree 1)
//! ```

use super::algorithms::{after_entry, part, HostTasks};
use super::spec::TREE_CHUNK_BYTES;
use super::{Builder, NONE};
use netsim_topo::{NodeIndex, Topology};

/// One tree over the positions `0..n` of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// Each position's parent; `None` at the root.
    pub parent: Vec<Option<usize>>,
    /// Each position's children, in ascending order (at most two; three at
    /// the first GPU of a server's chain, [`chained`]).
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

/// NCCL's tree of one channel over whole servers of `local` GPUs each
/// (search pattern `TREE`, NCCL 2.19 `src/graph/search.cc` and
/// `connect.cc`): inside each server a chain from local rank `head`
/// through `head + 1`, `head + 2`, ... (mod `local`), the order NCCL's
/// search takes through an NVSwitch (`ncclTopoSearchNextGpuSort`: the next
/// GPU first); the chain's first GPU, on rail `head`, links up to the
/// parent server's first GPU and down to the child servers' ones, as
/// `nodes` (a tree over the servers, `connectTrees`) says. Position
/// `s x local + l` is server `s`'s local rank `l`.
pub fn chained(nodes: &Tree, local: usize, head: usize) -> Tree {
    let servers = nodes.parent.len();
    let mut parent = vec![None; servers * local];
    for s in 0..servers {
        for i in 0..local {
            parent[s * local + (head + i) % local] = if i > 0 {
                Some(s * local + (head + i - 1) % local)
            } else {
                nodes.parent[s].map(|up| up * local + head)
            };
        }
    }
    Tree::from_parents(parent)
}

/// The GPUs of `group` by server: servers in index order, GPUs in
/// `group`'s order; `None` when a GPU has no server.
pub fn by_server(topo: &Topology, group: &[NodeIndex]) -> Option<Vec<Vec<NodeIndex>>> {
    let mut servers: std::collections::BTreeMap<u32, Vec<NodeIndex>> = Default::default();
    for &h in group {
        servers
            .entry(topo.node(h).coords.server?)
            .or_default()
            .push(h);
    }
    Some(servers.into_values().collect())
}

/// [`by_server`] when each server has the same count of GPUs, more than
/// one: the groups NCCL chains inside servers.
pub fn chain_servers(topo: &Topology, group: &[NodeIndex]) -> Option<Vec<Vec<NodeIndex>>> {
    let servers = by_server(topo, group)?;
    let local = servers.first()?.len();
    (local > 1 && servers.iter().all(|s| s.len() == local)).then_some(servers)
}

/// Double binary tree all-reduce (NCCL): `2 x channels` trees over the
/// group, alternately NCCL's first and second tree, each reducing its part
/// of every chunk up to its root and broadcasting it back down. Each edge
/// sends its chunks in order, as NCCL's one connection per peer and
/// channel does, so a chunk moves up while the previous one comes down.
/// `chunks` pieces, or NCCL's chunking when `None` ([`nccl_chunks`]).
/// False, with the builder refusing, when the trees would take more flows
/// than tasks may be.
pub fn double_binary_tree(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    size_bytes: u64,
    channels: u32,
    chunks: Option<u32>,
    entry: &HostTasks,
) -> bool {
    let trees = TreePipeline::new(group, channels);
    let depth = nccl_depth(group.len(), group.len());
    all_reduce(b, coll, trees, size_bytes, chunks, depth, entry)
}

/// NCCL's tree all-reduce over whole servers ([`chain_servers`]): per
/// local rank `h`, a chain through each server from GPU `h` and NCCL's two
/// trees among the servers' GPU `h` over rail `h` ([`chained`]), so
/// `2 x local` trees (whole rounds of them when `channels` asks for more),
/// each with its share, in `chunks` pieces or NCCL's ([`nccl_chunks`]).
/// False, with the builder refusing, when the trees would take more flows
/// than tasks may be.
pub fn server_double_binary_tree(
    b: &mut Builder,
    coll: u32,
    servers: &[Vec<NodeIndex>],
    size_bytes: u64,
    channels: u32,
    chunks: Option<u32>,
    entry: &HostTasks,
) -> bool {
    let trees = TreePipeline::on_servers(servers, channels);
    let depth = nccl_depth(trees.group.len(), servers.len());
    all_reduce(b, coll, trees, size_bytes, chunks, depth, entry)
}

/// NCCL's estimate of its trees' depth (NCCL 2.19 `connectTrees`):
/// `ranks / nodes - 1 + log2i(nodes)`, the chain inside a node and the
/// trees among the nodes.
pub fn nccl_depth(ranks: usize, nodes: usize) -> u64 {
    let nodes = nodes.max(1);
    (ranks / nodes) as u64 - 1 + u64::from(nodes.ilog2())
}

/// NCCL 2.19's chunk of a tree all-reduce in Simple (`src/enqueue.cc`,
/// `computeColl`): one step of the 4 MiB buffer, 512 KiB, halved while
/// each of the `channels` trees would take fewer than `8 x depth` chunks
/// (down to 128 KiB), fewer than `4 x depth` (down to 64 KiB), fewer than
/// `depth` (down to 32 KiB): small buffers in small chunks, so that the
/// pipeline fills.
pub fn nccl_chunk_bytes(size_bytes: u64, channels: u64, depth: u64) -> u64 {
    let mut chunk = TREE_CHUNK_BYTES;
    for (rounds, floor) in [(8, 128 << 10), (4, 64 << 10), (1, 32 << 10)] {
        while size_bytes / (channels.max(1) * chunk) < rounds * depth && chunk > floor {
            chunk /= 2;
        }
    }
    chunk
}

/// Pieces of `size_bytes` over `trees` trees of NCCL's `depth`: one chunk
/// of [`nccl_chunk_bytes`] per tree and piece.
pub fn nccl_chunks(size_bytes: u64, trees: u64, depth: u64) -> u32 {
    let per_piece = trees.max(1) * nccl_chunk_bytes(size_bytes, trees, depth);
    size_bytes.div_ceil(per_piece).clamp(1, u64::from(u32::MAX)) as u32
}

/// `size_bytes` all-reduced over `trees` in `chunks` pieces (NCCL's for
/// trees of `depth` when `None`), in order; false, with the builder
/// refusing, when they would take more flows than tasks may be.
fn all_reduce(
    b: &mut Builder,
    coll: u32,
    mut trees: TreePipeline,
    size_bytes: u64,
    chunks: Option<u32>,
    depth: u64,
    entry: &HostTasks,
) -> bool {
    let count = trees.shapes.len() as u64;
    let chunks = u64::from(chunks.unwrap_or_else(|| nccl_chunks(size_bytes, count, depth)));
    let members = trees.group.len() as u64;
    let flows = (count * chunks).saturating_mul(2 * members.saturating_sub(1));
    if flows > b.max_tasks() {
        b.refuse();
        return false;
    }
    for chunk in 0..chunks {
        if b.over() {
            return true;
        }
        trees.piece(b, coll, part(size_bytes, chunks, chunk), entry);
    }
    true
}

/// Per position, every flow so far up to its parent and down from it, how
/// many of an edge's flows may be in flight at once, and whether an edge's
/// flows queue on one queue pair ([`Builder::queue_after`]).
struct Edges<'a> {
    up: &'a mut [Vec<u32>],
    down: &'a mut [Vec<u32>],
    window: usize,
    queued: bool,
}

/// Flow `flow` onto an edge's `flows`, queued behind the previous one there
/// when `queued`.
fn push_edge(b: &mut Builder, flows: &mut Vec<u32>, flow: u32, queued: bool) {
    if let (true, Some(&ahead)) = (queued, flows.last()) {
        b.queue_after(flow, ahead);
    }
    flows.push(flow);
}

/// The latest of `flows`, `NONE` for none.
fn last(flows: &[u32]) -> u32 {
    flows.last().copied().unwrap_or(NONE)
}

/// The flow `window` back in `flows`, which the next must wait for.
fn back(flows: &[u32], window: usize) -> u32 {
    flows.len().checked_sub(window).map_or(NONE, |i| flows[i])
}

/// `bytes` reduced up `tree` (children before parents) and broadcast back
/// down from the root. A flow on an edge waits for the flow `window` back
/// on it (the previous piece there when `window` is 1).
fn pass(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    tree: &Tree,
    bytes: u64,
    entry: &HostTasks,
    edges: Edges,
) {
    let Edges {
        up,
        down,
        window,
        queued,
    } = edges;
    let live = |mut deps: Vec<u32>| {
        deps.retain(|&d| d != NONE);
        deps
    };
    for &pos in tree.order.iter().rev() {
        let Some(parent) = tree.parent[pos] else {
            continue;
        };
        let mut deps: Vec<u32> = tree.children[pos].iter().map(|&c| last(&up[c])).collect();
        deps.push(back(&up[pos], window));
        let deps = after_entry(entry, group[pos], &live(deps));
        let flow = b.flow(group[pos], group[parent], bytes, coll, &deps);
        push_edge(b, &mut up[pos], flow, queued);
    }
    for &pos in &tree.order {
        let received: Vec<u32> = match tree.parent[pos] {
            None => tree.children[pos].iter().map(|&c| last(&up[c])).collect(),
            Some(_) => vec![last(&down[pos])],
        };
        for &c in &tree.children[pos] {
            let mut deps = received.clone();
            deps.push(back(&down[c], window));
            let deps = after_entry(entry, group[pos], &live(deps));
            let flow = b.flow(group[pos], group[c], bytes, coll, &deps);
            push_edge(b, &mut down[c], flow, queued);
        }
    }
}

/// Flows of an edge of a chained tree ([`TreePipeline::on_servers`]) in
/// flight at once: NCCL keeps up to `NCCL_STEPS` (8) chunks in flight on a
/// connection (a step's slot is free again once the peer has taken it),
/// posted in order on one queue pair, so they leave back to back, each at
/// the link's rate, and an edge never idles for an acknowledgement. Each
/// flow queues behind the previous one of its edge
/// ([`Builder::queue_after`]) rather than sharing the link with it.
pub const CHAIN_WINDOW: usize = 8;

/// A double binary tree that takes its data one piece at a time, as a
/// pipeline stage does (and [`double_binary_tree`] its chunks): each
/// piece is split among the trees, and each edge sends its pieces in order
/// (a piece's flow on an edge waits for the previous piece's there), so
/// pieces leave the tree in the order they entered rather than all at the
/// end, sharing it.
pub struct TreePipeline {
    group: Vec<NodeIndex>,
    /// Every tree over the positions of `group`, each with an equal part.
    shapes: Vec<Tree>,
    /// Per tree and position, every flow so far up from it and down to it.
    up: Vec<Vec<Vec<u32>>>,
    down: Vec<Vec<Vec<u32>>>,
    /// Flows of an edge in flight at once.
    window: usize,
    /// Whether an edge's flows queue on one queue pair.
    queued: bool,
}

impl TreePipeline {
    /// `channels` tree pairs over `group`, nothing sent yet.
    pub fn new(group: &[NodeIndex], channels: u32) -> TreePipeline {
        let pair = double_tree(group.len());
        let shapes = (0..channels.max(1))
            .flat_map(|_| pair.iter().cloned())
            .collect();
        TreePipeline::of(group.to_vec(), shapes, 1, false)
    }

    /// NCCL's trees over whole servers ([`server_double_binary_tree`]),
    /// nothing sent yet.
    pub fn on_servers(servers: &[Vec<NodeIndex>], channels: u32) -> TreePipeline {
        let local = servers[0].len();
        let rounds = (channels.max(1) as usize).div_ceil(local);
        let nodes = double_tree(servers.len());
        let shapes = (0..rounds * local)
            .flat_map(|c| nodes.iter().map(move |t| chained(t, local, c % local)))
            .collect();
        TreePipeline::of(servers.concat(), shapes, CHAIN_WINDOW, true)
    }

    fn of(group: Vec<NodeIndex>, shapes: Vec<Tree>, window: usize, queued: bool) -> TreePipeline {
        let fresh = vec![vec![Vec::new(); group.len()]; shapes.len()];
        TreePipeline {
            group,
            shapes,
            up: fresh.clone(),
            down: fresh,
            window,
            queued,
        }
    }

    /// The next piece, `size_bytes` all-reduced over the group after
    /// `entry`; returns its first task.
    pub fn piece(&mut self, b: &mut Builder, coll: u32, size_bytes: u64, entry: &HostTasks) -> u32 {
        let first = b.task_count();
        let trees = self.up.len() as u64;
        for (t, (up, down)) in self.up.iter_mut().zip(&mut self.down).enumerate() {
            let bytes = part(size_bytes, trees, t as u64);
            let tree = &self.shapes[t];
            let (window, queued) = (self.window, self.queued);
            let edges = Edges {
                up,
                down,
                window,
                queued,
            };
            pass(b, coll, &self.group, tree, bytes, entry, edges);
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

    /// NCCL 2.19's depth estimate (`connectTrees`) and its chunk
    /// (`computeColl`), worked by hand: 2 servers of 8 GPUs are depth
    /// 7 + 1; 16 MiB over 16 trees halves 512 KiB twice (2, 4 < 64
    /// chunks a tree) to 128 KiB, then once (8 < 32) to 64 KiB; 1 MiB goes
    /// down to the 32 KiB floor; 4 GiB keeps 512 KiB (512 >= 64).
    #[test]
    fn nccl_chunks_follow_enqueue() {
        assert_eq!(nccl_depth(16, 2), 8);
        assert_eq!(nccl_depth(32, 4), 9);
        assert_eq!(nccl_depth(8, 8), 3, "one rank a node: log2 of the nodes");
        assert_eq!(nccl_depth(12, 12), 3);
        let k = 1u64 << 10;
        let chunk = |size: u64, trees: u64, depth: u64| nccl_chunk_bytes(size, trees, depth) / k;
        assert_eq!(chunk(16 << 20, 16, 8), 64);
        assert_eq!(chunk(1 << 20, 16, 8), 32);
        assert_eq!(
            chunk(256 << 20, 16, 8),
            256,
            "64 chunks a tree stops the halving"
        );
        assert_eq!(chunk(4 << 30, 16, 9), 512);
        assert_eq!(
            chunk(16 << 20, 2, 2),
            512,
            "4 hosts: 16 chunks a tree, 2 x 8"
        );
        assert_eq!(chunk(16 << 20, 2, 3), 256, "8 hosts: 16 < 24, once");
        assert_eq!(nccl_chunks(16 << 20, 16, 8), 16);
        assert_eq!(nccl_chunks(1 << 20, 16, 8), 2);
        assert_eq!(nccl_chunks(4 << 30, 16, 9), 512);
        assert_eq!(nccl_chunks(1000, 2, 1), 1);
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

    /// Parents of position `p` under `down/down/down->p->up` entries.
    fn check(t: &Tree, logged: &[(usize, Option<usize>, &[usize])]) {
        for &(p, up, down) in logged {
            assert_eq!(t.parent[p], up, "up of {p}");
            let mut kids = down.to_vec();
            kids.sort_unstable();
            assert_eq!(t.children[p], kids, "down of {p}");
        }
    }

    /// nccl-tests issue 128's `NCCL INFO Trees` lines, 2 servers of 4
    /// GPUs, channel 0: `[0] 1/4/-1->0->-1 [1] 1/-1/-1->0->4`,
    /// `[0] 5/-1/-1->4->0 [1] 5/0/-1->4->-1`, then `2->1->0`, `3->2->1`,
    /// `-1->3->2` in both trees, and server 1's chain alike.
    #[test]
    fn chain_inside_servers_is_nccls_log() {
        let [t0, t1] = double_tree(2).map(|t| chained(&t, 4, 0));
        let chain: [(usize, Option<usize>, &[usize]); 6] = [
            (1, Some(0), &[2]),
            (2, Some(1), &[3]),
            (3, Some(2), &[]),
            (5, Some(4), &[6]),
            (6, Some(5), &[7]),
            (7, Some(6), &[]),
        ];
        check(&t0, &[(0, None, &[1, 4]), (4, Some(0), &[5])]);
        check(&t1, &[(0, Some(4), &[1]), (4, None, &[5, 0])]);
        check(&t0, &chain);
        check(&t1, &chain);
        assert_eq!(t0.depth(), 4, "3 chain hops under server 1's head");
    }

    /// nccl-tests issue 133's lines, 2 servers of 8, channel 0 on local
    /// rank 4's NIC: `[0] 13/-1/-1->12->4 [1] 13/4/-1->12->-1`,
    /// `14->13->12`, `15->14->13`, `-1->11->10`: the chain starts at the
    /// head and wraps, 12 -> 13 -> 14 -> 15 -> 8 -> 9 -> 10 -> 11.
    #[test]
    fn chain_starts_at_its_rail_and_wraps() {
        let [t0, t1] = double_tree(2).map(|t| chained(&t, 8, 4));
        let chain: [(usize, Option<usize>, &[usize]); 4] = [
            (13, Some(12), &[14]),
            (14, Some(13), &[15]),
            (8, Some(15), &[9]),
            (11, Some(10), &[]),
        ];
        check(&t0, &[(12, Some(4), &[13]), (4, None, &[5, 12])]);
        check(&t1, &[(12, None, &[13, 4]), (4, Some(12), &[5])]);
        check(&t0, &chain);
        check(&t1, &chain);
    }

    /// Every GPU is at every chain position once over the `local` heads,
    /// so it touches `2 (local - 1)` chain edges per tree over them; a
    /// head's NIC carries its server's tree edges.
    #[test]
    fn chains_spread_over_every_rail() {
        let (servers, local) = (4, 8);
        let nodes = double_tree(servers);
        let mut nvlink = vec![0; servers * local];
        let mut nic = vec![0; servers * local];
        for t in &nodes {
            for h in 0..local {
                let tree = chained(t, local, h);
                for p in 0..servers * local {
                    let cross = tree.parent[p].iter().chain(&tree.children[p]);
                    for &q in cross {
                        if q / local == p / local {
                            nvlink[p] += 1;
                        } else {
                            nic[p] += 1;
                        }
                    }
                }
            }
        }
        assert!(nvlink.iter().all(|&e| e == 2 * 2 * (local - 1)));
        let want: Vec<usize> = (0..servers * local)
            .map(|p| [2, 4, 4, 2][p / local])
            .collect();
        assert_eq!(nic, want, "the servers' tree degrees, on every rail");
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
