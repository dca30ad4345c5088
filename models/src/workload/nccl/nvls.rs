//! NVLS (NVLink SHARP) all-reduce: the NVSwitch of a server reduces what
//! its GPUs write into it and multicasts the sum back (all-gather and
//! reduce-scatter through the same engine, see [`server_exchange`]), as an in-network
//! aggregation tree of one switch ([`crate::network::aggregation`]: the
//! same chunks, slots and multicast as a Tofino or SHARP switch, on the
//! NVSwitch's own NVLink ports and bandwidth). NVLS-Tree is NVLS inside
//! every server and a double binary tree across servers per rail.
//!
//! ```text
//!   NVLS:       GPU --S(n+1)/n--> NVSwitch engine --S(n+1)/n--> every GPU
//!               (reduce-scatter by ld_reduce: S up, S/n down; all-gather
//!               by multicast store: S/n up, S down; both share each port)
//!   NVLS-Tree:  per piece of the buffer, pipelined: an NVLS reduce-
//!               scatter in each server (S up, S/L down), for local rank k
//!               a tree of the servers' GPU k over rail k all-reduces
//!               shard k (S/L), an NVLS all-gather in each server (S/L
//!               up, S down)
//! ```
//! The NVSwitch's reduction and multicast engine passes at most
//! [`NVLS_ENGINE_PERMILLE`] of a port's NVLink rate: chunks queue for it
//! behind the ports ([`crate::workload::InaOp::engine_bps`]).
//! SimAI 1.6 runs NVLS as flows into and out of the NVSwitch in 4 chunks
//! of S/4 (single server only; NVLS-Tree is not generated): the same
//! bytes on every GPU-NVSwitch link each way, no engine
//! ([`mocknccl_all_reduce`], `--nvls-flows mocknccl`).

use crate::workload::algorithms::{self as algo, HostTasks, Pieces};
use crate::workload::spec::CollectiveOp;
use crate::workload::trees::TreePipeline;
use crate::workload::{Builder, InaKind, InaOp, InaPattern, TreeNode};
use netsim_engine::SimTime;
use netsim_topo::{NodeIndex, PortIndex, Role, Topology};

/// The NVSwitch's time to reduce a chunk: an assumption (NVIDIA publishes
/// no figure), small beside a chunk's serialisation.
pub const NVLS_PROCESSING: SimTime = SimTime::from_ns(100);

/// The NVSwitch's NVLink SHARP engine throughput behind each NVLink port,
/// in thousandths of the port's rate: NCCL's `nvlsEfficiency` for Hopper
/// (0.85, NCCL `src/graph/tuning.cc`). The limit is per port, not one
/// engine shared by the switch: the NVLS traffic a GPU's NVLinks carry
/// stays at 307-310 GB/s each way from 5 to 8 GPUs on an H100 server
/// (NCCL issue 1455's measurements, `busbw (n+1) / (2(n-1))`), where a
/// shared engine would give each port less as GPUs are added; it is 0.83
/// of the 370 GB/s point-to-point traffic reaches (NCCL's 20.6 GB/s per
/// H100 NVLink times 18). NVIDIA publishes no engine figure of its own.
pub const NVLS_ENGINE_PERMILLE: u64 = 850;

/// Bytes each direction of a GPU's NVLink carries in NCCL's NVLS
/// all-reduce of `size_bytes` over `n` GPUs: the reduce-scatter
/// (`multimem.ld_reduce`) sends the whole buffer up and its reduced shard
/// `S/n` down, the all-gather (`multimem.st`) sends the shard up and the
/// switch multicasts every shard down, `S` (NCCL's maintainers:
/// "send S, receive S/N" and back, NCCL issue 1083; nccl-tests issue 212:
/// `algbw = busbw n / (n+1)` for NVLS).
pub fn all_reduce_port_bytes(size_bytes: u64, n: usize) -> u64 {
    size_bytes.saturating_add(size_bytes.div_ceil(n.max(1) as u64))
}

/// Chunks a GPU keeps in flight into the NVSwitch: enough that the
/// window never limits an NVLink (a few microseconds of 9 KB chunks).
pub const NVLS_SLOTS: u32 = 1024;

/// The NVSwitch every GPU of `members` reaches directly, and each GPU's
/// port toward it; `None` when they do not share one.
fn nvswitch_of(
    topo: &Topology,
    members: &[NodeIndex],
) -> Option<(NodeIndex, Vec<(NodeIndex, PortIndex)>)> {
    let mut switch = None;
    let mut ports = Vec::with_capacity(members.len());
    for &m in members {
        let (i, p) = topo
            .ports(m)
            .iter()
            .enumerate()
            .find(|(_, p)| topo.role(p.peer) == Role::NvSwitch)?;
        if *switch.get_or_insert(p.peer) != p.peer {
            return None;
        }
        ports.push((m, i as PortIndex));
    }
    Some((switch?, ports))
}

/// NVLS all-reduce among `members` (GPUs of one server): each streams
/// `stream_bytes` into the NVSwitch in chunks of `chunk_bytes` after
/// `entry` and receives as much back, through the switch's engine; the
/// reason when they share no NVSwitch.
pub fn server_all_reduce(
    b: &mut Builder,
    topo: &Topology,
    coll: u32,
    members: &[NodeIndex],
    stream_bytes: u64,
    chunk_bytes: u32,
    entry: &HostTasks,
) -> Result<(), String> {
    let stream = Stream {
        bytes: stream_bytes,
        chunk_bytes,
        pattern: InaPattern::AllReduce,
        engine: true,
        release_chunks: 1,
    };
    server_op(b, topo, coll, members, stream, entry)
}

/// Chunks of SimAI 1.6's NVLS all-reduce (MockNccl's NVLS channel).
pub const MOCKNCCL_NVLS_CHUNKS: u64 = 4;

/// NVLS all-reduce of `size_bytes` among `members` (GPUs of one server) as
/// SimAI 1.6's MockNccl builds it (the committed `nvls-ar-8` list): every
/// GPU sends the buffer into the NVSwitch in [`MOCKNCCL_NVLS_CHUNKS`]
/// chunks of `S/4`, and the NVSwitch sends each chunk back to every GPU
/// once all GPUs' copies of it are in: `S` up and `S` down a GPU (no
/// shard), store and forward by chunk, no engine and no processing time
/// (SimAI's NVSwitch forwards at its links' rate). As the switch's
/// aggregation of packets of `chunk_bytes`, released down by groups of
/// `ceil(S/4 / chunk_bytes)` packets ([`InaOp::release_chunks`]; the last
/// group holds what is left, so it is shorter when `S/4` is not whole
/// packets): a GPU's chunks go up one after another (SimAI's FCT file:
/// each starts as the one before it is sent), so the last comes down one
/// group's time (about `S/4`) after the last went up, about `5/4` of one
/// pass.
pub fn mocknccl_all_reduce(
    b: &mut Builder,
    topo: &Topology,
    coll: u32,
    members: &[NodeIndex],
    size_bytes: u64,
    chunk_bytes: u32,
    entry: &HostTasks,
) -> Result<(), String> {
    let release_chunks = mocknccl_release_chunks(size_bytes, chunk_bytes)?;
    let stream = Stream {
        bytes: size_bytes,
        chunk_bytes,
        pattern: InaPattern::AllReduce,
        engine: false,
        release_chunks,
    };
    server_op(b, topo, coll, members, stream, entry)
}

/// Most packets in one of MockNccl's NVLS chunks: the NVSwitch keeps two
/// chunks' packets in flight (`slots`, allocated per operation), so above
/// this a run would allocate gigabytes.
pub const MOCKNCCL_MAX_GROUP_CHUNKS: u32 = 1 << 20;

/// Packets of `chunk_bytes` in one chunk of `S/4` of MockNccl's NVLS
/// all-reduce of `size_bytes` ([`InaOp::release_chunks`]), at most
/// [`MOCKNCCL_MAX_GROUP_CHUNKS`].
pub fn mocknccl_release_chunks(size_bytes: u64, chunk_bytes: u32) -> Result<u32, String> {
    let quarter = size_bytes.div_ceil(MOCKNCCL_NVLS_CHUNKS).max(1);
    let packets = quarter.div_ceil(u64::from(chunk_bytes.max(1)));
    u32::try_from(packets)
        .ok()
        .filter(|&p| p <= MOCKNCCL_MAX_GROUP_CHUNKS)
        .ok_or_else(|| {
            format!(
                "--nvls-flows mocknccl: a chunk of --size/4 = {quarter} B is {packets} packets of \
                 --mtu {chunk_bytes} B, over {MOCKNCCL_MAX_GROUP_CHUNKS}"
            )
        })
}

/// What each member streams into the NVSwitch, and where results go.
#[derive(Clone, Copy, Debug)]
struct Stream {
    bytes: u64,
    chunk_bytes: u32,
    pattern: InaPattern,
    /// The NVSwitch's NVLS engine and processing time (NCCL on Hopper);
    /// without, it forwards at its ports' rate (SimAI's MockNccl).
    engine: bool,
    /// [`InaOp::release_chunks`].
    release_chunks: u32,
}

/// One operation of the NVSwitch's engine among `members` after `entry`.
fn server_op(
    b: &mut Builder,
    topo: &Topology,
    coll: u32,
    members: &[NodeIndex],
    stream: Stream,
    entry: &HostTasks,
) -> Result<(), String> {
    let Stream {
        bytes: stream_bytes,
        chunk_bytes,
        pattern,
        engine,
        release_chunks,
    } = stream;
    if release_chunks > 1 && pattern == InaPattern::AllGather {
        // The switch passes a gathered chunk on per member's copy: there
        // is no reduced chunk to hold.
        return Err("release by group needs a reduction, not an all-gather".to_string());
    }
    let (switch, uplinks) = nvswitch_of(topo, members)
        .ok_or("NVLS needs the group's GPUs on one NVSwitch of their server")?;
    let port_bps = uplinks
        .iter()
        .map(|&(m, p)| topo.link(topo.port(m, p).link).bandwidth_bps)
        .min()
        .unwrap_or(0);
    let engine_bps = u64::try_from(u128::from(port_bps) * u128::from(NVLS_ENGINE_PERMILLE) / 1000)
        .expect("below the port's rate");
    let chunks = stream_bytes.div_ceil(u64::from(chunk_bytes));
    let chunks = u32::try_from(chunks).map_err(|_| "too many chunks".to_string())?;
    let mut child_ports: Vec<PortIndex> = uplinks
        .iter()
        .map(|&(m, p)| topo.port(m, p).peer_port)
        .collect();
    child_ports.sort_unstable();
    let op = b.ina_op(InaOp {
        collective: coll,
        kind: InaKind::Reduce,
        tree: vec![TreeNode {
            node: switch,
            parent_port: None,
            child_ports,
        }],
        size_bytes: stream_bytes,
        chunk_bytes,
        chunks,
        // A held group and the next one in flight.
        slots: NVLS_SLOTS.max(release_chunks.saturating_mul(2)),
        processing: if engine {
            NVLS_PROCESSING
        } else {
            SimTime::ZERO
        },
        engine_bps: engine.then_some(engine_bps.max(1)),
        release_chunks,
        pattern,
        members: uplinks.clone(),
    });
    for (m, _) in uplinks {
        let deps = entry.get(&m).map_or(&[][..], Vec::as_slice);
        b.flow_into(m, switch, stream_bytes, coll, op, deps);
    }
    Ok(())
}

/// NVLS all-gather or reduce-scatter (`op`) of `size_bytes` (the whole
/// buffer) among `members` (GPUs of one server) after `entry`, through the
/// same NVSwitch engine as [`server_all_reduce`]. NCCL's all-gather stores
/// a GPU's shard once (`multimem.st`, `S/n` up) and the switch multicasts
/// every shard down (`S`); its reduce-scatter loads the whole buffer
/// reduced by the switch (`multimem.ld_reduce`, `S` up, `S/n` down)
/// (NCCL `src/device/all_gather.h`, NVLS one-node branch: a send of the
/// rank's `count` to `nvls->down`, a gather of `nHeads x count` from
/// `nvls->up`; reduce-scatter: "send S, receive S/N", NCCL issue 1083).
#[allow(clippy::too_many_arguments)]
pub fn server_exchange(
    b: &mut Builder,
    topo: &Topology,
    coll: u32,
    op: CollectiveOp,
    members: &[NodeIndex],
    size_bytes: u64,
    chunk_bytes: u32,
    entry: &HostTasks,
) -> Result<(), String> {
    let stream = if op == CollectiveOp::AllGather {
        Stream {
            bytes: size_bytes.div_ceil(members.len().max(1) as u64).max(1),
            chunk_bytes,
            pattern: InaPattern::AllGather,
            engine: true,
            release_chunks: 1,
        }
    } else {
        Stream {
            bytes: size_bytes,
            chunk_bytes,
            pattern: InaPattern::ReduceScatter,
            engine: true,
            release_chunks: 1,
        }
    };
    server_op(b, topo, coll, members, stream, entry)
}

/// NVLS-Tree pipelines its buffer in pieces of at least this many bytes...
pub const NVLS_TREE_PIECE_BYTES: u64 = 1 << 20;
/// ... and of at most `S /` this many bytes (32 pieces or more from
/// 32 MiB): a piece's three stages overlap the next pieces', so the
/// pipeline's fill costs two pieces' bottleneck time.
pub const NVLS_TREE_MAX_PIECES: u64 = 32;
/// NCCL's NVLS channels on Hopper (`NVLS_NCHANNELS`, 16).
pub const NVLS_CHANNELS: u64 = 16;

/// NCCL's chunk per NVLS head and channel for an NVLS-Tree all-reduce of
/// `size_bytes` over `servers` servers with `heads` NVLS heads each (NCCL
/// 2.19 `src/enqueue.cc`, `computeColl`): one step of the 4 MiB Simple
/// buffer (`buffSize / NCCL_STEPS`, 512 KiB), 64 KiB on 4 servers or more,
/// halved while the buffer holds fewer than 32, 16, 4, 1 rounds of
/// `nChannels x nHeads` chunks, down to 256, 128, 64, 32 KiB.
pub fn tree_chunk_bytes(size_bytes: u64, servers: u64, heads: u64) -> u64 {
    let concurrent = NVLS_CHANNELS * heads.max(1);
    let mut chunk: u64 = if servers >= 4 { 64 << 10 } else { 512 << 10 };
    for (rounds, floor) in [
        (32, 256 << 10),
        (16, 128 << 10),
        (4, 64 << 10),
        (1, 32 << 10),
    ] {
        if size_bytes < rounds * concurrent * chunk && chunk > floor {
            chunk = floor;
        }
    }
    chunk
}

/// The bytes of one NVLS-Tree piece: `size / 32`, at least 1 MiB, and at
/// most one iteration of NCCL's loop, `loopSize = nChannels x nHeads x
/// chunkSize` (NCCL `src/device/all_reduce.h`, NVLS_TREE): each channel
/// takes one chunk per head per iteration, so no stage holds more at once.
pub fn tree_piece_bytes(size_bytes: u64, servers: u64, heads: u64) -> u64 {
    let loop_bytes = NVLS_CHANNELS * heads.max(1) * tree_chunk_bytes(size_bytes, servers, heads);
    (size_bytes / NVLS_TREE_MAX_PIECES)
        .max(NVLS_TREE_PIECE_BYTES)
        .min(loop_bytes)
        .max(1)
}

/// NVLS-Tree all-reduce over whole servers (`servers`: each server's GPUs
/// in local-rank order, the same count in each), as NCCL pipelines it: the
/// buffer in pieces, each an NVLS reduce-scatter in every server, a double
/// binary tree of shard `k` among the servers' GPU `k` (over rail `k`), and
/// an NVLS all-gather in every server. A stage takes a GPU's pieces in
/// order, so a piece's tree runs while the next piece is reduced and the
/// previous one gathered; in-server, the reduce-scatter loads the NVLinks
/// up and the all-gather down, as NCCL's `2 x intraBw` counts them.
#[allow(clippy::too_many_arguments)]
pub fn tree(
    b: &mut Builder,
    topo: &Topology,
    coll: u32,
    servers: &[Vec<NodeIndex>],
    size_bytes: u64,
    chunk_bytes: u32,
    tree_pieces: Pieces,
    entry: &HostTasks,
) -> Result<(), String> {
    let local = servers[0].len() as u64;
    let all: Vec<NodeIndex> = servers.concat();
    let pieces = size_bytes
        .div_ceil(tree_piece_bytes(size_bytes, servers.len() as u64, local))
        .max(1);
    let mut rails: Vec<TreePipeline> = (0..servers[0].len())
        .map(|k| {
            let rail: Vec<NodeIndex> = servers.iter().map(|s| s[k]).collect();
            TreePipeline::new(&rail, tree_pieces.channels)
        })
        .collect();
    let mut scattered = entry.clone();
    let mut gathered = HostTasks::new();
    for piece in 0..pieces {
        let bytes = (size_bytes / pieces + u64::from(piece < size_bytes % pieces)).max(1);
        let shard = bytes.div_ceil(local).max(1);
        let [scatter, gather] = [
            (bytes, InaPattern::ReduceScatter),
            (shard, InaPattern::AllGather),
        ]
        .map(|(bytes, pattern)| Stream {
            bytes,
            chunk_bytes,
            pattern,
            engine: true,
            release_chunks: 1,
        });
        let first = b.task_count();
        for s in servers {
            server_op(b, topo, coll, s, scatter, &scattered)?;
        }
        scattered = algo::exits(b, coll, first, &all);
        let mut reduced = gathered.clone();
        for (k, rail) in rails.iter_mut().enumerate() {
            let start = rail.piece(b, coll, shard, &scattered);
            let gpus: Vec<NodeIndex> = servers.iter().map(|s| s[k]).collect();
            for (gpu, exit) in algo::exits(b, coll, start, &gpus) {
                reduced.entry(gpu).or_default().extend(exit);
            }
        }
        let start = b.task_count();
        for s in servers {
            server_op(b, topo, coll, s, gather, &reduced)?;
        }
        gathered = algo::exits(b, coll, start, &all);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk of S/4 is whole packets, up to the bound; past it the
    /// error names the flags instead of allocating two chunks' slots.
    #[test]
    fn mocknccl_chunks_are_bounded_and_named() {
        assert_eq!(mocknccl_release_chunks(1 << 20, 4096), Ok(64));
        assert_eq!(mocknccl_release_chunks(1_000_001, 4096), Ok(62));
        let max = u64::from(MOCKNCCL_MAX_GROUP_CHUNKS);
        assert_eq!(
            mocknccl_release_chunks(4 * max * 64, 64),
            Ok(MOCKNCCL_MAX_GROUP_CHUNKS)
        );
        for size in [4 * max * 64 + 1, 1 << 36, u64::MAX] {
            let why = mocknccl_release_chunks(size, 64).expect_err("over the bound");
            assert!(why.contains("--size") && why.contains("--mtu 64"), "{why}");
        }
    }
}
