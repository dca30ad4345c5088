//! A dummy NIC: a SimBricks listener that sends timestamped probe frames and
//! records what comes back, advancing its clock conservatively.
//!
//! Its clock moves only as far as its inputs allow: to the next thing it
//! must do (a probe, a SYNC, the end), and never past the stamp of the last
//! message its peer sent, since the peer stamps messages in increasing
//! order. It sends a SYNC whenever nothing went out for a sync interval.
//! Everything it records is a function of the stamps, so its report does
//! not depend on wall-clock timing.

use crate::proto::TYPE_NET_PACKET;
use crate::{Channel, Error, Params, RingSize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// EtherType of probe frames (IEEE 802 local experimental).
pub const PROBE_ETHERTYPE: u16 = 0x88b5;
/// Bytes of a probe frame before its filler: MACs, EtherType, id, send time.
pub const PROBE_HEADER_BYTES: usize = 14 + 4 + 8;

/// One probe to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// NIC time at which the frame leaves (picoseconds).
    pub send_ps: u64,
    pub dst_mac: [u8; 6],
    /// Whole Ethernet frame length, at least [`PROBE_HEADER_BYTES`].
    pub frame_bytes: usize,
    pub id: u32,
}

/// What the dummy NIC does.
#[derive(Clone, Debug)]
pub struct Config {
    /// Listener parameters (socket, latency, sync interval, sync).
    pub params: Params,
    pub shm_path: PathBuf,
    pub mac: [u8; 6],
    /// Probes in increasing `send_ps`.
    pub probes: Vec<Probe>,
    /// The NIC stops (TERMINATE) when its clock reaches this (picoseconds).
    pub end_ps: u64,
    /// Wall-clock bound on connecting and on any single wait for the peer.
    pub timeout: Duration,
}

/// A probe frame that came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrival {
    /// The stamp it arrived with: when the NIC takes it (picoseconds).
    pub arrive_ps: u64,
    pub id: u32,
    pub src_mac: [u8; 6],
    /// The send time the sender wrote into it.
    pub send_ps: u64,
    pub frame_bytes: usize,
}

/// What one run of the dummy NIC saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub arrivals: Vec<Arrival>,
    /// Frames that were not intact probes (wrong EtherType or filler).
    pub damaged: u64,
    pub sent: u64,
    pub syncs_received: u64,
    /// The peer said TERMINATE before our end.
    pub peer_terminated: bool,
}

/// Builds probe `probe`'s frame from `src_mac`; the filler repeats the id's low byte.
pub fn probe_frame(probe: &Probe, src_mac: [u8; 6]) -> Vec<u8> {
    assert!(
        probe.frame_bytes >= PROBE_HEADER_BYTES,
        "probe frame too short"
    );
    let mut frame = vec![probe.id as u8; probe.frame_bytes];
    frame[0..6].copy_from_slice(&probe.dst_mac);
    frame[6..12].copy_from_slice(&src_mac);
    frame[12..14].copy_from_slice(&PROBE_ETHERTYPE.to_be_bytes());
    frame[14..18].copy_from_slice(&probe.id.to_be_bytes());
    frame[18..26].copy_from_slice(&probe.send_ps.to_be_bytes());
    frame
}

/// Reads a probe frame back; `None` when it is not an intact probe.
pub fn parse_probe(frame: &[u8], arrive_ps: u64) -> Option<Arrival> {
    if frame.len() < PROBE_HEADER_BYTES || frame[12..14] != PROBE_ETHERTYPE.to_be_bytes() {
        return None;
    }
    let id = u32::from_be_bytes(frame[14..18].try_into().ok()?);
    if frame[PROBE_HEADER_BYTES..].iter().any(|&b| b != id as u8) {
        return None;
    }
    Some(Arrival {
        arrive_ps,
        id,
        src_mac: frame[6..12].try_into().ok()?,
        send_ps: u64::from_be_bytes(frame[18..26].try_into().ok()?),
        frame_bytes: frame.len(),
    })
}

/// Listens, runs until `end_ps`, says TERMINATE, and reports.
pub fn run(config: &Config) -> Result<Report, Error> {
    let mut link = Channel::listen(
        &config.params,
        &config.shm_path,
        RingSize::default(),
        config.timeout,
    )?;
    let mut report = Report::default();
    let mut frame = Vec::new();
    let mut now_ps = 0u64;
    let mut next_probe = 0usize;
    // The peer stamps in increasing order: no future input is earlier than this.
    let mut inputs_known_ps = 0u64;
    let mut waiting_since = Instant::now();
    loop {
        while let Some(stamp) = link.peek_timestamp_ps() {
            inputs_known_ps = inputs_known_ps.max(stamp);
            if stamp > now_ps && link.is_synchronized() {
                break;
            }
            let msg = link.try_recv(&mut frame).expect("peeked a message");
            match msg.kind {
                TYPE_NET_PACKET => match parse_probe(&frame, msg.timestamp_ps) {
                    Some(arrival) => report.arrivals.push(arrival),
                    None => report.damaged += 1,
                },
                crate::proto::TYPE_SYNC => report.syncs_received += 1,
                _ => {}
            }
        }
        if link.peer_terminated() {
            report.peer_terminated = true;
            break;
        }
        if now_ps >= config.end_ps {
            break;
        }
        while let Some(probe) = config
            .probes
            .get(next_probe)
            .filter(|p| p.send_ps <= now_ps)
        {
            let frame = probe_frame(probe, config.mac);
            if !link.try_send_packet(now_ps, 0, &frame)? {
                break; // ring full: retry on the next turn
            }
            report.sent += 1;
            next_probe += 1;
        }
        if link.sync_due(now_ps) {
            link.try_send_sync(now_ps);
        }
        let probe_due = config
            .probes
            .get(next_probe)
            .map_or(u64::MAX, |p| p.send_ps.max(now_ps));
        let mut target = probe_due.min(config.end_ps);
        if link.is_synchronized() {
            target = target
                .min(link.next_sync_ps().max(now_ps))
                .min(inputs_known_ps.max(now_ps));
        }
        if target > now_ps {
            now_ps = target;
            waiting_since = Instant::now();
        } else if next_probe < config.probes.len() && probe_due <= now_ps || link.sync_due(now_ps) {
            // Output ring full: the peer drains it; yield rather than spin.
            std::thread::yield_now();
        } else {
            if !link.peer_alive() {
                return Err(Error::Disconnected);
            }
            if waiting_since.elapsed() > config.timeout {
                return Err(Error::Timeout("no input from the peer"));
            }
            std::thread::yield_now();
        }
    }
    while !link.terminate(now_ps) {
        std::thread::yield_now();
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_frames_round_trip() {
        let probe = Probe {
            send_ps: 123_456,
            dst_mac: [2, 0, 0, 0, 0, 9],
            frame_bytes: 1500,
            id: 77,
        };
        let frame = probe_frame(&probe, [2, 0, 0, 0, 0, 1]);
        assert_eq!(frame.len(), 1500);
        let arrival = parse_probe(&frame, 999).unwrap();
        assert_eq!(
            (arrival.id, arrival.send_ps, arrival.arrive_ps),
            (77, 123_456, 999)
        );
        let mut damaged = frame.clone();
        damaged[700] ^= 1;
        assert_eq!(parse_probe(&damaged, 0), None);
    }
}
