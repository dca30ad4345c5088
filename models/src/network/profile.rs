//! Named parameter sets of the RoCE congestion control, the NIC and the
//! switches (`--cc-profile`): netsim's own defaults, SimAI's `SimAI.conf`
//! on its ns-3 backend, and NVIDIA ConnectX firmware defaults.
//!
//! Where each number comes from:
//!
//! - `simai`: `astra-sim-alibabacloud/inputs/config/SimAI.conf` (payload
//!   9000 B, `ALPHA_RESUME_INTERVAL 1`, `RATE_DECREASE_INTERVAL 4`,
//!   `RP_TIMER 900`, `EWMA_GAIN 1/256`, `FAST_RECOVERY_TIMES 1`, `RATE_AI
//!   50Mb/s`, `RATE_HAI 100Mb/s`, `MIN_RATE 100Mb/s`, `CLAMP_TARGET_RATE 0`,
//!   `HAS_WIN 1`, `VAR_WIN 1`, `FAST_REACT 1`, `U_TARGET 0.95`, `MI_THRESH 0`,
//!   `MULTI_RATE 0`, `SAMPLE_FEEDBACK 0`, `ACK_HIGH_PRIO 0`, `L2_ACK_INTERVAL
//!   1`, the KMIN/KMAX/PMAX maps, `BUFFER_SIZE 32` MiB) and the ns-3 code it
//!   runs: `rdma-hw.cc` (`RateOnFirstCnp` 1.0, a CNP flag on the ACK of every
//!   marked packet, HPCC's EWMA over the base RTT, the reference rate updated
//!   once per RTT, a rate change re-timing the next paced packet), `switch-node.cc` (ECN marked at dequeue, ACKs in the data
//!   class), the MMU (4 KB reserve per ingress queue, 3 KB resume offset,
//!   headroom 3 x rate x latency per port, PFC threshold free >> 3) and the
//!   header sizes of its packets (40 B per data packet, 82 B with HPCC's INT
//!   stack; 48 B ACKs, 76 B with INT).
//! - `connectx`: NVIDIA's "DCQCN CC Parameters" page (ConnectX-4 and later
//!   firmware defaults): `dce_tcp_g` 1019/1024 (g = 5/1024),
//!   `dce_tcp_rtt` 1 us, `rate_reduce_monitor_period` 4 us,
//!   `rpg_time_reset` 300 us, `rpg_byte_reset` 32767 B, `rpg_threshold` 1,
//!   `rpg_ai_rate` 5 Mb/s, `rpg_hai_rate` 50 Mb/s, `rpg_min_rate` 1 Mb/s,
//!   `clamp_tgt_rate` 0, `rate_to_set_on_first_cnp` 0 (the first CNP cuts),
//!   `min_time_between_cnps` 4 us at the notification point. The NIC has no
//!   window; switches mark at enqueue with SimAI's maps; RoCEv2 headers.
//! - `netsim`: the defaults of [`NetConfig::default`].

use super::config::{CcKind, CnpMode, HpccUtilisation, NetConfig, WindowMode};
use netsim_engine::SimTime;

/// A named, consistent set of congestion-control, NIC and switch parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcProfile {
    /// netsim's defaults.
    Netsim,
    /// SimAI's `SimAI.conf` on its ns-3 backend, mechanism for mechanism.
    Simai,
    /// NVIDIA ConnectX firmware defaults.
    Connectx,
}

impl CcProfile {
    /// Every profile, in the order `--help` lists them.
    pub const ALL: [CcProfile; 3] = [CcProfile::Netsim, CcProfile::Simai, CcProfile::Connectx];

    /// The profile's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CcProfile::Netsim => "netsim",
            CcProfile::Simai => "simai",
            CcProfile::Connectx => "connectx",
        }
    }

    /// The profile called `name`, if any.
    pub fn from_name(name: &str) -> Option<CcProfile> {
        CcProfile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The profile's whole configuration for congestion control `cc` (the
    /// header sizes of `simai` depend on it: HPCC's INT stack).
    pub fn config(self, cc: CcKind) -> NetConfig {
        let netsim = NetConfig {
            cc,
            ..NetConfig::default()
        };
        match self {
            CcProfile::Netsim => netsim,
            CcProfile::Simai => simai(netsim),
            CcProfile::Connectx => connectx(netsim),
        }
    }
}

fn simai(base: NetConfig) -> NetConfig {
    let int = base.cc == CcKind::Hpcc;
    let mtu_bytes = 9000;
    let header_bytes = if int { 82 } else { 40 };
    NetConfig {
        mtu_bytes,
        header_bytes,
        control_bytes: if int { 76 } else { 48 },
        dcqcn: super::config::DcqcnConfig {
            g: 1.0 / 256.0,
            alpha_update: SimTime::from_us(1),
            rate_decrease_interval: SimTime::from_us(4),
            rate_increase_timer: SimTime::from_us(900),
            fast_recovery_times: 1,
            additive_increase_bps: 50_000_000,
            hyper_increase_bps: 100_000_000,
            min_rate_bps: 100_000_000,
            cnp_interval: SimTime::ZERO,
            cnp_mode: CnpMode::AckFlag,
            clamp_target_rate: false,
            rate_on_first_cnp: Some(1.0),
            byte_counter_bytes: 0,
        },
        hpcc: super::config::HpccConfig {
            eta: 0.95,
            max_stage: 0,
            additive_increase_bps: 50_000_000,
            utilisation: HpccUtilisation::IntDelta,
            ewma: true,
            fast_react: true,
            retime_on_rate_change: true,
            ..base.hpcc
        },
        buffer_bytes: 32 << 20,
        pfc_alpha: 1.0 / 8.0,
        pfc_xon_offset_bytes: 3 * 1024,
        pfc_headroom_bytes: 0,
        pfc_headroom_latency_factor: 3,
        pfc_reserve_bytes: 4 * 1024,
        ecn_at_dequeue: true,
        ack_high_priority: false,
        window: WindowMode::VariableBdp,
        ack_interval: 1,
        rto: SimTime::from_us(500),
        ..base
    }
}

fn connectx(base: NetConfig) -> NetConfig {
    NetConfig {
        dcqcn: super::config::DcqcnConfig {
            g: 5.0 / 1024.0,
            alpha_update: SimTime::from_us(1),
            rate_decrease_interval: SimTime::from_us(4),
            rate_increase_timer: SimTime::from_us(300),
            fast_recovery_times: 1,
            additive_increase_bps: 5_000_000,
            hyper_increase_bps: 50_000_000,
            min_rate_bps: 1_000_000,
            cnp_interval: SimTime::from_us(4),
            cnp_mode: CnpMode::Packet,
            clamp_target_rate: false,
            rate_on_first_cnp: None,
            byte_counter_bytes: 32_767,
        },
        ack_high_priority: false,
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_validate_and_round_trip_their_names() {
        for p in CcProfile::ALL {
            assert_eq!(CcProfile::from_name(p.name()), Some(p));
            for cc in [CcKind::Dcqcn, CcKind::Hpcc, CcKind::Dctcp, CcKind::None] {
                p.config(cc).validate().unwrap();
            }
        }
        assert_eq!(
            CcProfile::Netsim.config(CcKind::Dcqcn),
            NetConfig::default()
        );
        assert_eq!(CcProfile::Simai.config(CcKind::Hpcc).header_bytes, 82);
        assert_eq!(CcProfile::Simai.config(CcKind::Dcqcn).header_bytes, 40);
    }
}
