//! Several jobs on one fabric with background traffic: placement, start
//! times, the `job` column, and placement errors.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::Array;

use crate::common::tables::{batches, column, strings};
use crate::common::{netsim, scratch};

/// `(job, start_ns)` of every row.
fn jobs(dir: &Path, start: &str) -> Vec<(Option<String>, Option<u64>)> {
    let mut rows = Vec::new();
    for b in batches(dir) {
        let job = strings(&b, "job");
        let s = column::<UInt64Type>(&b, start);
        for i in 0..b.num_rows() {
            rows.push((
                job.is_valid(i).then(|| job.value(i).to_string()),
                s.is_valid(i).then(|| s.value(i)),
            ));
        }
    }
    rows
}

#[test]
fn two_jobs_and_background_traffic_share_a_fabric() {
    let out = scratch("two");
    let o = netsim(format!(
        r#"--topo fat-tree --k 4 --traffic permutation --flow-size 20000
           --job {{name="a",workload="allreduce",size="256KiB",ranks=8}}
           --job {{name="b",workload="alltoall",size="64KiB",hosts="8-11",start_us=5}}
           --out {} --quiet"#,
        out.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let collectives = jobs(&out.join("collectives"), "start_ns");
    assert_eq!(collectives.len(), 2);
    for (job, start) in &collectives {
        let start = start.expect("every collective ran");
        match job.as_deref() {
            Some("a") => {}
            Some("b") => assert!(start >= 5_000, "job b started at {start} ns"),
            other => panic!("collective of job {other:?}"),
        }
    }
    let flows = jobs(&out.join("flows"), "start_ns");
    let count = |name: Option<&str>| flows.iter().filter(|f| f.0.as_deref() == name).count();
    // Ring all-reduce over 8: 2 x 7 steps x 8 flows; all-to-all over 4: 12.
    assert_eq!(count(Some("a")), 2 * 7 * 8);
    assert_eq!(count(Some("b")), 12);
    // The permutation: one background flow per host, no job.
    assert_eq!(count(None), 16);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn placement_errors_exit_with_code_2() {
    let out = scratch("bad");
    for (jobs, needle) in [
        (
            vec![
                r#"{name="a",workload="allreduce",hosts="0-7"}"#,
                r#"{name="b",workload="allreduce",hosts="6-9"}"#,
            ],
            "host 6 already runs job `a`",
        ),
        (
            vec![r#"{name="a",workload="allreduce",ranks=17}"#],
            "17 ranks but only 16",
        ),
        (
            vec![r#"{name="a",workload="allreduce",hosts="pods"}"#],
            "ranks: needed",
        ),
        (
            vec![r#"{name="a",workload="allreduce",rank=4}"#],
            "unknown field `rank`",
        ),
        (
            vec![r#"{name="a",workload="allreduce",hosts="0-3",start_us=-1}"#],
            "start_us",
        ),
    ] {
        let mut args = format!("--topo fat-tree --k 4 --out {}", out.display());
        for j in &jobs {
            args.push_str(&format!(" --job {j}"));
        }
        let o = netsim(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{jobs:?}: {err}");
        assert!(err.contains(needle), "{jobs:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn strided_placements_deal_ranks_over_pods_and_servers() {
    let out = scratch("strided");
    let o = netsim(format!(
        r#"--topo fat-tree --k 4 --traffic permutation --flow-size 1000
           --job {{name="p",workload="barrier",hosts="pods",ranks=4}} --out {} --quiet"#,
        out.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // One host in each of the 4 pods (4 hosts per pod): 0, 4, 8, 12.
    let mut hosts = std::collections::BTreeSet::new();
    for b in batches(&out.join("flows")) {
        let job = b.column_by_name("job").unwrap().as_string::<i32>();
        let src = b
            .column_by_name("src")
            .unwrap()
            .as_primitive::<arrow_array::types::UInt32Type>();
        for i in 0..b.num_rows() {
            if job.is_valid(i) {
                hosts.insert(src.value(i));
            }
        }
    }
    assert_eq!(hosts.into_iter().collect::<Vec<_>>(), [0, 4, 8, 12]);
    let _ = std::fs::remove_dir_all(&out);
}
