//! The protocol end to end in one process: a dummy NIC listens, a small
//! conservative reflector connects and sends every frame straight back.

use simbricks::dummy_nic::{self, Probe};
use simbricks::proto::{TYPE_NET_PACKET, TYPE_TERMINATE};
use simbricks::{Channel, Params};
use std::time::{Duration, Instant};

const LATENCY_NS: u64 = 500;
const TIMEOUT: Duration = Duration::from_secs(20);

/// A connecter that returns each frame at the time it arrives, syncing as
/// SimBricks does, until the NIC terminates.
fn reflect(url: &str) -> u64 {
    let params = Params::parse(url).unwrap();
    let mut link = Channel::connect(&params, TIMEOUT).unwrap();
    let mut now_ps = 0u64;
    let mut frame = Vec::new();
    let mut reflected = 0;
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < TIMEOUT, "reflector timed out");
        // Conservative: take inputs up to their stamp, advance to it.
        if let Some(stamp) = link.peek_timestamp_ps() {
            if stamp > now_ps && stamp > link.next_sync_ps() {
                // Cannot jump past a due SYNC: send it first.
                let sync_at = link.next_sync_ps().max(now_ps);
                if link.sync_due(sync_at) {
                    now_ps = sync_at;
                    link.try_send_sync(now_ps);
                    continue;
                }
            }
            now_ps = now_ps.max(stamp);
            let msg = link.try_recv(&mut frame).unwrap();
            if msg.kind == TYPE_TERMINATE {
                return reflected;
            }
            if msg.kind == TYPE_NET_PACKET {
                while !link.try_send_packet(now_ps, 0, &frame).unwrap() {
                    std::thread::yield_now();
                }
                reflected += 1;
            }
        }
        if link.sync_due(now_ps) {
            link.try_send_sync(now_ps);
        }
        std::thread::yield_now();
    }
}

#[test]
fn probes_come_back_after_two_latencies() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nic.sock");
    let params = Params::parse(&format!(
        "listen:{}:{}:sync=true:latency={LATENCY_NS}:sync_interval={LATENCY_NS}",
        sock.display(),
        dir.path().join("nic.shm").display()
    ))
    .unwrap();
    let probes: Vec<Probe> = (0..50)
        .map(|i| Probe {
            send_ps: 1_000_000 + 333_333 * u64::from(i),
            dst_mac: [2, 0, 0, 0, 0, 2],
            frame_bytes: 64 + i as usize * 29,
            id: i,
        })
        .collect();
    let config = dummy_nic::Config {
        params,
        shm_path: dir.path().join("nic.shm"),
        mac: [2, 0, 0, 0, 0, 1],
        probes: probes.clone(),
        end_ps: 40_000_000,
        timeout: TIMEOUT,
    };
    let nic = std::thread::spawn(move || dummy_nic::run(&config));
    let url = format!(
        "connect:{}:sync=true:latency={LATENCY_NS}:sync_interval={LATENCY_NS}",
        sock.display()
    );
    let reflector = std::thread::spawn(move || reflect(&url));
    let report = nic.join().unwrap().unwrap();
    assert_eq!(reflector.join().unwrap(), 50);
    assert_eq!(report.sent, 50);
    assert_eq!(report.damaged, 0);
    assert!(report.syncs_received > 0);
    assert_eq!(report.arrivals.len(), 50);
    for (arrival, probe) in report.arrivals.iter().zip(&probes) {
        assert_eq!(arrival.id, probe.id);
        assert_eq!(arrival.send_ps, probe.send_ps);
        assert_eq!(arrival.frame_bytes, probe.frame_bytes);
        assert_eq!(arrival.arrive_ps, probe.send_ps + 2 * LATENCY_NS * 1000);
    }
}

#[test]
fn frames_larger_than_a_slot_are_refused_and_a_missing_peer_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nobody.sock");
    let params = Params::parse(&format!("connect:{}:sync=true", sock.display())).unwrap();
    let err = Channel::connect(&params, Duration::from_millis(50))
        .err()
        .unwrap();
    assert!(err.to_string().contains("cannot connect"), "{err}");

    let listen = Params::parse(&format!(
        "listen:{}:{}:sync=true",
        sock.display(),
        dir.path().join("shm").display()
    ))
    .unwrap();
    let shm = dir.path().join("shm");
    let nic = std::thread::spawn(move || {
        let mut link = Channel::listen(&listen, &shm, Default::default(), TIMEOUT).unwrap();
        let refused = link.try_send_packet(0, 0, &[0u8; 1537]).unwrap_err();
        assert!(refused.to_string().contains("1537 bytes"), "{refused}");
        assert!(link.try_send_packet(0, 0, &[0u8; 1536]).unwrap());
    });
    let mut link = Channel::connect(
        &Params::parse(&format!("connect:{}:sync=true", sock.display())).unwrap(),
        TIMEOUT,
    )
    .unwrap();
    nic.join().unwrap();
    let mut frame = Vec::new();
    let started = Instant::now();
    let msg = loop {
        if let Some(msg) = link.try_recv(&mut frame) {
            break msg;
        }
        assert!(started.elapsed() < TIMEOUT);
    };
    assert_eq!(
        (msg.kind, frame.len(), msg.timestamp_ps),
        (TYPE_NET_PACKET, 1536, 500_000)
    );
    // The listener's channel was dropped: it said TERMINATE and closed the socket.
    while link
        .try_recv(&mut frame)
        .is_none_or(|m| m.kind != TYPE_TERMINATE)
    {
        assert!(started.elapsed() < TIMEOUT);
    }
    assert!(!link.peer_alive());
}
