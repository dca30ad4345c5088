//! A live view of how far a run has got, for a progress display on another thread.

use crate::SimTime;
use std::sync::atomic::{AtomicU64, Ordering};

/// How far a run has got: the simulated time all shards have reached and the
/// events handled so far.
///
/// Shards update it once per synchronisation window (two relaxed atomic
/// operations each), never per event, so passing one costs nothing
/// measurable; any thread may read it at any time. Under MPI each rank has its
/// own, counting the events of that rank's shards.
#[derive(Debug, Default)]
pub struct Progress {
    time_ps: AtomicU64,
    events: AtomicU64,
}

impl Progress {
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Every event earlier than this has been handled, on every shard.
    pub fn sim_time(&self) -> SimTime {
        SimTime(self.time_ps.load(Ordering::Relaxed))
    }

    /// Events handled so far by the shards reporting here.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Every event before `window_start` has been handled (a shard starts
    /// the window beginning there, and all shards agree on it; a sequential
    /// run reports its own time), `events` of them since the last report.
    pub fn window(&self, window_start: SimTime, events: u64) {
        // `fetch_max`, not a store by one shard: under MPI shard 0 may live
        // on another rank, and the value must never move backwards.
        self.time_ps
            .fetch_max(window_start.as_ps(), Ordering::Relaxed);
        if events > 0 {
            self.events.fetch_add(events, Ordering::Relaxed);
        }
    }
}
