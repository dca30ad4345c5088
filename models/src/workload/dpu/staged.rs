//! DPU-Bench's staged collectives as task DAGs: workers on DPU cores move
//! the data with RDMA reads and writes, host processes only hand over; and
//! the pure-host reference, where each host process moves its own data.
//!
//! An RDMA read is a request message from the reader to the data's owner,
//! then the data flowing back; a write is the data flowing out, complete at
//! the writer when acknowledged. A core (a worker, or one host process)
//! spends [`CoreCost::post`] per operation it posts and [`CoreCost::poll`]
//! per completion it reaps, one after another: posts and polls are compute
//! tasks chained on the core. A worker posts all its reads, then, as each
//! read is reaped in order, posts the writes that forward that data, and
//! finally reaps the writes; so reads and writes of different items overlap
//! while the core stays serial.

use crate::dpu::DpuFabric;
use crate::workload::{Builder, Collective, CollectiveOp, NONE};
use netsim_engine::SimTime;
use netsim_topo::NodeIndex;

/// Wire bytes of a control message: an RDMA read request, a hand-over or
/// completion notice between a host process and its worker.
pub const CONTROL_BYTES: u64 = 64;

/// The four DPU-Bench patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// Every worker reads the root's buffer, then writes it to its host processes.
    Broadcast,
    /// Workers read their host processes' blocks and write each to the root.
    Gather,
    /// Workers read their host processes' blocks and write them to one
    /// leader worker, which then writes the whole buffer to every process.
    AllgatherSingleLeader,
    /// Each worker reads its processes' blocks and writes each to every process.
    AllgatherAllIn,
}

impl Pattern {
    /// Every pattern, in the order the benchmark runs them.
    pub const ALL: [Pattern; 4] = [
        Pattern::Broadcast,
        Pattern::Gather,
        Pattern::AllgatherSingleLeader,
        Pattern::AllgatherAllIn,
    ];

    /// The name in the `pattern` column and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Broadcast => "broadcast",
            Pattern::Gather => "gather",
            Pattern::AllgatherSingleLeader => "allgather_single_leader",
            Pattern::AllgatherAllIn => "allgather_all_in",
        }
    }

    /// The pattern called `name`.
    pub fn parse(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// How host processes are dealt to workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Assign {
    /// Round robin: process `p` goes to worker `p mod W`.
    Cyclic,
    /// Contiguous blocks of `P / W` processes; the last worker also takes the remainder.
    Block,
}

impl Assign {
    pub const ALL: [Assign; 2] = [Assign::Cyclic, Assign::Block];

    pub fn name(self) -> &'static str {
        match self {
            Assign::Cyclic => "cyclic",
            Assign::Block => "block",
        }
    }

    pub fn parse(name: &str) -> Option<Assign> {
        Assign::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The processes of each of `workers` workers, out of `procs`.
    pub fn deal(self, procs: u32, workers: u32) -> Vec<Vec<u32>> {
        assert!(workers >= 1 && workers <= procs);
        let mut out = vec![Vec::new(); workers as usize];
        for p in 0..procs {
            let w = match self {
                Assign::Cyclic => p % workers,
                Assign::Block => (p / (procs / workers)).min(workers - 1),
            };
            out[w as usize].push(p);
        }
        out
    }
}

/// Per-operation costs of one core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreCost {
    pub post: SimTime,
    pub poll: SimTime,
}

/// Where processes and workers sit: `ppn` host processes per server on the
/// first `nodes` servers and `workers` workers on their DPUs, both launched
/// round robin over the nodes (MPI's `--map-by node`): process `p` on server
/// `p mod nodes`, worker `w` on server `w mod nodes`. So when the workers
/// are a multiple of the nodes, cyclic dealing gives every worker processes
/// of its own server, while blocks of consecutive processes span servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub nodes: u32,
    pub ppn: u32,
    pub workers: u32,
}

impl Shape {
    pub fn procs(&self) -> u32 {
        self.nodes * self.ppn
    }

    /// Workers on the busiest DPU.
    pub fn wpn(&self) -> u32 {
        self.workers.div_ceil(self.nodes)
    }

    pub fn proc_server(&self, p: u32) -> u32 {
        p % self.nodes
    }

    pub fn worker_server(&self, w: u32) -> u32 {
        w % self.nodes
    }

    /// Checks the shape against the fabric and the DPU's cores.
    pub fn validate(&self, f: &DpuFabric) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > f.servers {
            return Err(format!(
                "nodes must be 1..={} (the topology's hosts), got {}",
                f.servers, self.nodes
            ));
        }
        if self.ppn == 0 || self.ppn > 4096 {
            return Err(format!("ppn must be 1..=4096, got {}", self.ppn));
        }
        if self.workers == 0 || self.workers > self.procs() {
            return Err(format!(
                "workers must be 1..={} (never more than host processes), got {}",
                self.procs(),
                self.workers
            ));
        }
        if self.wpn() > f.params.cores {
            return Err(format!(
                "{} workers need {} per DPU but a DPU has {} cores",
                self.workers,
                self.wpn(),
                f.params.cores
            ));
        }
        Ok(())
    }
}

/// One core's serial timeline: every task it runs waits for the previous one.
pub(crate) struct Core {
    node: NodeIndex,
    cost: CoreCost,
    pub(crate) last: Option<u32>,
    collective: u32,
}

impl Core {
    pub(crate) fn new(node: NodeIndex, cost: CoreCost, collective: u32) -> Core {
        Core {
            node,
            cost,
            last: None,
            collective,
        }
    }

    /// The core is busy for `duration` once `deps` (observable here) have completed.
    fn busy(&mut self, b: &mut Builder, duration: SimTime, deps: &[u32]) -> u32 {
        let mut all: Vec<u32> = deps.to_vec();
        all.extend(self.last);
        let t = b.compute(self.node, duration, self.collective, &all);
        self.last = Some(t);
        t
    }

    /// Posts an RDMA write of `bytes` to `dst`; returns its flow task.
    fn write(&mut self, b: &mut Builder, dst: NodeIndex, bytes: u64) -> u32 {
        let post = self.busy(b, self.cost.post, &[]);
        b.flow(self.node, dst, bytes, self.collective, &[post])
    }

    /// Posts an RDMA read of `bytes` from `src`; returns the data's flow task.
    fn read(&mut self, b: &mut Builder, src: NodeIndex, bytes: u64) -> u32 {
        let post = self.busy(b, self.cost.post, &[]);
        let request = b.flow(self.node, src, CONTROL_BYTES, self.collective, &[post]);
        b.flow(src, self.node, bytes, self.collective, &[request])
    }

    /// Reaps the completion of `op`.
    fn poll(&mut self, b: &mut Builder, op: u32) -> u32 {
        self.busy(b, self.cost.poll, &[op])
    }
}

/// Data a worker forwards: read from `read` (if any) into DPU memory, then
/// written to each of `writes`.
pub(crate) struct Item {
    pub(crate) read: Option<(NodeIndex, u64)>,
    pub(crate) writes: Vec<(NodeIndex, u64)>,
}

/// Part `j` of `k` near-equal parts of `bytes` (the first `bytes % k` parts
/// are a byte longer).
fn part(bytes: u64, k: u64, j: u64) -> u64 {
    bytes / k + u64::from(j < bytes % k)
}

/// `items` cut into staging fragments of at most `chunk_bytes` read bytes:
/// a fragment reads its share of the item's read and writes the same share
/// of each of its writes. Items without a read are kept whole.
fn fragments(items: &[Item], chunk_bytes: u64) -> Vec<Item> {
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        let Some((src, bytes)) = it.read else {
            out.push(Item {
                read: None,
                writes: it.writes.clone(),
            });
            continue;
        };
        let k = bytes.div_ceil(chunk_bytes.max(1)).max(1);
        for j in 0..k {
            out.push(Item {
                read: Some((src, part(bytes, k, j))),
                writes: it
                    .writes
                    .iter()
                    .map(|&(dst, w)| (dst, part(w, k, j)))
                    .filter(|&(_, w)| w > 0)
                    .collect(),
            });
        }
    }
    out
}

/// Runs `items` on `core`, starting once `gate` has completed, in staging
/// fragments of at most `chunk_bytes`. The worker keeps one read in flight:
/// it reaps fragment `i`'s read, posts fragment `i + 1`'s, then posts
/// fragment `i`'s writes, so forwarding overlaps the next read; it reaps the
/// writes at the end. Returns the write flows.
pub(crate) fn run_items(
    b: &mut Builder,
    core: &mut Core,
    items: &[Item],
    gate: &[u32],
    chunk_bytes: u64,
) -> Vec<u32> {
    if !gate.is_empty() {
        core.busy(b, SimTime::ZERO, gate);
    }
    let items = fragments(items, chunk_bytes);
    let read = |b: &mut Builder, core: &mut Core, i: usize| {
        items
            .get(i)
            .and_then(|it| it.read)
            .map(|(src, bytes)| core.read(b, src, bytes))
    };
    let mut in_flight = read(b, core, 0);
    let mut writes = Vec::new();
    for (i, it) in items.iter().enumerate() {
        if let Some(r) = in_flight {
            core.poll(b, r);
        }
        in_flight = read(b, core, i + 1);
        for &(dst, bytes) in &it.writes {
            writes.push(core.write(b, dst, bytes));
        }
    }
    for &w in &writes {
        core.poll(b, w);
    }
    writes
}

fn collective(b: &mut Builder, name: &str, op: CollectiveOp, procs: u32, size: u64) -> u32 {
    b.collective(Collective {
        name: name.into(),
        op,
        algorithm: "dpu",
        group_size: procs,
        size_bytes: size,
        offloaded: false,
        fallback_reason: None,
        tasks: 0,
        job: NONE,
    })
}

fn op_of(pattern: Pattern) -> CollectiveOp {
    match pattern {
        Pattern::Broadcast => CollectiveOp::Broadcast,
        Pattern::Gather => CollectiveOp::Send,
        Pattern::AllgatherSingleLeader | Pattern::AllgatherAllIn => CollectiveOp::AllGather,
    }
}

/// Time for a host core to copy `bytes` within its own memory.
fn copy_time(bytes: u64, copy_bps: u64) -> SimTime {
    let ps = u128::from(bytes) * 8 * 1_000_000_000_000 / u128::from(copy_bps.max(1));
    SimTime(u64::try_from(ps).unwrap_or(u64::MAX))
}

/// The pure-host reference of `pattern` with `size` bytes per process (the
/// root is process 0): every host process is its own core and moves its own
/// data; a transfer within one server is a memory copy at `copy_bps`.
/// Collective 0 spans it.
pub fn reference(
    b: &mut Builder,
    f: &DpuFabric,
    shape: &Shape,
    pattern: Pattern,
    size: u64,
    host: CoreCost,
    copy_bps: u64,
) {
    let procs = shape.procs();
    let c = collective(b, "reference", op_of(pattern), procs, size);
    let node = |p: u32| f.host(shape.proc_server(p));
    for q in 0..procs {
        let mut core = Core::new(node(q), host, c);
        // Peers this process sends to (or, for a broadcast, reads from).
        let peers: Vec<u32> = match pattern {
            Pattern::Broadcast | Pattern::Gather if q == 0 => Vec::new(),
            Pattern::Broadcast | Pattern::Gather => vec![0],
            Pattern::AllgatherSingleLeader | Pattern::AllgatherAllIn => {
                (0..procs).filter(|&r| r != q).collect()
            }
        };
        let mut remote = Vec::new();
        for &r in peers
            .iter()
            .filter(|&&r| shape.proc_server(r) != shape.proc_server(q))
        {
            remote.push(match pattern {
                Pattern::Broadcast => core.read(b, node(r), size),
                _ => core.write(b, node(r), size),
            });
        }
        let local = peers
            .iter()
            .filter(|&&r| shape.proc_server(r) == shape.proc_server(q))
            .count() as u64;
        if local > 0 {
            core.busy(b, copy_time(size * local, copy_bps), &[]);
        }
        for op in remote {
            core.poll(b, op);
        }
        if core.last.is_none() {
            // The root of a rooted pattern moves nothing: it still takes part.
            core.busy(b, SimTime::ZERO, &[]);
        }
    }
}

/// The worker that leads the single-leader allgather.
const LEADER: u32 = 0;

/// The offloaded iteration: each host process posts a hand-over to its
/// worker and computes for `compute` (collective 0, "compute"), while the
/// workers run `pattern` and notify their processes (collective 1, "comm").
/// `dpu` is the workers' cost, `host` the processes' (posting the hand-over).
#[allow(clippy::too_many_arguments)]
pub fn offloaded(
    b: &mut Builder,
    f: &DpuFabric,
    shape: &Shape,
    pattern: Pattern,
    assign: Assign,
    size: u64,
    compute: SimTime,
    host: CoreCost,
) {
    let procs = shape.procs();
    let dpu_cost = CoreCost {
        post: f.params.post,
        poll: f.params.poll,
    };
    let chunk = f.params.chunk_bytes;
    let compute_c = collective(b, "compute", CollectiveOp::Send, procs, size);
    let comm = collective(b, "comm", op_of(pattern), procs, size);
    let dealt = assign.deal(procs, shape.workers);
    let mut worker_of = vec![0u32; procs as usize];
    for (w, ps) in dealt.iter().enumerate() {
        for &p in ps {
            worker_of[p as usize] = w as u32;
        }
    }
    let host_node = |p: u32| f.host(shape.proc_server(p));
    let dpu_node = |w: u32| f.dpu(shape.worker_server(w));
    // Host side: post the hand-over, send it, compute.
    let mut handover = vec![Vec::new(); shape.workers as usize];
    for p in 0..procs {
        let mut core = Core::new(host_node(p), host, compute_c);
        let post = core.busy(b, host.post, &[]);
        let go = b.flow(
            host_node(p),
            dpu_node(worker_of[p as usize]),
            CONTROL_BYTES,
            comm,
            &[post],
        );
        handover[worker_of[p as usize] as usize].push(go);
        core.busy(b, compute, &[]);
    }
    // Worker side.
    let mut cores: Vec<Core> = (0..shape.workers)
        .map(|w| Core::new(dpu_node(w), dpu_cost, comm))
        .collect();
    let mut into_leader = Vec::new();
    for (w, ps) in dealt.iter().enumerate() {
        let w = w as u32;
        let items = worker_items(f, shape, pattern, w, ps, size);
        let gate = std::mem::take(&mut handover[w as usize]);
        let writes = run_items(b, &mut cores[w as usize], &items, &gate, chunk);
        if pattern == Pattern::AllgatherSingleLeader {
            into_leader.extend(writes);
        }
    }
    if pattern == Pattern::AllgatherSingleLeader {
        // The leader forwards once every block is in its DPU's memory: the
        // writes into it, and what its DPU's other workers read.
        let mut gate = into_leader;
        for w in 1..shape.workers {
            if dpu_node(w) == dpu_node(LEADER) {
                gate.extend(cores[w as usize].last);
            }
        }
        let whole = size * u64::from(procs);
        let items = [Item {
            read: None,
            writes: (0..procs).map(|q| (host_node(q), whole)).collect(),
        }];
        run_items(b, &mut cores[LEADER as usize], &items, &gate, chunk);
    }
    // Completion notices: each worker to its processes (the leader to all).
    for (w, ps) in dealt.iter().enumerate() {
        let core = &cores[w];
        let to: Vec<u32> = match pattern {
            Pattern::AllgatherSingleLeader if w as u32 == LEADER => (0..procs).collect(),
            Pattern::AllgatherSingleLeader => Vec::new(),
            _ => ps.clone(),
        };
        let last = core.last.expect("every worker runs at least one operation");
        for p in to {
            b.flow(core.node, host_node(p), CONTROL_BYTES, comm, &[last]);
        }
    }
}

/// What worker `w`, serving processes `ps`, reads and writes in `pattern`
/// (blocks of `size` bytes; worker 0 leads the single-leader allgather).
fn worker_items(
    f: &DpuFabric,
    shape: &Shape,
    pattern: Pattern,
    w: u32,
    ps: &[u32],
    size: u64,
) -> Vec<Item> {
    let procs = shape.procs();
    let host_node = |p: u32| f.host(shape.proc_server(p));
    let dpu_node = |w: u32| f.dpu(shape.worker_server(w));
    match pattern {
        Pattern::Broadcast => vec![Item {
            read: Some((host_node(0), size)),
            writes: ps.iter().map(|&p| (host_node(p), size)).collect(),
        }],
        Pattern::Gather => ps
            .iter()
            .map(|&p| Item {
                read: Some((host_node(p), size)),
                writes: vec![(host_node(0), size)],
            })
            .collect(),
        Pattern::AllgatherAllIn => ps
            .iter()
            .map(|&p| Item {
                read: Some((host_node(p), size)),
                writes: (0..procs)
                    .filter(|&q| q != p)
                    .map(|q| (host_node(q), size))
                    .collect(),
            })
            .collect(),
        Pattern::AllgatherSingleLeader => {
            let same = dpu_node(w) == dpu_node(LEADER);
            ps.iter()
                .map(|&p| Item {
                    read: Some((host_node(p), size)),
                    writes: if same {
                        Vec::new()
                    } else {
                        vec![(dpu_node(LEADER), size)]
                    },
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cyclic_and_block_deal_every_process_once() {
        for assign in Assign::ALL {
            for workers in 1..=64 {
                let dealt = assign.deal(64, workers);
                let mut all: Vec<u32> = dealt.concat();
                all.sort_unstable();
                assert_eq!(all, (0..64).collect::<Vec<_>>());
                assert!(dealt.iter().all(|d| !d.is_empty()));
            }
        }
        assert_eq!(Assign::Cyclic.deal(8, 3)[1], vec![1, 4, 7]);
        assert_eq!(Assign::Block.deal(8, 3)[2], vec![4, 5, 6, 7]);
        // 64 processes on 48 workers: block leaves the remainder to the last.
        assert_eq!(Assign::Block.deal(64, 48)[47].len(), 17);
        assert_eq!(Assign::Cyclic.deal(64, 48)[0].len(), 2);
    }

    #[test]
    fn fragments_conserve_every_byte_and_keep_reads_at_most_a_chunk() {
        let items = [
            Item {
                read: Some((3, 1_000_001)),
                writes: vec![(4, 1_000_001), (5, 2_000_002)],
            },
            Item {
                read: None,
                writes: vec![(6, 7)],
            },
        ];
        let out = fragments(&items, 262_144);
        // ceil(1_000_001 / 262_144) = 4 fragments, then the item with no read.
        assert_eq!(out.len(), 5);
        let read: u64 = out.iter().filter_map(|f| f.read).map(|(_, b)| b).sum();
        assert_eq!(read, 1_000_001);
        assert!(out
            .iter()
            .filter_map(|f| f.read)
            .all(|(src, b)| src == 3 && b <= 262_144));
        for (dst, total) in [(4, 1_000_001), (5, 2_000_002), (6, 7)] {
            let sent: u64 = out
                .iter()
                .flat_map(|f| &f.writes)
                .filter(|w| w.0 == dst)
                .map(|w| w.1)
                .sum();
            assert_eq!(sent, total, "writes to {dst}");
        }
        // A buffer no larger than a fragment stays whole.
        assert_eq!(fragments(&items[..1], 1 << 20).len(), 1);
    }
}
