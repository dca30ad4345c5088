//! Where a run's shards execute: the threads of this process, or the ranks x
//! threads of an MPI job. Models are written once against [`Executor`].

use crate::{run_on_threads, Layout, Model, NodeId, Progress, ShardId, ShardReport, SimTime, Wire};
use std::ops::Range;

/// Runs the shards of a layout.
pub trait Executor {
    /// The shards this process runs, out of `layout.shards()`.
    fn local_shards(&self, layout: &Layout) -> Range<usize>;

    /// Runs this process's shards until no event earlier than `end` remains
    /// anywhere, and returns their reports in shard order. `make_model(shard, nodes)` builds a shard's model on the
    /// thread that runs it. With `progress`, this process's shards report
    /// how far they got once per window.
    ///
    /// # Panics
    /// Re-raises a shard's panic (a model bug) after stopping the others.
    fn run<M, F>(
        &self,
        layout: &Layout,
        seed: u64,
        end: SimTime,
        progress: Option<&Progress>,
        make_model: F,
    ) -> Vec<ShardReport<M>>
    where
        M: Model,
        M::Payload: Wire,
        F: Fn(ShardId, &[NodeId]) -> M + Sync;

    /// The maximum of `value` over every process of the run (a collective
    /// step under MPI: all processes must call it).
    fn max_over_processes(&self, value: u64) -> u64;
}

/// The shards rank `rank` of `ranks` runs: an even, contiguous share.
///
/// # Panics
/// If `shards` is not a multiple of `ranks`.
pub fn rank_shards(shards: usize, rank: usize, ranks: usize) -> Range<usize> {
    assert!(
        shards.is_multiple_of(ranks),
        "{shards} shards cannot be dealt evenly over {ranks} ranks"
    );
    let per_rank = shards / ranks;
    rank * per_rank..(rank + 1) * per_rank
}

/// Every shard on its own thread of this process ([`run_on_threads`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Threads;

impl Executor for Threads {
    fn local_shards(&self, layout: &Layout) -> Range<usize> {
        0..layout.shards()
    }

    fn run<M, F>(
        &self,
        layout: &Layout,
        seed: u64,
        end: SimTime,
        progress: Option<&Progress>,
        make_model: F,
    ) -> Vec<ShardReport<M>>
    where
        M: Model,
        M::Payload: Wire,
        F: Fn(ShardId, &[NodeId]) -> M + Sync,
    {
        run_on_threads(layout, seed, end, progress, make_model)
    }

    fn max_over_processes(&self, value: u64) -> u64 {
        value
    }
}
