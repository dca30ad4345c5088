//! Chakra execution traces through the command line: each of ASTRA-sim's
//! microbenchmarks (`tests/data/chakra/`) writes the same collectives and
//! flows tables as netsim's own collective on the same ranks, at packet
//! and flow level; Chakra's feeder test trace runs to its end; a corrupt
//! or unmodelled trace is one line naming the file, record, node and field.

use std::path::Path;

use crate::common::tables::{rows, Row};
use crate::common::{rejects, run_json, run_out, runs_file, scratch};

/// The rows of `table` in the run in `out`, without the `job` column (a
/// trace's job is named after its directory, a collective's after itself).
fn table(out: &Path, table: &str) -> Vec<Row> {
    let mut rows = rows(&out.join(table));
    for row in &mut rows {
        row.remove("job");
    }
    rows
}

/// `--workload DIR` of the microbenchmark against `--workload OP --size
/// BYTES --group 0-(N-1)`: ASTRA-sim's all-gather size is each rank's
/// input, netsim's the output.
fn compare(dir: &str, op: &str, n: u32, flags: &str) {
    let set = runs_file(&format!("tests/data/chakra/{dir}/{n}npus_1MB"));
    let bytes = if op == "allgather" {
        u64::from(n) << 20
    } else {
        1 << 20
    };
    // The packet- and flow-level tests run at once: their scratch
    // directories differ, or one would remove the other's.
    let level = if flags.is_empty() { "packet" } else { "flow" };
    let scratch = scratch(&format!("{dir}-{n}-{level}"));
    let fabric = format!("--topo fat-tree --k 4 {flags}");
    let traced = run_out(&scratch, &format!("{fabric} --workload {set}"), "traced");
    let direct = format!(
        "{fabric} --workload {op} --size {bytes} --group 0-{}",
        n - 1
    );
    let direct = run_out(&scratch, &direct, "direct");
    for t in ["collectives", "flows"] {
        let (traced, direct) = (table(&traced, t), table(&direct, t));
        assert!(!traced.is_empty(), "{dir} {n}: no {t}");
        assert_eq!(traced, direct, "{dir} {n} {flags}: {t}");
    }
}

const SETS: [(&str, &str); 4] = [
    ("all_reduce", "allreduce"),
    ("all_gather", "allgather"),
    ("all_to_all", "alltoall"),
    ("reduce_scatter", "reducescatter"),
];

#[test]
fn astra_sim_microbenchmarks_equal_netsims_own_collectives() {
    for (dir, op) in SETS {
        for n in [4, 8, 16] {
            compare(dir, op, n, "");
        }
    }
}

#[test]
fn astra_sim_microbenchmarks_equal_netsims_own_collectives_at_flow_level() {
    for (dir, op) in SETS {
        compare(dir, op, 8, "--fidelity flow");
    }
}

/// Chakra's feeder test trace (one rank of a PyTorch run; unpacked with
/// `tar` where there is one) runs to the end of its data dependencies'
/// critical path, 46140 us, at packet and flow level: its collectives are
/// on the one rank and send nothing.
#[test]
fn chakras_feeder_test_trace_runs_to_its_end() {
    let dir = scratch("feeder");
    let tarball = runs_file("tests/data/chakra/feeder_tests_trace.tar.gz");
    let unpacked = std::process::Command::new("tar")
        .args(["xzf", &tarball, "-C"])
        .arg(&dir)
        .status();
    if !unpacked.is_ok_and(|s| s.success()) {
        eprintln!("no tar: Chakra's feeder test trace is not run");
        return;
    }
    for (flags, out) in [("", "packet"), ("--fidelity flow", "flow")] {
        let line = format!("--topo star --hosts 2 --workload tests/data {flags}");
        let out = run_out(&dir, &line, out);
        assert_eq!(run_json(&out)["sim_end_ns"], 46_140_000, "{flags}");
    }
}

#[test]
fn a_bad_trace_is_one_line_naming_file_record_and_node() {
    let dir = scratch("bad");
    let good = std::fs::read(runs_file(
        "tests/data/chakra/all_reduce/4npus_1MB/all_reduce.1.et",
    ))
    .unwrap();
    let write = |bytes: &[u8]| {
        for r in 0..2 {
            std::fs::write(
                dir.join(format!("t.{r}.et")),
                if r == 1 { bytes } else { &good[..] },
            )
            .unwrap();
        }
    };
    let line = "--topo fat-tree --k 4 --workload t";
    // Cut short inside the node.
    write(&good[..good.len() - 3]);
    rejects(&dir, line, &[], "t.1.et:2: record 2: a length of");
    // The node's type (field 3, after its id) made MEM_LOAD_NODE.
    let mut mem = good.clone();
    let at = mem.windows(2).position(|w| w == [0x18, 7]).unwrap();
    mem[at + 1] = 2;
    write(&mem);
    rejects(
        &dir,
        line,
        &[],
        "t.1.et:2: node 1 (MEM_LOAD_NODE): memory loads and stores are not modelled",
    );
    mem[at + 1] = 9;
    write(&mem);
    rejects(
        &dir,
        line,
        &[],
        "node 1 (unknown type): type 9 is not a Chakra node type",
    );
    std::fs::remove_file(dir.join("t.0.et")).unwrap();
    std::fs::write(dir.join("t.2.et"), &good).unwrap();
    let line = format!("--topo fat-tree --k 4 --workload {}", dir.display());
    rejects(
        &dir,
        &line,
        &[],
        "t.0.et:0: missing: the trace's files run to rank 2",
    );
}
