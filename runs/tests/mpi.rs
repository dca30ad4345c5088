//! `netsim` under `mpirun` (feature `mpi`): 1, 2 and 4 ranks, and 2 ranks x
//! 2 threads, write the same tables (and count the same events, memo hits,
//! misses and sandbox events) as one thread, with fast-forward and
//! memoization too; bad input stops every rank quickly with one message.
//!
//! What is compared: every row of every table (flows, queues, pfc, links,
//! collectives, switch_offload), each rendered exactly (floats by their bits,
//! nulls as such), all rows of a table sorted. Part files differ by name and by the rank recorded in their
//! metadata, so files are not compared byte for byte; their contents are.
//!
//! Needs Open MPI's `mpirun` on `PATH` (or in `MPIRUN`).
#![cfg(feature = "mpi")]

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

// The integration tests' helpers (`it/common`); this binary uses a part.
#[allow(dead_code)]
#[path = "it/common/mod.rs"]
mod common;

use common::tables::cell;
use common::{run_json, scratch, words};

const NETSIM: &str = env!("CARGO_BIN_EXE_netsim");

fn mpirun_path() -> PathBuf {
    if let Some(path) = std::env::var_os("MPIRUN") {
        return path.into();
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("mpirun"))
        .find(|p| p.is_file())
        .expect("mpirun not found on PATH (install openmpi-bin, or set MPIRUN)")
}

/// Runs `command`, killing it if it has not finished within `limit`.
fn run_within(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("command starts");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            child.kill().ok();
            let out = child.wait_with_output().expect("killed command output");
            panic!(
                "still running after {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("command output")
}

/// `netsim args` on `ranks` MPI ranks.
fn mpirun(ranks: u32, args: &[&str]) -> Output {
    let mut command = Command::new(mpirun_path());
    command
        .args(["--oversubscribe", "--allow-run-as-root", "-n"])
        .arg(ranks.to_string())
        .arg(NETSIM)
        .args(args);
    run_within(command, Duration::from_secs(300))
}

fn check(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every table of the dataset in `out`: its rows, rendered and sorted.
fn tables(out: &Path) -> BTreeMap<String, Vec<String>> {
    let mut tables = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let mut rows = Vec::new();
        for part in std::fs::read_dir(&dir).unwrap() {
            let part = part.unwrap().path();
            assert!(
                part.extension().is_some_and(|e| e == "parquet"),
                "stray file {}",
                part.display()
            );
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&part).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                for row in 0..batch.num_rows() {
                    let cells: Vec<String> = batch.columns().iter().map(|c| cell(c, row)).collect();
                    rows.push(cells.join(","));
                }
            }
        }
        rows.sort();
        tables.insert(
            dir.file_name().unwrap().to_string_lossy().into_owned(),
            rows,
        );
    }
    tables
}

fn part_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The scenario on one thread, then under MPI at several ranks x threads:
/// every table identical. Returns the reference's run.json.
fn same_tables_across_ranks(name: &str, scenario: &str) -> serde_json::Value {
    let dir = scratch(name);
    let reference = dir.join("reference");
    let line = format!(
        "{scenario} --threads 1 --out {} --quiet",
        reference.display()
    );
    let o = run_within(
        {
            let mut c = Command::new(NETSIM);
            c.args(words(&line));
            c
        },
        Duration::from_secs(300),
    );
    check(&o, "the one-thread reference run");
    let expected = tables(&reference);
    assert!(
        expected["flows"].len() >= 16,
        "the scenario has flows: {:?}",
        expected.keys()
    );
    assert!(
        !expected["queues"].is_empty(),
        "the scenario samples queues"
    );

    for (ranks, threads) in [(1, 1), (2, 1), (4, 1), (2, 2)] {
        let out = dir.join(format!("r{ranks}t{threads}"));
        let line = format!(
            "{scenario} --threads {threads} --out {} --quiet",
            out.display()
        );
        let o = mpirun(ranks, &words(&line));
        check(&o, &format!("{ranks} ranks x {threads} threads"));
        let got = tables(&out);
        for (table, rows) in &expected {
            assert!(
                got.get(table) == Some(rows),
                "{name}: table {table} differs at {ranks} ranks x {threads} threads"
            );
        }
        assert_eq!(got.len(), expected.len(), "same tables");

        let shards = ranks * threads;
        let expected_parts: Vec<String> = (0..shards)
            .map(|s| format!("part-{:05}-{s:05}.parquet", s / threads))
            .collect();
        assert_eq!(part_names(&out.join("flows")), expected_parts);
        let summary = run_json(&out);
        assert_eq!(summary["ranks"], ranks);
        assert_eq!(summary["shards"], shards);
        assert_eq!(summary["threads"], threads);
        let per_rank = summary["per_rank"].as_array().unwrap();
        assert_eq!(per_rank.len(), ranks as usize);
        assert!(per_rank
            .iter()
            .all(|r| r["peak_rss_bytes"].as_u64() > Some(0)));
        let events: u64 = per_rank.iter().map(|r| r["events"].as_u64().unwrap()).sum();
        assert_eq!(summary["events"], events);
        let one = run_json(&reference);
        assert_eq!(summary["events"], one["events"]);
        // The memo's counts, each made on one shard (a domain's first flow's
        // sender, a sandbox's), and the jumps, the same on every rank.
        for field in [
            "memo_hits",
            "memo_misses",
            "memo_sandbox_events",
            "memo_events_avoided",
            "memo_rounds",
            "skips",
            "skipped_ns",
        ] {
            assert_eq!(
                summary["fast_forward"][field], one["fast_forward"][field],
                "{name}: {field} at {ranks} ranks x {threads} threads"
            );
        }
    }
    run_json(&reference)
}

#[test]
fn fat_tree_tables_are_identical_on_1_2_4_ranks_and_2x2() {
    // Sampled every 2 us: ports are busy at the instants, so they write rows
    // (an idle port writes none).
    same_tables_across_ranks(
        "fat-tree",
        "--topo fat-tree --k 4 --flow-size 200000 --sample-ns 2000",
    );
}

#[test]
fn fast_forwarded_tables_are_identical_on_1_2_4_ranks_and_2x2() {
    // The jumps are agreed across ranks (`Comm::all_max`) and the samples
    // inside them written from the steady state, on every rank alike.
    let reference = same_tables_across_ranks(
        "fast-forward",
        "--topo fat-tree --k 4 --flow-size 4000000 --fast-forward on --ff-period-us 1",
    );
    let ff = &reference["fast_forward"];
    assert!(ff["skips"].as_u64() > Some(0), "{ff}");
}

#[test]
fn memoized_tables_are_identical_on_1_2_4_ranks_and_2x2() {
    // Every rank keeps every switch's routing rows for the keys and the
    // sandboxes; a record made on the rank of its domain's first sender
    // reaches the others through `Comm::all_max`.
    let workload = common::runs_file("scenarios/workloads/gpt-micro-simai.txt");
    let reference = same_tables_across_ranks(
        "memo",
        &format!(
            "--topo spectrum-x --gpus 64 --workload {workload} --fast-forward on --ff-memo on"
        ),
    );
    let ff = &reference["fast_forward"];
    assert!(ff["memo_hits"].as_u64() > Some(0), "{ff}");
    assert!(ff["memo_sandbox_events"].as_u64() > Some(0), "{ff}");
}

#[test]
fn dragonfly_tables_are_identical_on_1_2_4_ranks_and_2x2() {
    same_tables_across_ranks(
        "dragonfly",
        "--topo dragonfly --p 2 --a 4 --h 2 --groups 9 --routing ugal --flow-size 100000 \
         --sample-ns 2000",
    );
}

#[test]
fn collective_tables_are_identical_on_1_2_4_ranks_and_2x2() {
    same_tables_across_ranks(
        "collective",
        "--topo fat-tree --k 4 --workload allreduce --algo ina --size 262144",
    );
}

#[test]
fn a_malformed_scenario_stops_every_rank_with_one_message() {
    let dir = scratch("malformed");
    let scenario = dir.join("bad.toml");
    std::fs::write(&scenario, "[topology]\ntopo = \"fat-tree\"\nk = \"four\"\n").unwrap();
    let out = dir.join("out");
    let started = Instant::now();
    let o = mpirun(
        2,
        &words(&format!(
            "--config {} --out {}",
            scenario.display(),
            out.display()
        )),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "mpirun reports the failure");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        stderr.matches("netsim: error:").count(),
        1,
        "one message for both ranks:\n{stderr}"
    );
    assert!(stderr.contains("bad.toml"), "names the file:\n{stderr}");
    assert!(!out.join("run.json").exists());
}

#[test]
fn an_impossible_partition_stops_every_rank_with_one_message() {
    // 5 ranks cannot share 4 routers (hosts stay with their router): found
    // while planning, on every rank.
    let dir = scratch("impossible");
    let out = dir.join("out");
    let o = mpirun(
        5,
        &words(&format!(
            "--topo dragonfly --p 1 --a 2 --h 1 --groups 2 --threads 1 --out {}",
            out.display()
        )),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(
        stderr.matches("netsim: error:").count(),
        1,
        "one message:\n{stderr}"
    );
    assert!(stderr.contains("5 ranks x 1 shards"), "{stderr}");
}

/// The pid of the process launched for MPI rank `rank` whose command line
/// contains `marker`, once it is running.
fn rank_pid(rank: u32, marker: &str) -> Option<i32> {
    let rank_var = format!("OMPI_COMM_WORLD_RANK={rank}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let has = |bytes: &[u8], word: &str| {
                bytes
                    .split(|&b| b == 0)
                    .any(|w| String::from_utf8_lossy(w).contains(word))
            };
            (cmdline.starts_with(NETSIM.as_bytes())
                && has(&cmdline, marker)
                && has(&environ, &rank_var))
            .then_some(pid)
        })
}

#[test]
fn a_signal_to_one_rank_stops_every_rank_and_rank_0_says_so() {
    // Rank 0 writes run.json and the message but was not signalled: it
    // learns of the stop at the exchange and of the signal from rank 1.
    let dir = scratch("interrupt");
    let out = dir.join("out");
    let line = format!(
        "run --topo fat-tree --k 4 --flow-size 1073741824 --sample-ns 100000 --threads 1 \
         --quiet --out {}",
        out.display()
    );
    let mut command = Command::new(mpirun_path());
    command
        .args(["--oversubscribe", "--allow-run-as-root", "-n", "2", NETSIM])
        .args(words(&line))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("mpirun starts");
    let started = Instant::now();
    let rank_1 = loop {
        // Rank 1's sinks are open (its handler long installed) once its
        // part of `flows/` is there, under its temporary name.
        let opened = out.join("flows/.part-00001-00001.parquet.tmp").exists();
        match rank_pid(1, &out.display().to_string()) {
            Some(pid) if opened => break pid,
            _ => assert!(started.elapsed() < Duration::from_secs(120), "no output"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signals rank 1 of our own job, which is still running.
    assert_eq!(unsafe { libc::kill(rank_1, libc::SIGINT) }, 0);
    let output = child.wait_with_output().expect("mpirun ends");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{err}");
    assert_eq!(err.matches("stopped by SIGINT").count(), 1, "{err}");
    let run = run_json(&out);
    assert_eq!(run["interrupted"], true);
    assert_eq!(run["interrupted_by"], "SIGINT");
    assert!(run["flows_finished"].as_u64().unwrap() < run["flows"].as_u64().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
