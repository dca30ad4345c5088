//! Parameters of the Ultra Ethernet transport, with the sources of their
//! defaults: the UEC reference simulator (htsim's `uec_src.cpp`, as the UEC
//! evaluates UET) for the entropy set, the load balancer and NSCC's
//! constants; the UET specification for the scheme (packet spraying over
//! entropy values, SACK, trimming with NACKs, receiver credits); EQDS
//! (Olteanu et al., NSDI 2022: the receiver-driven scheme RCCC descends
//! from, in the same simulator) for the credit defaults.

use netsim_engine::SimTime;
use netsim_topo::Topology;

/// Which transport the NICs run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// RoCEv2: one path per flow (5-tuple ECMP), go-back-N.
    Roce,
    /// Ultra Ethernet (UET's reliable unordered delivery): per-packet
    /// entropy, selective acknowledgements, trimming NACKs, NSCC.
    Uec,
}

/// How a UEC sender chooses each packet's entropy value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadBalancing {
    /// Cycle through the entropy set regardless of feedback.
    Oblivious,
    /// Cycle, but skip (once) an entropy an ECN-marked ACK or a NACK penalised.
    Bitmap,
    /// Recycled entropy path selection: reuse entropies whose ACKs came back
    /// unmarked (a buffer of eight), explore a random one when none is left.
    Reps,
}

/// UEC congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UecCc {
    /// Network-signal congestion control: a window driven by queueing delay
    /// and ECN (fair/proportional/fast increase, multiplicative decrease,
    /// quick adapt).
    Nscc,
    /// Receiver credit congestion control: after a first speculative
    /// window, a sender sends new data only on credits its receiver issues,
    /// and the receiver keeps the credit outstanding toward it at a target.
    Rccc,
    /// Both: a packet needs room in NSCC's window and a credit.
    Both,
    /// No window control beyond the outstanding-packet limit.
    None,
}

impl UecCc {
    /// Whether NSCC's window runs.
    pub fn nscc(self) -> bool {
        matches!(self, UecCc::Nscc | UecCc::Both)
    }

    /// Whether receivers issue credits.
    pub fn rccc(self) -> bool {
        matches!(self, UecCc::Rccc | UecCc::Both)
    }
}

/// Ultra Ethernet transport parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UecConfig {
    pub lb: LoadBalancing,
    /// Entropy values a flow sprays over (a power of two; htsim's
    /// `path_entropy_size` is 64).
    pub entropies: u32,
    /// Oblivious and bitmap: a new random start for each pass over the
    /// entropies (htsim's `UecMpOblivious`); off, one per flow.
    pub entropy_redraw: bool,
    pub cc: UecCc,
    /// NSCC's target queueing delay (htsim `_target_Qdelay` = 6 us).
    pub target_qdelay: SimTime,
    /// A packet is declared lost once a packet sent this many psns after it
    /// is acknowledged (reordering by spraying stays below it). netsim's
    /// choice, measured: a k=8 fat-tree 2 MB permutation spraying over 256
    /// entropies resends 8.5% of its packets needlessly at 16, 1.6% at 32,
    /// 0.04% at 64, none at 128; trimming NACKs make real losses quick anyway.
    /// 0: off (htsim without SLEEK): only NACKs and the timer resend.
    pub ooo_pkts: u32,
    /// Most packets a sender has outstanding (the SACK window; UET bounds it too).
    pub window_pkts: u32,
    /// RCCC: the credit a receiver keeps outstanding toward it, in BDPs of
    /// the longest path it has heard from (the sender's link rate x that
    /// path's base RTT). One BDP is what keeps the last hop busy with no
    /// standing queue (EQDS's pull pacer keeps one BDP of pulls out).
    pub rccc_target_bdp: f64,
    /// RCCC: what a sender may send before its first credit, in BDPs of its
    /// path (EQDS: a new flow sends its first BDP speculatively, so a lone
    /// flow loses no round trip).
    pub rccc_initial_bdp: f64,
    /// The receiver acknowledges once this many data bytes arrived since
    /// its last ACK, and at once for an ECN-marked packet, a packet whose
    /// sender asked for an ACK (the last of a window, a resend) or the
    /// flow's first and last (htsim's `_bytes_unacked_threshold`, 16 KB);
    /// 0: every packet.
    pub ack_bytes: u32,
    /// NSCC's first window, in BDPs of the flow's base RTT (htsim: its
    /// largest window, 1.5).
    pub initial_window_bdp: f64,
    /// NSCC quick adapt. `None`: whenever the window is at least what the
    /// last period achieved; `Some(g)`: only when that is below the largest
    /// window / 2^g (htsim's `_qa_gate`, 3).
    pub qa_gate: Option<u32>,
    /// When NSCC applies its accumulated increase.
    pub adjust: NsccAdjust,
    /// NSCC: an unmarked ACK past the target pulls the delay average toward
    /// a quarter of the base RTT, and a NACK pushes it toward the network
    /// RTT (the UET specification's and htsim's `update_delay`).
    pub delay_decay: bool,
    /// Where NSCC's base RTT comes from.
    pub base_rtt: BaseRtt,
    /// The fabric's largest unloaded RTT (htsim's `network_max_unloaded_rtt`:
    /// the diameter's latency both ways, a full packet and an ACK serialised
    /// at every hop); set from the topology before the run.
    pub fabric_rtt: SimTime,
    /// The retransmission timer runs per packet (htsim's: a packet sent at
    /// least an RTO ago is resent, progress or not), rather than per flow
    /// (everything outstanding is resent when no packet was acknowledged
    /// for an RTO, even a resend younger than it).
    pub rto_per_packet: bool,
    /// NSCC: a packet goes only if it fits in the window whole (htsim's
    /// `can_send_NSCC`), rather than while the window is not yet full (a
    /// window a little above one packet then holds two).
    pub window_fit: bool,
    /// NSCC: a NACK counts toward the bytes quick adapt ignores, and cuts
    /// the window only outside them and when quick adapt does not fire
    /// (htsim's `updateCwndOnNack_NSCC`); off, every NACK cuts it.
    pub nack_ignore: bool,
    /// SLEEK loss recovery (htsim's `-sleek`, `sleek.rs`): recovery once
    /// 1.5 windows arrived out of order, and probes when ACKs stop; it
    /// replaces detection by reordering (`ooo_pkts`). NSCC only.
    pub sleek: bool,
    /// Bitmap load balancing scores entropies as htsim's `UecMpBitmap`
    /// (1 per ECN-marked ACK, 4 per NACK, at most 15; a pick that meets
    /// scored entropies takes one off the first) rather than skipping a
    /// penalised entropy once.
    pub bitmap_scores: bool,
    /// NSCC: the fair increase only at or above the target delay, the
    /// proportional one alone below it (htsim's `updateCwndOnAck_NSCC`);
    /// off, both below the target.
    pub fair_above_target: bool,
    /// Resends leave lowest psn first (htsim's `_rtx_queue` is a map by
    /// psn) rather than in the order the losses were found. Under SLEEK it
    /// matters: resending the lowest hole first moves the cumulative point,
    /// which keeps the out-of-order count below SLEEK's trigger.
    pub rtx_lowest_first: bool,
    /// NSCC with the fabric's base RTT: a NACK's round trip (the data
    /// packet's send to the NACK's arrival) lowers the base RTT too, as an
    /// ACK's does (htsim's `update_base_rtt_on_nack`). A trimmed header
    /// skips the queues, so a NACK measures the unloaded path even when
    /// every data packet waited; without it a flow nearer the receiver
    /// than the fabric's diameter keeps a base above its path's, reads
    /// less delay than there is, and takes more than its share.
    pub nack_base_rtt: bool,
    /// On a host with several ports toward the destination (one per plane
    /// of a multi-plane fabric), one queue pair is scheduled on all of them
    /// and sprays its packets across the planes, with the load balancer's
    /// path state kept per plane (UET's multi-plane spraying); off, the
    /// flow keeps the one port its hash picked.
    pub plane_spray: bool,
    /// A sprayed flow's NSCC window (its BDP and largest window) follows
    /// one port's rate, as htsim's does (its NIC has one link speed per
    /// port, `_nic.linkspeed()`), rather than the ports' combined rate.
    pub plane_window_per_port: bool,
    /// NSCC counts a packet as its bytes on the wire, header included,
    /// wherever it counts bytes: in flight against the window, acknowledged
    /// (its increases and what quick adapt achieved), NACKed or lost (what
    /// leaves the window), its smallest window and its adjust threshold
    /// (htsim's `_in_flight += full_pkt_size`, its sink's `_recvd_bytes +=
    /// pkt.size()`, `_min_cwnd = _mtu`); off, the payload. The constants
    /// scaled per packet (fair and proportional increase, `eta`) stay in
    /// payload bytes in both, as htsim's `_mss`.
    pub window_wire_bytes: bool,
}

/// When NSCC folds its accumulated increase into the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NsccAdjust {
    /// Every 16,000 x (target / 12 us) bytes acknowledged or 12 us, the
    /// increase capped at the bytes acknowledged (netsim's first reading).
    Reference,
    /// Every 8 MTUs acknowledged or the fabric's RTT, uncapped (htsim's
    /// `initNsccParams` and `fulfill_adjustment`).
    Network,
}

/// Where NSCC's base RTT comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseRtt {
    /// The flow's own path, unloaded.
    Path,
    /// The fabric's largest RTT ([`UecConfig::fabric_rtt`]), lowered to the
    /// smallest RTT the flow measures (htsim's `initNscc` with
    /// `network_max_unloaded_rtt`, then `update_base_rtt`).
    Fabric,
}

impl Default for UecConfig {
    fn default() -> Self {
        UecConfig {
            lb: LoadBalancing::Bitmap,
            entropies: 256,
            entropy_redraw: false,
            cc: UecCc::Nscc,
            target_qdelay: SimTime::from_us(6),
            ooo_pkts: 64,
            window_pkts: 1024,
            rccc_target_bdp: 1.0,
            rccc_initial_bdp: 1.0,
            ack_bytes: 0,
            initial_window_bdp: 1.0,
            qa_gate: None,
            adjust: NsccAdjust::Reference,
            delay_decay: false,
            base_rtt: BaseRtt::Path,
            fabric_rtt: SimTime::ZERO,
            rto_per_packet: false,
            window_fit: false,
            nack_ignore: false,
            sleek: false,
            bitmap_scores: false,
            fair_above_target: false,
            rtx_lowest_first: false,
            nack_base_rtt: false,
            plane_spray: true,
            plane_window_per_port: false,
            window_wire_bytes: false,
        }
    }
}

/// NSCC's reference network, against which its constants are scaled
/// (htsim `initNsccParams`: 100 Gb/s and a 12 us RTT).
pub(crate) const NSCC_REFERENCE_BPS: f64 = 100e9;
pub(crate) const NSCC_REFERENCE_RTT_PS: f64 = 12e6;

/// The fabric's largest unloaded RTT as htsim's `calculate_rtt` takes it:
/// the host-to-host diameter (in links, hosts never transit) crossed both
/// ways at the largest link latency, with a `packet_bytes` packet and an
/// `ack_bytes` ACK serialised at every hop at the first host's link rate.
pub fn fabric_rtt(topo: &Topology, packet_bytes: u32, ack_bytes: u32) -> SimTime {
    let Some(first) = topo.hosts().next() else {
        return SimTime::ZERO;
    };
    let Some(port) = topo.ports(first).first() else {
        return SimTime::ZERO;
    };
    let rate_bps = topo.link(port.link).bandwidth_bps.max(1);
    let latency_ps = topo.links().iter().map(|l| l.latency_ps).max().unwrap_or(0);
    let hops = u64::from(host_diameter_hops(topo, first));
    let bits = u64::from(packet_bytes + ack_bytes) * 8;
    let serialisation_ps = (u128::from(bits) * 1_000_000_000_000 / u128::from(rate_bps)) as u64;
    SimTime(hops * (2 * latency_ps + serialisation_ps))
}

/// Links from host `from` to the farthest host (breadth first; hosts are
/// ends, never transit). On a symmetric fabric, the diameter.
fn host_diameter_hops(topo: &Topology, from: u32) -> u32 {
    let mut hops = vec![u32::MAX; topo.node_count() as usize];
    let mut frontier = std::collections::VecDeque::from([from]);
    hops[from as usize] = 0;
    let mut farthest = 0;
    while let Some(n) = frontier.pop_front() {
        let h = hops[n as usize];
        if topo.is_host(n) && n != from {
            farthest = farthest.max(h);
            continue;
        }
        for p in topo.ports(n) {
            if hops[p.peer as usize] == u32::MAX {
                hops[p.peer as usize] = h + 1;
                frontier.push_back(p.peer);
            }
        }
    }
    farthest
}
