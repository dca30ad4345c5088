//! Running all shards of a process on persistent worker threads.

use crate::shard::{run_shard, Model, ShardReport};
use crate::sync::{Comm, ThreadExchange};
use crate::{Layout, Progress, ShardId, SimTime};
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
/// violation) after stopping the others.
pub fn run_on_threads<M, F>(
    layout: &Layout,
    seed: u64,
    end: SimTime,
    progress: Option<&Progress>,
    make_model: F,
) -> Vec<ShardReport<M>>
where
    M: Model,
    F: Fn(ShardId, &[crate::NodeId]) -> M + Sync,
{
    let exchange = ThreadExchange::<M::Payload>::new(layout.shards());
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..layout.shards())
            .map(|s| {
                let exchange = &exchange;
                let make_model = &make_model;
                std::thread::Builder::new()
                    .name(format!("netsim-shard-{s}"))
                    .spawn_scoped(scope, move || {
                        let shard = ShardId(s as u32);
                        let mut comm = exchange.endpoint(s);
                        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
                            let model = make_model(shard, layout.nodes(shard));
                            run_shard(layout, shard, seed, end, model, &mut comm, progress)
                        }));
                        if outcome.is_err() {
                            comm.abort();
                        }
                        outcome
                    })
                    .expect("cannot spawn a shard worker thread")
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("shard worker panicked outside the model"))
            .collect()
    });
    let mut reports = Vec::with_capacity(outcomes.len());
    let mut aborted = false;
    for outcome in outcomes {
        match outcome {
            Err(panic) => panic::resume_unwind(panic),
            Ok(Err(_)) => aborted = true,
            Ok(Ok(report)) => reports.push(report),
        }
    }
    assert!(!aborted, "a shard aborted without any shard panicking");
    reports
}
