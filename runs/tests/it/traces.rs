//! GOAL traces (ATLAHS, LogGOPSim) through the command line: a token ring
//! of sends, receives and computations equals its closed form at packet and
//! flow level, LogGOPSim's own schedules run, two schedules merged into one
//! file as ATLAHS' `merge_goals.py` does run, two GOAL jobs share a fabric
//! with a `job` column, and a malformed trace is one line naming its line.

use arrow_array::types::{UInt32Type, UInt64Type};
use std::path::Path;

use crate::common::tables::{batches, column};
use crate::common::{netsim, run_json, runs_file, scratch, stderr};

/// `(src, dst, start_ns)` of every flow, by start.
fn flows(out: &Path) -> Vec<(u32, u32, u64)> {
    let mut rows = Vec::new();
    for b in batches(&out.join("flows")) {
        let (src, dst) = (
            column::<UInt32Type>(&b, "src"),
            column::<UInt32Type>(&b, "dst"),
        );
        let start = column::<UInt64Type>(&b, "start_ns");
        for i in 0..b.num_rows() {
            rows.push((src.value(i), dst.value(i), start.value(i)));
        }
    }
    rows.sort_by_key(|r| r.2);
    rows
}

/// A token passed once round `ranks` ranks: rank 0 computes and sends to
/// rank 1 (tag 5); every other rank receives, computes, sends on (tag left
/// out: 0); rank 0 finally receives from any rank with any tag.
fn token_ring(ranks: u32, compute_ns: u64, bytes: u64) -> String {
    let mut text = format!("// a token round {ranks} ranks\nnum_ranks {ranks}\n\n");
    for r in 0..ranks {
        let (next, previous) = ((r + 1) % ranks, (r + ranks - 1) % ranks);
        let tag = if r == 1 { " tag 5" } else { "" };
        let body = if r == 0 {
            format!(
                "l1: calc {compute_ns}\nl2: send {bytes}b to 1 tag 5\nl2 requires l1\n\
                 l3: recv {bytes}b from -1 tag -1\nl3 requires l2\n"
            )
        } else {
            format!(
                "l1: recv {bytes}b from {previous}{tag}\nl2: calc {compute_ns}\nl2 requires l1\n\
                 l3: send {bytes}b to {next}\nl3 requires l2\n"
            )
        };
        text += &format!("rank {r} {{\n{body}}}\n\n");
    }
    text
}

/// Links between hosts `a` and `b` of a k = 4 fat-tree (two hosts per edge
/// switch, two edge switches per pod).
fn links(a: u32, b: u32) -> u64 {
    match (a / 2 == b / 2, a / 4 == b / 4) {
        (true, _) => 2,
        (false, true) => 4,
        (false, false) => 6,
    }
}

/// The fat-tree's defaults: 100 Gb/s, 1 us per link; netsim's 62-byte
/// header and 66-byte ACK.
const LINK_PS: u64 = 1_000_000;
const PS_PER_BYTE: u64 = 80;
const HEADER_BYTES: u64 = 62;
const ACK_BYTES: u64 = 66;

/// A one-packet message of `bytes` over `hops` links: its last byte
/// arrives after each link's latency and store-and-forward; the sender
/// sees its ACK after the way back too.
fn arrival_ps(bytes: u64, hops: u64) -> u64 {
    hops * (LINK_PS + (bytes + HEADER_BYTES) * PS_PER_BYTE)
}
fn ack_ps(hops: u64) -> u64 {
    hops * (LINK_PS + ACK_BYTES * PS_PER_BYTE)
}

/// Each hop of the ring costs the compute and the message's arrival (a
/// receive ends when the last byte is in); the run ends when the last
/// sender has its ACK. Packet and flow level agree with it to the ns.
#[test]
fn a_goal_token_ring_equals_its_closed_form() {
    let (ranks, compute_ns, bytes) = (8u32, 2_000u64, 1_000u64);
    let dir = scratch("ring");
    let file = dir.join("ring.goal");
    std::fs::write(&file, token_ring(ranks, compute_ns, bytes)).unwrap();
    // Flow h starts after h + 1 computations and h arrivals.
    let mut starts_ps = Vec::new();
    let mut t = 0;
    for r in 0..ranks {
        t += compute_ns * 1000;
        starts_ps.push(t);
        t += arrival_ps(bytes, links(r, (r + 1) % ranks));
    }
    let end_ps = starts_ps[ranks as usize - 1]
        + arrival_ps(bytes, links(ranks - 1, 0))
        + ack_ps(links(ranks - 1, 0));
    for fidelity in ["packet", "flow"] {
        let out = dir.join(fidelity);
        let o = netsim(format!(
            "run --topo fat-tree --k 4 --workload {} --fidelity {fidelity} --quiet --out {}",
            file.display(),
            out.display()
        ));
        assert!(o.status.success(), "{fidelity}: {}", stderr(&o));
        let got = flows(&out);
        let want: Vec<(u32, u32, u64)> = (0..ranks)
            .map(|r| (r, (r + 1) % ranks, starts_ps[r as usize] / 1000))
            .collect();
        assert_eq!(got, want, "{fidelity}");
        assert_eq!(run_json(&out)["sim_end_ns"], end_ps / 1000, "{fidelity}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn goal(name: &str) -> String {
    runs_file(&format!("tests/data/goal/{name}.goal"))
}

/// LogGOPSim's example schedules run to the end: a dissemination barrier
/// (4 rounds of 16 messages) and a binomial-tree broadcast (15 messages).
#[test]
fn loggopsim_schedules_run_to_the_end() {
    for (name, messages) in [("dissemination_16", 64), ("binary_tree_16", 15)] {
        for fidelity in ["packet", "flow"] {
            let out = scratch(&format!("{name}-{fidelity}"));
            let o = netsim(format!(
                "run --topo fat-tree --k 4 --workload {} --fidelity {fidelity} --quiet --out {}",
                goal(name),
                out.display()
            ));
            assert!(o.status.success(), "{name} {fidelity}: {}", stderr(&o));
            let run = run_json(&out);
            assert_eq!(run["flows"], messages, "{name} {fidelity}");
            assert_eq!(run["flows_finished"], messages, "{name} {fidelity}");
            let _ = std::fs::remove_dir_all(&out);
        }
    }
}

/// Schedules merged as ATLAHS' `merge_goals.py` does in its multi-job mode
/// with the packed pattern: `num_ranks` is the sum, job `j`'s rank `r`
/// becomes rank `offset_j + r`, and each send's destination and receive's
/// source (the fifth token of its line) is renumbered the same way.
fn merge_packed(files: &[String]) -> String {
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let ranks: Vec<u32> = texts
        .iter()
        .map(|t| t.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    let mut merged = format!("num_ranks {}\n\n", ranks.iter().sum::<u32>());
    let mut offset = 0;
    for (text, n) in texts.iter().zip(&ranks) {
        for line in text.lines().skip(1) {
            let mut tokens: Vec<String> = line.split_whitespace().map(String::from).collect();
            match tokens.first().map(String::as_str) {
                Some("rank") => {
                    tokens[1] = (tokens[1].parse::<u32>().unwrap() + offset).to_string()
                }
                _ if matches!(tokens.get(1).map(String::as_str), Some("send" | "recv")) => {
                    tokens[4] = (tokens[4].parse::<u32>().unwrap() + offset).to_string()
                }
                _ => {}
            }
            merged += &(tokens.join(" ") + "\n");
        }
        offset += n;
    }
    merged
}

/// The barrier and the broadcast merged into one 32-rank file run side by
/// side on a 54-host fat-tree: every message of both arrives.
#[test]
fn two_goal_jobs_merged_into_one_file_run() {
    let dir = scratch("merged");
    let file = dir.join("merged.goal");
    std::fs::write(
        &file,
        merge_packed(&[goal("dissemination_16"), goal("binary_tree_16")]),
    )
    .unwrap();
    let out = dir.join("out");
    let o = netsim(format!(
        "run --topo fat-tree --k 6 --workload {} --quiet --out {}",
        file.display(),
        out.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let run = run_json(&out);
    assert_eq!(
        (run["flows"].clone(), run["flows_finished"].clone()),
        (79.into(), 79.into())
    );
    // The broadcast's messages leave its root, rank 16, and stay in 16..32.
    let got = flows(&out);
    assert!(
        got.iter().filter(|f| f.0 >= 16).all(|f| f.1 >= 16),
        "{got:?}"
    );
    assert_eq!(got.iter().filter(|f| f.0 == 16).count(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same two schedules as two `--job`s: each message's row names its job.
#[test]
fn two_goal_jobs_share_a_fabric_with_a_job_column() {
    let out = scratch("jobs");
    let o = netsim(format!(
        r#"run --topo fat-tree --k 6
           --job {{name="barrier",workload="{}",ranks=16}}
           --job {{name="bcast",workload="{}",ranks=16}}
           --quiet --out {}"#,
        goal("dissemination_16"),
        goal("binary_tree_16"),
        out.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let mut per_job = std::collections::BTreeMap::new();
    for b in batches(&out.join("flows")) {
        let job = crate::common::tables::strings(&b, "job");
        for i in 0..b.num_rows() {
            *per_job.entry(job.value(i).to_string()).or_insert(0) += 1;
        }
    }
    assert_eq!(
        per_job,
        [("barrier".to_string(), 64), ("bcast".to_string(), 15)].into()
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A malformed trace fails in one line naming its file and line; so does
/// a message from a rank to itself, which once panicked in the network (no
/// route from host 0 to host 0).
#[test]
fn a_malformed_goal_file_is_one_line_naming_its_line() {
    let dir = scratch("bad");
    let file = dir.join("bad.goal");
    for (text, error) in [
        (
            "num_ranks 2\nrank 0 {\nl1: send 8b to 1\nl1 requires l9\n}\n",
            "4: label `l9` is not defined in rank 0",
        ),
        (
            "num_ranks 2\nrank 0 {\nl1: send 8b to 0\nl2: recv 8b from 0\n}\nrank 1 {\n}\n",
            "3: rank 0 sends to or receives from itself: a local copy, which netsim does not \
             model (no path leads from a host to itself)",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let o = netsim(format!(
            "run --topo fat-tree --k 4 --workload {} --quiet --out {}",
            file.display(),
            dir.join("out").display()
        ));
        assert_eq!(o.status.code(), Some(2), "{text}");
        assert_eq!(
            stderr(&o).trim_end(),
            format!("netsim: error: {}:{error}", file.display())
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
