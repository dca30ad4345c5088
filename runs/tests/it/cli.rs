//! The `netsim` binary end to end: a small run writes its dataset, and bad
//! input exits with code 2, a message naming the flag, file or line, and no
//! output that looks complete.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{netsim, run_json, runs_file, scratch, stderr, words};

fn parquet_files(dir: &Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .count()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk(&p)
            } else {
                vec![p]
            }
        })
        .collect()
}

#[test]
fn a_small_run_writes_every_table_and_run_json() {
    let dir = scratch("run");
    let out = dir.join("out");
    let o = netsim(format!(
        "--topo fat-tree --k 4 --threads 2 --quiet --out {}",
        out.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let run = run_json(&out);
    for key in [
        "scenario",
        "seed",
        "version",
        "shards",
        "threads",
        "ranks",
        "lookahead_ps",
        "events",
        "wall_s",
        "events_per_s",
        "peak_rss_bytes",
        "sim_end_ns",
        "rows",
    ] {
        assert!(run.get(key).is_some(), "run.json lacks {key}");
    }
    assert_eq!(run["shards"], 2);
    assert_eq!(run["rows"]["flows"], 16);
    assert_eq!(run["flows_finished"], 16);
    assert_eq!(run["sent_payload_bytes"], run["delivered_payload_bytes"]);
    // One part per shard and table.
    for table in ["flows", "queues", "pfc", "links"] {
        assert_eq!(parquet_files(&out.join(table)), 2, "{table}");
    }
}

#[test]
fn bad_flags_exit_with_code_2() {
    for (args, needle) in [
        ("--bogus", "--bogus"),
        ("--threads 0", "--threads"),
        ("--topo fat-tree --k 5", "k"),
        ("--cc reno", "--cc"),
        ("--mtu 10", "mtu"),
        ("--cc-profile ns3", "--cc-profile"),
        ("--dcqcn-rate-on-first-cnp 2", "dcqcn-rate-on-first-cnp"),
        ("--dcqcn-rate-on-first-cnp half", "dcqcn-rate-on-first-cnp"),
        ("--dcqcn-cnp-interval-us=-1", "dcqcn-cnp-interval-us"),
        // Found by the fuzz campaign: the sum overflowed u32.
        ("--header-bytes 4294967295", "--header-bytes"),
        (
            "--pfc-resume-offset-bytes 18446744073709551615",
            "--pfc-resume-offset-bytes",
        ),
        (
            "--pfc-reserve-bytes 18446744073709551615",
            "--pfc-reserve-bytes",
        ),
        ("--window huge", "--window"),
        ("--transport tcp", "--transport"),
        ("--cc timely --timely-beta 0", "--timely-beta"),
        ("--cc timely --timely-t-high-us 10", "--timely-t-high-us"),
        ("--cc timely --timely-min-rtt-us 0", "--timely-min-rtt-us"),
        ("--topo fat-tree --planes 9", "--planes"),
        ("--topo fat-tree --planes 0", "--planes"),
        ("--topo dragonfly --planes 2", "--planes"),
        ("--trim on", "--trim"),
        ("--transport uec --uec-lb ecmp", "--uec-lb"),
        ("--transport uec --uec-cc cubic", "--uec-cc"),
        ("--transport uec --uec-entropies 100", "--uec-entropies"),
        ("--transport uec --uec-window-pkts 0", "--uec-window-pkts"),
        (
            "--transport uec --uec-target-qdelay-us 0",
            "--uec-target-qdelay-us",
        ),
        (
            "--transport uec --uec-rccc-target-bdp 0",
            "--uec-rccc-target-bdp",
        ),
        (
            "--transport uec --uec-rccc-initial-bdp NaN",
            "--uec-rccc-initial-bdp",
        ),
        (
            "--transport uec --uec-rccc-target-bdp 1e300",
            "--uec-rccc-target-bdp",
        ),
        ("--transport uec --fidelity flow", "--transport uec"),
        ("--transport uec --uec-profile htsim", "--uec-profile"),
        (
            "--transport uec --buffer-model per-port",
            "--port-buffer-bytes",
        ),
        (
            "--transport uec --port-buffer-bytes 100000",
            "--buffer-model per-port",
        ),
        (
            "--transport uec --buffer-model per-port --port-buffer-bytes 0",
            "--port-buffer",
        ),
        ("--transport uec --uec-qa-gate often", "--uec-qa-gate"),
        ("--transport uec --uec-qa-gate 40", "--uec-qa-gate"),
        (
            "--transport uec --uec-initial-window-bdp 0",
            "--uec-initial-window-bdp",
        ),
        ("--transport uec --trim-victim oldest", "--trim-victim"),
        (
            "--config /nonexistent/scenario.toml",
            "/nonexistent/scenario.toml",
        ),
    ] {
        let o = netsim(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn scenario_errors_name_file_line_and_field() {
    let dir = scratch("scenario");
    let cases = [
        ("bad-toml.toml", "topo = \"fat-tree\nk = 4\n", ":1:"),
        (
            "unknown.toml",
            "topo = \"fat-tree\"\n[engine]\nthreadz = 2\n",
            ":3: unknown field `threadz`",
        ),
        (
            "value.toml",
            "[engine]\nseed = 1\nthreads = 0\n",
            ":3: field `threads`",
        ),
    ];
    for (name, text, needle) in cases {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let o = netsim(format!("validate --config {}", path.display()));
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let message = stderr(&o);
        assert!(
            message.contains(name) && message.contains(needle),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_bad_traffic_file_leaves_no_dataset() {
    let dir = scratch("traffic");
    let tm = dir.join("cm.txt");
    std::fs::write(
        &tm,
        "Nodes 16\nConnections 2\n0->3 size 1000\n2->99 size 10\n",
    )
    .unwrap();
    let out = dir.join("out");
    let traffic = format!("tm:{}", tm.display());
    let o = netsim(format!(
        "--topo fat-tree --k 4 --traffic {traffic} --out {}",
        out.display()
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cm.txt:4: dst 99"), "{}", stderr(&o));
    assert_eq!(parquet_files(&out), 0);
}

#[test]
fn topo_exports_a_simai_file_that_imports_back() {
    let dir = scratch("topo");
    let file = dir.join("spx.txt");
    let o = netsim(format!(
        "topo spectrum-x --gpus 128 --format simai -o {}",
        file.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().next(), Some("216 8 16 72 768 H100"));
    let again = dir.join("again.txt");
    let simai = format!("simai:{}", file.display());
    let o = netsim(format!(
        "topo {simai} --format simai -o {}",
        again.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), text);
}

#[test]
fn topo_and_partition_reject_bad_input_without_output() {
    let dir = scratch("topo-bad");
    let file = dir.join("out.txt");
    for args in [
        "topo fat-tree --k 7",
        "topo dragonfly --a 4 --h 2 --groups 10",
        "topo spectrum-x --gpus 100",
        "topo torus",
        "partition fat-tree --shards 0",
    ] {
        let args = if args.starts_with("partition") {
            args.to_owned()
        } else {
            format!("{args} -o {}", file.display())
        };
        let o = netsim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}");
        assert!(!file.exists(), "{args:?} left {}", file.display());
    }
}

#[test]
fn partition_reports_cut_balance_and_lookahead() {
    let o = netsim("partition fat-tree --k 16 --shards 4 --partition metis");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_lowercase();
    for word in ["cut", "imbalance", "lookahead"] {
        assert!(text.contains(word), "{word} missing from: {text}");
    }
}

#[test]
fn a_collective_workload_writes_the_collectives_and_switch_offload_tables() {
    let dir = scratch("collective");
    let out = dir.join("out");
    let o = netsim(format!(
        "--topo star --hosts 8 --workload allreduce --algo ina --dtype int32 \
        --size 64KiB --threads 1 --quiet --out {}",
        out.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let run = run_json(&out);
    assert_eq!(run["collectives_finished"], 1);
    assert_eq!(run["rows"]["collectives"], 1);
    assert_eq!(run["rows"]["switch_offload"], 1);
    // Every member streamed into the switch: one flow each.
    assert_eq!(run["rows"]["flows"], 8);
    for table in ["collectives", "switch_offload"] {
        assert_eq!(parquet_files(&out.join(table)), 1, "{table}");
    }
}

#[test]
fn bad_workloads_exit_with_code_2_naming_the_line_or_flag() {
    let dir = scratch("bad-workload");
    let cycle = dir.join("cycle.toml");
    std::fs::write(
        &cycle,
        "[[phase]]\nname = \"a\"\ncompute_ns = 5\nafter = [\"b\"]\n\n[[phase]]\nname = \"b\"\ncollective = \"allreduce\"\nsize = \"1MiB\"\nafter = [\"a\"]\n",
    )
    .unwrap();
    let simai = dir.join("layers.txt");
    std::fs::write(
        &simai,
        "DATA\n2\nl0 -1 5 ALLREDUCE 4096 5 NONE 0 5 NONE 0 5\nl1 -1 5 ALLREDUCE four 5 NONE 0 5 NONE 0 5\n",
    )
    .unwrap();
    let out = dir.join("out");
    let cycle_arg = cycle.display();
    let simai_arg = simai.display();
    for (args, needles) in [
        ("--workload allreduce --group 0,1,99", vec!["host 99"]),
        ("--workload allreduce --size 0", vec!["--size"]),
        ("--workload allreduce --algo direct", vec!["--algo"]),
        ("--workload gossip", vec!["gossip"]),
        (
            &format!("--workload {cycle_arg}"),
            vec!["cycle.toml:", "cycle"],
        ),
        (
            &format!("--workload {simai_arg}"),
            vec!["layers.txt:4", "fwd_comm_size"],
        ),
    ] {
        let o = netsim(format!(
            "--topo fat-tree --k 4 --out {} {args}",
            out.display()
        ));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        for needle in needles {
            assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        }
        assert!(!stderr(&o).contains("panicked"));
        assert_eq!(parquet_files(&out), 0, "{args:?} left output");
    }
}

/// Runs netsim with stdin, stdout and stderr on a pseudo-terminal (through
/// util-linux `script`) and returns everything it wrote there.
fn netsim_on_a_terminal(line: &str) -> String {
    let mut command = env!("CARGO_BIN_EXE_netsim").to_string();
    for arg in words(line) {
        assert!(!arg.contains(['\'', ' ']), "quote {arg} properly first");
        command.push_str(&format!(" '{arg}'"));
    }
    let o = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .output()
        .expect("util-linux `script` runs");
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn progress_bar_only_on_a_terminal_and_never_with_quiet() {
    let dir = scratch("progress");
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let args = format!("--topo fat-tree --k 4 --end-us 500 --out {out}");

    // Piped stderr: no bar, no cursor control, just the one-line summary.
    let o = netsim(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stderr(&o);
    assert!(!text.contains(['\r', '\x1b', '[', '%']), "{text:?}");
    assert_eq!(text.lines().count(), 1, "{text:?}");
    for needle in ["netsim: ", " events in ", "M events/s", "wall ", out] {
        assert!(text.contains(needle), "summary lacks {needle:?}: {text}");
    }

    // A terminal: the bar (simulated time, events/s, ETA against --end-us)
    // is drawn and erased, then the same summary follows.
    let shown = netsim_on_a_terminal(&args);
    for needle in ["sim ", "M/s", "ETA", "\x1b[2K", " events in "] {
        assert!(shown.contains(needle), "no {needle:?} in {shown:?}");
    }
    // --quiet on a terminal: nothing at all.
    assert_eq!(netsim_on_a_terminal(&format!("{args} --quiet")), "");
}

#[test]
fn the_two_plane_scenario_runs_with_both_transports_on_two_shards() {
    let scenario = runs_file("scenarios/permutation-k8-two-planes.toml");
    let dir = scratch("planes");
    for transport in ["uec", "roce"] {
        let out = dir.join(transport);
        let o = netsim(format!(
            "--config {scenario} --k 4 --flow-size 100000 --transport \
            {transport} --shards 2 --quiet --out {}",
            out.display()
        ));
        assert!(o.status.success(), "{transport}: {}", stderr(&o));
        let run = run_json(&out);
        assert_eq!(run["flows_finished"], 16, "{transport}");
        assert_eq!(run["delivered_payload_bytes"], 16 * 100_000, "{transport}");
    }
}

#[test]
fn every_shipped_scenario_validates_from_any_directory() {
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let elsewhere = scratch("validate");
    let mut checked = 0;
    for entry in std::fs::read_dir(&scenarios).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let o = Command::new(env!("CARGO_BIN_EXE_netsim"))
            .args(["validate", "--config", path.to_str().unwrap()])
            .current_dir(&elsewhere)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", path.display(), stderr(&o));
        checked += 1;
    }
    assert!(checked >= 7, "found {checked} scenarios");
}

/// `run.json` of a 4:1 incast on one switch run with `extra` flags.
fn incast_run_json(name: &str, extra: &str) -> serde_json::Value {
    let dir = scratch(name);
    let out = dir.join("out");
    let o = netsim(format!(
        "--topo star --hosts 5 --traffic incast --incast-degree 4 --flow-size \
        300000 --quiet --out {} {extra}",
        out.display()
    ));
    assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
    let text = std::fs::read_to_string(out.join("run.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_cc_profile_sets_every_value_and_flags_override_it() {
    let simai = incast_run_json("profile-simai", "--cc-profile simai");
    let n = &simai["network"];
    assert_eq!(n["cc_profile"], "simai");
    assert_eq!(n["mtu_bytes"], 9000);
    assert_eq!(n["header_bytes"], 40);
    assert_eq!(n["window"], "VariableBdp");
    assert_eq!(n["ecn_at_dequeue"], true);
    assert_eq!(n["ack_high_priority"], false);
    assert_eq!(n["pfc_reserve_bytes"], 4096);
    assert_eq!(n["dcqcn"]["rate_increase_ns"], 900_000.0);
    assert_eq!(n["dcqcn"]["clamp_target_rate"], false);
    assert_eq!(n["dcqcn"]["cnp_mode"], "AckFlag");
    assert_eq!(simai["flows_finished"], 4);
    // An explicit flag wins over the profile; a CNP interval of 0 is valid.
    let over = incast_run_json(
        "profile-override",
        "--cc-profile simai --mtu 1000 --dcqcn-rate-increase-us 55 --dcqcn-cnp-mode packet \
            --dcqcn-cnp-interval-us 0",
    );
    let n = &over["network"];
    assert_eq!(n["mtu_bytes"], 1000);
    assert_eq!(n["dcqcn"]["rate_increase_ns"], 55_000.0);
    assert_eq!(n["dcqcn"]["cnp_interval_ns"], 0.0);
    assert_eq!(n["window"], "VariableBdp");
    let cx = incast_run_json("profile-connectx", "--cc-profile connectx");
    assert_eq!(cx["network"]["dcqcn"]["byte_counter_bytes"], 32_767);
    assert_eq!(cx["network"]["dcqcn"]["min_rate_mbps"], 1.0);
    let netsim_default = incast_run_json("profile-netsim", "");
    assert_eq!(netsim_default["network"]["cc_profile"], "netsim");
    assert_eq!(netsim_default["network"]["window"], "Off");
    assert_eq!(netsim_default["network"]["transport"], "roce");
    let rccc = incast_run_json(
        "uec-rccc",
        "--transport uec --uec-cc rccc --uec-rccc-target-bdp 1.5",
    );
    let u = &rccc["network"]["uec"];
    assert_eq!(u["cc"], "rccc");
    assert_eq!(u["rccc_target_bdp"], 1.5);
    assert_eq!(u["rccc_initial_bdp"], 1.0);
    assert_eq!(rccc["network"]["trim"], true);
}

/// A reader that closes the pipe early (`netsim topo ... | head -1`) ends
/// the run quietly: no panic from printing to a closed stdout.
#[test]
fn a_closed_stdout_ends_the_run_without_a_panic() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_netsim"))
        .args(words("topo fat-tree --k 8"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("netsim starts");
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("stderr reads");
    let status = child.wait().expect("netsim ends");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    assert!(status.code() != Some(101), "{status:?}");
}

/// `--simbricks`: a peer that is not there is a one-line error, exit 2,
/// after the connect timeout; a malformed URL is refused before the build.
#[test]
fn simbricks_without_a_peer_is_a_one_line_error() {
    let dir = scratch("simbricks_without_a_peer");
    let sock = dir.join("nobody.sock");
    let o = netsim(format!(
        "--topo fat-tree --k 4 --end-us 10 --simbricks-timeout-s 1 --simbricks 0=connect:{}:sync=true --out {}",
        sock.display(),
        dir.join("out").display()
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot connect to SimBricks socket"),
        "{}",
        stderr(&o)
    );
    let o = netsim("--topo fat-tree --k 4 --simbricks 0=connect:/x:sync=maybe");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("sync=true or sync=false"),
        "{}",
        stderr(&o)
    );
}
