//! The processes of a run: this one alone, or every rank of an MPI job
//! (cargo feature `mpi`, started by `mpirun`; every rank runs the same
//! command line).
//!
//! A run under MPI is a fixed sequence of collective steps that every rank
//! takes. A rank that meets an error (bad input, a file it cannot write) must
//! not simply leave, or the others would wait in the next collective forever:
//! each step that can fail ends in [`Ranks::agree`], where all ranks learn
//! whether any failed and stop together. The first failing rank prints its
//! error; all stop with [`OtherRankFailed`], which the binary exits on
//! quietly. Panics abort the whole job (see `netsim_engine::mpi`).

use netsim_engine::{Layout, Progress, SimTime};
use netsim_models::network::{simulate_on, Fabric, NetRun};
use netsim_models::telemetry::TelemetrySink;
use std::ops::Range;

/// A rank (maybe this one) met an error and printed it; this rank stops too.
#[derive(Debug, thiserror::Error)]
#[error("rank {0} failed")]
pub struct OtherRankFailed(pub usize);

/// How the binary reports an error (with its causes): one line.
pub fn print_error(error: &anyhow::Error) {
    eprintln!("netsim: error: {}", one_line(error));
}

/// `error` and its causes on one line: a cause whose text the message
/// already carries (an OS error a library quoted) is not repeated, line
/// breaks become `; `, and long values are shortened.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    let joined = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let words: Vec<String> = joined.split(' ').map(|w| shorten(w, 100)).collect();
    shorten(&words.join(" "), 1000)
}

/// `s` itself when at most `max` bytes, else its start and end around the
/// number of bytes left out: an error never echoes a huge value whole.
pub fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let keep = max / 3;
    let mut head = keep;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - keep;
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}...[{} bytes]...{}", &s[..head], tail - head, &s[tail..])
}

/// The MPI launcher that started this process as one of several, found by
/// the environment it sets (`var` reads a variable): the launcher and the
/// variable that tells, e.g. `OMPI_COMM_WORLD_SIZE=4`; `None` when this
/// process runs alone. Open MPI, MPICH/Hydra (PMI), PMIx and Slurm's `srun`
/// are recognised.
pub fn mpi_launcher(var: impl Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
    // Process counts, then ranks (a rank past 0 means several processes).
    const SIZES: [(&str, &str); 5] = [
        ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"),
        ("PMI_SIZE", "mpirun (MPICH/Hydra, PMI)"),
        ("PMIX_SIZE", "a PMIx launcher"),
        ("MPI_LOCALNRANKS", "mpirun (MPICH/Hydra)"),
        ("SLURM_NTASKS", "Slurm's srun"),
    ];
    const RANKS: [(&str, &str); 3] = [
        ("OMPI_COMM_WORLD_RANK", "Open MPI's mpirun"),
        ("PMI_RANK", "mpirun (MPICH/Hydra, PMI)"),
        ("PMIX_RANK", "a PMIx launcher"),
    ];
    let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u64>().ok());
    let found = |name: &str, launcher| Some((launcher, format!("{name}={}", var(name)?.trim())));
    for (name, launcher) in SIZES {
        // Slurm sets SLURM_NTASKS for a whole allocation; only the tasks
        // srun starts have a SLURM_PROCID.
        if name == "SLURM_NTASKS" && var("SLURM_PROCID").is_none() {
            continue;
        }
        if number(name).is_some_and(|n| n > 1) {
            return found(name, launcher);
        }
    }
    for (name, launcher) in RANKS {
        if number(name).is_some_and(|r| r > 0) {
            return found(name, launcher);
        }
    }
    None
}

/// The processes taking part in a run.
pub struct Ranks {
    #[cfg(feature = "mpi")]
    world: netsim_engine::mpi::MpiWorld,
}

impl Ranks {
    /// This process alone, or (with feature `mpi`) the MPI job it belongs to;
    /// MPI is initialised here and finalised when the value drops.
    pub fn init() -> anyhow::Result<Ranks> {
        #[cfg(not(feature = "mpi"))]
        if let Some((launcher, evidence)) = mpi_launcher(|name| std::env::var(name).ok()) {
            // Each launched process would run the whole simulation alone,
            // all of them racing on one output directory.
            anyhow::bail!(
                "started by {launcher} ({evidence}) as one of several processes, but this netsim \
                 was built without MPI: rebuild it with `cargo build --release -p netsim \
                 --features mpi`"
            );
        }
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
        {
            let Some(first) = self.world.first_failed_rank(result.is_err()) else {
                return result;
            };
            // The reporting rank prints before anyone exits: mpirun ends the
            // whole job at the first non-zero exit, and the message with it.
            if first == self.rank() {
                if let Err(e) = &result {
                    print_error(e);
                }
            }
            self.barrier();
            Err(OtherRankFailed(first).into())
        }
        #[cfg(not(feature = "mpi"))]
        result
    }

    /// Collective: returns when every rank has called it.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        self.world.barrier();
    }

    /// Collective: fails on every rank unless all computed the same
    /// `fingerprint` of `what` (ranks compute the partition independently;
    /// this catches ranks running different binaries or inputs).
    pub fn check_same(&self, what: &str, fingerprint: u64) -> anyhow::Result<()> {
        #[cfg(feature = "mpi")]
        {
            let (min, max) = self.world.min_max(fingerprint);
            self.agree(if min != max && self.rank() == 0 {
                Err(anyhow::anyhow!(
                    "the ranks computed different {what}s: do they all run the same netsim \
                     binary on the same input files?"
                ))
            } else {
                Ok(())
            })
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = (what, fingerprint);
            Ok(())
        }
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
