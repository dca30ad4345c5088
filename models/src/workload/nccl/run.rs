//! One collective as NCCL runs it: the algorithm and protocol (asked for,
//! or chosen by [`super::tuning`]), the protocol's latency before the
//! first send and its flag bytes on every flow, rings per rail with PXN
//! relays, NVLS and NVLS-Tree over the NVSwitch.

use super::tuning::{self, Shape};
use super::{delayed, label, nvls, Nccl, NcclAlgo, Protocol};
use crate::workload::algorithms::{self as algo, HostTasks, Pieces, RingSpec};
use crate::workload::{trees, Algorithm, Builder, CollectiveOp, OpSpec};
use netsim_engine::SimTime;
use netsim_topo::{NodeIndex, Role, Topology};

/// What the builder knows that NCCL's model needs.
pub struct Ctx<'a> {
    pub topo: &'a Topology,
    pub nccl: Nccl,
    /// `--channels`: parallel rings at least (rails set the least over
    /// whole servers).
    pub channels: u32,
    /// Chunking of a tree's halves (NVLS-Tree's trees among the servers).
    pub tree_pieces: Pieces,
    /// Pieces of a tree all-reduce, as asked (`--chunks`); NCCL's when
    /// `None`.
    pub chunks: Option<u32>,
    /// NVLS streams chunks of this size (the fabric's MTU).
    pub mtu_bytes: u32,
    /// NVLS, as in-network aggregation, needs a lossless fabric.
    pub pfc: bool,
}

/// What [`collective`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The collective's flows are built.
    Built,
    /// Not NCCL's to run here: build it as host algorithm `.0`.
    Host(Algorithm),
}

/// Bandwidth of `host`'s first link to a node of role `nvswitch` or not.
fn link_bps(topo: &Topology, host: NodeIndex, nvswitch: bool) -> u64 {
    topo.ports(host)
        .iter()
        .find(|p| (topo.role(p.peer) == Role::NvSwitch) == nvswitch)
        .map_or(0, |p| topo.link(p.link).bandwidth_bps)
}

/// What SimAI 1.6's MockNccl picks (`get_algo_proto_info`): NVLS for an
/// all-reduce of 8 or more H100-class ranks with `AS_NVLS_ENABLE`, the
/// ring for everything else, at any size.
fn simai_choice(shape: &Shape, nvls: bool) -> NcclAlgo {
    if shape.op == CollectiveOp::AllReduce && shape.hopper && shape.ranks >= 8 && nvls {
        NcclAlgo::Nvls
    } else {
        NcclAlgo::Ring
    }
}

/// Adds `op` on `group` (not folded) as NCCL runs it, or says which host
/// algorithm to build instead (operations NCCL's model does not cover).
pub fn collective(
    b: &mut Builder,
    cx: &Ctx,
    coll: u32,
    op: &OpSpec,
    group: &[NodeIndex],
    entry: &HostTasks,
) -> Outcome {
    let covered = matches!(
        op.op,
        CollectiveOp::AllReduce | CollectiveOp::AllGather | CollectiveOp::ReduceScatter
    );
    let asked = match op.algorithm {
        Algorithm::Ring => Some(NcclAlgo::Ring),
        Algorithm::Tree if op.op == CollectiveOp::AllReduce => Some(NcclAlgo::Tree),
        Algorithm::Nvls => Some(NcclAlgo::Nvls),
        Algorithm::NvlsTree => Some(NcclAlgo::NvlsTree),
        Algorithm::Auto => None,
        other => return Outcome::Host(other),
    };
    let servers = trees::by_server(cx.topo, group);
    let Some(servers) = servers.filter(|_| covered && group.len() > 1) else {
        return Outcome::Host(match asked {
            Some(NcclAlgo::Tree) => Algorithm::Tree,
            _ if op.algorithm == Algorithm::Auto => op.op.default_algorithm(),
            _ => Algorithm::Ring,
        });
    };
    let whole = servers.len() > 1
        && servers[0].len() > 1
        && servers.iter().all(|s| s.len() == servers[0].len());
    let local = if whole { servers[0].len() as u32 } else { 1 };
    let shape = Shape {
        op: op.op,
        ranks: group.len() as u32,
        servers: servers.len() as u32,
        size_bytes: op.size_bytes,
        channels: cx.channels.max(local),
        nvlink_bps: link_bps(cx.topo, group[0], true),
        nic_bps: link_bps(cx.topo, group[0], false),
        hopper: tuning::is_hopper(cx.topo.gpu_type()),
        nvls: cx.nccl.nvls && cx.pfc,
    };
    let (mut algo, mut proto) = match asked {
        None if cx.nccl.simai_choice => (
            simai_choice(&shape, cx.nccl.nvls),
            cx.nccl.protocol.unwrap_or(Protocol::Simple),
        ),
        None => tuning::choose(&shape, cx.nccl.protocol),
        Some(a) => (a, best_protocol(&shape, a, cx.nccl.protocol)),
    };
    // NVLS across servers needs the network's SHARP too: NCCL runs
    // NVLS-Tree there; a group that is not whole servers runs the ring.
    if algo == NcclAlgo::Nvls && servers.len() > 1 {
        algo = NcclAlgo::NvlsTree;
    }
    let nvls = matches!(algo, NcclAlgo::Nvls | NcclAlgo::NvlsTree);
    let reduces = op.op == CollectiveOp::AllReduce;
    // NVLS all-gather and reduce-scatter are plain NVLink flows (no
    // in-network state), so they need no lossless fabric, but only one
    // server's NVSwitch: NCCL's multi-node variants are not modelled.
    let why = match (nvls, reduces) {
        (false, _) => None,
        (true, false) if algo == NcclAlgo::NvlsTree => Some(
            "NVLS all-gather and reduce-scatter are modelled inside one server: across servers they run the ring",
        ),
        (true, false) => None,
        (true, true) if !cx.pfc => Some(
            "NVLS reduces in the NVSwitch as in-network aggregation: it needs a lossless fabric (--pfc on)",
        ),
        (true, true) if algo == NcclAlgo::NvlsTree && !whole => {
            Some("NVLS-Tree needs whole servers with the same GPUs in each")
        }
        (true, true) => None,
    };
    if let Some(why) = why {
        b.collective_mut(coll).fallback_reason = Some(why.into());
        algo = NcclAlgo::Ring;
        proto = best_protocol(&shape, algo, cx.nccl.protocol);
    }
    let latency = if cx.nccl.tuning_latency {
        tuning::latency(&shape, algo, proto)
    } else {
        SimTime::ZERO
    };
    let entry = delayed(b, coll, group, latency, entry);
    let size = proto.wire_bytes(op.size_bytes);
    let pxn = cx.nccl.pxn && whole && algo == NcclAlgo::Ring;
    b.collective_mut(coll).algorithm = label(algo, pxn, proto);
    let whole_servers = whole.then_some(&servers[..]);
    // A ring inside one server runs one channel per GPU too (SimAI's
    // `gen_local_ring`; NCCL's NVLink rings are more); the tuning above
    // keeps its channels, so what `auto` picks is unchanged.
    let channels = if servers.len() == 1 {
        cx.channels.max(group.len() as u32)
    } else {
        shape.channels
    };
    build(
        b,
        cx,
        coll,
        op.op,
        group,
        whole_servers,
        algo,
        size,
        channels,
        &entry,
    );
    Outcome::Built
}

/// The protocol for `algo`: the one asked for where `algo` runs it, or
/// the tuning model's fastest.
fn best_protocol(shape: &Shape, algo: NcclAlgo, asked: Option<Protocol>) -> Protocol {
    if matches!(algo, NcclAlgo::Nvls | NcclAlgo::NvlsTree) {
        return Protocol::Simple;
    }
    asked.unwrap_or_else(|| {
        Protocol::ALL
            .into_iter()
            .min_by(|&p, &q| {
                tuning::time_us(shape, algo, p).total_cmp(&tuning::time_us(shape, algo, q))
            })
            .unwrap_or(Protocol::Simple)
    })
}

/// The flows of `algo` with wire size `size` (flags included); a ring
/// that does not span whole servers runs `channels` channels.
#[allow(clippy::too_many_arguments)]
fn build(
    b: &mut Builder,
    cx: &Ctx,
    coll: u32,
    op: CollectiveOp,
    group: &[NodeIndex],
    servers: Option<&[Vec<NodeIndex>]>,
    algo: NcclAlgo,
    size: u64,
    channels: u32,
    entry: &HostTasks,
) {
    let n = group.len() as u32;
    let steps = if op == CollectiveOp::AllReduce {
        2 * (n - 1)
    } else {
        n - 1
    };
    match (algo, servers) {
        (NcclAlgo::Ring, Some(servers)) => {
            rail_rings(b, cx, coll, servers, size, steps, entry);
        }
        (NcclAlgo::Ring, None) => {
            let pieces = Pieces {
                channels,
                chunks: 1,
            };
            algo::ring(b, coll, group, size, steps, pieces, entry);
        }
        (NcclAlgo::Tree, _) => {
            let channels = cx.tree_pieces.channels;
            match trees::chain_servers(cx.topo, group) {
                Some(servers) => {
                    trees::server_double_binary_tree(
                        b, coll, &servers, size, channels, cx.chunks, entry,
                    );
                }
                None => {
                    trees::double_binary_tree(b, coll, group, size, channels, cx.chunks, entry);
                }
            }
        }
        (NcclAlgo::Nvls, _) => {
            // Checked by the caller: one server's GPUs on its NVSwitch.
            let r = if op == CollectiveOp::AllReduce && cx.nccl.mocknccl_nvls {
                nvls::mocknccl_all_reduce(b, cx.topo, coll, group, size, cx.mtu_bytes, entry)
            } else if op == CollectiveOp::AllReduce {
                let stream = nvls::all_reduce_port_bytes(size, group.len());
                nvls::server_all_reduce(b, cx.topo, coll, group, stream, cx.mtu_bytes, entry)
            } else {
                nvls::server_exchange(b, cx.topo, coll, op, group, size, cx.mtu_bytes, entry)
            };
            if let Err(why) = r {
                fall_back(b, cx, coll, group, size, steps, why, entry);
            }
        }
        (NcclAlgo::NvlsTree, Some(servers)) => {
            let r = nvls::tree(
                b,
                cx.topo,
                coll,
                servers,
                size,
                cx.mtu_bytes,
                cx.tree_pieces,
                entry,
            );
            if let Err(why) = r {
                fall_back(b, cx, coll, group, size, steps, why, entry);
            }
        }
        (NcclAlgo::NvlsTree, None) => unreachable!("NVLS-Tree runs on whole servers only"),
    }
}

/// The ring, when NVLS found no NVSwitch to reduce in.
#[allow(clippy::too_many_arguments)]
fn fall_back(
    b: &mut Builder,
    cx: &Ctx,
    coll: u32,
    group: &[NodeIndex],
    size: u64,
    steps: u32,
    why: String,
    entry: &HostTasks,
) {
    let c = b.collective_mut(coll);
    c.fallback_reason = Some(why);
    c.algorithm = "ring";
    let pieces = Pieces {
        channels: cx.channels,
        chunks: 1,
    };
    algo::ring(b, coll, group, size, steps, pieces, entry);
}

/// NCCL's rings over whole servers, one per local rank (more, in whole
/// rounds, when `--channels` asks), each leaving a server on its own
/// rail; with PXN the hop out of a server is relayed over NVLink to the
/// GPU on the next server's entry rail, so it crosses one rail switch.
fn rail_rings(
    b: &mut Builder,
    cx: &Ctx,
    coll: u32,
    servers: &[Vec<NodeIndex>],
    size_bytes: u64,
    steps: u32,
    entry: &HostTasks,
) {
    let rails = algo::rail_rings(servers);
    let rounds = (cx.channels as usize).div_ceil(rails.len());
    let members = servers.iter().map(Vec::len).sum::<usize>() as u64;
    // Refused before the rings size their buffers for that many flows.
    if ((rounds * rails.len()) as u64).saturating_mul(members) > b.max_tasks() {
        b.refuse();
        return;
    }
    let orders: Vec<Vec<NodeIndex>> = rails
        .iter()
        .cycle()
        .take(rounds * rails.len())
        .cloned()
        .collect();
    // (server, local rank) of every member, to find a relay.
    let place: std::collections::HashMap<NodeIndex, (usize, usize)> = servers
        .iter()
        .enumerate()
        .flat_map(|(s, gpus)| gpus.iter().enumerate().map(move |(l, &g)| (g, (s, l))))
        .collect();
    let pxn = cx.nccl.pxn;
    let relay = |src: NodeIndex, dst: NodeIndex| -> Option<NodeIndex> {
        let (s, _) = place[&src];
        let (d, l) = place[&dst];
        let r = servers[s][l];
        (pxn && s != d && r != src).then_some(r)
    };
    let ring = RingSpec {
        ranks: orders[0].len(),
        size_bytes,
        steps,
        chunks: 1,
    };
    algo::relayed_rings(b, coll, &orders, ring, entry, &relay);
}
