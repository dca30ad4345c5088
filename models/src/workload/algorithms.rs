//! Host collective algorithms, each decomposed into flows whose
//! dependencies are local to one host (see the module above).
//!
//! Every function takes `entry`: per group member, the tasks that must
//! complete at that host before it starts its part (a previous phase), and
//! adds the collective's flows to the builder. [`exits`] then joins, per
//! host, everything the host sent and received: that host's part is done.
//!
//! Sizes follow NCCL's conventions: `size_bytes` is the all-reduce buffer,
//! the all-gather output, the reduce-scatter input, the broadcast/reduce
//! buffer, and each rank's whole send buffer for all-to-all.

use super::{Builder, TaskKind, NONE};
use netsim_topo::NodeIndex;
use std::collections::BTreeMap;

/// Per host: tasks whose completion (seen at that host) gates or ends a part.
pub type HostTasks = BTreeMap<NodeIndex, Vec<u32>>;

/// Message of a software barrier round, payload bytes.
pub const BARRIER_MESSAGE_BYTES: u64 = 8;

/// How a collective's data is cut into flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pieces {
    /// Parallel rings/trees, each with its own queue pairs (and ECMP paths).
    pub channels: u32,
    /// Pipelining: each step's data is sent as this many flows, and the next
    /// step of a chunk waits only for the same chunk of the previous step.
    pub chunks: u32,
}

/// `total` split into `parts` nearly equal sizes, at least one byte each.
pub(super) fn part(total: u64, parts: u64, i: u64) -> u64 {
    (total / parts + u64::from(i < total % parts)).max(1)
}

fn entry_of(entry: &HostTasks, host: NodeIndex) -> &[u32] {
    entry.get(&host).map_or(&[], Vec::as_slice)
}

/// `deps` plus the host's entry: a rank never acts before its previous
/// phase is done there, even when data from its peers arrives earlier.
pub(super) fn after_entry(entry: &HostTasks, host: NodeIndex, deps: &[u32]) -> Vec<u32> {
    let mut all = entry_of(entry, host).to_vec();
    all.extend_from_slice(deps);
    all
}

/// Ring over `group`: `steps` steps, each sending `size/N` from every rank
/// to the next; step `s` of a chunk waits for step `s-1` of that chunk to
/// arrive. All-reduce is `2(N-1)` steps (reduce-scatter then all-gather),
/// reduce-scatter and all-gather `N-1`.
pub fn ring(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    size_bytes: u64,
    steps: u32,
    pieces: Pieces,
    entry: &HostTasks,
) {
    folded_ring(
        b,
        coll,
        group,
        group.len(),
        size_bytes,
        steps,
        pieces,
        entry,
    );
}

/// [`ring`] over the simulated members `group` of a ring of `ranks`
/// members (a folded data-parallel group: each member stands for
/// `ranks / group.len()`): every step sends `size/ranks`, as the whole ring
/// would, between the members `group` lists next to each other.
#[allow(clippy::too_many_arguments)]
pub fn folded_ring(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    ranks: usize,
    size_bytes: u64,
    steps: u32,
    pieces: Pieces,
    entry: &HostTasks,
) {
    let orders = vec![group.to_vec(); pieces.channels as usize];
    channel_rings(
        b,
        coll,
        &orders,
        ranks,
        size_bytes,
        steps,
        pieces.chunks,
        entry,
    );
}

/// The rings NCCL builds over whole servers on a rail-optimized fabric
/// (`servers`: the group's GPUs by server, each server's in local-rank
/// order, `L` of them): ring `c` visits every server in turn and, inside
/// each, local ranks `c, c + 1, ..., c + L - 1 (mod L)`, so it enters a
/// server on rail `c` and leaves it from rail `c - 1`: the `L` rings'
/// inter-server traffic spreads over every NIC of a server (SimAI's
/// MockNccl: one ring per local rank).
pub fn rail_rings(servers: &[Vec<NodeIndex>]) -> Vec<Vec<NodeIndex>> {
    let local = servers.first().map_or(0, Vec::len);
    (0..local)
        .map(|c| {
            servers
                .iter()
                .flat_map(|s| (0..local).map(move |j| s[(c + j) % local]))
                .collect()
        })
        .collect()
}

/// Rings with one order per channel: channel `c` runs over `orders[c]`
/// (every order a permutation of the same members, standing for a ring of
/// `ranks`), each step sending `size/ranks` split evenly over the channels
/// and `chunks` flows each; a flow waits for the flow of its channel and
/// chunk its sender received in the previous step.
#[allow(clippy::too_many_arguments)]
pub fn channel_rings(
    b: &mut Builder,
    coll: u32,
    orders: &[Vec<NodeIndex>],
    ranks: usize,
    size_bytes: u64,
    steps: u32,
    chunks: u32,
    entry: &HostTasks,
) {
    let ring = RingSpec {
        ranks,
        size_bytes,
        steps,
        chunks,
    };
    relayed_rings(b, coll, orders, ring, entry, &|_, _| None);
}

/// The size and steps of [`relayed_rings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSpec {
    /// Members the ring stands for (each step sends `size/ranks`).
    pub ranks: usize,
    pub size_bytes: u64,
    pub steps: u32,
    /// Flows per step and channel.
    pub chunks: u32,
}

/// [`channel_rings`] where a hop `src -> dst` for which `relay` names a
/// member `r` goes `src -> r -> dst`, the second flow after the first
/// arrives at `r` (NCCL's PXN: a GPU hands an inter-server send over
/// NVLink to the GPU of its server on the destination's rail).
pub fn relayed_rings(
    b: &mut Builder,
    coll: u32,
    orders: &[Vec<NodeIndex>],
    ring: RingSpec,
    entry: &HostTasks,
    relay: &dyn Fn(NodeIndex, NodeIndex) -> Option<NodeIndex>,
) {
    let n = orders[0].len();
    let per_step = ring.size_bytes.div_ceil(ring.ranks as u64);
    let chunks = ring.chunks as usize;
    let pieces = orders.len() * chunks;
    // prev[i * pieces + p]: the flow of piece p (channel p / chunks) that
    // position i of its ring sent in the previous step (it arrives at
    // position i + 1).
    let mut prev: Vec<u32> = Vec::with_capacity(n * pieces);
    for step in 0..ring.steps {
        if b.over() {
            return;
        }
        let mut sent = Vec::with_capacity(prev.capacity());
        for i in 0..n {
            for p in 0..pieces {
                b.set_channel(p / chunks);
                let order = &orders[p / chunks];
                let (src, dst) = (order[i], order[(i + 1) % n]);
                let bytes = part(per_step, pieces as u64, p as u64);
                let deps = if step == 0 {
                    entry_of(entry, src).to_vec()
                } else {
                    let received = prev[((i + n - 1) % n) * pieces + p];
                    after_entry(entry, src, &[received])
                };
                let task = match relay(src, dst) {
                    None => b.flow(src, dst, bytes, coll, &deps),
                    Some(r) => {
                        let hop = b.flow(src, r, bytes, coll, &deps);
                        b.flow(r, dst, bytes, coll, &after_entry(entry, r, &[hop]))
                    }
                };
                sent.push(task);
            }
        }
        prev = sent;
    }
    b.set_channel(0);
}

fn heap_children(pos: usize, n: usize) -> impl Iterator<Item = usize> {
    [2 * pos + 1, 2 * pos + 2]
        .into_iter()
        .filter(move |&c| c < n)
}

/// Which halves recursive halving-doubling runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalvingDoubling {
    /// Reduce-scatter by recursive halving, then all-gather by doubling.
    AllReduce,
    ReduceScatter,
    AllGather,
}

/// Recursive halving-doubling (Rabenseifner). A group that is not a power
/// of two first folds its `2r` extra ranks pairwise (the even one sends its
/// whole buffer to the odd one), and unfolds at the end.
pub fn halving_doubling(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    size_bytes: u64,
    what: HalvingDoubling,
    entry: &HostTasks,
) {
    let n = group.len();
    let p2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let extra = n - p2;
    // The last task each active rank received (gating its next send).
    let mut gate: Vec<Vec<u32>> = Vec::with_capacity(p2);
    let mut active: Vec<NodeIndex> = Vec::with_capacity(p2);
    for i in 0..extra {
        let (even, odd) = (group[2 * i], group[2 * i + 1]);
        let fold = b.flow(even, odd, size_bytes, coll, entry_of(entry, even));
        let mut deps = entry_of(entry, odd).to_vec();
        deps.push(fold);
        active.push(odd);
        gate.push(deps);
    }
    for &r in &group[2 * extra..] {
        active.push(r);
        gate.push(entry_of(entry, r).to_vec());
    }
    let rounds = p2.trailing_zeros();
    let mut exchange = |distance: usize, bytes: u64, gate: &mut Vec<Vec<u32>>| {
        let mut sent = vec![NONE; p2];
        for idx in 0..p2 {
            sent[idx] = b.flow(active[idx], active[idx ^ distance], bytes, coll, &gate[idx]);
        }
        for idx in 0..p2 {
            gate[idx] = after_entry(entry, active[idx], &[sent[idx ^ distance]]);
        }
    };
    if what != HalvingDoubling::AllGather {
        for k in 0..rounds {
            exchange(
                p2 >> (k + 1),
                size_bytes.div_ceil(2u64 << k).max(1),
                &mut gate,
            );
        }
    }
    if what != HalvingDoubling::ReduceScatter {
        for k in (0..rounds).rev() {
            exchange(
                p2 >> (k + 1),
                size_bytes.div_ceil(2u64 << k).max(1),
                &mut gate,
            );
        }
    }
    if what == HalvingDoubling::AllReduce {
        for i in 0..extra {
            let (even, odd) = (group[2 * i], group[2 * i + 1]);
            b.flow(odd, even, size_bytes, coll, &gate[i]);
        }
    }
}

/// Every rank sends `size/N` to every other rank, all at once.
pub fn all_to_all(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    size_bytes: u64,
    pieces: Pieces,
    entry: &HostTasks,
) {
    let n = group.len();
    let per_peer = size_bytes.div_ceil(n as u64);
    for shift in 1..n {
        if b.over() {
            return;
        }
        for i in 0..n {
            let (src, dst) = (group[i], group[(i + shift) % n]);
            for c in 0..u64::from(pieces.channels) {
                let bytes = part(per_peer, u64::from(pieces.channels), c);
                b.flow(src, dst, bytes, coll, entry_of(entry, src));
            }
        }
    }
}

/// Broadcast from `group[0]` or reduce to it, over a pipelined chain or a
/// binary tree, chunk by chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rooted {
    pub reduce: bool,
    /// A binary tree rather than a chain.
    pub tree: bool,
}

pub fn rooted(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    size_bytes: u64,
    Rooted { reduce, tree }: Rooted,
    pieces: Pieces,
    entry: &HostTasks,
) {
    let n = group.len();
    // parent[pos] in a chain (pos - 1) or a binary heap ((pos - 1) / 2).
    let parent = |pos: usize| if tree { (pos - 1) / 2 } else { pos - 1 };
    let children = |pos: usize| -> Vec<usize> {
        if tree {
            heap_children(pos, n).collect()
        } else if pos + 1 < n {
            vec![pos + 1]
        } else {
            Vec::new()
        }
    };
    let chunks = u64::from(pieces.chunks) * u64::from(pieces.channels);
    for chunk in 0..chunks {
        if b.over() {
            return;
        }
        let bytes = part(size_bytes, chunks, chunk);
        let mut flow_into = vec![NONE; n];
        if reduce {
            // flow_into[pos]: the flow pos sends up.
            for pos in (1..n).rev() {
                let kids = children(pos);
                let received: Vec<u32> = kids.iter().map(|&k| flow_into[k]).collect();
                let deps = after_entry(entry, group[pos], &received);
                flow_into[pos] = b.flow(group[pos], group[parent(pos)], bytes, coll, &deps);
            }
        } else {
            // flow_into[pos]: the flow that brings pos the chunk.
            for pos in 1..n {
                let from = parent(pos);
                let received: &[u32] = if from == 0 { &[] } else { &[flow_into[from]] };
                let deps = after_entry(entry, group[from], received);
                flow_into[pos] = b.flow(group[from], group[pos], bytes, coll, &deps);
            }
        }
    }
}

/// Dissemination barrier: in round `k` rank `i` signals rank `i + 2^k` and
/// waits for rank `i - 2^k`; after `ceil(log2 N)` rounds all have arrived.
pub fn dissemination_barrier(b: &mut Builder, coll: u32, group: &[NodeIndex], entry: &HostTasks) {
    let n = group.len();
    let mut received: Vec<Option<u32>> = vec![None; n];
    let mut distance = 1;
    while distance < n {
        let mut sent = vec![NONE; n];
        for i in 0..n {
            let deps = after_entry(entry, group[i], received[i].as_slice());
            sent[i] = b.flow(
                group[i],
                group[(i + distance) % n],
                BARRIER_MESSAGE_BYTES,
                coll,
                &deps,
            );
        }
        for i in 0..n {
            received[(i + distance) % n] = Some(sent[i]);
        }
        distance *= 2;
    }
}

/// Per member of `group`: a join of every task of collective `coll` (from
/// task `first` on) that the member saw complete: its part is done.
pub fn exits(b: &mut Builder, coll: u32, first: u32, group: &[NodeIndex]) -> HostTasks {
    let mut seen: HostTasks = group.iter().map(|&h| (h, Vec::new())).collect();
    for t in first..b.task_count() {
        let task = b.task_at(t);
        if task.collective != coll {
            continue;
        }
        let mut add = |h: NodeIndex| {
            if let Some(v) = seen.get_mut(&h) {
                v.push(t);
            }
        };
        match b.kind(&task) {
            TaskKind::Flow(f) => {
                let f = b.flow_spec(f);
                add(f.src);
                add(f.dst);
            }
            TaskKind::Compute(_) => add(task.host),
        }
    }
    seen.into_iter()
        .map(|(h, deps)| (h, vec![b.join(h, coll, &deps)]))
        .collect()
}
