//! `--fast-forward on` from the command line: what it does not cover yet
//! (Ultra Ethernet, faults, in-network aggregation) and bad values of its
//! flags end with exit code 2 and one line naming the flag, before any
//! output is written; a run it covers reports its jumps in run.json.

use std::path::Path;
use std::process::Output;

use crate::common::{self, scratch};

/// `netsim line` in `dir`.
fn netsim_in(dir: &Path, line: &str) -> Output {
    common::netsim_command(dir, &common::words(line), &[])
        .output()
        .expect("netsim runs")
}

#[test]
fn what_fast_forward_does_not_cover_is_refused_with_one_line_and_no_output() {
    let dir = scratch("refused");
    let cases: &[(&str, &str)] = &[
        (
            "--topo fat-tree --k 4 --transport uec",
            "--fast-forward: Ultra Ethernet (--transport uec) is not fast-forwarded",
        ),
        (
            "--topo fat-tree --k 4 --fault link-down:0-16@20us",
            "--fast-forward on: runs with faults",
        ),
        (
            "--topo star --hosts 8 --workload allreduce --algo ina --dtype int32 --size 64KiB",
            "--fast-forward on: in-network aggregation",
        ),
        ("--topo star --ff-tolerance 1", "--ff-tolerance"),
        ("--topo star --ff-period-us 0", "--ff-period-us"),
        ("--topo star --ff-max-skip-us 1000001", "--ff-max-skip-us"),
        // Not a whole number of the 10 us periods.
        ("--topo star --ff-window-us 15", "--ff-window-us"),
        // A negative value is the flag's, not an unknown argument.
        ("--topo star --ff-tolerance -1", "--ff-tolerance"),
        ("--topo star --ff-max-skip-us -5", "--ff-max-skip-us"),
        ("--topo star --ff-memo maybe", "--ff-memo"),
        ("--topo star --ff-congested maybe", "--ff-congested"),
        ("--topo star --ff-scope maybe", "--ff-scope"),
    ];
    for (flags, needle) in cases {
        let args = format!("run --fast-forward on --quiet --out out {flags}");
        common::rejects(&dir, &args, &[], needle);
        assert!(!dir.join("out").exists(), "{args:?} left output behind");
        // The same run without fast-forward is valid: the refusal is the
        // fast-forward's, not the scenario's.
        let off = args.replacen("--fast-forward on", "--fast-forward off", 1);
        if !needle.starts_with("--ff-") {
            let o = netsim_in(&dir, &off);
            assert!(
                o.status.success(),
                "{off:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            std::fs::remove_dir_all(dir.join("out")).unwrap();
        } else {
            // A bad `--ff-*` value is refused with fast-forward off too.
            common::rejects(&dir, &off, &[], needle);
            assert!(!dir.join("out").exists(), "{off:?} left output behind");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_steady_run_reports_its_jumps_and_conserves_bytes() {
    let dir = scratch("steady");
    let out = common::run_out(
        &dir,
        "run --topo star --hosts 4 --traffic incast --flow-size 8388608 --fast-forward on",
        "out",
    );
    let run = common::run_json(&out);
    let ff = &run["fast_forward"];
    assert_eq!(ff["enabled"], true, "{run}");
    assert!(ff["skips"].as_u64().unwrap() > 0, "{run}");
    assert!(ff["skipped_ns"].as_u64().unwrap() > 0, "{run}");
    assert!(ff["events_avoided"].as_u64().unwrap() > 0, "{run}");
    assert_eq!(run["flows_finished"], run["flows"], "{run}");
    // Three senders into one: every byte sent, in jumps or packet by
    // packet, was delivered, and nothing more.
    let bytes = 3 * 8_388_608u64;
    assert_eq!(run["sent_payload_bytes"], bytes, "{run}");
    assert_eq!(run["delivered_payload_bytes"], bytes, "{run}");
    // The jumped bytes were all steady flows' bytes, and the census
    // never counts more than was sent.
    let steady = ff["flow_steady_bytes"].as_u64().unwrap();
    assert!(steady > 0 && steady < bytes, "{run}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_congested_incast_jumps_only_with_ff_congested() {
    let dir = scratch("congested");
    // Two DCQCN senders into one port with PFC: cut in every window.
    let line = "run --topo star --hosts 3 --traffic incast --incast-degree 2 \
                --flow-size 10000000 --cc dcqcn --pfc on --buffer-kb 512 \
                --fast-forward on --sample-ns 0";
    let skips = |extra: &str, out: &str| {
        let run = common::run_json(&common::run_out(&dir, &format!("{line} {extra}"), out));
        assert_eq!(run["flows_finished"], run["flows"], "{run}");
        run["fast_forward"]["skips"].as_u64().unwrap()
    };
    assert_eq!(skips("", "flat"), 0);
    assert!(skips("--ff-congested on", "congested") > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
