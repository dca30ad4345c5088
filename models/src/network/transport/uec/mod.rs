//! The Ultra Ethernet transport (UET's reliable unordered delivery over a
//! lossy fabric): every packet carries an entropy value the switches hash,
//! so a flow sprays over many paths; the receiver acknowledges each packet
//! selectively; a switch that would drop a packet trims it to its header,
//! and the receiver NACKs it so the sender resends it at once; NSCC sets
//! the window, RCCC's receiver credits pace new data into a busy receiver;
//! a retransmission timer is the last resort.
//!
//! ```text
//!  sender: lb (entropy) ─ sack (psns) ─ nscc (window)
//!     data ──sprayed──▶ receiver: sack bitmap ──SACK(psn, entropy, ce)──▶ sender
//!     trimmed header ──▶ receiver ──NACK(psn, entropy)──▶ sender resends psn
//! ```

mod lb;
mod nscc;
pub(crate) mod planes;
mod probe;
pub(crate) mod rccc;
mod receive;
pub(crate) mod sack;
mod sleek;

use crate::network::config::UecConfig;
use crate::network::packet::{Packet, PacketKind};
use lb::EntropyPicker;
use netsim_engine::{NodeRng, SimTime};
use nscc::Nscc;
use rccc::CreditWallet;
use sack::SackSender;
use sleek::Sleek;

/// The sender side of one UEC flow.
#[derive(Debug)]
pub(crate) struct UecSender {
    seq: SackSender,
    lb: EntropyPicker,
    /// Plane spraying: the load balancers of planes (host ports) 1.., each
    /// with its own path state (an entropy names a different path in each
    /// plane); empty when the flow keeps one port.
    plane_lbs: Vec<EntropyPicker>,
    /// The plane (host port) the last packet left by; `NO_PLANE` before
    /// the first. Free ports are offered from the one after it.
    pub last_plane: u16,
    /// Entropies per plane: a packet sent on plane p carries entropy
    /// `p x entropies + e + 1`, so its ACK says which plane it measured.
    entropies: u32,
    /// Set when the flow starts, if NSCC runs.
    nscc: Option<Nscc>,
    /// Set when the flow starts, if RCCC runs: new packets need credit.
    credit: Option<CreditWallet>,
    /// RCCC: resends NACKs asked for and not yet sent.
    nacked_pending: u32,
    /// Payload bytes per packet (SLEEK counts packets in these, as htsim's
    /// `get_avg_pktsize`).
    mtu_bytes: u32,
    /// The bytes NSCC counts per packet: the payload, or the packet on the
    /// wire ([`UecConfig::window_wire_bytes`]).
    win_pkt_bytes: u32,
    /// ACK coalescing: the receiver acknowledges by bytes, so the packet
    /// that fills the window (or is the last, or a resend) asks for an ACK.
    coalesced: bool,
    /// The packet `on_send` last named asks for an ACK at once.
    ack_request: bool,
    /// NSCC: a packet goes only if it fits in the window whole.
    window_fit: bool,
    /// SLEEK loss recovery, if on (it runs with NSCC only, as in htsim).
    sleek: Option<Sleek>,
    /// NACKs received: packets trimmed on the way.
    pub trimmed_pkts: u64,
    /// Selective acknowledgements received.
    pub sacks: u64,
}

impl UecSender {
    /// A sender of `packets` packets of `mtu_bytes` (payload, each with a
    /// `header_bytes` header) for flow `flow`.
    pub(crate) fn new(
        flow: u32,
        packets: u32,
        config: &UecConfig,
        mtu_bytes: u32,
        header_bytes: u32,
    ) -> UecSender {
        let mut h = u64::from(flow) ^ 0x5EED_0E7C;
        let xor = netsim_engine::splitmix64(&mut h) as u32;
        UecSender {
            seq: SackSender::new(packets, config.window_pkts)
                .with_lowest_first(config.rtx_lowest_first),
            lb: EntropyPicker::new(
                config.lb,
                config.entropies,
                xor,
                config.entropy_redraw,
                config.bitmap_scores,
            ),
            plane_lbs: Vec::new(),
            last_plane: planes::NO_PLANE,
            entropies: config.entropies,
            nscc: None,
            credit: None,
            nacked_pending: 0,
            mtu_bytes,
            win_pkt_bytes: if config.window_wire_bytes {
                mtu_bytes + header_bytes
            } else {
                mtu_bytes
            },
            coalesced: config.ack_bytes > 0,
            ack_request: false,
            window_fit: config.window_fit,
            sleek: config.sleek.then(Sleek::default),
            trimmed_pkts: 0,
            sacks: 0,
        }
    }

    /// The flow starts at `now` on a path of `base_rtt` at `line_rate_bps`;
    /// with RCCC, it may send `initial_pkts` new packets before a credit.
    pub(crate) fn start(
        &mut self,
        config: &UecConfig,
        line_rate_bps: u64,
        base_rtt: SimTime,
        initial_pkts: u32,
        now: SimTime,
    ) {
        if config.cc.rccc() {
            self.credit = Some(CreditWallet::new(initial_pkts));
        }
        if config.cc.nscc() {
            self.nscc = Some(Nscc::new(
                line_rate_bps,
                base_rtt,
                self.mtu_bytes,
                self.win_pkt_bytes,
                config,
                now,
            ));
        }
    }

    /// Plane spraying: the flow sends on host ports `0..planes`; each
    /// plane past the first gets a load balancer of its own (its cycle
    /// drawn from `flow` and the plane). Returns false, leaving the flow
    /// on one plane, if the planes' entropies do not fit 16 bits.
    pub(crate) fn spray_planes(&mut self, flow: u32, planes: u16, config: &UecConfig) -> bool {
        if u64::from(planes) * u64::from(self.entropies) >= u64::from(u16::MAX) {
            return false;
        }
        self.plane_lbs = (1..planes)
            .map(|p| {
                let mut h = (u64::from(p) << 32 | u64::from(flow)) ^ 0x5EED_0E7C;
                let xor = netsim_engine::splitmix64(&mut h) as u32;
                EntropyPicker::new(
                    config.lb,
                    config.entropies,
                    xor,
                    config.entropy_redraw,
                    config.bitmap_scores,
                )
            })
            .collect();
        true
    }

    /// The load balancer of plane `plane` (plane 0 without spraying).
    fn picker(&mut self, plane: u16) -> &mut EntropyPicker {
        match plane {
            0 => &mut self.lb,
            p => &mut self.plane_lbs[usize::from(p) - 1],
        }
    }

    /// The plane and the entropy within it that a packet's (1-based)
    /// entropy value names.
    fn plane_of(&self, entropy: u16) -> (u16, u16) {
        let e = u32::from(entropy.wrapping_sub(1));
        if self.plane_lbs.is_empty() {
            return (0, e as u16);
        }
        ((e / self.entropies) as u16, (e % self.entropies) as u16)
    }

    /// What NSCC counts as in flight.
    fn in_flight_bytes(&self) -> f64 {
        f64::from(self.seq.outstanding()) * f64::from(self.win_pkt_bytes)
    }

    /// The psn that may go next, or `None` (window full, no credit for new
    /// data, nothing to send).
    pub(crate) fn next_psn(&mut self) -> Option<u32> {
        if let Some(n) = &self.nscc {
            // The packet must fit in the window (htsim's `can_send_NSCC`),
            // or the window need only not be full yet.
            let in_flight = self.in_flight_bytes();
            let shut = if self.window_fit {
                in_flight + f64::from(self.win_pkt_bytes) > n.cwnd_bytes
            } else {
                in_flight >= n.cwnd_bytes
            };
            // SLEEK's recovery resends whatever the window.
            let recovery =
                self.sleek.as_ref().is_some_and(Sleek::recovering) && self.seq.resend_pending();
            if self.seq.outstanding() > 0 && shut && !recovery {
                return None;
            }
        }
        let psn = self.seq.next_psn()?;
        match &self.credit {
            Some(c) if c.pkts == 0 && self.needs_credit(psn) => None,
            _ => Some(psn),
        }
    }

    /// RCCC: whether sending `psn` next takes a credit: new data, and the
    /// resends the receiver asked for (its NACKs owe them a credit); not a
    /// resend of a loss it cannot know of.
    fn needs_credit(&self, psn: u32) -> bool {
        !self.seq.is_retransmission(psn) || self.nacked_pending > 0
    }

    /// The next packet leaves at `now` on plane `plane` (0 without
    /// spraying): its psn, whether it is a retransmission, and its entropy
    /// value (1-based; 0 means none).
    pub(crate) fn on_send(
        &mut self,
        now: SimTime,
        rng: &mut NodeRng,
        plane: u16,
    ) -> (u32, bool, u16) {
        let next = self.seq.next_psn();
        let credited = self.credit.is_some() && next.is_some_and(|p| self.needs_credit(p));
        let (psn, retransmission) = self.seq.on_send(now);
        if credited {
            if let Some(c) = &mut self.credit {
                c.pkts = c.pkts.saturating_sub(1);
            }
            if retransmission {
                self.nacked_pending -= 1;
            }
        }
        self.last_plane = plane;
        let offset = u32::from(plane) * self.entropies;
        let entropy = (offset + u32::from(self.picker(plane).next(rng))) as u16 + 1;
        if self.coalesced {
            // htsim asks once the next packet would not fit.
            let next = if self.window_fit {
                self.win_pkt_bytes
            } else {
                0
            };
            let window_full = match &self.nscc {
                Some(n) => self.in_flight_bytes() + f64::from(next) >= n.cwnd_bytes,
                None => self.seq.next_psn().is_none(),
            };
            self.ack_request = retransmission || self.seq.all_sent() || window_full;
        }
        (psn, retransmission, entropy)
    }

    /// The `util` field of the data packet `on_send` last named: 1 when it
    /// asks for an ACK at once (ACK coalescing), else 0.
    #[inline]
    pub(crate) fn ack_request(&self) -> u16 {
        u16::from(self.ack_request)
    }

    /// A credit for `pkts` more new packets arrived (RCCC).
    pub(crate) fn on_credit(&mut self, pkts: u32) {
        if let Some(c) = &mut self.credit {
            c.pkts += pkts;
        }
    }

    /// Packets acknowledged in order.
    pub(crate) fn acked(&self) -> u32 {
        self.seq.una()
    }

    /// Packets acknowledged, cumulatively or selectively.
    pub(crate) fn acked_packets(&self) -> u32 {
        self.seq.acked_count()
    }

    /// Packets outstanding.
    pub(crate) fn in_flight(&self) -> u32 {
        self.seq.outstanding()
    }

    /// Distinct entropies used, over all planes.
    pub(crate) fn paths_used(&self) -> u32 {
        self.lb.paths_used() + self.plane_lbs.iter().map(|l| l.paths_used()).sum::<u32>()
    }

    /// Every packet acknowledged.
    pub(crate) fn done(&self) -> bool {
        self.seq.done()
    }

    /// A SACK or NACK arrived at `now`; `ooo` is the reordering threshold.
    /// How many packets it declared lost.
    fn on_feedback(&mut self, pkt: &Packet, now: SimTime, ooo: u32) -> u32 {
        let (plane, entropy) = self.plane_of(pkt.entropy);
        let mtu = f64::from(self.win_pkt_bytes);
        match pkt.kind {
            PacketKind::Sack if pkt.last => {
                let acked = self.seq.on_cumulative(pkt.psn);
                if acked > 0 {
                    let in_flight = self.in_flight_bytes();
                    if let Some(n) = &mut self.nscc {
                        // No RTT sample: count it as on target.
                        n.on_ack(now, SimTime::ZERO, false, f64::from(acked) * mtu, in_flight);
                    }
                }
                self.run_sleek(now)
            }
            PacketKind::ProbeAck => self.on_probe_ack(pkt, now),
            PacketKind::Sack => {
                self.sacks += 1;
                let ce = pkt.ce != 0;
                self.picker(plane).on_ack(entropy, ce);
                // SLEEK resends packets still in flight, so the ACK of a
                // resent psn may be the first copy's: no RTT sample then
                // (htsim's `validateSendTs`; a too-small sample would lower
                // the base RTT).
                let resent = self.sleek.is_some() && self.seq.was_resent(pkt.psn);
                let rtt = self.seq.on_sack(pkt.psn, now);
                let mut acked = u32::from(rtt.is_some());
                let rtt = rtt.filter(|_| !resent);
                // A coalesced ACK also names held psns in its window, which
                // starts `sack_offset` below its own psn.
                let base = pkt.psn.wrapping_sub(u32::from(pkt.sack_offset));
                let mut mask = pkt.sack_mask();
                while mask != 0 {
                    let q = base.wrapping_add(mask.trailing_zeros());
                    mask &= mask - 1;
                    if q != pkt.psn {
                        acked += u32::from(self.seq.on_sack(q, now).is_some());
                    }
                }
                if acked > 0 {
                    let in_flight = self.in_flight_bytes();
                    if let Some(n) = &mut self.nscc {
                        // Without a sample of its own, the ACK counts at
                        // the average delay.
                        let rtt = rtt.unwrap_or_else(|| n.average_rtt());
                        n.on_ack(now, rtt, ce, f64::from(acked) * mtu, in_flight);
                    }
                }
                if self.sleek.is_some() {
                    return self.run_sleek(now);
                }
                if ooo == 0 {
                    return 0;
                }
                let lost = self.seq.detect_reordering_losses(ooo);
                if let Some(n) = &mut self.nscc {
                    n.on_loss(f64::from(lost) * mtu);
                }
                lost
            }
            PacketKind::Nack => {
                self.trimmed_pkts += 1;
                self.picker(plane).on_nack(entropy);
                // Under SLEEK the psn may have been resent while its first
                // copy was still in flight: a NACK of that copy is no RTT
                // sample of the resend (a trimmed header 0.65 us after the
                // resend left set a 12 KB largest window; as for a SACK).
                let resent = self.sleek.is_some() && self.seq.was_resent(pkt.psn);
                let rtt = self
                    .seq
                    .sent_at(pkt.psn)
                    .map(|sent| now - sent)
                    .filter(|_| !resent);
                if self.seq.on_nack(pkt.psn) {
                    if self.credit.is_some() {
                        self.nacked_pending += 1;
                    }
                    let in_flight = self.in_flight_bytes();
                    if let Some(n) = &mut self.nscc {
                        n.on_nack(now, rtt, mtu, in_flight);
                    }
                }
                0
            }
            kind => unreachable!("{kind:?} is not UEC feedback"),
        }
    }

    /// SLEEK's window, if SLEEK and NSCC run.
    fn sleek_window(&self) -> Option<sleek::Window> {
        let n = self.nscc.as_ref()?;
        self.sleek.as_ref()?;
        let (base_rtt, target, max_cwnd_bytes) = n.limits();
        Some(sleek::Window {
            cwnd_bytes: n.cwnd_bytes,
            max_cwnd_bytes,
            mtu_bytes: f64::from(self.mtu_bytes),
            base_rtt,
            target,
        })
    }

    /// SLEEK after an ACK at `now`: how many packets recovery declared lost.
    fn run_sleek(&mut self, now: SimTime) -> u32 {
        match (self.sleek_window(), &mut self.sleek) {
            (Some(w), Some(k)) => k.on_ack(&mut self.seq, w, now),
            _ => 0,
        }
    }

    /// A probe's ACK: its cumulative point, then whether the path it
    /// measured is empty enough that what is missing was lost.
    fn on_probe_ack(&mut self, pkt: &Packet, now: SimTime) -> u32 {
        self.seq.on_cumulative(pkt.psn);
        let (Some(k), Some(n)) = (&mut self.sleek, &mut self.nscc) else {
            return 0;
        };
        let delay = match k.last_probe(pkt.util) {
            Some(sent) => n.on_probe_rtt(now - sent, pkt.ce != 0),
            None => n.average_delay_now(),
        };
        k.on_probe_ack(&self.seq, delay, n.limits().1);
        self.run_sleek(now)
    }

    /// SLEEK: when a probe timer event must be scheduled, if one must.
    pub(crate) fn probe_timer_request(&mut self) -> Option<SimTime> {
        self.sleek.as_mut()?.timer_request()
    }

    /// SLEEK's probe timer fired at `now`: the probe to send (its number
    /// and entropy) if one is due, and when the timer fires next.
    pub(crate) fn on_probe_timer(
        &mut self,
        now: SimTime,
        rng: &mut NodeRng,
    ) -> Option<(Option<(u16, u16)>, SimTime)> {
        let base_rtt = self.sleek_window()?.base_rtt;
        let (probe, next) = self.sleek.as_mut()?.on_timer(now, base_rtt)?;
        Some((probe.map(|p| (p, self.lb.next(rng) + 1)), next))
    }

    /// Whether a packet sent at least `rto` before `now` is outstanding.
    pub(crate) fn expired(&self, now: SimTime, rto: SimTime) -> bool {
        self.seq
            .oldest_outstanding()
            .is_some_and(|sent| sent + rto <= now)
    }

    /// The retransmission timer fired at `now`. With one timer per packet
    /// (`per_packet`), what was sent at least `rto` ago is resent; else,
    /// without progress since the last firing, everything outstanding.
    /// How many packets were lost, and when the timer is due again.
    pub(crate) fn on_timeout(
        &mut self,
        now: SimTime,
        rto: SimTime,
        per_packet: bool,
    ) -> (u32, SimTime) {
        let (lost, due) = if per_packet {
            let recovering = self.sleek.as_ref().is_some_and(Sleek::recovering);
            let (lost, next, rewind) = self.seq.on_packet_timeout(now, rto, recovering);
            if let (Some(k), Some(psn)) = (&mut self.sleek, rewind) {
                k.rewind(psn);
            }
            (lost, next.unwrap_or(now + rto))
        } else {
            (self.seq.on_timeout(), now + rto)
        };
        if let Some(n) = &mut self.nscc {
            n.on_loss(f64::from(lost) * f64::from(self.win_pkt_bytes));
        }
        (lost, due)
    }
}

#[cfg(test)]
mod tests;
