//! Parameters of the Ultra Ethernet transport, with the sources of their
//! defaults: the UEC reference simulator (htsim's `uec_src.cpp`, as the UEC
//! evaluates UET) for the entropy set, the load balancer and NSCC's
//! constants; the UET specification for the scheme (packet spraying over
//! entropy values, SACK, trimming with NACKs, receiver credits); EQDS
//! (Olteanu et al., NSDI 2022: the receiver-driven scheme RCCC descends
//! from, in the same simulator) for the credit defaults.

use netsim_engine::SimTime;

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
    /// `_path_entropy_size` = 256).
    pub entropies: u32,
    pub cc: UecCc,
    /// NSCC's target queueing delay (htsim `_target_Qdelay` = 6 us).
    pub target_qdelay: SimTime,
    /// A packet is declared lost once a packet sent this many psns after it
    /// is acknowledged (reordering by spraying stays below it). netsim's
    /// choice, measured: a k=8 fat-tree 2 MB permutation spraying over 256
    /// entropies resends 8.5% of its packets needlessly at 16, 1.6% at 32,
    /// 0.04% at 64, none at 128; trimming NACKs make real losses quick anyway.
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
}

impl Default for UecConfig {
    fn default() -> Self {
        UecConfig {
            lb: LoadBalancing::Bitmap,
            entropies: 256,
            cc: UecCc::Nscc,
            target_qdelay: SimTime::from_us(6),
            ooo_pkts: 64,
            window_pkts: 1024,
            rccc_target_bdp: 1.0,
            rccc_initial_bdp: 1.0,
        }
    }
}

/// NSCC's reference network, against which its constants are scaled
/// (htsim `initNsccParams`: 100 Gb/s and a 12 us RTT).
pub(crate) const NSCC_REFERENCE_BPS: f64 = 100e9;
pub(crate) const NSCC_REFERENCE_RTT_PS: f64 = 12e6;
