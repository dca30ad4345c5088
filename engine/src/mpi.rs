//! MPI ranks x threads: the [`Executor`] of a job started by `mpirun`
//! (rsmpi over the system MPI; cargo feature `mpi`).
//!
//! With `R` ranks and `S` shards, rank `r` runs shards `r*S/R .. (r+1)*S/R`,
//! one per thread. Shard ids are global, so models and layouts do not know
//! about ranks. A window ends with two barriers among the rank's threads:
//!
//! ```text
//!  every shard   outboxes -> mailboxes (one per sender and receiver); its next time
//!  ─── barrier 1 ───
//!  every shard   takes the mailboxes addressed to it by shards of its rank
//!  the leader    (the rank's first shard, on the thread that initialised MPI)
//!                all-reduce: minimum next time      all-to-all: byte counts
//!                all-to-all(v): the encoded events for other ranks
//!                decodes what arrived into the inboxes of the rank's shards
//!  ─── barrier 2 ───
//!  every shard   takes its inbox, reads the global minimum
//! ```
//!
//! Each buffer is written and read in different phases separated by a
//! barrier, so one set of buffers serves every window. Events cross ranks in
//! the explicit [`Wire`] encoding, unchanged.
//!
//! A panic anywhere calls `MPI_Abort` (a panic hook), so a model bug on one
//! rank ends the job instead of leaving the others in a collective forever.

use crate::executor::{rank_shards, Executor};
use crate::shard::run_shard;
use crate::sync::{Aborted, Barrier, Comm};
use crate::threads::run_shards;
use crate::wire::{decode_events, encode_event, Wire};
use crate::{Event, Layout, Model, NodeId, Progress, ShardId, ShardReport, SimTime};
use ::mpi::collective::SystemOperation;
use ::mpi::datatype::{Partition, PartitionMut};
use ::mpi::environment::Universe;
use ::mpi::topology::SimpleCommunicator;
use ::mpi::traits::*;
use ::mpi::{Count, Threading};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// MPI could not be started as netsim needs it.
#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    #[error("MPI was already initialised in this process")]
    AlreadyInitialized,
    #[error("the MPI library offers thread support {0:?}; netsim needs at least Funneled")]
    ThreadSupport(Threading),
}

/// This process's membership of `MPI_COMM_WORLD`. Dropping it finalises MPI.
pub struct MpiWorld {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    // Last: MPI is finalised when the universe drops.
    _universe: Universe,
}

impl MpiWorld {
    /// Initialises MPI and installs a panic hook that aborts the whole job
    /// (after printing the panic) so that no rank waits forever for one that
    /// died.
    ///
    /// MPI calls are made only by the thread that calls this (it must run
    /// [`Executor::run`]). Thread support `Multiple` is requested so that the
    /// panic hook may abort from any thread; `Funneled` is accepted, and
    /// aborting from a worker is then best effort.
    pub fn init() -> Result<MpiWorld, MpiError> {
        let (universe, level) = ::mpi::initialize_with_threading(Threading::Multiple)
            .ok_or(MpiError::AlreadyInitialized)?;
        if level < Threading::Funneled {
            return Err(MpiError::ThreadSupport(level));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let print_panic = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            print_panic(info);
            eprintln!("netsim: rank {rank} panicked; aborting all {size} ranks");
            SimpleCommunicator::world().abort(101);
        }));
        Ok(MpiWorld {
            world,
            rank,
            size,
            _universe: universe,
        })
    }

    /// This process's rank in `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Collective: the lowest rank that passed `failed = true`, if any. Lets
    /// every rank stop at the same point when one of them meets an error.
    pub fn first_failed_rank(&self, failed: bool) -> Option<usize> {
        let mine = if failed { self.rank } else { self.size } as u64;
        let mut first = 0u64;
        self.world
            .all_reduce_into(&mine, &mut first, SystemOperation::min());
        (first < self.size as u64).then_some(first as usize)
    }

    /// Collective: returns when every rank has called it.
    pub fn barrier(&self) {
        self.world.barrier();
    }

    /// Collective: the minimum and maximum of `value` over all ranks.
    pub fn min_max(&self, value: u64) -> (u64, u64) {
        let mine = [value, !value];
        let mut out = [0u64; 2];
        self.world
            .all_reduce_into(&mine[..], &mut out[..], SystemOperation::min());
        (out[0], !out[1])
    }

    /// Collective: rank 0 receives every rank's `values` (all ranks pass the
    /// same number), concatenated in rank order; other ranks receive `None`.
    pub fn gather(&self, values: &[u64]) -> Option<Vec<u64>> {
        let values = not_in_place(values);
        let root = self.world.process_at_rank(0);
        if self.rank == 0 {
            let mut all = buffer(values.len() * self.size);
            root.gather_into_root(values, &mut all[..]);
            Some(all)
        } else {
            root.gather_into(values);
            None
        }
    }

    /// Collective: rank 0 receives every rank's `values` (any number each),
    /// concatenated in rank order; other ranks receive `None`.
    pub fn gather_varcount(&self, values: &[u64]) -> Option<Vec<u64>> {
        let values = not_in_place(values);
        let counts = self.gather(&[values.len() as u64]);
        let root = self.world.process_at_rank(0);
        let Some(counts) = counts else {
            root.gather_varcount_into(values);
            return None;
        };
        let counts: Vec<Count> = counts.iter().map(|&c| count(c as usize)).collect();
        let mut displs = vec![0; counts.len()];
        prefix_sums(&counts, &mut displs);
        let mut all = buffer(counts.iter().map(|&c| c as usize).sum());
        let mut partition = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        root.gather_varcount_into_root(values, &mut partition);
        Some(all)
    }
}

impl Executor for MpiWorld {
    /// [`rank_shards`] of this rank.
    fn local_shards(&self, layout: &Layout) -> Range<usize> {
        rank_shards(layout.shards(), self.rank, self.size)
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
        let local = self.local_shards(layout);
        let exchange = RankExchange::<M::Payload>::new(layout, local.clone(), self.size);
        let leader = RankComm {
            exchange: &exchange,
            shard: local.start,
            leader: Some(Leader::new(&self.world, self.size)),
            max_calls: 0,
        };
        run_shards(
            local,
            |shard| RankComm {
                exchange: &exchange,
                shard,
                leader: None,
                max_calls: 0,
            },
            Some(leader),
            |shard, comm| {
                let model = make_model(shard, layout.nodes(shard));
                run_shard(layout, shard, seed, end, model, comm, progress)
            },
        )
    }

    fn max_over_processes(&self, value: u64) -> u64 {
        let mut max = 0u64;
        self.world
            .all_reduce_into(&value, &mut max, SystemOperation::max());
        max
    }
}

/// State shared by the threads of one rank.
struct RankExchange<P> {
    layout: Layout,
    /// This rank's shards.
    local: Range<usize>,
    ranks: usize,
    barrier: Barrier,
    /// `mailboxes[(from - local.start) * shards + to]`, for every shard `to`
    /// of the run: the same rank's read them directly, the leader sends the
    /// others'.
    mailboxes: Vec<Mutex<Vec<Event<P>>>>,
    /// Events from other ranks, per local shard.
    incoming: Vec<Mutex<Vec<Event<P>>>>,
    /// Next event time of each local shard, in picoseconds.
    next_times: Vec<AtomicU64>,
    global_next: AtomicU64,
    /// `all_max` accumulators by call parity (see `ThreadComm::all_max`).
    maxima: [Mutex<(u64, Vec<u64>)>; 2],
}

impl<P> RankExchange<P> {
    fn new(layout: &Layout, local: Range<usize>, ranks: usize) -> RankExchange<P> {
        let threads = local.len();
        assert!(threads > 0, "a rank needs at least one shard");
        RankExchange {
            layout: layout.clone(),
            barrier: Barrier::new(threads),
            mailboxes: (0..threads * layout.shards())
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            incoming: (0..threads).map(|_| Mutex::new(Vec::new())).collect(),
            next_times: (0..threads).map(|_| AtomicU64::new(u64::MAX)).collect(),
            global_next: AtomicU64::new(u64::MAX),
            maxima: [
                Mutex::new((u64::MAX, Vec::new())),
                Mutex::new((u64::MAX, Vec::new())),
            ],
            local,
            ranks,
        }
    }

    fn mailbox(&self, from: usize, to: usize) -> std::sync::MutexGuard<'_, Vec<Event<P>>> {
        self.mailboxes[(from - self.local.start) * self.layout.shards() + to]
            .lock()
            .expect("mailbox poisoned")
    }
}

/// The rank's MPI side, run by its first shard between the two barriers.
/// Buffers keep their capacity from window to window.
struct Leader<'w> {
    world: &'w SimpleCommunicator,
    send: Vec<u8>,
    recv: Vec<u8>,
    send_counts: Vec<Count>,
    send_displs: Vec<Count>,
    recv_counts: Vec<Count>,
    recv_displs: Vec<Count>,
}

impl<'w> Leader<'w> {
    fn new(world: &'w SimpleCommunicator, ranks: usize) -> Leader<'w> {
        Leader {
            world,
            // Allocated up front: see `not_in_place`.
            send: Vec::with_capacity(1 << 16),
            recv: Vec::with_capacity(1 << 16),
            send_counts: vec![0; ranks],
            send_displs: vec![0; ranks],
            recv_counts: vec![0; ranks],
            recv_displs: vec![0; ranks],
        }
    }

    fn exchange<P: Wire>(&mut self, x: &RankExchange<P>) {
        let local_next = x
            .next_times
            .iter()
            .map(|t| t.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX);
        let mut global_next = u64::MAX;
        self.world
            .all_reduce_into(&local_next, &mut global_next, SystemOperation::min());

        let per_rank = x.local.len();
        let me = x.local.start / per_rank;
        self.send.clear();
        for rank in 0..x.ranks {
            let start = self.send.len();
            if rank != me {
                for from in x.local.clone() {
                    for to in rank * per_rank..(rank + 1) * per_rank {
                        let mut mailbox = x.mailbox(from, to);
                        for event in mailbox.iter() {
                            encode_event(event, &mut self.send);
                        }
                        mailbox.clear();
                    }
                }
            }
            self.send_displs[rank] = count(start);
            self.send_counts[rank] = count(self.send.len() - start);
        }
        self.world
            .all_to_all_into(&self.send_counts[..], &mut self.recv_counts[..]);
        prefix_sums(&self.recv_counts, &mut self.recv_displs);
        let received = self.recv_counts.iter().map(|&c| c as usize).sum();
        self.recv.resize(received, 0);
        self.world.all_to_all_varcount_into(
            &Partition::new(&self.send[..], &self.send_counts[..], &self.send_displs[..]),
            &mut PartitionMut::new(
                &mut self.recv[..],
                &self.recv_counts[..],
                &self.recv_displs[..],
            ),
        );

        let mut inboxes: Vec<_> = x
            .incoming
            .iter()
            .map(|m| m.lock().expect("inbox poisoned"))
            .collect();
        for event in decode_events::<P>(&self.recv) {
            let shard = x.layout.shard_of(event.target).index();
            assert!(
                x.local.contains(&shard),
                "rank {me} received an event for node {} of shard {shard}",
                event.target
            );
            inboxes[shard - x.local.start].push(event);
        }
        x.global_next.store(global_next, Ordering::Relaxed);
    }
}

/// One shard's endpoint of a [`RankExchange`]; the rank's first shard also
/// holds the [`Leader`].
struct RankComm<'a, 'w, P> {
    exchange: &'a RankExchange<P>,
    shard: usize,
    leader: Option<Leader<'w>>,
    /// `all_max` calls so far (the same on every shard of every rank).
    max_calls: u64,
}

impl<P: Wire + Send> Comm<P> for RankComm<'_, '_, P> {
    fn exchange(
        &mut self,
        outboxes: &mut [Vec<Event<P>>],
        local_next: SimTime,
        inbox: &mut Vec<Event<P>>,
    ) -> Result<SimTime, Aborted> {
        let x = self.exchange;
        for (to, outbox) in outboxes.iter_mut().enumerate() {
            if !outbox.is_empty() {
                x.mailbox(self.shard, to).append(outbox);
            }
        }
        x.next_times[self.shard - x.local.start].store(local_next.0, Ordering::Relaxed);
        x.barrier.wait()?;
        for from in x.local.clone() {
            inbox.append(&mut x.mailbox(from, self.shard));
        }
        if let Some(leader) = &mut self.leader {
            leader.exchange(x);
        }
        x.barrier.wait()?;
        inbox.append(
            &mut x.incoming[self.shard - x.local.start]
                .lock()
                .expect("inbox poisoned"),
        );
        Ok(SimTime(x.global_next.load(Ordering::Relaxed)))
    }

    fn all_max(&mut self, values: &mut [u64]) -> Result<(), Aborted> {
        // The rank's threads merge, its leader reduces over ranks between
        // two barriers, and everyone reads the result.
        let x = self.exchange;
        let call = self.max_calls;
        self.max_calls += 1;
        let acc = &x.maxima[(call % 2) as usize];
        crate::sync::merge_max(&mut acc.lock().expect("maxima poisoned"), call, values);
        x.barrier.wait()?;
        if let Some(leader) = &self.leader {
            let mut acc = acc.lock().expect("maxima poisoned");
            let mut global = buffer(acc.1.len());
            leader.world.all_reduce_into(
                not_in_place(&acc.1),
                &mut global[..],
                SystemOperation::max(),
            );
            acc.1 = global;
        }
        x.barrier.wait()?;
        values.copy_from_slice(&acc.lock().expect("maxima poisoned").1);
        Ok(())
    }

    fn abort(&self) {
        self.exchange.barrier.abort();
    }
}

/// `n` as an MPI count.
///
/// # Panics
/// Beyond `i32::MAX` (2 GiB of events for one rank in one window).
fn count(n: usize) -> Count {
    Count::try_from(n).unwrap_or_else(|_| {
        panic!("{n} bytes for one rank in one window exceed MPI's 32-bit counts")
    })
}

// Open MPI's `MPI_IN_PLACE` is the address 1, which is also where Rust puts
// empty slices of bytes: an empty buffer must point at real memory, or MPI
// reads it as "in place".

/// `values`, or an empty slice at a real address.
fn not_in_place(values: &[u64]) -> &[u64] {
    static EMPTY: [u64; 1] = [0];
    if values.is_empty() {
        &EMPTY[..0]
    } else {
        values
    }
}

/// A zeroed receive buffer of `len` values, allocated even when empty.
fn buffer(len: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(len.max(1));
    v.resize(len, 0);
    v
}

/// `starts[i]` = sum of `counts[..i]`.
fn prefix_sums(counts: &[Count], starts: &mut [Count]) {
    let mut sum = 0;
    for (start, &c) in starts.iter_mut().zip(counts) {
        *start = sum;
        sum += c;
    }
}
