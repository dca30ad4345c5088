//! Keys that recognise a repeat within the run's tolerance (DESIGN.md §3c,
//! "Tolerant keys"): a domain whose key has no record replays the record
//! of a key equal to it but for its times (entry start offsets, compute
//! durations, when outside dependencies are met), each within the
//! tolerance (`--ff-tolerance`) of the record's span. Its replay keeps the
//! record's per-flow completions relative to each flow's own start, so a
//! flow that starts a little later ends that much later.

use hashbrown::HashMap;

/// Records' keys by their *mask*: the key with its times zeroed, and the
/// positions of the times, in the order the records were made (the same
/// on every shard).
#[derive(Debug, Default)]
pub(super) struct Near {
    by_mask: HashMap<Vec<u64>, Vec<Vec<u64>>>,
}

/// `key` with the values at `times` zeroed, then `times` themselves.
fn mask(key: &[u64], times: &[u32]) -> Vec<u64> {
    let mut out = key.to_vec();
    for &i in times {
        out[i as usize] = 0;
    }
    out.extend(times.iter().map(|&i| u64::from(i)));
    out
}

impl Near {
    /// A record was made for `key` (times at `times`).
    pub(super) fn insert(&mut self, key: &[u64], times: &[u32]) {
        self.by_mask
            .entry(mask(key, times))
            .or_default()
            .push(key.to_vec());
    }

    /// The recorded key nearest `key` whose every time (at `times`) is
    /// within `slack(recorded key)` picoseconds of `key`'s: the one whose
    /// largest difference is least, the first made among equals. `None`
    /// when no record of its mask is that close.
    pub(super) fn find(
        &self,
        key: &[u64],
        times: &[u32],
        slack: impl Fn(&[u64]) -> u64,
    ) -> Option<&[u64]> {
        let keys = self.by_mask.get(&mask(key, times))?;
        let mut best: Option<(u64, &[u64])> = None;
        for k in keys {
            let allowed = slack(k);
            let worst = times
                .iter()
                .map(|&i| k[i as usize].abs_diff(key[i as usize]))
                .max()
                .unwrap_or(0);
            if worst <= allowed && best.is_none_or(|(w, _)| worst < w) {
                best = Some((worst, k));
            }
        }
        best.map(|(_, k)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::Near;

    #[test]
    fn a_key_within_the_slack_finds_the_nearest_record_and_others_do_not() {
        let mut near = Near::default();
        // Position 1 is a time; 0 and 2 are structure.
        near.insert(&[7, 1_000, 3], &[1]);
        near.insert(&[7, 1_050, 3], &[1]);
        let slack = |_: &[u64]| 60;
        assert_eq!(
            near.find(&[7, 1_040, 3], &[1], slack),
            Some(&[7, 1_050, 3][..])
        );
        assert_eq!(
            near.find(&[7, 990, 3], &[1], slack),
            Some(&[7, 1_000, 3][..])
        );
        // Beyond the slack of both, or another structure: none.
        assert_eq!(near.find(&[7, 1_200, 3], &[1], slack), None);
        assert_eq!(near.find(&[7, 1_000, 4], &[1], slack), None);
        // The same values at other time positions are another mask.
        assert_eq!(near.find(&[7, 1_000, 3], &[2], slack), None);
    }
}
