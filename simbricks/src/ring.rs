//! One direction of a link: a single-producer single-consumer ring of fixed
//! slots in the shared-memory pool.
//!
//! A slot belongs to the producer while bit 7 of its own/type byte is clear.
//! The producer fills header and frame, then stores the type with the
//! ownership bit set (release); the consumer loads that byte (acquire),
//! copies the message out and hands the slot back with the bit cleared
//! (release). Neither side ever waits here: a full or empty ring is
//! reported to the caller, who retries later.

use crate::proto::*;
use std::sync::atomic::{AtomicU8, Ordering};

/// Where a ring lies in the pool and where this side is in it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ring {
    pub(crate) offset_bytes: usize,
    pub(crate) slot_bytes: usize,
    pub(crate) slots: usize,
    /// Next slot this side reads or writes.
    pub(crate) pos: usize,
}

/// What one received slot held (the frame itself goes to the caller's buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Message type without the ownership bit ([`TYPE_SYNC`], [`TYPE_TERMINATE`], [`TYPE_NET_PACKET`], ...).
    pub kind: u8,
    /// The sender's time plus its link latency, in picoseconds.
    pub timestamp_ps: u64,
    /// The port byte of a packet (0 otherwise).
    pub port: u8,
}

impl Ring {
    /// Checks that the ring lies inside a pool of `pool_bytes` with room for
    /// at least a header per slot.
    pub(crate) fn fits(&self, pool_bytes: usize) -> bool {
        self.slots > 0
            && self.slot_bytes >= SLOT_HEADER_BYTES
            && self
                .slots
                .checked_mul(self.slot_bytes)
                .and_then(|len| len.checked_add(self.offset_bytes))
                .is_some_and(|end| end <= pool_bytes)
    }

    /// The largest frame a slot holds.
    pub(crate) fn frame_bytes_max(&self) -> usize {
        (self.slot_bytes - SLOT_HEADER_BYTES).min(usize::from(u16::MAX))
    }

    /// # Safety
    /// `base` points at a live mapping that [`Ring::fits`].
    unsafe fn slot(&self, base: *mut u8) -> *mut u8 {
        base.add(self.offset_bytes + self.pos * self.slot_bytes)
    }

    fn advance(&mut self) {
        self.pos = (self.pos + 1) % self.slots;
    }

    /// # Safety
    /// `slot` points at a slot header in a live mapping.
    unsafe fn own_type<'a>(slot: *mut u8) -> &'a AtomicU8 {
        AtomicU8::from_ptr(slot.add(OWN_TYPE_OFFSET))
    }

    /// The timestamp of the next message without taking it.
    ///
    /// # Safety
    /// `base` points at a live mapping that [`Ring::fits`].
    pub(crate) unsafe fn peek(&self, base: *mut u8) -> Option<u64> {
        let slot = self.slot(base);
        let own = Self::own_type(slot).load(Ordering::Acquire);
        if own & OWN_MASK != OWN_CONSUMER {
            return None;
        }
        Some(u64::from_le(
            slot.add(TIMESTAMP_OFFSET).cast::<u64>().read_unaligned(),
        ))
    }

    /// Takes the next message, copying a packet's frame into `frame`, and
    /// hands the slot back to the producer.
    ///
    /// # Safety
    /// `base` points at a live mapping that [`Ring::fits`].
    pub(crate) unsafe fn recv(&mut self, base: *mut u8, frame: &mut Vec<u8>) -> Option<Received> {
        let slot = self.slot(base);
        let own_type = Self::own_type(slot);
        let own = own_type.load(Ordering::Acquire);
        if own & OWN_MASK != OWN_CONSUMER {
            return None;
        }
        let kind = own & TYPE_MASK;
        let timestamp_ps = u64::from_le(slot.add(TIMESTAMP_OFFSET).cast::<u64>().read_unaligned());
        frame.clear();
        let mut port = 0;
        if kind == TYPE_NET_PACKET {
            let len = u16::from_le(slot.add(PACKET_LEN_OFFSET).cast::<u16>().read_unaligned());
            // A peer with larger slots than it announced is cut to the slot.
            let len = usize::from(len).min(self.frame_bytes_max());
            port = slot.add(PACKET_PORT_OFFSET).read();
            frame.extend_from_slice(std::slice::from_raw_parts(slot.add(SLOT_HEADER_BYTES), len));
        }
        own_type.store(kind | OWN_PRODUCER, Ordering::Release);
        self.advance();
        Some(Received {
            kind,
            timestamp_ps,
            port,
        })
    }

    /// Writes one message if the next slot is free; `false` when the ring is full.
    /// The caller checked `frame.len() <= frame_bytes_max()`.
    ///
    /// # Safety
    /// `base` points at a live mapping that [`Ring::fits`].
    pub(crate) unsafe fn send(
        &mut self,
        base: *mut u8,
        kind: u8,
        timestamp_ps: u64,
        port: u8,
        frame: &[u8],
    ) -> bool {
        debug_assert!(frame.len() <= self.frame_bytes_max());
        let slot = self.slot(base);
        let own_type = Self::own_type(slot);
        if own_type.load(Ordering::Acquire) & OWN_MASK != OWN_PRODUCER {
            return false;
        }
        if kind == TYPE_NET_PACKET {
            let len = frame.len() as u16;
            slot.add(PACKET_LEN_OFFSET)
                .cast::<u16>()
                .write_unaligned(len.to_le());
            slot.add(PACKET_PORT_OFFSET).write(port);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(SLOT_HEADER_BYTES), frame.len());
        }
        slot.add(TIMESTAMP_OFFSET)
            .cast::<u64>()
            .write_unaligned(timestamp_ps.to_le());
        own_type.store(kind | OWN_CONSUMER, Ordering::Release);
        self.advance();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_written_is_read_back_at_the_pinned_offsets() {
        let mut pool = vec![0u8; 4 * 128];
        let base = pool.as_mut_ptr();
        let mut tx = Ring {
            offset_bytes: 0,
            slot_bytes: 128,
            slots: 4,
            pos: 0,
        };
        let mut rx = tx;
        assert!(tx.fits(pool.len()));
        let frame = [7u8; 64];
        for i in 0..4 {
            assert!(unsafe { tx.send(base, TYPE_NET_PACKET, 1000 + i, 3, &frame) });
        }
        assert!(
            !unsafe { tx.send(base, TYPE_SYNC, 9, 0, &[]) },
            "full ring refuses"
        );
        assert_eq!(pool[0..2], 64u16.to_le_bytes());
        assert_eq!(pool[2], 3);
        assert_eq!(pool[48..56], 1000u64.to_le_bytes());
        assert_eq!(pool[63], 0xc0);
        assert_eq!(pool[64..128], frame);
        let mut got = Vec::new();
        let base = pool.as_mut_ptr();
        assert_eq!(unsafe { rx.peek(base) }, Some(1000));
        let msg = unsafe { rx.recv(base, &mut got) }.unwrap();
        assert_eq!(
            (msg.kind, msg.timestamp_ps, msg.port),
            (TYPE_NET_PACKET, 1000, 3)
        );
        assert_eq!(got, frame);
        assert_eq!(pool[63], 0x40, "slot handed back to the producer");
    }
}
