//! SIGINT or SIGTERM during a run stops it at the next synchronisation
//! window: the process exits with 128 + the signal (not 0, not 2),
//! `run.json` says `interrupted`, and the tables are valid Parquet
//! holding what was written, as at a time limit.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::tables::batches;
use crate::common::{netsim_command, run_json, scratch, words};

/// A permutation of 1 GiB flows on 16 hosts: a minute or more of packets
/// in a debug build, so the signal always comes mid-run.
const LONG_RUN: &str =
    "run --topo fat-tree --k 4 --flow-size 1073741824 --sample-ns 100000 --quiet --out out";

#[test]
fn a_signal_stops_the_run_at_a_window_and_run_json_says_interrupted() {
    // One shard has no lookahead to keep; its windows end every 100 us of
    // simulated time all the same, so it sees the signal mid-run too.
    for (signal, code, threads) in [
        (libc::SIGINT, 130, 2),
        (libc::SIGTERM, 143, 2),
        (libc::SIGINT, 130, 1),
    ] {
        let dir = scratch(&format!("interrupt-{signal}-{threads}"));
        let line = format!("{LONG_RUN} --threads {threads}");
        let child = netsim_command(&dir, &words(&line), &[])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("netsim starts");
        // The sinks are open (the handler long installed) once `flows/` is there.
        let started = Instant::now();
        while !dir.join("out/flows").exists() {
            assert!(started.elapsed() < Duration::from_secs(120), "no output");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: signals our own child, which is still running.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let output = child.wait_with_output().expect("netsim ends");
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{err}");
        assert!(err.contains("run.json says interrupted"), "{err}");
        let out = dir.join("out");
        let run = run_json(&out);
        assert_eq!(run["interrupted"], true);
        let by = if signal == libc::SIGINT {
            "SIGINT"
        } else {
            "SIGTERM"
        };
        assert_eq!(run["interrupted_by"], by);
        let flows = run["flows"].as_u64().unwrap();
        assert!(run["flows_finished"].as_u64().unwrap() < flows);
        assert!(run["sim_end_ns"].as_u64().unwrap() > 0);
        // Every flow has its row (unfinished ones too), read back as Parquet.
        let rows: usize = batches(&out.join("flows"))
            .iter()
            .map(|b| b.num_rows())
            .sum();
        assert_eq!(rows as u64, flows);
        assert_eq!(run["rows"]["flows"], flows);
        let links: usize = batches(&out.join("links"))
            .iter()
            .map(|b| b.num_rows())
            .sum();
        assert_eq!(Some(links as u64), run["rows"]["links"].as_u64());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
