//! The UEC sender's window accounting: what NSCC counts per packet; which
//! feedback is an RTT sample under SLEEK.

use super::UecSender;
use crate::network::config::{BaseRtt, UecConfig};
use crate::network::packet::{Packet, PacketKind};
use netsim_engine::{NodeId, NodeRng, SimTime};

/// A sender of 1,000 packets of 4,086 payload bytes (64-byte headers)
/// with NSCC at 1.5 BDPs of a 100 Gb/s, 14 us path (262,500 bytes),
/// sending only whole packets that fit, with htsim's quick adapt (which
/// does not fire in a flow's first period) and NACK rule.
fn sender(window_wire_bytes: bool) -> UecSender {
    let config = UecConfig {
        initial_window_bdp: 1.5,
        window_fit: true,
        qa_gate: Some(3),
        nack_ignore: true,
        window_wire_bytes,
        ..UecConfig::default()
    };
    let mut s = UecSender::new(7, 1000, &config, 4086, 64);
    s.start(
        &config,
        100_000_000_000,
        SimTime::from_us(14),
        0,
        SimTime::ZERO,
    );
    s
}

/// Packets sent before the window shuts.
fn first_window(s: &mut UecSender) -> u32 {
    let mut rng = NodeRng::new(1, NodeId(0));
    let mut sent = 0;
    while s.next_psn().is_some() {
        s.on_send(SimTime::ZERO, &mut rng, 0);
        sent += 1;
    }
    sent
}

/// htsim's window holds `_in_flight + full_pkt_size <= _cwnd`, packets
/// counted on the wire: 262,500 / 4,150 = 63.3, so 63 go; counting the
/// payload (4,086) lets a 64th go, a packet more per flow standing in the
/// queues.
#[test]
fn counting_packets_on_the_wire_fits_one_packet_fewer_in_the_first_window() {
    assert_eq!(first_window(&mut sender(false)), 64);
    assert_eq!(first_window(&mut sender(true)), 63);
}

/// What leaves the window with a NACK is the trimmed packet as counted:
/// its wire size under htsim's accounting (`_cwnd -= pkt_size` from the
/// send record), its payload otherwise.
#[test]
fn a_nack_takes_the_packet_as_counted_out_of_the_window() {
    for (wire, counted) in [(false, 4086.0), (true, 4150.0)] {
        let mut s = sender(wire);
        first_window(&mut s);
        let before = s.nscc.expect("NSCC runs").cwnd_bytes;
        let nack = Packet {
            via: 0,
            entropy: 1,
            ..Packet::new(PacketKind::Nack, 7, 1, 0, 3, 64)
        };
        s.on_feedback(&nack, SimTime::from_us(20), 0);
        let after = s.nscc.expect("NSCC runs").cwnd_bytes;
        assert!(
            (before - after - counted).abs() < 1e-6,
            "wire {wire}: {before} -> {after}"
        );
    }
}

/// A SACK or NACK from the receiver for `psn`.
fn feedback(kind: PacketKind, psn: u32) -> Packet {
    Packet {
        kind,
        wire_bytes: 64,
        src: 1,
        dst: 0,
        entropy: 1,
        ..Packet::test_data(7, psn)
    }
}

/// SLEEK resends a psn whose first copy may still be in flight. When that
/// copy was trimmed, its NACK comes back soon after the resend left: the
/// time since the resend is no round trip. Taken as one (htsim's
/// `processNack` takes the send record's time, the resend's), a NACK 0.5
/// us after the resend set the base RTT to 0.5 us and the largest window
/// to 1.5 x 6 KB, where a flow then stayed for a millisecond
/// (docs/perf/2026-11-29-uec-8.md). A NACK of a resent psn gives no RTT
/// sample under SLEEK, as a SACK of one does not.
#[test]
fn under_sleek_a_nack_soon_after_a_resend_leaves_the_base_rtt() {
    let config = UecConfig {
        initial_window_bdp: 1.5,
        window_fit: true,
        qa_gate: Some(3),
        nack_ignore: true,
        window_wire_bytes: true,
        sleek: true,
        base_rtt: BaseRtt::Fabric,
        nack_base_rtt: true,
        ..UecConfig::default()
    };
    let mut s = UecSender::new(7, 1000, &config, 4086, 64);
    let base = SimTime::from_us(14);
    s.start(&config, 100_000_000_000, base, 0, SimTime::ZERO);
    let mut rng = NodeRng::new(1, NodeId(0));
    // psn 0 is held up; each later one is acknowledged 14 us after it
    // left, until SLEEK finds psn 0 lost (1.5 windows out of order).
    let (mut now, mut acked, mut lost) = (SimTime::ZERO, 1, 0);
    while lost == 0 {
        while s.next_psn().is_some() {
            s.on_send(now, &mut rng, 0);
        }
        now += SimTime::from_us(14);
        let sent = s.seq.next_new();
        while lost == 0 && acked < sent {
            lost = s.on_feedback(&feedback(PacketKind::Sack, acked), now, 0);
            acked += 1;
        }
    }
    assert!(s.seq.resend_pending());
    let (psn, resent, _) = s.on_send(now, &mut rng, 0);
    assert_eq!((psn, resent), (0, true));
    // The first copy's NACK, 0.5 us later.
    s.on_feedback(
        &feedback(PacketKind::Nack, 0),
        now + SimTime::from_ns(500),
        0,
    );
    let (base_rtt, _, max_cwnd) = s.nscc.as_ref().expect("NSCC runs").limits();
    assert_eq!(base_rtt, base);
    assert!(max_cwnd > 250_000.0, "largest window {max_cwnd}");
}
