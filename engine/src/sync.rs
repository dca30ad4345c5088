//! The communication seam between shards, and its shared-memory implementation.
//!
//! A window ends with one collective step: every shard hands over the events
//! it produced for each other shard, receives the events addressed to it, and
//! learns the global minimum of the next event time. The two travel together
//! so that a window costs one barrier on threads, and one all-to-all plus one
//! all-reduce on MPI. A shard's contribution to the minimum already counts the
//! events it just sent, so the minimum needs no second round after delivery.

use crate::{Event, SimTime};
use crossbeam_utils::Backoff;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Another shard stopped (it panicked), so this shard must stop too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("another shard aborted the run")]
pub struct Aborted;

/// One shard's end of the collective step that closes every window.
pub trait Comm<P> {
    /// Sends `outboxes[s]` to shard `s` (leaving every outbox empty, its
    /// capacity kept), appends the events other shards sent to this one to
    /// `inbox`, and returns the minimum of `local_next` over all shards.
    ///
    /// `local_next` must be the earliest time among this shard's queue and
    /// the events it is sending now.
    fn exchange(
        &mut self,
        outboxes: &mut [Vec<Event<P>>],
        local_next: SimTime,
        inbox: &mut Vec<Event<P>>,
    ) -> Result<SimTime, Aborted>;

    /// Replaces `values` by their elementwise maximum over all shards (a
    /// collective step: every shard calls it with as many values, between
    /// the same two exchanges). A minimum travels as `u64::MAX - x`.
    fn all_max(&mut self, values: &mut [u64]) -> Result<(), Aborted>;

    /// Tells the other shards that this one will never reach the next
    /// exchange (it is unwinding from a panic), so they stop instead of
    /// waiting forever.
    fn abort(&self);
}

/// Sense-counting barrier for workers that may outnumber cores: spin briefly,
/// then yield, and give up when the run is aborted.
#[derive(Debug)]
pub(crate) struct Barrier {
    parties: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    aborted: AtomicBool,
}

impl Barrier {
    pub(crate) fn new(parties: usize) -> Barrier {
        Barrier {
            parties,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
        }
    }

    pub(crate) fn wait(&self) -> Result<(), Aborted> {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return Ok(());
        }
        let backoff = Backoff::new();
        while self.generation.load(Ordering::Acquire) == generation {
            if self.aborted.load(Ordering::Relaxed) {
                return Err(Aborted);
            }
            if backoff.is_completed() {
                std::thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
        Ok(())
    }

    /// Makes every present and future `wait` fail.
    pub(crate) fn abort(&self) {
        self.aborted.store(true, Ordering::Relaxed);
    }
}

/// State shared by the shards of one process.
///
/// Mailboxes and minima are double-buffered by window parity: a shard fills
/// the buffers of window `w + 1` while slower shards may still be reading
/// those of window `w`, and it cannot reach window `w + 2` before every shard
/// has passed the barrier of `w + 1`, by which time they are done reading.
#[derive(Debug)]
pub struct ThreadExchange<P> {
    shards: usize,
    barrier: Barrier,
    /// `mailboxes[parity][from * shards + to]`.
    mailboxes: [Vec<Mutex<Vec<Event<P>>>>; 2],
    /// `next_times[parity][shard]`, in picoseconds.
    next_times: [Vec<AtomicU64>; 2],
    /// `all_max` accumulators by call parity: the call number that last
    /// wrote each, and the running maximum.
    maxima: [Mutex<(u64, Vec<u64>)>; 2],
}

/// Merges `values` into `acc`, the accumulator of collective call `call`:
/// the first shard of a call replaces what an earlier call left.
pub(crate) fn merge_max(acc: &mut (u64, Vec<u64>), call: u64, values: &[u64]) {
    if acc.0 != call || acc.1.len() != values.len() {
        acc.0 = call;
        acc.1.clear();
        acc.1.extend_from_slice(values);
    } else {
        for (a, &v) in acc.1.iter_mut().zip(values) {
            *a = (*a).max(v);
        }
    }
}

impl<P> ThreadExchange<P> {
    pub fn new(shards: usize) -> ThreadExchange<P> {
        assert!(shards > 0, "a run needs at least one shard");
        let mailboxes = || {
            (0..shards * shards)
                .map(|_| Mutex::new(Vec::new()))
                .collect()
        };
        let next_times = || (0..shards).map(|_| AtomicU64::new(u64::MAX)).collect();
        ThreadExchange {
            shards,
            barrier: Barrier::new(shards),
            mailboxes: [mailboxes(), mailboxes()],
            next_times: [next_times(), next_times()],
            maxima: [
                Mutex::new((u64::MAX, Vec::new())),
                Mutex::new((u64::MAX, Vec::new())),
            ],
        }
    }

    /// The endpoint for `shard`; each shard must take exactly one.
    pub fn endpoint(&self, shard: usize) -> ThreadComm<'_, P> {
        assert!(shard < self.shards);
        ThreadComm {
            exchange: self,
            shard,
            parity: 0,
            max_calls: 0,
        }
    }
}

/// One shard's endpoint of a [`ThreadExchange`].
#[derive(Debug)]
pub struct ThreadComm<'a, P> {
    exchange: &'a ThreadExchange<P>,
    shard: usize,
    parity: usize,
    /// `all_max` calls so far (the same on every shard).
    max_calls: u64,
}

impl<P: Send> Comm<P> for ThreadComm<'_, P> {
    fn exchange(
        &mut self,
        outboxes: &mut [Vec<Event<P>>],
        local_next: SimTime,
        inbox: &mut Vec<Event<P>>,
    ) -> Result<SimTime, Aborted> {
        let shared = self.exchange;
        let n = shared.shards;
        let mailboxes = &shared.mailboxes[self.parity];
        for (to, outbox) in outboxes.iter_mut().enumerate() {
            if !outbox.is_empty() {
                let mut mailbox = mailboxes[self.shard * n + to]
                    .lock()
                    .expect("mailbox poisoned");
                mailbox.append(outbox);
            }
        }
        let next_times = &shared.next_times[self.parity];
        next_times[self.shard].store(local_next.0, Ordering::Relaxed);
        shared.barrier.wait()?;
        let global_next = next_times
            .iter()
            .map(|t| t.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX);
        for from in 0..n {
            let mut mailbox = mailboxes[from * n + self.shard]
                .lock()
                .expect("mailbox poisoned");
            inbox.append(&mut mailbox);
        }
        self.parity ^= 1;
        Ok(SimTime(global_next))
    }

    fn all_max(&mut self, values: &mut [u64]) -> Result<(), Aborted> {
        // Call `n` uses buffer `n % 2`; a shard reaches call `n + 2` only
        // after every shard passed call `n + 1`'s barrier, so after every
        // shard has read call `n`'s result.
        let call = self.max_calls;
        self.max_calls += 1;
        let acc = &self.exchange.maxima[(call % 2) as usize];
        merge_max(&mut acc.lock().expect("maxima poisoned"), call, values);
        self.exchange.barrier.wait()?;
        values.copy_from_slice(&acc.lock().expect("maxima poisoned").1);
        Ok(())
    }

    fn abort(&self) {
        self.exchange.barrier.abort();
    }
}
