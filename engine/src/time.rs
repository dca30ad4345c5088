//! Simulated time: integer picoseconds, never floating point.
//!
//! A user's number becomes simulated time only through a checked constructor
//! ([`SimTime::try_from_ns`], [`SimTime::try_from_us`], [`SimTime::try_from_f64`])
//! that rejects what does not fit. Sums of times never wrap: they saturate at
//! [`SimTime::MAX`], which the engine treats as "never" (an event there is
//! never handled), so a sum beyond the range of simulated time postpones an
//! event past the end of every run instead of moving it into the past.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time or a duration, in picoseconds.
///
/// `u64` picoseconds cover 213 days of simulated time, far beyond any
/// packet-level run, while keeping one-picosecond resolution so that link
/// serialisation times at 800 Gb/s (10 ps per byte) stay exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

/// A user's time does not fit in simulated time (or is not a number).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{value} {unit} is {problem}")]
pub struct TimeRangeError {
    /// The value as given.
    pub value: String,
    /// Its unit (`ns`, `us`).
    pub unit: &'static str,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Why a time does not fit.
const BEYOND: &str = "beyond the range of simulated time (2^64 ps, about 213 days)";

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    /// Later than any event; used as "no event" and "run forever". An event
    /// at `MAX` is never handled.
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_ps(ps: u64) -> SimTime {
        SimTime(ps)
    }
    /// Saturates at [`SimTime::MAX`]; for constants. User input goes through
    /// [`SimTime::try_from_ns`].
    pub const fn from_ns(ns: u64) -> SimTime {
        SimTime(ns.saturating_mul(1_000))
    }
    /// Saturates at [`SimTime::MAX`]; for constants. User input goes through
    /// [`SimTime::try_from_us`].
    pub const fn from_us(us: u64) -> SimTime {
        SimTime(us.saturating_mul(1_000_000))
    }
    /// `ns` nanoseconds, or an error when they do not fit.
    pub fn try_from_ns(ns: u64) -> Result<SimTime, TimeRangeError> {
        Self::scaled(ns, 1_000, "ns")
    }
    /// `us` microseconds, or an error when they do not fit.
    pub fn try_from_us(us: u64) -> Result<SimTime, TimeRangeError> {
        Self::scaled(us, 1_000_000, "us")
    }
    fn scaled(value: u64, ps_per_unit: u64, unit: &'static str) -> Result<SimTime, TimeRangeError> {
        match value.checked_mul(ps_per_unit) {
            Some(ps) if ps < u64::MAX => Ok(SimTime(ps)),
            _ => Err(TimeRangeError {
                value: value.to_string(),
                unit,
                problem: BEYOND,
            }),
        }
    }
    /// `value` in units of `ps_per_unit` picoseconds (1e6 for microseconds),
    /// rounded to the picosecond; an error for NaN, negative values and
    /// values that do not fit.
    pub fn try_from_f64(
        value: f64,
        ps_per_unit: f64,
        unit: &'static str,
    ) -> Result<SimTime, TimeRangeError> {
        let error = |problem| TimeRangeError {
            value: value.to_string(),
            unit,
            problem,
        };
        if !value.is_finite() || value < 0.0 {
            return Err(error("not a finite non-negative number"));
        }
        let ps = (value * ps_per_unit).round();
        // 2^64 is the first f64 above every u64; MAX itself means "never".
        if ps >= 18_446_744_073_709_551_616.0 || ps as u64 == u64::MAX {
            return Err(error(BEYOND));
        }
        Ok(SimTime(ps as u64))
    }
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Whole nanoseconds, rounded down.
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    pub const fn saturating_add(self, other: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(other.0))
    }
    /// The sum, or `None` when it does not fit: for sums of user times that
    /// are checked before a run.
    pub const fn checked_add(self, other: SimTime) -> Option<SimTime> {
        match self.0.checked_add(other.0) {
            Some(ps) => Some(SimTime(ps)),
            None => None,
        }
    }
    /// `self` times `n`, saturating at [`SimTime::MAX`] ("never").
    pub const fn saturating_mul(self, n: u64) -> SimTime {
        SimTime(self.0.saturating_mul(n))
    }
}

/// Saturates at [`SimTime::MAX`] ("never"): an event scheduled past the
/// range of simulated time is never handled, rather than wrapping into the past.
impl Add for SimTime {
    type Output = SimTime;
    #[inline]
    fn add(self, other: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(other.0))
    }
}

/// Saturates like [`Add`].
impl AddAssign for SimTime {
    #[inline]
    fn add_assign(&mut self, other: SimTime) {
        self.0 = self.0.saturating_add(other.0);
    }
}

impl Sub for SimTime {
    type Output = SimTime;
    #[inline]
    fn sub(self, other: SimTime) -> SimTime {
        SimTime(self.0 - other.0)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ps", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_times_that_do_not_fit_are_errors() {
        assert_eq!(SimTime::try_from_ns(5), Ok(SimTime(5_000)));
        assert!(SimTime::try_from_ns(u64::MAX / 1000 + 1).is_err());
        assert!(SimTime::try_from_us(18_446_744_073_710).is_err());
        assert_eq!(
            SimTime::try_from_us(18_446_744_073_709),
            Ok(SimTime(18_446_744_073_709_000_000))
        );
        assert_eq!(
            SimTime::try_from_f64(1.5, 1e6, "us"),
            Ok(SimTime(1_500_000))
        );
        for bad in [1e30, f64::NAN, f64::INFINITY, -1.0, 1.9e13] {
            assert!(SimTime::try_from_f64(bad, 1e6, "us").is_err(), "{bad}");
        }
    }

    #[test]
    fn sums_saturate_at_never() {
        assert_eq!(SimTime(u64::MAX - 1) + SimTime(5), SimTime::MAX);
        let mut t = SimTime(u64::MAX - 1);
        t += SimTime(2);
        assert_eq!(t, SimTime::MAX);
        assert_eq!(SimTime(u64::MAX - 1).checked_add(SimTime(2)), None);
        assert_eq!(SimTime::from_us(u64::MAX), SimTime::MAX);
    }
}
