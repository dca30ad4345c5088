//! A connected SimBricks network link: handshake in both roles, then
//! packets, SYNCs and TERMINATE over the shared-memory rings.
//!
//! The listener creates the pool file, maps it shared, and sends its intro
//! with the pool's descriptor (`SCM_RIGHTS`); the connecter sends its intro
//! and maps the descriptor it receives. Each side sends before it receives,
//! so neither waits on the other (SimBricks' `SimBricksBaseIfEstablish`).

use crate::proto::*;
use crate::ring::{Received, Ring};
use crate::url::Params;
use crate::Error;
use memmap2::MmapRaw;
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::fs::{File, OpenOptions};
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// How a listener sizes its rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSize {
    pub slots: usize,
    pub slot_bytes: usize,
}

impl Default for RingSize {
    /// SimBricks' network defaults: 8,192 slots of 1,536 + 64 bytes.
    fn default() -> RingSize {
        RingSize {
            slots: DEFAULT_SLOTS,
            slot_bytes: DEFAULT_NET_SLOT_BYTES,
        }
    }
}

/// One end of an established link.
pub struct Channel {
    map: MmapRaw,
    stream: UnixStream,
    rx: Ring,
    tx: Ring,
    latency_ps: u64,
    sync_interval_ps: u64,
    sync: bool,
    /// This side's time at its last send (SimBricks' `out_timestamp`).
    out_last_ps: Option<u64>,
    terminated: bool,
    /// We sent TERMINATE: nothing more goes out.
    sent_terminate: bool,
}

fn sync_flags(sync: bool) -> u64 {
    // `sync=true` in a URL means "required" in SimBricks.
    if sync {
        FLAG_SYNC | FLAG_SYNC_FORCE
    } else {
        0
    }
}

/// SimBricks' sync negotiation (`SimbricksBaseIfIntroRecv`).
fn negotiate(ours: bool, peer_flags: u64) -> Result<bool, Error> {
    let peer_sync = peer_flags & FLAG_SYNC != 0;
    let peer_force = peer_flags & FLAG_SYNC_FORCE != 0;
    if peer_force && !ours {
        return Err(Error::Handshake("peer forces sync but ours is off".into()));
    }
    if ours && !peer_sync && !peer_force {
        return Err(Error::Handshake(
            "sync required here but the peer offers none".into(),
        ));
    }
    Ok(ours && (peer_sync || peer_force))
}

fn check_peer(version: u64, proto: u64) -> Result<(), Error> {
    if version != PROTO_VERSION {
        return Err(Error::Handshake(format!(
            "peer speaks protocol version {version}, not 1"
        )));
    }
    if proto != PROTO_ID_NET {
        return Err(Error::Handshake(format!(
            "peer's upper layer is {proto}, not network (1)"
        )));
    }
    Ok(())
}

/// Waits for a connection on `listener` until `deadline`.
fn accept_until(listener: &UnixListener, deadline: Instant) -> Result<UnixStream, Error> {
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => return Ok(stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(Error::Timeout("no peer connected"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

impl Channel {
    /// Listens on `params.socket_path` with a pool at `shm_path`, waits up to
    /// `timeout` for a connecter, and completes the handshake.
    pub fn listen(
        params: &Params,
        shm_path: &Path,
        size: RingSize,
        timeout: Duration,
    ) -> Result<Channel, Error> {
        let deadline = Instant::now() + timeout;
        let ring_bytes = size
            .slots
            .checked_mul(size.slot_bytes)
            .ok_or(Error::Handshake("ring too large".into()))?;
        let _ = std::fs::remove_file(&params.socket_path);
        let listener = UnixListener::bind(&params.socket_path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(shm_path)?;
        file.set_len(2 * ring_bytes as u64)?;
        let map = MmapRaw::map_raw(&file)?;
        // Listener's view: c2l is its input, l2c its output (SimBricks puts the input ring first).
        let rx = Ring {
            offset_bytes: 0,
            slot_bytes: size.slot_bytes,
            slots: size.slots,
            pos: 0,
        };
        let tx = Ring {
            offset_bytes: ring_bytes,
            ..rx
        };
        let stream = accept_until(&listener, deadline)?;
        drop(listener);
        let _ = std::fs::remove_file(&params.socket_path);
        let intro = ListenerIntro {
            version: PROTO_VERSION,
            flags: sync_flags(params.sync),
            l2c_offset: tx.offset_bytes as u64,
            l2c_slot_bytes: tx.slot_bytes as u64,
            l2c_slots: tx.slots as u64,
            c2l_offset: rx.offset_bytes as u64,
            c2l_slot_bytes: rx.slot_bytes as u64,
            c2l_slots: rx.slots as u64,
            upper_layer_proto: PROTO_ID_NET,
            upper_layer_intro_offset: LISTENER_INTRO_BYTES as u64,
        };
        send_with_fd(&stream, &intro.encode(), &file)?;
        stream.set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))?;
        let mut buf = [0u8; CONNECTER_INTRO_BYTES + NET_INTRO_BYTES];
        (&stream).read_exact(&mut buf)?;
        let peer = ConnecterIntro::decode(&buf).expect("buffer holds an intro");
        check_peer(peer.version, peer.upper_layer_proto)?;
        let sync = negotiate(params.sync, peer.flags)?;
        Channel::open(map, stream, rx, tx, params, sync)
    }

    /// Connects to the listener at `params.socket_path`, retrying until
    /// `timeout` (the listener may start after us), and completes the handshake.
    pub fn connect(params: &Params, timeout: Duration) -> Result<Channel, Error> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(&params.socket_path) {
                Ok(stream) => break stream,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(Error::Connect(params.socket_path.display().to_string(), e)),
            }
        };
        let intro = ConnecterIntro {
            version: PROTO_VERSION,
            flags: sync_flags(params.sync),
            upper_layer_proto: PROTO_ID_NET,
            upper_layer_intro_offset: CONNECTER_INTRO_BYTES as u64,
        };
        let mut msg = [0u8; CONNECTER_INTRO_BYTES + NET_INTRO_BYTES];
        msg[..CONNECTER_INTRO_BYTES].copy_from_slice(&intro.encode());
        (&stream).write_all(&msg)?;
        stream.set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))?;
        let (buf, file) = recv_with_fd(&stream)?;
        let peer =
            ListenerIntro::decode(&buf).ok_or(Error::Handshake("short listener intro".into()))?;
        check_peer(peer.version, peer.upper_layer_proto)?;
        let sync = negotiate(params.sync, peer.flags)?;
        let map = MmapRaw::map_raw(&file)?;
        let ring = |offset: u64, slot_bytes: u64, slots: u64| Ring {
            offset_bytes: offset as usize,
            slot_bytes: slot_bytes as usize,
            slots: slots as usize,
            pos: 0,
        };
        let rx = ring(peer.l2c_offset, peer.l2c_slot_bytes, peer.l2c_slots);
        let tx = ring(peer.c2l_offset, peer.c2l_slot_bytes, peer.c2l_slots);
        Channel::open(map, stream, rx, tx, params, sync)
    }

    fn open(
        map: MmapRaw,
        stream: UnixStream,
        rx: Ring,
        tx: Ring,
        params: &Params,
        sync: bool,
    ) -> Result<Channel, Error> {
        if !rx.fits(map.len()) || !tx.fits(map.len()) {
            return Err(Error::Handshake(
                "rings do not fit in the shared pool".into(),
            ));
        }
        params.check().map_err(|why| Error::Handshake(why.into()))?;
        // From here on the socket only tells whether the peer is still there.
        stream.set_nonblocking(true)?;
        Ok(Channel {
            map,
            stream,
            rx,
            tx,
            latency_ps: params.latency_ps,
            sync_interval_ps: params.sync_interval_ps,
            sync,
            out_last_ps: None,
            terminated: false,
            sent_terminate: false,
        })
    }

    /// This side's link latency, picoseconds: what it adds to every stamp.
    pub fn latency_ps(&self) -> u64 {
        self.latency_ps
    }

    /// Whether both sides agreed to synchronise.
    pub fn is_synchronized(&self) -> bool {
        self.sync
    }

    /// Whether the peer sent TERMINATE.
    pub fn peer_terminated(&self) -> bool {
        self.terminated
    }

    /// The largest frame one of our slots carries.
    pub fn frame_bytes_max(&self) -> usize {
        self.tx.frame_bytes_max()
    }

    /// The stamp of the next waiting message, if any, without taking it.
    pub fn peek_timestamp_ps(&self) -> Option<u64> {
        // SAFETY: the rings were checked to fit the live mapping in `open`.
        unsafe { self.rx.peek(self.map.as_mut_ptr()) }
    }

    /// Takes the next waiting message (a packet's frame into `frame`).
    pub fn try_recv(&mut self, frame: &mut Vec<u8>) -> Option<Received> {
        // SAFETY: as in `peek_timestamp_ps`.
        let msg = unsafe { self.rx.recv(self.map.as_mut_ptr(), frame) }?;
        if msg.kind == TYPE_TERMINATE {
            self.terminated = true;
        }
        Some(msg)
    }

    fn try_send(&mut self, now_ps: u64, kind: u8, port: u8, frame: &[u8]) -> bool {
        if self.sent_terminate {
            return true;
        }
        let stamp = now_ps.saturating_add(self.latency_ps);
        // SAFETY: as in `peek_timestamp_ps`.
        let sent = unsafe {
            self.tx
                .send(self.map.as_mut_ptr(), kind, stamp, port, frame)
        };
        if sent {
            self.out_last_ps = Some(now_ps);
        }
        sent
    }

    /// Sends a frame at our time `now_ps` (stamped `now_ps + latency`);
    /// `Ok(false)` when the ring is full (retry later, never spin).
    pub fn try_send_packet(&mut self, now_ps: u64, port: u8, frame: &[u8]) -> Result<bool, Error> {
        if frame.len() > self.frame_bytes_max() {
            return Err(Error::FrameTooLarge {
                frame_bytes: frame.len(),
                slot_frame_bytes: self.frame_bytes_max(),
            });
        }
        Ok(self.try_send(now_ps, TYPE_NET_PACKET, port, frame))
    }

    /// Whether a SYNC is due at `now_ps`: synchronised, and nothing sent for
    /// a sync interval (SimBricks' `SimbricksBaseIfOutSync`).
    pub fn sync_due(&self, now_ps: u64) -> bool {
        self.sync
            && self
                .out_last_ps
                .is_none_or(|last| now_ps.saturating_sub(last) >= self.sync_interval_ps)
    }

    /// The latest time by which a SYNC or packet must go out.
    pub fn next_sync_ps(&self) -> u64 {
        self.out_last_ps
            .map_or(0, |last| last.saturating_add(self.sync_interval_ps))
    }

    /// Our time at the last message sent, if any.
    pub fn last_sent_ps(&self) -> Option<u64> {
        self.out_last_ps
    }

    /// Sends a SYNC at `now_ps`; `false` when the ring is full.
    pub fn try_send_sync(&mut self, now_ps: u64) -> bool {
        self.try_send(now_ps, TYPE_SYNC, 0, &[])
    }

    /// Whether the peer's socket is still open (it closes when the peer exits).
    pub fn peer_alive(&self) -> bool {
        let mut byte = [0u8; 1];
        match (&self.stream).read(&mut byte) {
            Ok(0) => false,
            Ok(_) => true,
            Err(e) => {
                e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted
            }
        }
    }
}

fn send_with_fd(stream: &UnixStream, intro: &[u8], file: &File) -> Result<(), Error> {
    let net_intro = [0u8; NET_INTRO_BYTES];
    let iov = [IoSlice::new(intro), IoSlice::new(&net_intro)];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [file.as_fd()];
    let pushed = control.push(SendAncillaryMessage::ScmRights(&fds));
    assert!(pushed, "the control buffer is sized for one descriptor");
    let sent =
        sendmsg(stream, &iov, &mut control, SendFlags::empty()).map_err(std::io::Error::from)?;
    if sent != intro.len() + NET_INTRO_BYTES {
        return Err(Error::Handshake("short intro send".into()));
    }
    Ok(())
}

fn recv_with_fd(stream: &UnixStream) -> Result<(Vec<u8>, File), Error> {
    let mut buf = vec![0u8; 2048];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        recvmsg(stream, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)
            .map_err(std::io::Error::from)?
    };
    if received.bytes < LISTENER_INTRO_BYTES {
        return Err(Error::Handshake(format!(
            "listener intro of {} bytes, expected 80",
            received.bytes
        )));
    }
    buf.truncate(received.bytes);
    let mut file = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message {
            file = file.or(fds.next().map(File::from));
        }
    }
    let file = file.ok_or(Error::Handshake(
        "listener intro came without the pool descriptor".into(),
    ))?;
    Ok((buf, file))
}

impl Drop for Channel {
    /// Says goodbye if we have not: SimBricks' `SimbricksBaseIfClose` sends
    /// TERMINATE (one try here: a full ring at exit is not worth a wait).
    fn drop(&mut self) {
        let now = self.out_last_ps.unwrap_or(0);
        self.terminate(now);
    }
}

impl Channel {
    /// Ends the link at `now_ps`: TERMINATE, then nothing more is sent.
    /// `false` when the ring is full (retry).
    pub fn terminate(&mut self, now_ps: u64) -> bool {
        if !self.sent_terminate {
            self.sent_terminate = self.try_send(now_ps, TYPE_TERMINATE, 0, &[]);
        }
        self.sent_terminate
    }
}
