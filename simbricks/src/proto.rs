//! The byte layout of SimBricks protocol version 1: intro messages and ring slots.
//!
//! Facts from SimBricks' `lib/simbricks/base/proto.h` and
//! `lib/simbricks/network/proto.h`. All structures are packed; integers are
//! in the host's byte order, which SimBricks only supports as little endian
//! (x86-64, aarch64), so this crate writes little endian explicitly.

/// The protocol version both intros carry.
pub const PROTO_VERSION: u64 = 1;
/// Upper-layer protocol id of the network protocol (`SIMBRICKS_PROTO_ID_NET`).
pub const PROTO_ID_NET: u64 = 0x01;

/// Intro flag: this side wants synchronisation (`..._FLAGS_LI_SYNC`, `..._CO_SYNC`).
pub const FLAG_SYNC: u64 = 1 << 0;
/// Intro flag: this side insists on synchronisation (`..._SYNC_FORCE`).
pub const FLAG_SYNC_FORCE: u64 = 1 << 1;

/// Size of the listener intro: ten packed u64s.
pub const LISTENER_INTRO_BYTES: usize = 80;
/// Size of the connecter intro: four packed u64s.
pub const CONNECTER_INTRO_BYTES: usize = 32;
/// Size of the network upper-layer intro (`SimbricksProtoNetIntro`: one unused u32).
pub const NET_INTRO_BYTES: usize = 4;

/// Size of a slot header; a packet's frame starts right after it.
pub const SLOT_HEADER_BYTES: usize = 64;
/// Offset of the frame length (u16) in a PACKET slot.
pub const PACKET_LEN_OFFSET: usize = 0;
/// Offset of the port (u8) in a PACKET slot.
pub const PACKET_PORT_OFFSET: usize = 2;
/// Offset of the timestamp (u64, picoseconds) in every slot.
pub const TIMESTAMP_OFFSET: usize = 48;
/// Offset of the ownership/type byte in every slot.
pub const OWN_TYPE_OFFSET: usize = 63;

/// Ownership bit of the own/type byte.
pub const OWN_MASK: u8 = 0x80;
/// The consumer owns the slot (it holds a message).
pub const OWN_CONSUMER: u8 = 0x80;
/// The producer owns the slot (it is free).
pub const OWN_PRODUCER: u8 = 0x00;
/// Message type bits of the own/type byte.
pub const TYPE_MASK: u8 = 0x7f;
/// A pure synchronisation message.
pub const TYPE_SYNC: u8 = 0x00;
/// The peer terminates; no more synchronisation on this link.
pub const TYPE_TERMINATE: u8 = 0x01;
/// A network packet (`SIMBRICKS_PROTO_NET_MSG_PACKET`).
pub const TYPE_NET_PACKET: u8 = 0x40;

/// Default slot count per direction (`SimbricksBaseIfDefaultParams`).
pub const DEFAULT_SLOTS: usize = 8192;
/// Default slot size of the network protocol: a 1,536-byte frame and the
/// header (`SimbricksNetIfDefaultParams`).
pub const DEFAULT_NET_SLOT_BYTES: usize = 1536 + SLOT_HEADER_BYTES;
/// Default link latency and sync interval: 500 ns, in picoseconds.
pub const DEFAULT_LATENCY_PS: u64 = 500_000;

/// The listener's intro: the layout of the shared-memory pool it passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerIntro {
    pub version: u64,
    pub flags: u64,
    /// Listener-to-connecter ring: byte offset in the pool, slot size, slot count.
    pub l2c_offset: u64,
    pub l2c_slot_bytes: u64,
    pub l2c_slots: u64,
    /// Connecter-to-listener ring.
    pub c2l_offset: u64,
    pub c2l_slot_bytes: u64,
    pub c2l_slots: u64,
    pub upper_layer_proto: u64,
    /// Offset of the upper-layer intro from the start of this message (80).
    pub upper_layer_intro_offset: u64,
}

/// The connecter's intro.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnecterIntro {
    pub version: u64,
    pub flags: u64,
    pub upper_layer_proto: u64,
    /// Offset of the upper-layer intro from the start of this message (32).
    pub upper_layer_intro_offset: u64,
}

fn put_u64s(values: &[u64], out: &mut [u8]) {
    for (chunk, value) in out.chunks_exact_mut(8).zip(values) {
        chunk.copy_from_slice(&value.to_le_bytes());
    }
}

fn get_u64(bytes: &[u8], index: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[index * 8..index * 8 + 8]);
    u64::from_le_bytes(word)
}

impl ListenerIntro {
    /// The packed bytes, in field order.
    pub fn encode(&self) -> [u8; LISTENER_INTRO_BYTES] {
        let mut out = [0u8; LISTENER_INTRO_BYTES];
        put_u64s(
            &[
                self.version,
                self.flags,
                self.l2c_offset,
                self.l2c_slot_bytes,
                self.l2c_slots,
                self.c2l_offset,
                self.c2l_slot_bytes,
                self.c2l_slots,
                self.upper_layer_proto,
                self.upper_layer_intro_offset,
            ],
            &mut out,
        );
        out
    }

    /// Reads an intro from the start of `bytes`; `None` when too short.
    pub fn decode(bytes: &[u8]) -> Option<ListenerIntro> {
        (bytes.len() >= LISTENER_INTRO_BYTES).then(|| ListenerIntro {
            version: get_u64(bytes, 0),
            flags: get_u64(bytes, 1),
            l2c_offset: get_u64(bytes, 2),
            l2c_slot_bytes: get_u64(bytes, 3),
            l2c_slots: get_u64(bytes, 4),
            c2l_offset: get_u64(bytes, 5),
            c2l_slot_bytes: get_u64(bytes, 6),
            c2l_slots: get_u64(bytes, 7),
            upper_layer_proto: get_u64(bytes, 8),
            upper_layer_intro_offset: get_u64(bytes, 9),
        })
    }
}

impl ConnecterIntro {
    /// The packed bytes, in field order.
    pub fn encode(&self) -> [u8; CONNECTER_INTRO_BYTES] {
        let mut out = [0u8; CONNECTER_INTRO_BYTES];
        put_u64s(
            &[
                self.version,
                self.flags,
                self.upper_layer_proto,
                self.upper_layer_intro_offset,
            ],
            &mut out,
        );
        out
    }

    /// Reads an intro from the start of `bytes`; `None` when too short.
    pub fn decode(bytes: &[u8]) -> Option<ConnecterIntro> {
        (bytes.len() >= CONNECTER_INTRO_BYTES).then(|| ConnecterIntro {
            version: get_u64(bytes, 0),
            flags: get_u64(bytes, 1),
            upper_layer_proto: get_u64(bytes, 2),
            upper_layer_intro_offset: get_u64(bytes, 3),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_offsets_match_simbricks_headers() {
        // SimbricksProtoNetMsgPacket: len u16, port u8, pad[45], timestamp u64,
        // pad_[7], own_type u8, data[].
        assert_eq!(PACKET_LEN_OFFSET, 0);
        assert_eq!(PACKET_PORT_OFFSET, 2);
        assert_eq!(PACKET_PORT_OFFSET + 1 + 45, TIMESTAMP_OFFSET);
        assert_eq!(TIMESTAMP_OFFSET + 8 + 7, OWN_TYPE_OFFSET);
        assert_eq!(OWN_TYPE_OFFSET + 1, SLOT_HEADER_BYTES);
        assert_eq!(SLOT_HEADER_BYTES, 64);
        assert_eq!(DEFAULT_NET_SLOT_BYTES, 1600);
        assert_eq!(DEFAULT_SLOTS, 8192);
        assert_eq!(
            (OWN_CONSUMER, TYPE_SYNC, TYPE_TERMINATE, TYPE_NET_PACKET),
            (0x80, 0x00, 0x01, 0x40)
        );
    }

    #[test]
    fn listener_intro_is_ten_packed_u64s() {
        let intro = ListenerIntro {
            version: PROTO_VERSION,
            flags: FLAG_SYNC | FLAG_SYNC_FORCE,
            l2c_offset: 3,
            l2c_slot_bytes: 4,
            l2c_slots: 5,
            c2l_offset: 6,
            c2l_slot_bytes: 7,
            c2l_slots: 8,
            upper_layer_proto: PROTO_ID_NET,
            upper_layer_intro_offset: LISTENER_INTRO_BYTES as u64,
        };
        let bytes = intro.encode();
        assert_eq!(bytes.len(), 80);
        let expected = [1u64, 3, 3, 4, 5, 6, 7, 8, 1, 80];
        for (i, value) in expected.iter().enumerate() {
            assert_eq!(bytes[i * 8..i * 8 + 8], value.to_le_bytes(), "field {i}");
        }
        assert_eq!(ListenerIntro::decode(&bytes), Some(intro));
        assert_eq!(ListenerIntro::decode(&bytes[..79]), None);
    }

    #[test]
    fn connecter_intro_is_four_packed_u64s() {
        let intro = ConnecterIntro {
            version: PROTO_VERSION,
            flags: FLAG_SYNC,
            upper_layer_proto: PROTO_ID_NET,
            upper_layer_intro_offset: CONNECTER_INTRO_BYTES as u64,
        };
        let bytes = intro.encode();
        assert_eq!(bytes.len(), 32);
        for (i, value) in [1u64, 1, 1, 32].iter().enumerate() {
            assert_eq!(bytes[i * 8..i * 8 + 8], value.to_le_bytes(), "field {i}");
        }
        assert_eq!(ConnecterIntro::decode(&bytes), Some(intro));
        assert_eq!(NET_INTRO_BYTES, 4);
    }
}
