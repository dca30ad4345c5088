//! Packets: small plain values, copied into events and queues.

use super::common::NO_NODE;

/// What a packet is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// RoCEv2 payload of one flow.
    Data,
    /// Cumulative acknowledgement: every packet before `psn` arrived.
    Ack,
    /// Go-back-N request: resend from `psn`.
    Nack,
    /// DCQCN congestion notification from the receiver.
    Cnp,
    /// In-network aggregation, toward the root of operation `flow`'s tree:
    /// chunk `psn` from a member or a partial aggregate from a child switch.
    InaUp,
    /// In-network aggregation result of chunk `psn`, multicast down the tree.
    InaDown,
    /// Ultra Ethernet selective acknowledgement of data packet `psn` (or,
    /// with `last` set, cumulative: every packet before `psn` arrived).
    Sack,
    /// Ultra Ethernet: the header of data packet `psn`, whose payload a
    /// switch cut off rather than drop (trimming); travels at control priority.
    Trimmed,
    /// Ultra Ethernet RCCC: the receiver grants flow `flow`'s sender `psn`
    /// more packets of new data.
    Credit,
    /// A frame from a SimBricks peer (`external`).
    External,
    /// Ultra Ethernet SLEEK: a header-sized probe `psn` of flow `flow`,
    /// queued with data so that its ACK measures the data queues.
    Probe,
    /// Ultra Ethernet SLEEK: the receiver's answer to probe `util`, with its
    /// cumulative point in `psn` and the probe's ECN mark.
    ProbeAck,
}

/// Egress priority classes. Control packets (ACK, NACK, CNP) have strict
/// priority over data, and only data is paused by PFC.
pub const PRIO_CONTROL: usize = 0;
pub const PRIO_DATA: usize = 1;
pub const PRIORITIES: usize = 2;

/// One packet on the wire. 32 bytes, so an event carrying it stays small:
/// a wider packet (40 bytes, with a separate 64-bit SACK mask) measured 5%
/// more CPU time on the k=16 permutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub flow: u32,
    /// Source and destination hosts (data direction for data, reversed for control).
    pub src: u32,
    pub dst: u32,
    /// Data: packet sequence number. ACK/NACK: next expected sequence number.
    pub psn: u32,
    /// Size on the wire, headers included.
    pub wire_bytes: u16,
    /// The port this packet entered the current switch on (PFC accounting).
    pub in_port: u16,
    pub kind: PacketKind,
    /// Data: Congestion Experienced. ACK: number of acknowledged packets that were CE.
    pub ce: u8,
    /// Data: last packet of the flow.
    pub last: bool,
    /// Ultra Ethernet coalesced SACK: how far below `psn` the window of
    /// its mask starts (in what would otherwise be padding).
    pub sack_offset: u8,
    /// Dragonfly Valiant/UGAL: the intermediate router still to visit, or
    /// `u32::MAX`. Ultra Ethernet SACK: the low 32 bits of its mask (SACKs
    /// never take a Valiant path, and routing ignores this for them).
    pub via: u32,
    /// HPCC: the highest normalised link utilisation on the path so far, in
    /// 1/1024 units (data), echoed back (ACK). Ultra Ethernet: a data
    /// packet's ACK request; a SACK's high 16 bits of its mask.
    pub util: u16,
    /// Ultra Ethernet: the entropy value the switches' ECMP hash adds to the
    /// 5-tuple (data), echoed back (SACK, NACK); 0 for RoCE, which leaves
    /// the hash as the 5-tuple alone.
    pub entropy: u16,
}

/// Fixed-point scale of [`Packet::util`].
pub const UTIL_ONE: f64 = 1024.0;

impl Packet {
    /// An Ultra Ethernet SACK's mask: bit `i` names psn − `sack_offset` + `i`
    /// as arrived too, as uet-htsim's SACK bitmap does (48 bits here, 64
    /// there). Kept in `via` (low 32 bits) and `util` (high 16).
    #[inline]
    pub fn sack_mask(&self) -> u64 {
        debug_assert_eq!(self.kind, PacketKind::Sack);
        u64::from(self.util) << 32 | u64::from(self.via)
    }

    /// Sets [`Packet::sack_mask`]; `mask` has at most 48 bits.
    #[inline]
    pub fn set_sack_mask(&mut self, mask: u64) {
        debug_assert!(mask >> 48 == 0, "SACK mask {mask:#x} wider than 48 bits");
        self.via = mask as u32;
        self.util = (mask >> 32) as u16;
    }

    /// A packet of `kind` with nothing set beyond what names it: not marked,
    /// not a flow's last, no Valiant waypoint, no telemetry or SACK mask,
    /// entropy 0, not yet inside a switch. Builders set what differs with
    /// `Packet { field, ..Packet::new(..) }`.
    #[inline]
    pub(crate) const fn new(
        kind: PacketKind,
        flow: u32,
        src: u32,
        dst: u32,
        psn: u32,
        wire_bytes: u16,
    ) -> Packet {
        Packet {
            flow,
            src,
            dst,
            psn,
            wire_bytes,
            in_port: 0,
            kind,
            ce: 0,
            last: false,
            via: NO_NODE,
            util: 0,
            entropy: 0,
            sack_offset: 0,
        }
    }

    /// The control packet of `kind` a host answers `self` with: the same
    /// flow, back from `self`'s destination to its source.
    #[inline]
    pub(crate) const fn reply(&self, kind: PacketKind, psn: u32, wire_bytes: u16) -> Packet {
        Packet::new(kind, self.flow, self.dst, self.src, psn, wire_bytes)
    }

    /// An empty data packet of `flow` from `src` to `dst`: what a host asks
    /// its routing with to learn which port the flow leaves by.
    pub(crate) fn route_probe(flow: u32, src: u32, dst: u32) -> Packet {
        Packet::new(PacketKind::Data, flow, src, dst, 0, 0)
    }

    /// A full-size data packet of `flow` from host 3 to host 11, for tests
    /// of queues and switches that only tell packets apart by flow and PSN.
    #[cfg(test)]
    pub fn test_data(flow: u32, psn: u32) -> Packet {
        Packet::new(PacketKind::Data, flow, 3, 11, psn, 4158)
    }

    #[inline]
    pub fn priority(&self) -> usize {
        match self.kind {
            PacketKind::Data | PacketKind::InaUp | PacketKind::InaDown | PacketKind::Probe => {
                PRIO_DATA
            }
            _ => PRIO_CONTROL,
        }
    }
}
