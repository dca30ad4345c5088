//! Ports: a node's egress queues per priority, serialisation onto the link,
//! the PFC pause state the peer imposes, and the HPCC telemetry stamp.
//!
//! A busy port with a queue keeps exactly one pending `TxDone` for when it
//! frees up; a packet put on the wire is one `Arrive` event at the peer,
//! after serialisation plus link latency. What to send next is the owner's
//! choice: the switch's queues (`switch.rs`) or the NIC's flows (`nic/`).
//!
//! Rooms: the port's layout and state (here), its queues (`queue`), the
//! ports of a shard built from the topology (`build`), and serialisation,
//! `TxDone` and PFC frames (`transmit`).

mod build;
mod queue;
mod transmit;

pub(crate) use build::{shard_ports, ShardPorts};
pub(crate) use queue::PacketQueue;

use super::cc::IntRecords;
use super::packet::PRIORITIES;
use netsim_engine::{NodeId, SimTime};

/// One egress port of a node: what a packet crossing it reads, in three
/// cache lines. The first holds the link, the serialiser's state, the
/// peer's pause and whether a fault holds the link down; each priority's
/// queue has a line of its own (its front packet and the ring's header).
/// What no per-packet step reads lives in side arrays by the same index
/// (`Network::port_side`, `ecn`, `hosts`, `health`): with them
/// in, a port was 464 bytes, and on k=16 the out-port's first line was
/// the largest miss of a switch hop (two thirds of `switch_enqueue`).
/// The ingress accounting of the same link is `Network::ingress`. The
/// bytes sent are counted on the first line up to 64 KiB a priority
/// (`tx_unflushed`), then moved to `Network::tx_flushed`: adding to that
/// array on every transmit was a cache miss each time (7% of a k=16 run's
/// misses past L2).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Port {
    /// The link and its peer (a fault may slow it).
    pub link: Link,
    /// The serialiser and the bytes queued.
    pub egress: Egress,
    /// The peer paused the data class (PFC); since when is in `PortSide`.
    pub paused: bool,
    /// Faults holding the link down, 0 when it works (`faults.rs`; the
    /// rest of the link's health is `Network::health`).
    pub down_causes: u8,
    /// Bytes sent per priority not yet in `Network::tx_flushed`
    /// (`Network::tx_bytes` adds both).
    pub tx_unflushed: [u16; PRIORITIES],
    /// Its ECN thresholds: an index into `Network::ecn`, the shard's
    /// distinct markings (a few: by link rate). A per-port array of them
    /// missed the cache on most data packets a switch queued.
    pub ecn_class: u16,
    /// The egress queues per priority, a cache line each.
    pub queues: [PacketQueue; PRIORITIES],
}

// The layout the comment above promises: a first line of state, then the
// queues on lines of their own.
const _: () = assert!(std::mem::size_of::<Port>() == 192);
const _: () = assert!(std::mem::offset_of!(Port, queues) == 64);

/// The port's state that no per-packet step reads (rarely, or only under
/// HPCC): counters for telemetry, when the peer's pause began, HPCC's meter.
#[derive(Debug, Default)]
pub(crate) struct PortSide {
    /// Packet and drop counters, for telemetry (bytes sent: `Network::tx_bytes`).
    pub counters: PortCounters,
    /// When the current PFC pause began (`Port::paused`).
    pub pause_since: SimTime,
    /// HPCC's rate measurement and INT records (`transmit` stamps packets).
    pub hpcc: RateMeter,
}

/// Where a port's packets go, and how fast.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Link {
    pub peer: NodeId,
    pub peer_port: u16,
    pub rate_bps: u64,
    pub latency: SimTime,
}

/// A port's serialiser and the bytes in its egress queues per priority
/// (0 exactly when the queue is empty: every packet has wire bytes).
#[derive(Debug, Default)]
pub(crate) struct Egress {
    pub queued_bytes: [u64; PRIORITIES],
    /// The port is serialising until then.
    pub busy_until: SimTime,
    /// A `TxDone` is scheduled for `busy_until`.
    pub tx_pending: bool,
    /// Wire bytes of the data packet being serialised until `busy_until`
    /// (0 for a control packet): what a queue that counts the packet in
    /// service holds beyond `queued_bytes`.
    pub in_service_data_bytes: u32,
    /// Bit `prio` set: that queue holds a packet (kept by `Port`'s queue
    /// methods, so that a sender learns it without the queue's line).
    pub nonempty: u8,
}

/// What a port counts for the queue and link samples and the run's totals
/// besides the bytes it sent (`Network::tx_bytes`, added to by every
/// transmit, dense).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortCounters {
    pub ecn_marked_pkts: [u64; PRIORITIES],
    pub dropped_pkts: [u64; PRIORITIES],
    /// Data packets trimmed to their header here (UEC).
    pub trimmed_pkts: u64,
    /// Packets lost to the link's error rate.
    pub error_dropped_pkts: u64,
    /// Bytes on the wire by the last link sample.
    pub sampled_tx_bytes: u64,
}

/// HPCC: bytes sent since `window_start`, the rate measured over the last
/// full window of one base RTT, and under INT deltas the last INT record
/// of each flow crossing.
#[derive(Debug, Default)]
pub(crate) struct RateMeter {
    pub window_start: SimTime,
    pub window_bytes: u64,
    pub measured_rate_bps: f64,
    pub int_records: IntRecords,
}

impl Port {
    /// An idle, empty port toward `peer`'s port `peer_port` over a link of
    /// `rate_bps` and `latency`.
    pub(crate) fn new(peer: NodeId, peer_port: u16, rate_bps: u64, latency: SimTime) -> Port {
        Port {
            link: Link {
                peer,
                peer_port,
                rate_bps,
                latency,
            },
            egress: Egress::default(),
            paused: false,
            down_causes: 0,
            tx_unflushed: [0; PRIORITIES],
            ecn_class: 0,
            queues: Default::default(),
        }
    }

    /// The bytes this port sent per priority, `flushed` its entry of
    /// `Network::tx_flushed` (what `Network::tx_bytes` gives).
    #[inline]
    pub(crate) fn tx_bytes(&self, flushed: &[u64; PRIORITIES]) -> [u64; PRIORITIES] {
        std::array::from_fn(|prio| flushed[prio] + u64::from(self.tx_unflushed[prio]))
    }

    /// Moves this port's count of bytes sent into `flushed`, its entry of
    /// `Network::tx_flushed`, and hands that back to change (fast-forward
    /// moves the bytes sent with a jump).
    pub(crate) fn flush_tx<'a>(
        &mut self,
        flushed: &'a mut [u64; PRIORITIES],
    ) -> &'a mut [u64; PRIORITIES] {
        for (total, bytes) in flushed
            .iter_mut()
            .zip(std::mem::take(&mut self.tx_unflushed))
        {
            *total += u64::from(bytes);
        }
        flushed
    }
}
