//! `--host-overhead-jitter-ns`: each flow's host overhead plus a delay
//! uniform in [0, J] drawn from the run seed and the flow id alone.

use std::path::Path;

use crate::common::tables::flow_outcomes;
use crate::common::{netsim, scratch, stderr};

const RUN: &str =
    "--topo fat-tree --k 4 --workload allreduce --size 64KiB --host-overhead-ns 1000 --quiet";

fn run(out: &Path, extra: &str) -> Vec<Vec<String>> {
    let o = netsim(format!("{RUN} {extra} --out {}", out.display()));
    assert!(o.status.success(), "{extra}: {}", stderr(&o));
    flow_outcomes(out)
}

/// `start_ns` (column 4 of `flow_outcomes`) of flows 0-15: the ring's
/// first step, one flow per rank, which waits for nothing but the host
/// overhead.
fn first_starts_ns(table: &[Vec<String>]) -> Vec<u64> {
    table[..16].iter().map(|r| r[4].parse().unwrap()).collect()
}

#[test]
fn jitter_delays_each_flow_within_its_bound_the_same_on_any_thread_count() {
    let dir = scratch("host-jitter");
    let plain = run(&dir.join("plain"), "--threads 1");
    assert_eq!(
        plain,
        run(&dir.join("zero"), "--threads 2 --host-overhead-jitter-ns 0")
    );
    assert_eq!(first_starts_ns(&plain), vec![1000; 16]);

    let one = run(
        &dir.join("one"),
        "--threads 1 --host-overhead-jitter-ns 500",
    );
    let two = run(
        &dir.join("two"),
        "--threads 2 --host-overhead-jitter-ns 500",
    );
    let lazy = run(
        &dir.join("lazy"),
        "--threads 2 --lazy-expansion on --host-overhead-jitter-ns 500",
    );
    assert_eq!(one, two, "1 and 2 threads draw the same jitter");
    assert_eq!(one, lazy, "expanded lazily, a flow keeps its jitter");
    let starts = first_starts_ns(&one);
    assert_eq!(starts.len(), 16, "{starts:?}");
    assert!(
        starts.iter().all(|s| (1000..=1500).contains(s)),
        "{starts:?}"
    );
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert!(
        spread > 100,
        "16 uniform draws in 500 ns spread: {starts:?}"
    );
    assert_ne!(one, plain);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn jitter_is_refused_under_fast_forward() {
    let dir = scratch("host-jitter-ff");
    let o = netsim(format!(
        "{RUN} --host-overhead-jitter-ns 30 --fast-forward on --out {}",
        dir.display()
    ));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--host-overhead-jitter-ns"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
