//! The completion times of a run's flows, for `run.json`'s percentiles.
//!
//! A run keeps none of them while it runs: every finished flow's `fct_ns`
//! is in the `flows` table it streams, so [`exact_percentiles`] reads them
//! back from that table's parts (files, or the batches a run kept in
//! memory) in two passes, holding a histogram of about 0.9 MB and the
//! distinct times of the one or two buckets that hold the ranks asked.
//! The result is the same time a sort of every completion time gives.
//!
//! Under MPI, a rank reads its own parts back into [`Fcts`] (4 bytes a
//! flow, nanoseconds under 2^32, 4.3 s; longer ones apart, 8 bytes each)
//! for rank 0 to gather.

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The column [`exact_percentiles`] reads.
const FCT_COLUMN: &str = "fct_ns";

/// Mantissa bits of a [`bucket`]: 2^11 buckets per power of two above
/// 4,096 ns, one per nanosecond below.
const MANTISSA_BITS: u32 = 11;

/// Buckets [`bucket`] maps a `u64` into.
const BUCKETS: usize = (65 - MANTISSA_BITS as usize) << MANTISSA_BITS;

/// The histogram bucket of `t`: monotone in `t`, `t` itself below
/// 2^(MANTISSA_BITS + 1), else the power of two and the next
/// [`MANTISSA_BITS`] bits below the leading one.
fn bucket(t: u64) -> usize {
    if t < 1 << (MANTISSA_BITS + 1) {
        return t as usize;
    }
    let shift = 63 - t.leading_zeros() - MANTISSA_BITS;
    let mantissa = (t >> shift) as usize & ((1 << MANTISSA_BITS) - 1);
    ((shift as usize + 1) << MANTISSA_BITS) | mantissa
}

/// One part of the `flows` table: a finished file, or the row groups a run
/// kept in memory.
pub enum FlowsPart<'a> {
    File(PathBuf),
    Batches(&'a [RecordBatch]),
}

/// Calls `each` with every completion time (non-null `fct_ns`) of `parts`.
fn for_each_fct(parts: &[FlowsPart], mut each: impl FnMut(u64)) -> anyhow::Result<()> {
    let mut column = |batch: &RecordBatch| -> anyhow::Result<()> {
        let Some(fct) = batch.column_by_name(FCT_COLUMN) else {
            anyhow::bail!("the flows table has no {FCT_COLUMN} column");
        };
        let fct = fct.as_primitive::<UInt64Type>();
        if fct.null_count() == 0 {
            fct.values().iter().for_each(|&t| each(t));
        } else {
            fct.iter().flatten().for_each(&mut each);
        }
        Ok(())
    };
    for part in parts {
        match part {
            FlowsPart::Batches(batches) => batches.iter().try_for_each(&mut column)?,
            FlowsPart::File(path) => {
                let file = std::fs::File::open(path)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
                let Some((index, _)) = builder.schema().column_with_name(FCT_COLUMN) else {
                    anyhow::bail!("{}: no {FCT_COLUMN} column", path.display());
                };
                let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
                for batch in builder.with_projection(mask).build()? {
                    column(&batch?)?;
                }
            }
        }
    }
    Ok(())
}

/// The rank `round((n - 1) p)` of `n` sorted times, `p` in `0..=1`.
fn rank_of(n: u64, p: f64) -> u64 {
    ((n - 1) as f64 * p).round() as u64
}

/// Where the `k`-th (from 0) of the items counted by `counts` lies: the
/// index of its count, and its rank among that count's items.
fn locate(counts: impl IntoIterator<Item = u64>, mut k: u64) -> Option<(usize, u64)> {
    for (i, c) in counts.into_iter().enumerate() {
        if k < c {
            return Some((i, k));
        }
        k -= c;
    }
    None
}

/// The completion times at each of `ps` (each in `0..=1`) of every finished
/// flow of `parts`, as [`Fcts::percentile`] gives them (`None` without
/// finished flows), reading the parts twice and keeping none of the times.
pub fn exact_percentiles<const P: usize>(
    parts: &[FlowsPart],
    ps: [f64; P],
) -> anyhow::Result<[Option<u64>; P]> {
    let mut counts = vec![0u64; BUCKETS];
    for_each_fct(parts, |t| counts[bucket(t)] += 1)?;
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return Ok([None; P]);
    }
    // Each asked rank's bucket, and its rank among that bucket's times.
    let wanted = ps.map(|p| locate(counts.iter().copied(), rank_of(n, p)).expect("k < n"));
    drop(counts);
    // The distinct times of those buckets, counted.
    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    for_each_fct(parts, |t| {
        if wanted.iter().any(|&(b, _)| b == bucket(t)) {
            *seen.entry(t).or_default() += 1;
        }
    })?;
    Ok(wanted.map(|(b, k)| {
        let times: Vec<(u64, u64)> = seen
            .iter()
            .filter(|(&t, _)| bucket(t) == b)
            .map(|(&t, &c)| (t, c))
            .collect();
        locate(times.iter().map(|&(_, c)| c), k).map(|(i, _)| times[i].0)
    }))
}

/// Every completion time of `parts`, kept (a rank's, for rank 0 to gather).
pub fn read_fcts(parts: &[FlowsPart]) -> anyhow::Result<Fcts> {
    let mut fcts = Fcts::default();
    for_each_fct(parts, |t| fcts.push(t))?;
    Ok(fcts)
}

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

    /// `times` as batches of a nullable `fct_ns` column, a null after every
    /// seventh time (an unfinished flow).
    fn batches(times: &[u64]) -> Vec<RecordBatch> {
        use arrow_array::UInt64Array;
        times
            .chunks(1_000)
            .map(|chunk| {
                let column: UInt64Array = chunk
                    .iter()
                    .enumerate()
                    .flat_map(|(i, &t)| {
                        std::iter::once(Some(t)).chain((i % 7 == 0).then_some(None))
                    })
                    .collect();
                RecordBatch::try_from_iter([(FCT_COLUMN, std::sync::Arc::new(column) as _)])
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn buckets_are_monotone_and_in_range() {
        let mut last = 0;
        for shift in 0..64 {
            for t in [
                1u64 << shift,
                (1u64 << shift) + 1,
                (1u64 << shift).wrapping_mul(3) / 2,
            ] {
                assert!(bucket(t) < BUCKETS);
                assert!(bucket(t - 1) <= bucket(t), "{t}");
                last = last.max(bucket(t));
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert!(last < BUCKETS);
    }

    #[test]
    fn two_passes_give_the_sorted_copys_percentiles_from_files_and_batches() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let times: Vec<u64> = (0..20_003)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 4 {
                    // Many equal times, as a fabric without contention gives.
                    0 => 1_234_567,
                    1 => x % 5_000,
                    2 => 1_234_000 + x % 1_000,
                    _ => x % 5_400_000_000,
                }
            })
            .collect();
        let (first, second) = times.split_at(7_001);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        let file = std::fs::File::create(&path).unwrap();
        let kept_first = batches(first);
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(file, kept_first[0].schema(), None).unwrap();
        for b in &kept_first {
            writer.write(b).unwrap();
        }
        writer.close().unwrap();
        let kept_second = batches(second);
        let parts = [FlowsPart::File(path), FlowsPart::Batches(&kept_second)];
        let ps = [0.0, 0.25, 0.5, 0.99, 0.999, 1.0];
        let got = exact_percentiles(&parts, ps).unwrap();
        let mut all = read_fcts(&parts).unwrap();
        assert_eq!(all.len(), times.len());
        for (p, got) in ps.iter().zip(got) {
            assert_eq!(got, Some(sorted_percentile(&times, *p)), "{p}");
            assert_eq!(got, all.percentile(*p), "{p}");
        }
        assert_eq!(exact_percentiles(&parts[1..1], [0.5]).unwrap(), [None]);
    }
}
