//! netsim-engine: a conservative parallel discrete-event engine.
//!
//! The engine knows nothing of packets. It moves small `Copy` payloads
//! between *nodes*, each owned by exactly one *shard*; a shard is one event
//! queue run by one worker (a thread, or a thread of an MPI rank).
//!
//! # Ordering contract
//!
//! Every event carries the key `(time, source node, source seq)`, where
//! `source seq` counts the events the source node has created. Events are
//! handled in increasing key order. Because a node numbers the events it
//! creates itself, keys do not depend on how nodes are assigned to shards,
//! and neither does anything a model computes: **a run on 1, 2, 4 or 64
//! shards produces byte-identical results.** Random numbers come from a
//! stream per node derived from `(seed, node id)` ([`NodeRng`]), never from
//! the shard or thread.
//!
//! # Synchronisation
//!
//! Nodes influence other nodes only through links, and every link has a
//! latency of at least 1 ps. The *lookahead* `L` of a [`Layout`] is the
//! minimum latency over the links between shards. Runs proceed in bounded
//! windows: all shards agree on `T`, the earliest pending event anywhere,
//! handle their events earlier than `T + L`, then exchange the events they
//! created for each other ([`Comm`]). An event sent to another shard must be
//! timestamped at least `now + L`; the engine asserts it, since an earlier
//! one could land inside a window the receiver has already run.
//!
//! Where the shards run is an [`Executor`]: [`Threads`] of this process, or
//! (feature `mpi`) the ranks x threads of an MPI job (`mpi::MpiWorld`), where
//! events for other ranks travel in their [`Wire`] encoding.
//!
//! # Hot path
//!
//! Handling an event allocates nothing once queues and outboxes have grown
//! to their steady-state sizes: the queue is a radix heap over `Vec`s, and
//! outboxes and mailboxes keep their capacity from window to window.

mod executor;
mod ids;
mod layout;
#[cfg(feature = "mpi")]
pub mod mpi;
mod progress;
mod queue;
mod rng;
mod shard;
mod skip;
pub mod sync;
mod threads;
mod time;
pub mod wire;

pub use executor::{rank_shards, Executor, Threads};
pub use ids::{NodeId, ShardId};
pub use layout::{Layout, LayoutError};
pub use progress::{Progress, Stopped};
pub use queue::{Event, EventQueue, MAX_NODES};
pub use rng::{splitmix64, NodeRng};
pub use shard::{run_shard, Context, Inject, Model, ShardReport, EXTERNAL_SEQ_BASE};
pub use skip::{AllMax, SkipProposal, SkipStats};
pub use sync::{Aborted, Comm};
pub use threads::run_on_threads;
pub use time::{SimTime, TimeRangeError};
pub use wire::Wire;
