//! SimBricks Ethernet ports: host ports whose far end is a co-simulated NIC
//! (issue 34; guide page `docs/guide/simbricks.md`).
//!
//! A frame from a peer enters the fabric at its host as an `External`
//! packet of the frame's length, at the frame's stamp, and leaves at the
//! host owning its destination MAC, which hands it to its own peer. MACs
//! are static: host `h` is `02:00` followed by `h` (big endian), a locally
//! administered address, plus any MAC the run assigns it (`--simbricks-mac`,
//! for peers such as SimBricks' `net_pktgen` whose MACs are fixed); frames
//! to other MACs are dropped at their source.
//! The frame bytes wait in a table shared by the shards, keyed by (source
//! host, frame number), while the packet crosses the fabric.
//!
//! Time is the engine's external bound (DESIGN.md §3): a shard never
//! handles an event at or past the last stamp a synchronised peer sent,
//! and at every window boundary it sends what arrived before the boundary,
//! then a SYNC when one is due (or when it is about to wait), never
//! spinning on a full ring: what does not fit waits for the next boundary.

use super::packet::{Packet, PacketKind};
use super::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use netsim_engine::{Aborted, Context, Inject, NodeId, SimTime};
use simbricks::proto::{TYPE_NET_PACKET, TYPE_TERMINATE};
use simbricks::Channel;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The `flow` of every external packet: one ECMP source port, so frames
/// between two hosts keep one path and their order.
pub const EXTERNAL_FLOW: u32 = u32::MAX;
/// Frames shorter than an Ethernet header are dropped.
const ETHERNET_HEADER_BYTES: usize = 14;

/// The static MAC of host `host`: `02:00:` and the host id, big endian.
pub fn host_mac(host: u32) -> [u8; 6] {
    let id = host.to_be_bytes();
    [0x02, 0x00, id[0], id[1], id[2], id[3]]
}

/// The host a destination MAC names, if it is one of [`host_mac`]'s.
pub fn mac_host(mac: &[u8]) -> Option<u32> {
    match mac {
        [0x02, 0x00, a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// The links of a run, shared read-only by the shards (in the [`super::Fabric`]).
#[derive(Default)]
pub struct ExternalPorts {
    /// `(host, link)` by host; each shard takes its hosts' links once.
    attached: Vec<(u32, Mutex<Option<Channel>>)>,
    /// Frames on their way through the fabric, by (source host, frame number).
    frames: Mutex<HashMap<(u32, u32), Vec<u8>>>,
    /// The first failure, said in one line.
    error: Mutex<Option<String>>,
    /// Longest wall-clock wait for a peer before the run fails.
    wait_timeout: Duration,
    /// Set (by a signal handler) to end the run: TERMINATE, then stop.
    stop: Option<&'static AtomicBool>,
    /// MACs assigned to hosts beside their [`host_mac`]: (MAC, host).
    extra_macs: Vec<([u8; 6], u32)>,
}

impl std::fmt::Debug for ExternalPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts: Vec<u32> = self.attached.iter().map(|(h, _)| *h).collect();
        f.debug_struct("ExternalPorts")
            .field("hosts", &hosts)
            .finish()
    }
}

impl ExternalPorts {
    /// Links established for `links` (host, channel; hosts distinct).
    pub fn new(
        mut links: Vec<(u32, Channel)>,
        wait_timeout: Duration,
        stop: Option<&'static AtomicBool>,
    ) -> ExternalPorts {
        links.sort_by_key(|(host, _)| *host);
        ExternalPorts {
            attached: links
                .into_iter()
                .map(|(h, c)| (h, Mutex::new(Some(c))))
                .collect(),
            frames: Mutex::default(),
            error: Mutex::default(),
            wait_timeout,
            stop,
            extra_macs: Vec::new(),
        }
    }

    /// These links, with `macs` (MAC, host) also naming their hosts.
    pub fn with_macs(mut self, macs: Vec<([u8; 6], u32)>) -> ExternalPorts {
        self.extra_macs = macs;
        self
    }

    /// The host a destination MAC names: an assigned MAC, else [`mac_host`].
    pub fn dst_host(&self, mac: &[u8]) -> Option<u32> {
        self.extra_macs
            .iter()
            .find(|(m, _)| m[..] == *mac)
            .map(|&(_, host)| host)
            .or_else(|| mac_host(mac))
    }

    pub fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }

    /// The failure that ended the run, if one did.
    pub fn error(&self) -> Option<String> {
        self.error.lock().expect("error lock").clone()
    }

    fn fail(&self, message: String) -> Aborted {
        self.error
            .lock()
            .expect("error lock")
            .get_or_insert(message);
        Aborted
    }
}

/// One shard's end of one link.
pub(crate) struct Link {
    host: u32,
    channel: Channel,
    /// Frames that reached the host, with their time, not yet sent.
    out: VecDeque<(SimTime, Vec<u8>)>,
    /// Inputs taken so far: the key of the next injected event.
    in_seq: u64,
    /// Frames this host sent into the fabric: the next frame number.
    next_frame: u32,
    /// The peer's last stamp: no later input is earlier.
    known_ps: u64,
}

/// The links of one shard's hosts.
#[derive(Default)]
pub(crate) struct Links {
    links: Vec<Link>,
    buffer: Vec<u8>,
    /// Frames to no known host, or reaching a host without a peer.
    pub(crate) dropped_frames: u64,
}

impl Links {
    /// Takes the links of the hosts among `nodes`.
    pub(crate) fn take(ports: &ExternalPorts, nodes: &[NodeId]) -> Links {
        let links = ports
            .attached
            .iter()
            .filter(|(host, _)| nodes.binary_search(&NodeId(*host)).is_ok())
            .map(|(host, channel)| Link {
                host: *host,
                channel: channel
                    .lock()
                    .expect("link lock")
                    .take()
                    .expect("a link is taken once"),
                out: VecDeque::new(),
                in_seq: 0,
                next_frame: 0,
                known_ps: 0,
            })
            .collect();
        Links {
            links,
            buffer: Vec::new(),
            dropped_frames: 0,
        }
    }
}

impl Link {
    /// Whether the peer still bounds our time.
    fn bounds(&self) -> bool {
        self.channel.is_synchronized() && !self.channel.peer_terminated()
    }

    /// Sends the frames that arrived before `done`, in order, then a SYNC
    /// at `done` when due or when we are about to wait on the peer.
    fn flush(&mut self, done: SimTime) -> Result<(), String> {
        while let Some((time, frame)) = self.out.front() {
            match self.channel.try_send_packet(time.as_ps(), 0, frame) {
                Ok(true) => drop(self.out.pop_front()),
                Ok(false) => return Ok(()), // ring full: retry at the next boundary
                Err(e) => return Err(format!("host {}: {e}", self.host)),
            }
        }
        let waiting = self.known_ps <= done.as_ps()
            && self.channel.last_sent_ps().is_none_or(|t| t < done.as_ps());
        if self.channel.is_synchronized() && (self.channel.sync_due(done.as_ps()) || waiting) {
            self.channel.try_send_sync(done.as_ps());
        }
        Ok(())
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// The engine's external hook: hand out, take in, and wait until every
    /// synchronised peer allows time past `done`; returns the bound.
    pub(crate) fn external_step(
        &mut self,
        done: SimTime,
        inject: &mut Inject<'_, NetEvent>,
    ) -> Result<SimTime, Aborted> {
        if self.external.links.is_empty() {
            return Ok(SimTime::MAX);
        }
        let ports = &self.fabric.external;
        let started = Instant::now();
        loop {
            if ports.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                self.external_finish(done);
                return Err(Aborted);
            }
            let mut bound = SimTime::MAX;
            for i in 0..self.external.links.len() {
                self.external.links[i]
                    .flush(done)
                    .map_err(|e| ports.fail(e))?;
                self.external_take(i, done, inject)
                    .map_err(|e| ports.fail(e))?;
                let link = &self.external.links[i];
                if link.bounds() {
                    bound = bound.min(SimTime(link.known_ps));
                }
            }
            if bound > done {
                return Ok(bound);
            }
            for link in &self.external.links {
                if link.bounds() && !link.channel.peer_alive() {
                    return Err(ports.fail(format!(
                        "SimBricks peer of host {} disconnected at {done}",
                        link.host
                    )));
                }
            }
            if started.elapsed() > ports.wait_timeout {
                return Err(ports.fail(format!(
                    "SimBricks peers sent nothing past {done} for {} s",
                    ports.wait_timeout.as_secs()
                )));
            }
            std::thread::yield_now();
        }
    }

    /// Takes every message waiting from link `i`'s peer, injecting frames
    /// at their stamps (at `done` on an unsynchronised link).
    fn external_take(
        &mut self,
        i: usize,
        done: SimTime,
        inject: &mut Inject<'_, NetEvent>,
    ) -> Result<(), String> {
        let hosts = self.fabric.topo.host_count();
        let link = &mut self.external.links[i];
        while let Some(msg) = link.channel.try_recv(&mut self.external.buffer) {
            link.known_ps = link.known_ps.max(msg.timestamp_ps);
            if msg.kind == TYPE_TERMINATE || msg.kind != TYPE_NET_PACKET {
                continue;
            }
            let at = if link.channel.is_synchronized() {
                SimTime(msg.timestamp_ps)
            } else {
                done
            };
            if at < done {
                return Err(format!(
                    "SimBricks peer of host {} sent a frame stamped {at}, before {done}",
                    link.host
                ));
            }
            let frame = &self.external.buffer;
            let dst = (frame.len() >= ETHERNET_HEADER_BYTES)
                .then(|| self.fabric.external.dst_host(&frame[0..6]))
                .flatten();
            let Some(dst) = dst.filter(|&d| d < hosts && d != link.host) else {
                self.external.dropped_frames += 1;
                continue;
            };
            let wire_bytes = frame.len() as u16;
            let pkt = Packet {
                last: true,
                ..Packet::new(
                    PacketKind::External,
                    EXTERNAL_FLOW,
                    link.host,
                    dst,
                    link.next_frame,
                    wire_bytes,
                )
            };
            let key = (link.host, link.next_frame);
            self.fabric
                .external
                .frames
                .lock()
                .expect("frames lock")
                .insert(key, frame.clone());
            link.next_frame = link.next_frame.wrapping_add(1);
            inject.push(
                at,
                NodeId(link.host),
                link.in_seq,
                NetEvent::ExternalSend { pkt },
            );
            link.in_seq += 1;
        }
        Ok(())
    }

    /// An injected frame leaves its host into the fabric.
    pub(crate) fn external_send(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        self.host_send_control(ctx, pkt);
    }

    /// A frame reached its destination host: its peer gets it at the next
    /// window boundary; a host without a peer drops it.
    pub(crate) fn external_receive(&mut self, ctx: &mut Context<'_, NetEvent>, pkt: Packet) {
        let frame = self
            .fabric
            .external
            .frames
            .lock()
            .expect("frames lock")
            .remove(&(pkt.src, pkt.psn));
        let link = self
            .external
            .links
            .iter_mut()
            .find(|l| l.host == ctx.node().0);
        match (link, frame) {
            (Some(link), Some(frame)) => link.out.push_back((ctx.now(), frame)),
            _ => self.external.dropped_frames += 1,
        }
    }

    /// The run ended at `end`: send what fits and TERMINATE (one try each:
    /// a peer that stopped reading is not waited for).
    pub(crate) fn external_finish(&mut self, end: SimTime) {
        for link in &mut self.external.links {
            // Without an end, at the last time already promised to the peer.
            let last_ps = link.channel.last_sent_ps().unwrap_or(0);
            let at = if end == SimTime::MAX {
                SimTime(last_ps)
            } else {
                end
            };
            let _ = link.flush(at);
            link.channel.terminate(at.as_ps().max(last_ps));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assigned_macs_name_hosts_beside_the_static_ones() {
        let pktgen_mac = [0, 0, 0, 0, 0, 1];
        let ports = ExternalPorts::default().with_macs(vec![(pktgen_mac, 7)]);
        assert_eq!(ports.dst_host(&pktgen_mac), Some(7));
        assert_eq!(ports.dst_host(&host_mac(3)), Some(3));
        assert_eq!(ports.dst_host(&[0, 0, 0, 0, 0, 2]), None);
        assert_eq!(ExternalPorts::default().dst_host(&pktgen_mac), None);
    }
}
