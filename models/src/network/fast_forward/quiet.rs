//! Quiet windows (docs/design/fast-forward.md, "Quiet windows"): where
//! `--ff-window-us` is longer than four periods, a flow whose congestion
//! control never acted (no CNP, no retransmission, DCQCN at line rate) has
//! no control loop to oscillate, so four periods measure its rate; not
//! under `--ff-congested`, where PFC pauses are the loop. A
//! domain of such flows (`domains.rs`), or a run of them (agreed here at
//! every check), is judged on the last four periods; any other on the
//! whole window.

use super::jumps::Steady;
use crate::network::cc::CcState;
use crate::network::Network;
use crate::telemetry::TelemetrySink;
use netsim_engine::{Aborted, AllMax};

/// Periods a quiet window spans (see [`Steady::short`]).
const QUIET_PERIODS: usize = 4;

impl Steady {
    /// The periods of the steady window (`--ff-window-us`), the one a
    /// flow whose congestion control has acted is judged on: its rate
    /// oscillates, and the window must average that.
    pub(super) fn long(&self) -> usize {
        self.slots - 1
    }

    /// The periods a *quiet* domain is judged on (its flows' CC never
    /// acted: [`Network::ff_flow_quiet`]): four, or the whole window if
    /// shorter. With no control loop, rates are set by the links alone
    /// and a short window measures them; the long one would only delay
    /// the jump (a ring step of ~70 us leaves no room for a 40 us window).
    pub(super) fn short(&self) -> usize {
        self.long().min(QUIET_PERIODS)
    }

    /// The slot `periods` checks before `slot`.
    pub(super) fn back(&self, slot: usize, periods: usize) -> usize {
        (slot + self.slots - periods) % self.slots
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Whether sender `i`'s congestion control has never acted: no CNP, no
    /// retransmission, DCQCN still at line rate, or no CC at all (HPCC,
    /// Timely and DCTCP move on every acknowledgement: never quiet). Its
    /// rate is then set by the links it shares alone, with no control
    /// loop to oscillate (see [`Steady::short`]). Never under
    /// `--ff-congested`: there PFC pauses are part of the steady state, a
    /// loop no sender's CC shows, which only the long window averages.
    pub(super) fn ff_flow_quiet(&self, i: usize) -> bool {
        let congested = self.ff.steady.as_ref().is_some_and(|s| s.config.congested);
        let s = &self.transport.senders[i];
        !congested
            && s.cnps == 0
            && s.retransmitted_pkts == 0
            && match &s.cc {
                CcState::Dcqcn(d) => d.rate_bps >= s.line_rate_bps as f64,
                CcState::LineRate => true,
                CcState::Hpcc(_) | CcState::Timely(_) | CcState::Dctcp(_) => false,
            }
    }

    /// Agrees whether every flow sending is quiet: the whole run is then
    /// judged on the short window at this check, else on the long one
    /// (one value, only where the two differ).
    pub(crate) fn ff_agree_quiet(&mut self, all_max: AllMax<'_>) -> Result<(), Aborted> {
        let Some(ff) = self.ff.steady.as_ref() else {
            return Ok(());
        };
        if ff.short() == ff.long() {
            return Ok(());
        }
        let loud = self.active_senders().any(|i| !self.ff_flow_quiet(i));
        let mut agreed = [u64::from(loud)];
        all_max(&mut agreed)?;
        let ff = self.ff.steady.as_mut().expect("fast-forward is on");
        ff.run_periods = if agreed[0] == 0 {
            ff.short()
        } else {
            ff.long()
        };
        Ok(())
    }
}
