//! The UEC sender's window accounting: what NSCC counts per packet.

use super::UecSender;
use crate::network::config::UecConfig;
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
            flow: 7,
            src: 1,
            dst: 0,
            psn: 3,
            wire_bytes: 64,
            in_port: 0,
            kind: PacketKind::Nack,
            ce: 0,
            last: false,
            sack_offset: 0,
            via: 0,
            util: 0,
            entropy: 1,
        };
        s.on_feedback(&nack, SimTime::from_us(20), 0);
        let after = s.nscc.expect("NSCC runs").cwnd_bytes;
        assert!(
            (before - after - counted).abs() < 1e-6,
            "wire {wire}: {before} -> {after}"
        );
    }
}
