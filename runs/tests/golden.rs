//! Golden outputs: a checksum of every output table of a set of small runs, so a
//! change that alters simulated results does so knowingly.
//!
//! The runs cover DCQCN, DCTCP, HPCC, per-packet spraying, lossy mode with
//! go-back-N, the Ultra Ethernet transport (REPS spraying, trimming, NSCC), UGAL (on adversarial traffic, where it leaves the minimal path) and
//! Valiant dragonfly routing, incast with PFC, ring, tree and
//! in-network collectives, a switch barrier and a SimAI workload. Each table's
//! rows are rendered column by column (floats by their bits), sorted, and hashed
//! with FNV-1a; `golden/checksums.txt` holds `run table rows hash` lines.
//!
//! Bless after an intended change of behaviour:
//! `NETSIM_BLESS=1 cargo test -p netsim --test golden`, then review and commit
//! the diff of `runs/tests/golden/checksums.txt`. `NETSIM_GOLDEN_BIN=path`
//! runs another `netsim` binary instead of this build's (to bless with the
//! build from before a refactoring, say).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::RecordBatch;

mod common;

use common::tables::{batches, cell};

/// One golden run: a name and its command-line flags (after `run`).
struct Golden {
    name: &'static str,
    args: Vec<String>,
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn runs() -> Vec<Golden> {
    let data = golden_dir();
    let file = |name: &str| data.join(name).to_str().unwrap().to_owned();
    let run = |name: &'static str, args: &[&str]| Golden {
        name,
        args: args.iter().map(|a| (*a).to_owned()).collect(),
    };
    let collectives = file("allreduce-ring-tree-ina.toml");
    let simai = file("simai-micro.txt");
    let adversarial = file("dragonfly-adversarial.cm");
    vec![
        // Faults: a failing aggregation-core link, a slowed host link and
        // lossy links without PFC (go-back-N recovery).
        run(
            "faults-lossy",
            &[
                "--topo",
                "fat-tree",
                "--k",
                "4",
                "--flow-size",
                "300000",
                "--pfc",
                "off",
                "--link-error-rate",
                "1e-3",
                "--fault",
                "link-down:24-32@10us",
                "--fault",
                "link-rate:1-16@5us=25",
                "--fault",
                "link-up:24-32@200us",
                "--sample-ns",
                "10000",
            ],
        ),
        run(
            "incast-dcqcn-pfc",
            &[
                "--topo",
                "star",
                "--hosts",
                "9",
                "--traffic",
                "incast",
                "--incast-degree",
                "8",
                "--flow-size",
                "200000",
                "--cc",
                "dcqcn",
                "--pfc",
                "on",
                "--buffer-kb",
                "512",
                "--sample-ns",
                "2000",
            ],
        ),
        run(
            "dctcp-lossy",
            &[
                "--topo",
                "fat-tree",
                "--k",
                "4",
                "--traffic",
                "uniform",
                "--flows-per-host",
                "2",
                "--flow-size",
                "100000",
                "--cc",
                "dctcp",
                "--pfc",
                "off",
                "--buffer-kb",
                "256",
                "--sample-ns",
                "5000",
            ],
        ),
        run(
            "hpcc",
            &[
                "--topo",
                "fat-tree",
                "--k",
                "4",
                "--cc",
                "hpcc",
                "--traffic",
                "permutation",
                "--flow-size",
                "200000",
                "--sample-ns",
                "5000",
            ],
        ),
        run(
            "spray-dcqcn",
            &[
                "--topo",
                "fat-tree",
                "--k",
                "4",
                "--ecmp",
                "spray",
                "--cc",
                "dcqcn",
                "--traffic",
                "alltoall",
                "--flow-size",
                "20000",
                "--sample-ns",
                "5000",
            ],
        ),
        run(
            "spray-lossy-gbn",
            &[
                "--topo",
                "fat-tree",
                "--k",
                "4",
                "--ecmp",
                "spray",
                "--cc",
                "dctcp",
                "--pfc",
                "off",
                "--buffer-kb",
                "128",
                "--traffic",
                "uniform",
                "--flows-per-host",
                "2",
                "--flow-size",
                "100000",
                "--rto-us",
                "50",
            ],
        ),
        run(
            "uec-incast-trim-reps",
            &[
                "--topo",
                "fat-tree",
                "--k",
                "4",
                "--transport",
                "uec",
                "--uec-lb",
                "reps",
                "--uec-ooo-pkts",
                "16",
                "--buffer-kb",
                "200",
                "--traffic",
                "incast",
                "--incast-degree",
                "8",
                "--flow-size",
                "300000",
                "--sample-ns",
                "5000",
            ],
        ),
        run(
            "dragonfly-ugal",
            &[
                "--topo",
                "dragonfly",
                "--p",
                "2",
                "--a",
                "4",
                "--h",
                "2",
                "--routing",
                "ugal",
                "--traffic",
                &format!("tm:{adversarial}"),
                "--cc",
                "none",
                "--sample-ns",
                "5000",
            ],
        ),
        run(
            "dragonfly-valiant",
            &[
                "--topo",
                "dragonfly",
                "--p",
                "2",
                "--a",
                "4",
                "--h",
                "2",
                "--routing",
                "valiant",
                "--traffic",
                "permutation",
                "--flow-size",
                "100000",
                "--cc",
                "dcqcn",
            ],
        ),
        run(
            "collectives-ring-tree-ina",
            &[
                "--topo",
                "fat-tree",
                "--k",
                "4",
                "--workload",
                &collectives,
                "--cc",
                "dcqcn",
            ],
        ),
        run(
            "barrier-ina-dragonfly",
            &[
                "--topo",
                "dragonfly",
                "--p",
                "2",
                "--a",
                "4",
                "--h",
                "2",
                "--workload",
                "barrier",
                "--algo",
                "ina",
                "--iterations",
                "2",
            ],
        ),
        run(
            "simai-spectrum-x",
            &["--topo", "spectrum-x", "--gpus", "16", "--workload", &simai],
        ),
    ]
}

/// FNV-1a, 64 bits: small, stable across platforms and Rust versions.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;

fn rows_of(batch: &RecordBatch, out: &mut Vec<String>) {
    let schema = batch.schema();
    for row in 0..batch.num_rows() {
        let line: Vec<String> = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(field, column)| format!("{}={}", field.name(), cell(column.as_ref(), row)))
            .collect();
        out.push(line.join("\t"));
    }
}

/// Every table directory under `out`: its rows (all part files), sorted.
fn tables(out: &Path) -> BTreeMap<String, Vec<String>> {
    let mut tables = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let mut rows = Vec::new();
        for batch in batches(&dir) {
            rows_of(&batch, &mut rows);
        }
        rows.sort_unstable();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        tables.insert(name, rows);
    }
    tables
}

/// `run table rows hash` lines for one run.
fn checksum_lines(run: &Golden, scratch: &Path) -> Vec<String> {
    let out = scratch.join(run.name);
    // NETSIM_GOLDEN_BIN runs another build (say, one from before a change)
    // against the same checksums, or blesses with it.
    let binary = std::env::var_os("NETSIM_GOLDEN_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_netsim")),
        PathBuf::from,
    );
    let output = Command::new(binary)
        .arg("run")
        .args(&run.args)
        .args(["--threads", "1", "--seed", "1", "--quiet", "--out"])
        .arg(&out)
        .output()
        .expect("netsim runs");
    assert!(
        output.status.success(),
        "golden run {} failed: {}",
        run.name,
        String::from_utf8_lossy(&output.stderr)
    );
    let tables = tables(&out);
    assert!(
        !tables.is_empty(),
        "golden run {} wrote no tables",
        run.name
    );
    tables
        .iter()
        .map(|(table, rows)| {
            let hash = rows
                .iter()
                .fold(FNV_OFFSET, |h, row| fnv1a(fnv1a(h, row.as_bytes()), b"\n"));
            format!("{} {} {} {:016x}", run.name, table, rows.len(), hash)
        })
        .collect()
}

#[test]
fn every_output_table_matches_its_blessed_checksum() {
    let scratch = tempfile::tempdir().unwrap();
    let mut actual = Vec::new();
    for run in runs() {
        actual.extend(checksum_lines(&run, scratch.path()));
    }
    let path = golden_dir().join("checksums.txt");
    let header =
        "# run table rows fnv1a64 -- written by NETSIM_BLESS=1 cargo test -p netsim --test golden";
    if std::env::var_os("NETSIM_BLESS").is_some() {
        let mut text = format!("{header}\n");
        for line in &actual {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        return;
    }
    let blessed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; bless with NETSIM_BLESS=1", path.display()));
    let expected: Vec<&str> = blessed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let differences: Vec<String> = expected
        .iter()
        .filter(|l| !actual.iter().any(|a| a == *l))
        .map(|l| format!("- {l}"))
        .chain(
            actual
                .iter()
                .filter(|a| !expected.contains(&a.as_str()))
                .map(|a| format!("+ {a}")),
        )
        .collect();
    assert!(
        differences.is_empty(),
        "output tables differ from {} (bless with NETSIM_BLESS=1 if the change is intended):\n{}",
        path.display(),
        differences.join("\n")
    );
}
