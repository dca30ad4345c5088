//! A fixed-size byte encoding of events, for shards in other processes.
//!
//! Threads hand events to each other as values; MPI ranks need bytes. A
//! payload says how it encodes ([`Wire`]); the engine adds the event's time,
//! key and target. Every value of a payload type encodes to the same number
//! of bytes, so a buffer of events is a plain array of records and decoding
//! needs no framing. The encoding is explicit (no transmuted structs): it
//! carries no padding bytes, and ranks need not agree on Rust's layout.

use crate::{Event, NodeId, SimTime};

/// A payload that can cross process boundaries unchanged.
///
/// `decode(encode(x)) == x` must hold for every value, and `encode` must
/// write exactly [`Wire::WIRE_BYTES`] bytes.
pub trait Wire: Copy {
    /// Encoded size of every value, in bytes.
    const WIRE_BYTES: usize;

    fn encode(&self, out: &mut WireWriter<'_>);

    /// Reads a value `encode` wrote.
    ///
    /// # Panics
    /// On bytes no value encodes to (a bug: only `encode` produces them).
    fn decode(input: &mut WireReader<'_>) -> Self;
}

/// Appends little-endian fields to a byte buffer.
pub struct WireWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl WireWriter<'_> {
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    #[inline]
    pub fn bool(&mut self, v: bool) {
        self.out.push(u8::from(v));
    }
    #[inline]
    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    /// Pads with zeros up to `len` bytes written since `start` (variants of
    /// an enum that encode shorter than the longest one).
    #[inline]
    pub fn pad_to(&mut self, start: usize, len: usize) {
        self.out.resize(start + len, 0);
    }
    /// Bytes in the buffer so far, for [`WireWriter::pad_to`].
    #[inline]
    pub fn position(&self) -> usize {
        self.out.len()
    }
}

/// Reads little-endian fields from a byte slice.
pub struct WireReader<'a> {
    input: &'a [u8],
}

impl WireReader<'_> {
    #[inline]
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.input.split_at(N);
        self.input = rest;
        head.try_into().expect("split_at gave N bytes")
    }
    #[inline]
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    /// # Panics
    /// If the byte is neither 0 nor 1.
    #[inline]
    pub fn bool(&mut self) -> bool {
        match self.u8() {
            0 => false,
            1 => true,
            b => panic!("invalid bool {b} on the wire"),
        }
    }
    #[inline]
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    #[inline]
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    #[inline]
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

impl Wire for u32 {
    const WIRE_BYTES: usize = 4;
    fn encode(&self, out: &mut WireWriter<'_>) {
        out.u32(*self);
    }
    fn decode(input: &mut WireReader<'_>) -> u32 {
        input.u32()
    }
}

impl Wire for u64 {
    const WIRE_BYTES: usize = 8;
    fn encode(&self, out: &mut WireWriter<'_>) {
        out.u64(*self);
    }
    fn decode(input: &mut WireReader<'_>) -> u64 {
        input.u64()
    }
}

/// Time (8), key (8) and target (4) precede the payload.
const HEADER_BYTES: usize = 20;

/// Bytes of one encoded event carrying a `P`.
pub const fn event_bytes<P: Wire>() -> usize {
    HEADER_BYTES + P::WIRE_BYTES
}

/// Appends the encoding of `event` to `out`.
///
/// # Panics
/// If the payload's `encode` does not write exactly `WIRE_BYTES` bytes.
#[inline]
pub fn encode_event<P: Wire>(event: &Event<P>, out: &mut Vec<u8>) {
    let start = out.len();
    let mut w = WireWriter { out };
    w.u64(event.time.0);
    w.u64(event.order());
    w.u32(event.target.0);
    event.payload.encode(&mut w);
    assert_eq!(
        out.len() - start,
        event_bytes::<P>(),
        "a payload encoded to a size other than its WIRE_BYTES"
    );
}

/// The events encoded in `bytes` (a whole number of records).
///
/// # Panics
/// If `bytes` is not a whole number of records, or a payload does not decode.
pub fn decode_events<P: Wire>(bytes: &[u8]) -> impl Iterator<Item = Event<P>> + '_ {
    let size = event_bytes::<P>();
    assert!(
        bytes.len().is_multiple_of(size),
        "received {} bytes, not a whole number of {size}-byte events",
        bytes.len()
    );
    bytes.chunks_exact(size).map(|record| {
        let mut r = WireReader { input: record };
        let time = SimTime(r.u64());
        let order = r.u64();
        let target = NodeId(r.u32());
        let payload = P::decode(&mut r);
        assert!(
            r.input.is_empty(),
            "a payload decoded short of its WIRE_BYTES"
        );
        Event::from_parts(time, order, target, payload)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_cross_unchanged() {
        let events = [
            Event::new(SimTime(7), NodeId(3), 9, NodeId(4), 0xDEAD_BEEF_u64),
            Event::new(
                SimTime(u64::MAX - 1),
                NodeId((1 << 24) - 1),
                (1 << 40) - 1,
                NodeId(0),
                0,
            ),
        ];
        let mut bytes = Vec::new();
        for e in &events {
            encode_event(e, &mut bytes);
        }
        assert_eq!(bytes.len(), 2 * 28);
        let back: Vec<Event<u64>> = decode_events(&bytes).collect();
        assert_eq!(back, events);
        assert_eq!(back[1].src(), NodeId((1 << 24) - 1));
        assert_eq!(back[1].seq(), (1 << 40) - 1);
    }

    #[test]
    #[should_panic(expected = "not a whole number")]
    fn a_torn_buffer_is_caught() {
        let _ = decode_events::<u32>(&[0; 25]);
    }
}
