//! The byte encoding of network events, for shards on other MPI ranks.
//!
//! Every event encodes to [`NetEvent::WIRE_BYTES`] bytes: a variant tag, the
//! variant's fields little-endian, zero padding up to the longest variant
//! (an arriving packet). A variant added to [`NetEvent`] must be added here;
//! the matches are exhaustive so the compiler says so.

use super::packet::{Packet, PacketKind};
use super::{FlowTimer, NetEvent};
use netsim_engine::wire::{Wire, WireReader, WireWriter};

const PACKET_BYTES: usize = 32;

impl Wire for Packet {
    const WIRE_BYTES: usize = PACKET_BYTES;

    fn encode(&self, w: &mut WireWriter<'_>) {
        w.u32(self.flow);
        w.u32(self.src);
        w.u32(self.dst);
        w.u32(self.psn);
        w.u16(self.wire_bytes);
        w.u16(self.in_port);
        w.u8(match self.kind {
            PacketKind::Data => 0,
            PacketKind::Ack => 1,
            PacketKind::Nack => 2,
            PacketKind::Cnp => 3,
            PacketKind::InaUp => 4,
            PacketKind::InaDown => 5,
            PacketKind::Sack => 6,
            PacketKind::Trimmed => 7,
            PacketKind::Credit => 8,
            PacketKind::External => 9,
            PacketKind::Probe => 10,
            PacketKind::ProbeAck => 11,
        });
        w.u8(self.ce);
        w.bool(self.last);
        w.u8(self.sack_offset);
        w.u32(self.via);
        w.u16(self.util);
        w.u16(self.entropy);
    }

    fn decode(r: &mut WireReader<'_>) -> Packet {
        Packet {
            flow: r.u32(),
            src: r.u32(),
            dst: r.u32(),
            psn: r.u32(),
            wire_bytes: r.u16(),
            in_port: r.u16(),
            kind: match r.u8() {
                0 => PacketKind::Data,
                1 => PacketKind::Ack,
                2 => PacketKind::Nack,
                3 => PacketKind::Cnp,
                4 => PacketKind::InaUp,
                5 => PacketKind::InaDown,
                6 => PacketKind::Sack,
                7 => PacketKind::Trimmed,
                8 => PacketKind::Credit,
                9 => PacketKind::External,
                10 => PacketKind::Probe,
                11 => PacketKind::ProbeAck,
                k => panic!("invalid packet kind {k} on the wire"),
            },
            ce: r.u8(),
            last: r.bool(),
            sack_offset: r.u8(),
            via: r.u32(),
            util: r.u16(),
            entropy: r.u16(),
        }
    }
}

impl Wire for NetEvent {
    /// Tag, port, packet.
    const WIRE_BYTES: usize = 1 + 2 + PACKET_BYTES;

    fn encode(&self, w: &mut WireWriter<'_>) {
        let start = w.position();
        match *self {
            NetEvent::Arrive { port, pkt } => {
                w.u8(0);
                w.u16(port);
                pkt.encode(w);
            }
            NetEvent::TxDone { port } => {
                w.u8(1);
                w.u16(port);
            }
            NetEvent::Pfc { port, pause } => {
                w.u8(2);
                w.u16(port);
                w.bool(pause);
            }
            NetEvent::FlowStart { flow } => {
                w.u8(3);
                w.u32(flow);
            }
            NetEvent::Wake { port, generation } => {
                w.u8(4);
                w.u16(port);
                w.u32(generation);
            }
            NetEvent::Timer { flow, timer } => {
                w.u8(5);
                w.u32(flow);
                let (tag, generation) = match timer {
                    FlowTimer::DcqcnAlpha => (0, 0),
                    FlowTimer::DcqcnDecrease => (1, 0),
                    FlowTimer::DcqcnIncrease { generation } => (2, generation),
                    FlowTimer::Retransmit => (3, 0),
                    FlowTimer::Probe => (4, 0),
                };
                w.u8(tag);
                w.u32(generation);
            }
            NetEvent::TaskDone { task } => {
                w.u8(6);
                w.u32(task);
            }
            NetEvent::InaEmit { op, chunk, in_port } => {
                w.u8(7);
                w.u32(op);
                w.u32(chunk);
                w.u16(in_port);
            }
            NetEvent::Fault { fault } => {
                w.u8(8);
                w.u32(fault);
            }
            NetEvent::ExternalSend { pkt } => {
                w.u8(10);
                w.u16(0);
                pkt.encode(w);
            }
            NetEvent::MemoEnd { flow, at_source } => {
                w.u8(9);
                w.u32(flow);
                w.bool(at_source);
            }
            NetEvent::RailEnd { flow, at_source } => {
                w.u8(11);
                w.u32(flow);
                w.bool(at_source);
            }
            NetEvent::RailDone {
                flow,
                start_ps,
                counters,
            } => {
                w.u8(12);
                w.u32(flow);
                for v in start_ps.into_iter().chain(counters) {
                    w.u32(v);
                }
            }
        }
        w.pad_to(start, Self::WIRE_BYTES);
    }

    fn decode(r: &mut WireReader<'_>) -> NetEvent {
        let (event, used) = match r.u8() {
            0 => (
                NetEvent::Arrive {
                    port: r.u16(),
                    pkt: Packet::decode(r),
                },
                Self::WIRE_BYTES,
            ),
            1 => (NetEvent::TxDone { port: r.u16() }, 3),
            2 => (
                NetEvent::Pfc {
                    port: r.u16(),
                    pause: r.bool(),
                },
                4,
            ),
            3 => (NetEvent::FlowStart { flow: r.u32() }, 5),
            4 => (
                NetEvent::Wake {
                    port: r.u16(),
                    generation: r.u32(),
                },
                7,
            ),
            5 => {
                let flow = r.u32();
                let timer = match (r.u8(), r.u32()) {
                    (0, _) => FlowTimer::DcqcnAlpha,
                    (1, _) => FlowTimer::DcqcnDecrease,
                    (2, generation) => FlowTimer::DcqcnIncrease { generation },
                    (3, _) => FlowTimer::Retransmit,
                    (4, _) => FlowTimer::Probe,
                    (t, _) => panic!("invalid flow timer {t} on the wire"),
                };
                (NetEvent::Timer { flow, timer }, 10)
            }
            6 => (NetEvent::TaskDone { task: r.u32() }, 5),
            7 => (
                NetEvent::InaEmit {
                    op: r.u32(),
                    chunk: r.u32(),
                    in_port: r.u16(),
                },
                11,
            ),
            8 => (NetEvent::Fault { fault: r.u32() }, 5),
            9 => (
                NetEvent::MemoEnd {
                    flow: r.u32(),
                    at_source: r.bool(),
                },
                6,
            ),
            11 => (
                NetEvent::RailEnd {
                    flow: r.u32(),
                    at_source: r.bool(),
                },
                6,
            ),
            12 => (
                NetEvent::RailDone {
                    flow: r.u32(),
                    start_ps: [r.u32(), r.u32()],
                    counters: [r.u32(), r.u32(), r.u32()],
                },
                25,
            ),
            10 => {
                r.u16();
                let pkt = Packet::decode(r);
                (NetEvent::ExternalSend { pkt }, Self::WIRE_BYTES)
            }
            tag => panic!("invalid network event tag {tag} on the wire"),
        };
        for _ in used..Self::WIRE_BYTES {
            r.u8();
        }
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_engine::wire::{decode_events, encode_event};
    use netsim_engine::{Event, NodeId, SimTime};

    #[test]
    fn a_packet_stays_32_bytes_in_memory() {
        // UEC's entropy took the last two bytes of padding, a SACK's
        // window offset the byte after `last`.
        assert_eq!(std::mem::size_of::<Packet>(), 32);
        assert!(std::mem::size_of::<Event<NetEvent>>() < 64);
    }

    #[test]
    fn every_variant_crosses_unchanged() {
        let pkt = Packet {
            flow: 0xA1B2_C3D4,
            src: 1,
            dst: u32::MAX - 1,
            psn: 77,
            wire_bytes: 9048,
            in_port: 31,
            kind: PacketKind::Nack,
            ce: 200,
            last: true,
            sack_offset: 47,
            via: u32::MAX,
            util: 1023,
            entropy: 4097,
        };
        let payloads = [
            NetEvent::Arrive { port: 7, pkt },
            NetEvent::Arrive {
                port: 0,
                pkt: Packet {
                    kind: PacketKind::Cnp,
                    last: false,
                    ..pkt
                },
            },
            NetEvent::TxDone { port: u16::MAX },
            NetEvent::Pfc {
                port: 3,
                pause: true,
            },
            NetEvent::Pfc {
                port: 3,
                pause: false,
            },
            NetEvent::FlowStart { flow: 12345 },
            NetEvent::MemoEnd {
                flow: 77,
                at_source: false,
            },
            NetEvent::Wake {
                port: 2,
                generation: 99,
            },
            NetEvent::Timer {
                flow: 5,
                timer: FlowTimer::DcqcnIncrease { generation: 42 },
            },
            NetEvent::Timer {
                flow: 6,
                timer: FlowTimer::Retransmit,
            },
            NetEvent::Timer {
                flow: 6,
                timer: FlowTimer::DcqcnAlpha,
            },
            NetEvent::Timer {
                flow: 6,
                timer: FlowTimer::DcqcnDecrease,
            },
            NetEvent::TaskDone { task: 1 << 31 },
            NetEvent::InaEmit {
                op: 3,
                chunk: u32::MAX,
                in_port: 65,
            },
            NetEvent::Fault { fault: 7 },
            NetEvent::Arrive {
                port: 1,
                pkt: Packet {
                    kind: PacketKind::InaUp,
                    ..pkt
                },
            },
            NetEvent::Arrive {
                port: 1,
                pkt: Packet {
                    kind: PacketKind::InaDown,
                    ..pkt
                },
            },
            NetEvent::Arrive {
                port: 2,
                pkt: Packet {
                    kind: PacketKind::Sack,
                    ..pkt
                },
            },
            NetEvent::Arrive {
                port: 2,
                pkt: Packet {
                    kind: PacketKind::Trimmed,
                    ..pkt
                },
            },
            NetEvent::ExternalSend {
                pkt: Packet {
                    kind: PacketKind::External,
                    ..pkt
                },
            },
        ];
        crosses_unchanged(&payloads);
    }

    fn crosses_unchanged(payloads: &[NetEvent]) {
        let events: Vec<Event<NetEvent>> = payloads
            .iter()
            .enumerate()
            .map(|(i, &p)| Event::new(SimTime(i as u64 * 1000), NodeId(9), i as u64, NodeId(4), p))
            .collect();
        let mut bytes = Vec::new();
        for e in &events {
            encode_event(e, &mut bytes);
        }
        let back: Vec<Event<NetEvent>> = decode_events(&bytes).collect();
        assert_eq!(back, events);
    }

    #[test]
    fn rail_replay_events_cross_unchanged() {
        crosses_unchanged(&[
            NetEvent::RailEnd {
                flow: 78,
                at_source: true,
            },
            NetEvent::RailDone {
                flow: 79,
                start_ps: [1 << 8, 7],
                counters: [1, 2, u32::MAX],
            },
        ]);
    }
}
