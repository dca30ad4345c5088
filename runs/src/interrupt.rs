//! A graceful stop: SIGINT or SIGTERM during `netsim run` asks the run to
//! stop at its next synchronisation window (`Progress::interrupt`); the
//! shards return what they have, the tables are finished as at a time
//! limit, `run.json` says `"interrupted": true`, and the process exits
//! with 128 + the signal's number (130, 143), apart from 0 and 2. A
//! second signal ends the process at once.
//!
//! Under MPI the signal reaches only the ranks it was sent to; the others
//! stop at the same exchange all the same. Rank 0 adopts the signal of
//! the lowest rank that had one ([`adopt_first`]), so `run.json`, its
//! message and its exit code say so whichever rank was signalled.

use netsim_engine::Progress;
use std::sync::atomic::{AtomicI32, Ordering};

/// The command line's run progress, which the signal handler reaches.
pub static CLI_PROGRESS: Progress = Progress::new();

/// The signal that interrupted the run (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Atomic stores and `signal` only: async-signal-safe.
    SIGNAL.store(signal, Ordering::Relaxed);
    CLI_PROGRESS.interrupt();
    // SAFETY: restores the default disposition; allowed in a handler.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
}

/// Handles SIGINT and SIGTERM with a graceful stop from now on.
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to atomics and resets its disposition.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// The signal that interrupted this process (0: none).
pub fn signal_number() -> u64 {
    SIGNAL.load(Ordering::Relaxed).unsigned_abs().into()
}

/// Takes the first non-zero of `signals` (every rank's
/// [`signal_number`], in rank order) as this process's own, unless it had
/// one itself.
pub fn adopt_first(signals: &[u64]) {
    let first = signals.iter().find(|&&s| s != 0);
    if let Some(signal) = first.and_then(|&s| i32::try_from(s).ok()) {
        let _ = SIGNAL.compare_exchange(0, signal, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The signal that interrupted the run, by name, if one did.
pub fn signal_name() -> Option<&'static str> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        _ => Some("a signal"),
    }
}

/// The exit code of an interrupted run: 128 + the signal's number.
pub fn exit_code() -> Option<u8> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(128u8.saturating_add(u8::try_from(s).unwrap_or(127))),
    }
}
