//! Parameters of the Ultra Ethernet transport, with the sources of their
//! defaults: the UEC reference simulator (htsim's `uec_src.cpp`, as the UEC
//! evaluates UET) for the entropy set, the load balancer and NSCC's
//! constants; the UET specification for the scheme (packet spraying over
//! entropy values, SACK, trimming with NACKs).

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

/// UEC sender congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UecCc {
    /// Network-signal congestion control: a window driven by queueing delay
    /// and ECN (fair/proportional/fast increase, multiplicative decrease,
    /// quick adapt).
    Nscc,
    /// No window control beyond the outstanding-packet limit.
    None,
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
        }
    }
}

/// NSCC's reference network, against which its constants are scaled
/// (htsim `initNsccParams`: 100 Gb/s and a 12 us RTT).
pub(crate) const NSCC_REFERENCE_BPS: f64 = 100e9;
pub(crate) const NSCC_REFERENCE_RTT_PS: f64 = 12e6;
