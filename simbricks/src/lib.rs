//! SimBricks protocol version 1 in pure Rust: the network upper layer, both roles.
//!
//! SimBricks (SIGCOMM '22) joins separate simulators through shared-memory
//! rings with conservative synchronisation by link latency. This crate
//! speaks that protocol without SimBricks' C library: [`Params::parse`]
//! reads SimBricks' URLs, [`Channel::listen`] and [`Channel::connect`]
//! establish a link (UNIX socket, pool descriptor over `SCM_RIGHTS`), and a
//! [`Channel`] moves packets, SYNCs and TERMINATE. [`dummy_nic`] is a small
//! peer for tests. Times are picoseconds, as on SimBricks' wire.

pub mod conn;
pub mod dummy_nic;
pub mod proto;
mod ring;
pub mod url;

pub use conn::{Channel, RingSize};
pub use ring::Received;
pub use url::{Params, Role};

/// The largest latency or sync interval accepted: 100 ms, in picoseconds
/// (netsim's bound on link latencies, so sums of times stay in range).
pub const LATENCY_PS_MAX: u64 = 100_000_000_000;

/// What can go wrong on a SimBricks link.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad SimBricks URL: {0}")]
    Url(String),
    #[error("cannot connect to SimBricks socket {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("SimBricks handshake failed: {0}")]
    Handshake(String),
    #[error("SimBricks peer timed out: {0}")]
    Timeout(&'static str),
    #[error("SimBricks peer disconnected")]
    Disconnected,
    #[error("frame of {frame_bytes} bytes does not fit a SimBricks slot ({slot_frame_bytes} bytes of frame)")]
    FrameTooLarge {
        frame_bytes: usize,
        slot_frame_bytes: usize,
    },
    #[error("SimBricks link I/O: {0}")]
    Io(#[from] std::io::Error),
}
