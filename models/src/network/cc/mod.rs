//! Congestion control at the sending NIC: DCQCN's reaction point
//! (`dcqcn.rs`), HPCC (`hpcc.rs`) and the per-hop INT records its
//! switches keep (`int.rs`), TIMELY (`timely.rs`), DCTCP, and the sender
//! window that bounds the rate-based ones.

mod dcqcn;
mod hpcc;
mod int;
mod timely;

pub use dcqcn::{Dcqcn, IncreasePhase, IncreaseSource};
pub use hpcc::Hpcc;
pub(crate) use int::{flow_base_rtt, IntRecords};
pub use timely::Timely;

use super::config::{CcKind, WindowMode};

/// Per-flow congestion-control state.
#[derive(Clone, Debug)]
pub enum CcState {
    Dcqcn(Dcqcn),
    Dctcp(Dctcp),
    Hpcc(Hpcc),
    Timely(Timely),
    LineRate,
}

/// DCTCP: a congestion window cut by `alpha / 2` once per window with marks,
/// grown by one packet per window without.
#[derive(Clone, Debug)]
pub struct Dctcp {
    pub cwnd_bytes: f64,
    pub alpha: f64,
    /// The current observation window ends when this psn is acknowledged.
    pub window_end_psn: u32,
    pub acked_in_window: u32,
    pub marked_in_window: u32,
    pub cut_in_window: bool,
}

impl Dctcp {
    pub fn new(initial_cwnd_bytes: f64) -> Dctcp {
        Dctcp {
            cwnd_bytes: initial_cwnd_bytes,
            alpha: 1.0,
            window_end_psn: 0,
            acked_in_window: 0,
            marked_in_window: 0,
            cut_in_window: false,
        }
    }

    /// `acked` packets newly acknowledged up to `una`, `marked` of them CE;
    /// `next_psn` is the next packet the sender will send.
    pub fn on_ack(&mut self, g: f64, mss: f64, acked: u32, marked: u32, una: u32, next_psn: u32) {
        self.acked_in_window += acked;
        self.marked_in_window += marked;
        if marked > 0 && !self.cut_in_window {
            self.cwnd_bytes = (self.cwnd_bytes * (1.0 - self.alpha / 2.0)).max(mss);
            self.cut_in_window = true;
        } else if marked == 0 {
            self.cwnd_bytes += mss * mss * f64::from(acked) / self.cwnd_bytes;
        }
        if una >= self.window_end_psn {
            let fraction = if self.acked_in_window == 0 {
                0.0
            } else {
                f64::from(self.marked_in_window) / f64::from(self.acked_in_window)
            };
            self.alpha = (1.0 - g) * self.alpha + g * fraction;
            self.window_end_psn = next_psn;
            self.acked_in_window = 0;
            self.marked_in_window = 0;
            self.cut_in_window = false;
        }
    }
}

impl CcState {
    pub fn new(kind: CcKind, line_rate_bps: u64, bdp_bytes: f64) -> CcState {
        match kind {
            CcKind::Dcqcn => CcState::Dcqcn(Dcqcn::new(line_rate_bps)),
            CcKind::Dctcp => CcState::Dctcp(Dctcp::new(bdp_bytes)),
            CcKind::Hpcc => CcState::Hpcc(Hpcc::new(line_rate_bps)),
            CcKind::Timely => CcState::Timely(Timely::new(line_rate_bps)),
            CcKind::None => CcState::LineRate,
        }
    }
}

/// How many bytes a rate-based queue pair may have in flight, SimAI's
/// `GetWin`: `None` without a window (or a zero BDP), else the BDP, scaled
/// by the current rate over the line rate under [`WindowMode::VariableBdp`]
/// (never below one byte, so a queue pair is never shut).
pub fn window_bytes(
    mode: WindowMode,
    bdp_bytes: u64,
    rate_bps: f64,
    line_rate_bps: u64,
) -> Option<u64> {
    if bdp_bytes == 0 {
        return None;
    }
    match mode {
        WindowMode::Off => None,
        WindowMode::Bdp => Some(bdp_bytes),
        WindowMode::VariableBdp => {
            let scaled = bdp_bytes as f64 * rate_bps / line_rate_bps.max(1) as f64;
            Some((scaled as u64).max(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_bounds_bytes_in_flight() {
        // A 100 Gb/s path with a 10 us base RTT: a 125,000 B BDP.
        let bdp = 125_000;
        assert_eq!(
            window_bytes(WindowMode::Off, bdp, 50e9, 100_000_000_000),
            None
        );
        assert_eq!(
            window_bytes(WindowMode::Bdp, bdp, 50e9, 100_000_000_000),
            Some(bdp)
        );
        // VAR_WIN: half the rate, half the window; the minimum rate, 1 B.
        assert_eq!(
            window_bytes(WindowMode::VariableBdp, bdp, 50e9, 100_000_000_000),
            Some(62_500)
        );
        assert_eq!(
            window_bytes(WindowMode::VariableBdp, bdp, 1e3, 100_000_000_000),
            Some(1)
        );
        assert_eq!(
            window_bytes(WindowMode::Bdp, 0, 50e9, 100_000_000_000),
            None
        );
    }

    #[test]
    fn dctcp_cuts_once_per_window_by_alpha() {
        let mut d = Dctcp::new(100_000.0);
        d.window_end_psn = 10;
        d.on_ack(1.0 / 16.0, 1000.0, 1, 1, 1, 20);
        assert_eq!(d.cwnd_bytes, 50_000.0); // alpha = 1 initially
        d.on_ack(1.0 / 16.0, 1000.0, 1, 1, 2, 20);
        assert_eq!(d.cwnd_bytes, 50_000.0); // at most one cut per window
        d.on_ack(1.0 / 16.0, 1000.0, 8, 0, 10, 20);
        // Window ended: alpha = 15/16 + 1/16 * 2/10.
        assert!((d.alpha - (15.0 / 16.0 + 0.2 / 16.0)).abs() < 1e-12);
    }
}
