//! The completion times of a run's flows, kept for `run.json`'s percentiles
//! in 4 bytes a flow (nanoseconds under 2^32, 4.3 s; longer ones apart, 8
//! bytes each), in a vector a flow-level run sizes once for its flows: a
//! run of 10^8 flows holds what its count says, not a grown vector's spare
//! half or a copy.

/// Completion times, in no particular order.
#[derive(Debug, Default)]
pub struct Fcts {
    short_ns: Vec<u32>,
    long_ns: Vec<u64>,
}

impl Fcts {
    /// Room for `flows` times under 4.3 s.
    pub fn with_capacity(flows: usize) -> Fcts {
        Fcts {
            short_ns: Vec::with_capacity(flows),
            long_ns: Vec::new(),
        }
    }

    pub fn push(&mut self, fct_ns: u64) {
        match u32::try_from(fct_ns) {
            Ok(short) => self.short_ns.push(short),
            Err(_) => self.long_ns.push(fct_ns),
        }
    }

    pub fn len(&self) -> usize {
        self.short_ns.len() + self.long_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `other`'s times (taken whole into an empty one: no copy).
    pub fn append(&mut self, other: &mut Fcts) {
        if self.is_empty() {
            std::mem::swap(self, other);
        } else {
            self.short_ns.append(&mut other.short_ns);
            self.long_ns.append(&mut other.long_ns);
        }
    }

    /// Every time as nanoseconds (to gather them from several ranks).
    pub fn to_ns(&self) -> Vec<u64> {
        let short = self.short_ns.iter().map(|&t| u64::from(t));
        short.chain(self.long_ns.iter().copied()).collect()
    }

    pub fn from_ns(times_ns: &[u64]) -> Fcts {
        let mut f = Fcts::with_capacity(times_ns.len());
        for &t in times_ns {
            f.push(t);
        }
        f
    }

    /// The time at rank `round((n - 1) p)` of the sorted times, `p` in
    /// `0..=1` (`None` without times). Reorders the times.
    pub fn percentile(&mut self, p: f64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let k = ((self.len() - 1) as f64 * p).round() as usize;
        // Every short time is below every long one.
        Some(match k.checked_sub(self.short_ns.len()) {
            None => u64::from(*self.short_ns.select_nth_unstable(k).1),
            Some(k) => *self.long_ns.select_nth_unstable(k).1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The percentile of a sorted copy, as `run.json` gave it before.
    fn sorted_percentile(times: &[u64], p: f64) -> u64 {
        let mut s = times.to_vec();
        s.sort_unstable();
        s[((s.len() - 1) as f64 * p).round() as usize]
    }

    #[test]
    fn percentiles_match_a_sorted_copy_across_the_4_s_boundary() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let times: Vec<u64> = (0..10_001)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // A fifth past 2^32 ns.
                (x >> 16) % 5_400_000_000
            })
            .collect();
        let long = times.iter().filter(|&&t| t > u64::from(u32::MAX)).count();
        assert!(long > 1_000 && long < 9_000, "{long}");
        let mut halves = (
            Fcts::from_ns(&times[..5_000]),
            Fcts::from_ns(&times[5_000..]),
        );
        halves.0.append(&mut halves.1);
        let mut f = halves.0;
        assert_eq!(f.len(), times.len());
        for p in [0.0, 0.5, 0.8, 0.99, 1.0] {
            assert_eq!(f.percentile(p), Some(sorted_percentile(&times, p)), "{p}");
        }
        let mut round_trip = f.to_ns();
        round_trip.sort_unstable();
        let mut sorted = times.clone();
        sorted.sort_unstable();
        assert_eq!(round_trip, sorted);
        assert_eq!(Fcts::default().percentile(0.5), None);
    }
}
