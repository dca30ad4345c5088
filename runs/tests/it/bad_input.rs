//! Every input that once crashed, hung, exhausted memory or silently lied
//! (issue 18, and whatever the fuzz campaign in `fuzz.rs` finds) is kept
//! here: it must end with exit code 2 and one line that says where the bad
//! value came from, or with 0 where the input is valid.

use std::path::Path;
use std::process::Output;

use crate::common::{self, rejects, run_json, scratch};

/// `netsim line` in `dir` with the extra environment `env`.
fn netsim_in(dir: &Path, line: &str, env: &[(&str, &str)]) -> Output {
    common::netsim_command(dir, &common::words(line), env)
        .output()
        .expect("netsim runs")
}

/// The reproductions of issue 18 that name flags only, with the text the
/// error must contain.
const FLAG_CASES: &[(&str, &str)] = &[
    // A flow over 2^32 packets panicked.
    (
        "--topo star --hosts 8 --flow-size 17592186040321",
        "--flow-size: flow 0",
    ),
    // Path latency sums overflowed ("no route").
    (
        "--topo fat-tree --k 4 --link-latency-ns 9223372036854775",
        "--link-latency-ns",
    ),
    // A DCQCN period saturated and time wrapped: a hang.
    (
        "--topo fat-tree --k 4 --dcqcn-rate-decrease-us 1e30 --end-us 200",
        "--dcqcn-rate-decrease-us",
    ),
    (
        "--topo star --dcqcn-alpha-update-us 1e30",
        "--dcqcn-alpha-update-us",
    ),
    (
        "--topo star --dcqcn-rate-increase-us inf",
        "--dcqcn-rate-increase-us",
    ),
    (
        "--topo star --dcqcn-cnp-interval-us 1e13",
        "--dcqcn-cnp-interval-us",
    ),
    ("--topo star --rto-us 1e13", "--rto-us"),
    ("--topo star --hpcc-base-rtt-us NaN", "--hpcc-base-rtt-us"),
    // Counts trusted before they were checked: aborts.
    (
        "--topo star --workload allreduce --group 0-4294967295",
        "--group",
    ),
    (
        "--topo star --workload allreduce --channels 4294967295",
        "--channels",
    ),
    (
        "--topo star --workload allreduce --chunks 4294967295",
        "--chunks",
    ),
    (
        "--topo star --workload allreduce --iterations 4294967295",
        "--iterations",
    ),
    (
        "--topo star --traffic uniform --flows-per-host 4294967295",
        "--flows-per-host",
    ),
    ("--topo fat-tree --k 256", "routing tables need"),
    // Found while checking sizes: a topology or a model too large for the
    // address space aborted on allocation.
    ("--topo dragonfly --p 1 --a 700 --h 1", "links need"),
    ("--topo fat-tree --k 64 --oversub 64", "network model needs"),
    // Simulated time wrapped: wrong results with exit 0.
    ("--topo star --end-us 18446744073710", "--end-us"),
    (
        "--topo star --workload allreduce --algo ina --ina-latency-ns 18446744073709551",
        "--ina-latency-ns",
    ),
    (
        "--topo star --workload allreduce --host-overhead-ns 18446744073709551",
        "--host-overhead-ns",
    ),
    ("--topo star --sample-ns 18446744073709552", "--sample-ns"),
    // A per-message overhead without a workload did nothing, silently.
    (
        "--topo star --host-overhead-ns 500",
        "--host-overhead-ns: applies to a workload",
    ),
    (
        "--topo star --traffic incast --host-overhead-jitter-ns 30",
        "--host-overhead-jitter-ns: applies to a workload",
    ),
    (
        "--topo star --traffic incast --reduce-overhead-ns 30",
        "--reduce-overhead-ns: applies to a workload",
    ),
    // Issue 32: sampling every nanosecond a run of milliseconds (8 x 100 MB
    // into one 100 Gb/s host) wrote rows for minutes; the flows' ideal
    // completion times bound the run's length before it starts.
    (
        "--topo fat-tree --k 4 --traffic incast --incast-degree 8 --flow-size 100000000 \
         --sample-ns 1",
        "lasts at least 0.06",
    ),
    // The wrong flag was blamed.
    ("--topo dragonfly --h 100000", "--h:"),
    ("--topo star --pfc-alpha 0", "--pfc-alpha"),
    ("--topo star --ecn-pmax 2", "--ecn-pmax"),
    ("--topo star --ecn-kmin-kb 10", "--ecn-kmin-kb"),
    ("--topo star --buffer-kb 18446744073709552", "--buffer-kb"),
    // OS errors were printed twice.
    (
        "--topo star --traffic tm:/nonexistent/cm.txt",
        "No such file",
    ),
    ("--config /nonexistent/scenario.toml", "No such file"),
    // Found by the fuzz campaign: a bandwidth whose sum over a switch's
    // ports overflowed (seed 1795440385716735615).
    (
        "--topo star --hosts 17 --link-gbps 4294967295",
        "--link-gbps",
    ),
    // Found by the fuzz campaign (seed 1795700705144593704): a switch
    // barrier over a dragonfly with h = 255 (16,328 routers) searched from
    // every router for its tree's root (minutes: a hang), then the routing
    // tables' latencies and hop counts, not counted beside the tables,
    // aborted on allocation.
    (
        "--topo dragonfly --h 255 --workload barrier --algo ina --iterations 4",
        "routing tables need",
    ),
    // Found in review: SimAI's one window walked a path per pair of
    // hosts at setup (1e9 walks at 32,768 GPUs, a hang); every GPU of a
    // rail-optimized fabric is a host class of its own.
    (
        "--topo spectrum-x --gpus 8192 --flow-size 1000 --window-scope fabric",
        "--window-scope fabric: 8192 host classes",
    ),
    // A usage error is one line too.
    ("--topo star --no-such-flag", "--no-such-flag"),
];

#[test]
fn every_reproduction_of_issue_18_exits_2_with_one_line() {
    let dir = scratch("flags");
    for (args, needle) in FLAG_CASES {
        let mut args = format!("{args} --quiet");
        if !args.contains("--sample-ns") {
            args.push_str(" --sample-ns 0");
        }
        let line = rejects(&dir, &args, &[], needle);
        assert!(
            !line.contains("(os error 2): No such file"),
            "the OS error is repeated: {line}"
        );
    }
}

#[test]
fn the_largest_valid_end_fits_and_runs() {
    let dir = scratch("end");
    let o = netsim_in(
        &dir,
        "--topo star --hosts 4 --end-us 18446744073709 --quiet --sample-ns 0",
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = run_json(&dir.join("netsim-out"));
    assert_eq!(run["flows_finished"], run["flows"], "{run}");
}

#[test]
fn fault_errors_name_the_flag_or_the_file_line_and_field() {
    let dir = scratch("faults");
    let k4 = "--topo fat-tree --k 4 --quiet";
    let flag_cases: &[(&str, &str)] = &[
        (
            "link-down:0-17@5us",
            "--fault `link-down:0-17@5us`: target: there is no link",
        ),
        (
            "node-down:99@1ms",
            "--fault `node-down:99@1ms`: node: 99 is not a node",
        ),
        ("link-down:0-16@5", "time: `5` needs a unit"),
        ("link-down:0-16@99999999999999999999ms", "time: "),
        ("link-rate:0-16@1us", "value: link-rate needs"),
        ("link-rate:0-16@1us=0", "value: "),
        ("link-dwn:0-16@1us", "kind: `link-dwn`"),
        ("node-up:3", "time: missing"),
    ];
    for (spec, needle) in flag_cases {
        rejects(&dir, &format!("{k4} --fault {spec}"), &[], needle);
    }
    std::fs::write(
        dir.join("f.txt"),
        "# faults\nLINK_DOWN 5 0 16\nLINK_DOWN 5 0\n",
    )
    .unwrap();
    let args = format!("{k4} --faults f.txt");
    rejects(&dir, &args, &[], "f.txt:3: LINK_DOWN: expected");
    std::fs::write(dir.join("f.txt"), "LINK_DOWN 5 0 16\nLINK_DOWN x 0 16\n").unwrap();
    rejects(&dir, &args, &[], "f.txt:2: time: `x`");
    std::fs::write(
        dir.join("s.toml"),
        "topo = \"star\"\n\n[[fault]]\nkind = \"node-down\"\ntarget = 1\ntme = \"1us\"\n",
    )
    .unwrap();
    rejects(
        &dir,
        "--config s.toml --quiet",
        &[],
        "s.toml:3: fault: unknown key `tme`",
    );
    for (flag, value) in [
        ("--link-error-rate", "1"),
        ("--link-error-rate", "NaN"),
        ("--reroute-us", "1e9"),
    ] {
        rejects(&dir, &format!("{k4} {flag} {value}"), &[], flag);
    }
    // Flow level has no faults.
    let args = format!("{k4} --fidelity flow --fault node-down:3@1us");
    rejects(&dir, &args, &[], "--fault: the flow level");
}

#[test]
fn a_long_value_is_shortened_in_the_error() {
    let dir = scratch("long");
    let long = "a".repeat(100_000);
    let line = rejects(&dir, &format!("--topo {long}"), &[], "bytes]");
    assert!(line.contains("unknown topology"), "{line}");
}

#[test]
fn scenario_value_errors_name_file_line_and_field() {
    let dir = scratch("scenario");
    let cases: &[(&str, &str)] = &[
        (
            "topo = \"fat-tree\"\n[topology]\nk = 3\n",
            "s.toml:3: field `k`: ",
        ),
        (
            "topo = \"fat-tree\"\ntopology.k = 3\n",
            "s.toml:2: field `k`: ",
        ),
        (
            "topo = \"star\"\n\n[engine]\nend-us = 18446744073710\n",
            "s.toml:4: field `end-us`",
        ),
        (
            "topo = \"star\"\ntraffic = \"uniform\"\nflows-per-host = 4000000000\n",
            "s.toml:3: field `flows-per-host`",
        ),
        (
            "topo = \"star\"\n[network]\ndcqcn-g = 2.0\n",
            "s.toml:3: field `dcqcn-g`",
        ),
        // A topology too large to route is blamed on the size that made it
        // so, not on `topo` (the h = 255 case of the flag reproductions).
        (
            "topo = \"dragonfly\"\nworkload = \"barrier\"\nh = 255\nalgo = \"ina\"\n\
             iterations = 4\nsample-ns = 0\n",
            "s.toml:3: field `h`: --h 255 (--topo dragonfly): topology too large: its routing \
             tables need",
        ),
        // Syntax errors: one line, with the line.
        ("topo = \"fat-tree\"\n[topology\nk = 4\n", "s.toml:2: "),
        ("topo = \"fat-tree\"\nk = \"4\n", "s.toml:2: "),
    ];
    for (text, needle) in cases {
        std::fs::write(dir.join("s.toml"), text).unwrap();
        rejects(&dir, "--config s.toml --quiet", &[], needle);
        rejects(&dir, "validate --config s.toml", &[], needle);
    }
    // A flag typed on the command line is blamed as the flag.
    std::fs::write(dir.join("s.toml"), "topo = \"fat-tree\"\nk = 4\n").unwrap();
    let line = rejects(&dir, "--config s.toml --k 5 --quiet", &[], "--k: ");
    assert!(!line.contains("s.toml"), "{line}");
}

#[test]
fn connection_matrix_errors_name_a_real_line() {
    let dir = scratch("cm");
    std::fs::write(
        dir.join("cm.txt"),
        "Nodes 4\nConnections 3\n0->1 size 100\n",
    )
    .unwrap();
    rejects(
        &dir,
        "--topo star --hosts 4 --traffic tm:cm.txt --quiet",
        &[],
        "cm.txt:2: header says Connections 3",
    );
    std::fs::write(dir.join("cm.txt"), "0->1 start 1e30 size 100\n").unwrap();
    rejects(
        &dir,
        "--topo star --hosts 4 --traffic tm:cm.txt --quiet",
        &[],
        "cm.txt:1: start",
    );
    std::fs::write(dir.join("cm.txt"), "0->1 size 17592186040321\n").unwrap();
    rejects(
        &dir,
        "--topo star --hosts 4 --traffic tm:cm.txt --quiet",
        &[],
        "--traffic tm:cm.txt: flow 0",
    );
}

#[test]
fn a_simai_layer_count_is_checked_against_the_file() {
    let dir = scratch("simai");
    // Found by the fuzz campaign (seed 1795438864475018702): the parser
    // sized its layer list by the count before reading the layers.
    for count in ["18446744073709551615", "100000000"] {
        let text = format!(
            "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 \
             ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0\n{count}\n\
             embedding -1 2000 ALLREDUCE 65536 2000 NONE 0 2000 ALLREDUCE 131072 100\n"
        );
        std::fs::write(dir.join("w.txt"), text).unwrap();
        rejects(
            &dir,
            "--topo fat-tree --k 4 --workload w.txt --quiet",
            &[],
            "w.txt:2: layer count",
        );
    }
}

#[test]
fn a_build_without_mpi_refuses_to_run_under_an_mpi_launcher() {
    let dir = scratch("mpi");
    let launched: &[(&[(&str, &str)], &str)] = &[
        (
            &[("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "0")],
            "OMPI_COMM_WORLD_SIZE=4",
        ),
        (&[("PMI_SIZE", "2"), ("PMI_RANK", "0")], "PMI_SIZE=2"),
        (&[("PMI_RANK", "3")], "PMI_RANK=3"),
        (&[("PMIX_RANK", "1")], "PMIX_RANK=1"),
        (
            &[("SLURM_NTASKS", "8"), ("SLURM_PROCID", "5")],
            "SLURM_NTASKS=8",
        ),
    ];
    for (env, needle) in launched {
        let line = rejects(&dir, "--topo star --quiet", env, needle);
        assert!(line.contains("--features mpi"), "{line}");
    }
    // One process of a launcher, or a Slurm allocation outside srun, runs.
    for env in [
        &[("OMPI_COMM_WORLD_SIZE", "1"), ("OMPI_COMM_WORLD_RANK", "0")][..],
        &[("SLURM_NTASKS", "8")][..],
        &[("PMIX_RANK", "0")][..],
    ] {
        let o = netsim_in(&dir, "--topo star --hosts 4 --quiet --sample-ns 0", env);
        assert!(
            o.status.success(),
            "{env:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn a_run_that_fails_midway_leaves_no_run_json() {
    let dir = scratch("stale");
    let args = "--topo star --hosts 4 --quiet --sample-ns 0 --out out";
    let o = netsim_in(&dir, args, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.join("out/run.json").is_file());
    // Input errors leave the complete earlier run as it was.
    let bad = format!("{args} --flow-size 17592186040321");
    rejects(&dir, &bad, &[], "--flow-size");
    assert!(dir.join("out/run.json").is_file());
    // A run that fails once it has started writing leaves no run.json: a
    // table directory that is a file cannot take its parts.
    std::fs::remove_dir_all(dir.join("out/links")).unwrap();
    std::fs::write(dir.join("out/links"), "not a directory").unwrap();
    rejects(&dir, args, &[], "links");
    assert!(!dir.join("out/run.json").exists());
}
