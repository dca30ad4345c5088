//! A live view of how far a run has got, for a progress display on another
//! thread, and the way that thread asks the run to stop.

use crate::SimTime;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How far a run has got: the simulated time all shards have reached and the
/// events handled so far.
///
/// Shards update it once per synchronisation window (two relaxed atomic
/// operations each), never per event, so passing one costs nothing
/// measurable; any thread may read it at any time. Under MPI each rank has its
/// own, counting the events of that rank's shards.
///
/// [`Progress::stop`] asks the run to stop (Ctrl-C in the Python API): the
/// shards look once per window, the same cost as reporting, and the run
/// unwinds with [`Stopped`] rather than returning a partial result.
///
/// [`Progress::interrupt`] asks for a graceful stop instead (SIGINT or
/// SIGTERM in the binary): every shard stops at the same window boundary,
/// with every event before it handled, and the run returns what it has,
/// as if its end were there.
#[derive(Debug, Default)]
pub struct Progress {
    time_ps: AtomicU64,
    events: AtomicU64,
    stop: AtomicBool,
    interrupt: AtomicBool,
}

/// The unwind payload of a run stopped through [`Progress::stop`]: no shard
/// failed, and nothing the run produced is complete. Raised with
/// `std::panic::resume_unwind`, so no panic message is printed; whoever
/// asked for the stop catches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

impl Progress {
    /// Nothing reached, nothing asked (a `const fn`: a binary may keep
    /// one in a `static` that a signal handler reaches).
    pub const fn new() -> Progress {
        Progress {
            time_ps: AtomicU64::new(0),
            events: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            interrupt: AtomicBool::new(false),
        }
    }

    /// Every event earlier than this has been handled, on every shard.
    pub fn sim_time(&self) -> SimTime {
        SimTime(self.time_ps.load(Ordering::Relaxed))
    }

    /// Events handled so far by the shards reporting here.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Asks the run to stop at its next window (any thread, any time).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether [`Progress::stop`] was called.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Asks the run to stop gracefully at its next window boundary (any
    /// thread, any time; one atomic store, so a signal handler may call it).
    pub fn interrupt(&self) {
        self.interrupt.store(true, Ordering::Relaxed);
    }

    /// Whether [`Progress::interrupt`] was called.
    pub fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
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
