//! The processes of a run: this one alone, or every rank of an MPI job
//! (cargo feature `mpi`, started by `mpirun`; every rank runs the same
//! command line).
//!
//! A run under MPI is a fixed sequence of collective steps that every rank
//! takes. A rank that meets an error (bad input, a file it cannot write) must
//! not simply leave, or the others would wait in the next collective forever:
//! each step that can fail ends in [`Ranks::agree`], where all ranks learn
//! whether any failed and stop together. The first failing rank reports its
//! error; the others stop with [`OtherRankFailed`], which the binary exits on
//! quietly. Panics abort the whole job (see `netsim_engine::mpi`).

use netsim_engine::{Layout, Progress, SimTime};
use netsim_models::network::{simulate_on, Fabric, NetRun};
use netsim_models::telemetry::TelemetrySink;
use std::ops::Range;

/// Another rank met an error and reported it; this rank stops too.
#[derive(Debug, thiserror::Error)]
#[error("rank {0} failed")]
pub struct OtherRankFailed(pub usize);

/// The processes taking part in a run.
pub struct Ranks {
    #[cfg(feature = "mpi")]
    world: netsim_engine::mpi::MpiWorld,
}

impl Ranks {
    /// This process alone, or (with feature `mpi`) the MPI job it belongs to;
    /// MPI is initialised here and finalised when the value drops.
    pub fn init() -> anyhow::Result<Ranks> {
        Ok(Ranks {
            #[cfg(feature = "mpi")]
            world: netsim_engine::mpi::MpiWorld::init()?,
        })
    }

    /// This process's rank, `0..size()`.
    pub fn rank(&self) -> usize {
        #[cfg(feature = "mpi")]
        return self.world.rank();
        #[cfg(not(feature = "mpi"))]
        0
    }

    /// Number of processes.
    pub fn size(&self) -> usize {
        #[cfg(feature = "mpi")]
        return self.world.size();
        #[cfg(not(feature = "mpi"))]
        1
    }

    /// Collective: `result` if every rank succeeded. Otherwise every rank
    /// fails: the lowest failing rank with its own error, the others with
    /// [`OtherRankFailed`].
    pub fn agree<T>(&self, result: anyhow::Result<T>) -> anyhow::Result<T> {
        #[cfg(feature = "mpi")]
        match (self.world.first_failed_rank(result.is_err()), result) {
            (None, result) => result,
            (Some(first), Err(e)) if first == self.rank() => Err(e),
            (Some(first), _) => Err(OtherRankFailed(first).into()),
        }
        #[cfg(not(feature = "mpi"))]
        result
    }

    /// Collective: fails on every rank unless all computed the same
    /// `fingerprint` of `what` (ranks compute the partition independently;
    /// this catches ranks running different binaries or inputs).
    pub fn check_same(&self, what: &str, fingerprint: u64) -> anyhow::Result<()> {
        #[cfg(feature = "mpi")]
        {
            let (min, max) = self.world.min_max(fingerprint);
            if min != max {
                if self.rank() == 0 {
                    anyhow::bail!(
                        "the ranks computed different {what}s: do they all run the same netsim \
                         binary on the same input files?"
                    );
                }
                return Err(OtherRankFailed(0).into());
            }
        }
        let _ = (what, fingerprint);
        Ok(())
    }

    /// Collective: rank 0 gets every rank's `values` (the same number on
    /// each), concatenated in rank order; other ranks get `None`.
    pub fn gather(&self, values: &[u64]) -> Option<Vec<u64>> {
        #[cfg(feature = "mpi")]
        return self.world.gather(values);
        #[cfg(not(feature = "mpi"))]
        Some(values.to_vec())
    }

    /// Collective: like [`Ranks::gather`], any number of values per rank.
    pub fn gather_varcount(&self, values: &[u64]) -> Option<Vec<u64>> {
        #[cfg(feature = "mpi")]
        return self.world.gather_varcount(values);
        #[cfg(not(feature = "mpi"))]
        Some(values.to_vec())
    }

    /// The shards of `layout` this process runs.
    pub fn local_shards(&self, layout: &Layout) -> Range<usize> {
        use netsim_engine::Executor;
        #[cfg(feature = "mpi")]
        return self.world.local_shards(layout);
        #[cfg(not(feature = "mpi"))]
        netsim_engine::Threads.local_shards(layout)
    }

    /// Collective: simulates this process's shards (see [`simulate_on`]).
    pub fn simulate<S, F>(
        &self,
        fabric: &Fabric,
        layout: &Layout,
        end: SimTime,
        progress: Option<&Progress>,
        make_sink: F,
    ) -> NetRun<S>
    where
        S: TelemetrySink,
        F: Fn(netsim_engine::ShardId) -> S + Sync,
    {
        #[cfg(feature = "mpi")]
        return simulate_on(&self.world, fabric, layout, end, progress, make_sink);
        #[cfg(not(feature = "mpi"))]
        simulate_on(
            &netsim_engine::Threads,
            fabric,
            layout,
            end,
            progress,
            make_sink,
        )
    }
}
