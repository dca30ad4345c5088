//! DPU-staged collectives inside a workload (`algorithm = "dpu"`): each
//! rank hands its part to a worker on its own server's DPU, and the workers
//! move the data with RDMA reads and writes while the hosts go on (compute
//! phases that do not wait for the collective overlap it).
//!
//! A rank's first worker stages its data into DPU memory with one RDMA read
//! (broadcast: the root's buffer; all-gather, all-in: the rank's block;
//! all-to-all: its send buffer), then the writes out of DPU memory are
//! dealt round robin over the DPU's workers (broadcast: to the rank;
//! all-gather: the block to every other rank; all-to-all: each other rank
//! its `size / N` piece). A rank's part is done when every flow touching
//! its host has completed.

pub mod staged;

use super::algorithms::HostTasks;
use super::{Builder, CollectiveOp};
use crate::dpu::{servers, DpuParams};
use netsim_topo::{NodeIndex, Topology};
use staged::{run_items, Core, CoreCost, Item, CONTROL_BYTES};

/// A transfer's peer and bytes.
type Transfer = (NodeIndex, u64);

/// Whether `op` has a DPU-staged version.
pub fn supports(op: CollectiveOp) -> bool {
    matches!(
        op,
        CollectiveOp::Broadcast | CollectiveOp::AllGather | CollectiveOp::AllToAll
    )
}

/// Checks that `topo` has DPUs and `workers` fit on their `params.cores`.
pub fn check(topo: &Topology, workers: u32, params: &DpuParams) -> Result<(), String> {
    if servers(topo).is_none() {
        return Err("algorithm dpu needs DPUs on the hosts (--dpu-workers N)".into());
    }
    if workers == 0 || workers > params.cores {
        return Err(format!(
            "algorithm dpu needs 1..={} workers per DPU (--dpu-workers), got {workers}",
            params.cores
        ));
    }
    Ok(())
}

/// Adds the DPU-staged `op` of `size_bytes` on `group` (host memories of a
/// topology with DPUs) to collective `coll`, after `entry` at each member;
/// workers cost `params.post` and `params.poll` per operation and stage in
/// fragments of `params.chunk_bytes`.
#[allow(clippy::too_many_arguments)]
pub fn staged(
    b: &mut Builder,
    topo: &Topology,
    coll: u32,
    op: CollectiveOp,
    group: &[NodeIndex],
    size_bytes: u64,
    workers: u32,
    params: &DpuParams,
    entry: &HostTasks,
) {
    let cost = CoreCost {
        post: params.post,
        poll: params.poll,
    };
    let chunk = params.chunk_bytes;
    assert!(supports(op), "{} has no DPU-staged version", op.name());
    let s = servers(topo).expect("checked before building");
    let dpu = |h: NodeIndex| s + h;
    let n = group.len() as u64;
    let piece = size_bytes.div_ceil(n).max(1);
    for &r in group {
        // Hand-over: the rank tells its DPU its buffer is ready.
        let deps = entry.get(&r).map_or(&[][..], Vec::as_slice);
        let handover = b.flow(r, dpu(r), CONTROL_BYTES, coll, deps);
        let others = || group.iter().copied().filter(move |&q| q != r);
        let (read, writes): (Option<Transfer>, Vec<Transfer>) = match op {
            CollectiveOp::Broadcast if r == group[0] => (None, Vec::new()),
            CollectiveOp::Broadcast => (Some((group[0], size_bytes)), vec![(r, size_bytes)]),
            CollectiveOp::AllGather => (
                Some((r, size_bytes)),
                others().map(|q| (q, size_bytes)).collect(),
            ),
            _ => (
                Some((r, piece * (n - 1))),
                others().map(|q| (q, piece)).collect(),
            ),
        };
        // Worker 0 stages the data into DPU memory; the writes out of it
        // are dealt round robin over the DPU's workers.
        let mut first = Core::new(dpu(r), cost, coll);
        run_items(
            b,
            &mut first,
            &[Item {
                read,
                writes: Vec::new(),
            }],
            &[handover],
            chunk,
        );
        let staged = first.last;
        for j in 0..workers as usize {
            let mine: Vec<(NodeIndex, u64)> = writes
                .iter()
                .copied()
                .skip(j)
                .step_by(workers as usize)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let item = [Item {
                read: None,
                writes: mine,
            }];
            if j == 0 {
                run_items(b, &mut first, &item, &[], chunk);
            } else {
                let gate: Vec<u32> = staged.into_iter().collect();
                run_items(b, &mut Core::new(dpu(r), cost, coll), &item, &gate, chunk);
            }
        }
    }
}
