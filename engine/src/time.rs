//! Simulated time: integer picoseconds, never floating point.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time or a duration, in picoseconds.
///
/// `u64` picoseconds cover 213 days of simulated time, far beyond any
/// packet-level run, while keeping one-picosecond resolution so that link
/// serialisation times at 800 Gb/s (10 ps per byte) stay exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    /// Later than any event; used as "no event" and "run forever".
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_ps(ps: u64) -> SimTime {
        SimTime(ps)
    }
    pub const fn from_ns(ns: u64) -> SimTime {
        SimTime(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> SimTime {
        SimTime(us * 1_000_000)
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
}

impl Add for SimTime {
    type Output = SimTime;
    #[inline]
    fn add(self, other: SimTime) -> SimTime {
        SimTime(self.0 + other.0)
    }
}

impl AddAssign for SimTime {
    #[inline]
    fn add_assign(&mut self, other: SimTime) {
        self.0 += other.0;
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
