//! Running shards on persistent worker threads.

use crate::shard::{run_shard, Model, ShardReport};
use crate::sync::{Aborted, Comm, ThreadExchange};
use crate::{Layout, NodeId, Progress, ShardId, SimTime};
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};

/// Runs every shard of `layout` on its own worker thread until no event
/// earlier than `end` remains, and returns the shards' reports in shard
/// order.
///
/// `make_model(shard, nodes)` builds a shard's model on the thread that runs
/// it, so its memory is touched first by that thread. With `progress`, the
/// shards report how far they got once per window (see [`Progress`]).
///
/// # Panics
/// Re-raises the first panic of any shard (a model bug such as a lookahead
/// violation) after stopping the others; unwinds with [`crate::Stopped`]
/// when `progress` was asked to stop.
pub fn run_on_threads<M, F>(
    layout: &Layout,
    seed: u64,
    end: SimTime,
    progress: Option<&Progress>,
    make_model: F,
) -> Vec<ShardReport<M>>
where
    M: Model,
    F: Fn(ShardId, &[NodeId]) -> M + Sync,
{
    let exchange = ThreadExchange::<M::Payload>::new(layout.shards());
    run_shards(
        0..layout.shards(),
        |s| exchange.endpoint(s),
        None,
        |shard, comm| {
            let model = make_model(shard, layout.nodes(shard));
            run_shard(layout, shard, seed, end, model, comm, progress)
        },
    )
}

/// Runs `run(shard, comm)` for each of `shards`, each on a worker thread,
/// except that with `caller_comm` the first one runs on the calling thread
/// with that endpoint (MPI wants its calls from the thread that initialised
/// it). `endpoint(shard)` makes the other shards' endpoints on their threads.
pub(crate) fn run_shards<M, C, E, R>(
    shards: Range<usize>,
    endpoint: E,
    caller_comm: Option<C>,
    run: R,
) -> Vec<ShardReport<M>>
where
    M: Model,
    C: Comm<M::Payload>,
    E: Fn(usize) -> C + Sync,
    R: Fn(ShardId, &mut C) -> Result<ShardReport<M>, Aborted> + Sync,
{
    let run_one = |s: usize, mut comm: C| {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| run(ShardId(s as u32), &mut comm)));
        if outcome.is_err() {
            comm.abort();
        }
        outcome
    };
    let on_caller = caller_comm.is_some();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = shards
            .clone()
            .skip(usize::from(on_caller))
            .map(|s| {
                let (run_one, endpoint) = (&run_one, &endpoint);
                std::thread::Builder::new()
                    .name(format!("netsim-shard-{s}"))
                    .spawn_scoped(scope, move || run_one(s, endpoint(s)))
                    .expect("cannot spawn a shard worker thread")
            })
            .collect();
        let first = caller_comm.map(|comm| run_one(shards.start, comm));
        first
            .into_iter()
            .chain(
                workers
                    .into_iter()
                    .map(|w| w.join().expect("shard worker panicked outside the model")),
            )
            .collect()
    });
    let mut reports = Vec::with_capacity(outcomes.len());
    let mut aborted = false;
    for outcome in outcomes {
        match outcome {
            Err(panic) => panic::resume_unwind(panic),
            Ok(Err(Aborted)) => aborted = true,
            Ok(Ok(report)) => reports.push(report),
        }
    }
    if aborted {
        // No shard panicked, so a shard saw `Progress::stop` and aborted
        // the others (the only other way to abort is a panic).
        panic::resume_unwind(Box::new(crate::Stopped));
    }
    reports
}
