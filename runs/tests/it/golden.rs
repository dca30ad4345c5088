//! Golden outputs: a checksum of every non-empty output table of a set of
//! small runs, one test per run, so a change that alters simulated results
//! does so knowingly.
//!
//! The runs cover DCQCN, DCTCP, HPCC, per-packet spraying, lossy mode with
//! go-back-N, the Ultra Ethernet transport (REPS spraying, trimming, NSCC;
//! RCCC), UGAL (on adversarial traffic, where it leaves the minimal path)
//! and Valiant dragonfly routing, incast with PFC, ring, tree and
//! in-network collectives, a switch barrier, a SimAI workload, faults, the
//! flow level, fast-forward with memoization, DPU-staged collectives and a
//! two-plane fabric. Each table's rows are rendered column by column
//! (floats by their bits), sorted, and hashed with FNV-1a;
//! `golden/checksums.txt` holds `run table rows hash` lines (an empty table
//! has none).
//!
//! On a mismatch the test prints the differing lines and the first rows of
//! each differing table; with `NETSIM_GOLDEN_BASELINE=path` (a `netsim`
//! built before the change) it runs that binary too and prints the first
//! rows that differ between the two. Every rendered table is left in
//! `target/tmp/golden/<run>/<table>.rows` for a diff of its own.
//!
//! Bless after an intended change of behaviour:
//! `NETSIM_BLESS=1 cargo test -p netsim --test it golden::`, then review and
//! commit the diff of `runs/tests/golden/checksums.txt`.
//! `NETSIM_GOLDEN_BIN=path` runs another `netsim` binary instead of this
//! build's (to bless with the build from before a refactoring, say).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use arrow_array::RecordBatch;

use crate::common::tables::{batches, cell};
use crate::common::{runs_file, words};

/// One `#[test]` per golden run, named as the run with `_` for `-`; its
/// command line may name a file of `runs/tests/golden/` as `{golden}/file`.
/// Each run is checked once more keeping idle ports' rows, against
/// `checksums-keep-idle.txt`: the checksums blessed before idle rows were
/// left out, so that `--telemetry-idle-rows keep` gives the tables of before.
macro_rules! golden {
    ($($name:ident: $line:expr;)*) => {
        $(
            #[test]
            fn $name() {
                check(&stringify!($name).replace('_', "-"), $line, CHECKSUMS);
            }
        )*
        mod keep_idle_rows {
            $(
                #[test]
                fn $name() {
                    let line = format!("{} --telemetry-idle-rows keep", $line);
                    super::check(&stringify!($name).replace('_', "-"), &line, super::KEEP_IDLE);
                }
            )*
        }
    };
}

/// The blessed checksums.
const CHECKSUMS: &str = "checksums.txt";
/// The checksums of the runs with idle rows kept (never re-blessed: they
/// are the tables from before idle rows were left out).
const KEEP_IDLE: &str = "checksums-keep-idle.txt";

golden! {
    // Faults: a failing aggregation-core link, a slowed host link and lossy
    // links without PFC (go-back-N recovery).
    faults_lossy: "--topo fat-tree --k 4 --flow-size 300000 --pfc off --link-error-rate 1e-3 \
        --fault link-down:24-32@10us --fault link-rate:1-16@5us=25 \
        --fault link-up:24-32@200us --sample-ns 10000";
    incast_dcqcn_pfc: "--topo star --hosts 9 --traffic incast --incast-degree 8 \
        --flow-size 200000 --cc dcqcn --pfc on --buffer-kb 512 --sample-ns 2000";
    dctcp_lossy: "--topo fat-tree --k 4 --traffic uniform --flows-per-host 2 --flow-size 100000 \
        --cc dctcp --pfc off --buffer-kb 256 --sample-ns 5000";
    hpcc: "--topo fat-tree --k 4 --cc hpcc --traffic permutation --flow-size 200000 \
        --sample-ns 5000";
    spray_dcqcn: "--topo fat-tree --k 4 --ecmp spray --cc dcqcn --traffic alltoall \
        --flow-size 20000 --sample-ns 5000";
    spray_lossy_gbn: "--topo fat-tree --k 4 --ecmp spray --cc dctcp --pfc off --buffer-kb 128 \
        --traffic uniform --flows-per-host 2 --flow-size 100000 --rto-us 50";
    uec_incast_trim_reps: "--topo fat-tree --k 4 --transport uec --uec-lb reps \
        --uec-ooo-pkts 16 --buffer-kb 200 --traffic incast --incast-degree 8 \
        --flow-size 300000 --sample-ns 5000";
    dragonfly_ugal: "--topo dragonfly --p 2 --a 4 --h 2 --routing ugal \
        --traffic tm:{golden}/dragonfly-adversarial.cm --cc none --sample-ns 5000";
    dragonfly_valiant: "--topo dragonfly --p 2 --a 4 --h 2 --routing valiant \
        --traffic permutation --flow-size 100000 --cc dcqcn";
    collectives_ring_tree_ina: "--topo fat-tree --k 4 \
        --workload {golden}/allreduce-ring-tree-ina.toml --cc dcqcn";
    barrier_ina_dragonfly: "--topo dragonfly --p 2 --a 4 --h 2 --workload barrier --algo ina \
        --iterations 2";
    simai_spectrum_x: "--topo spectrum-x --gpus 16 --workload {golden}/simai-micro.txt";
    // The flow level: max-min fair rates instead of packets.
    flow_level_allreduce: "--topo fat-tree --k 4 --workload allreduce --size 4MiB \
        --fidelity flow --sample-ns 10000";
    // Fast-forward with memoization: the repeated layers of a SimAI
    // workload are recorded once and replayed.
    fast_forward_memo: "--topo spectrum-x --gpus 16 --workload {golden}/simai-micro.txt \
        --fast-forward on --ff-memo on --sample-ns 5000";
    // An all-gather staged through the DPUs.
    dpu_allgather: "--topo fat-tree --k 4 --workload allgather --algo dpu --dpu-workers 2 \
        --size 64KiB --sample-ns 5000";
    // Ultra Ethernet with receiver-credit congestion control.
    uec_rccc_permutation: "--topo fat-tree --k 4 --transport uec --uec-cc rccc \
        --traffic permutation --flow-size 200000 --sample-ns 5000";
    // Two planes: every NIC striped over two copies of the switch layers.
    two_planes_permutation: "--topo fat-tree --k 4 --planes 2 --traffic permutation \
        --flow-size 200000 --cc dcqcn --sample-ns 5000";
}

/// Rows of a differing table printed on a failure.
const ROWS_SHOWN: usize = 5;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
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

/// Every non-empty table directory under `out`: its rows (all part files),
/// sorted.
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
        if rows.is_empty() {
            continue;
        }
        rows.sort_unstable();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        tables.insert(name, rows);
    }
    tables
}

/// Runs `binary` with the golden run `line` into `out` and reads its tables
/// back, each also written to `out/<table>.rows`.
fn run(binary: &Path, name: &str, line: &str, out: &Path) -> BTreeMap<String, Vec<String>> {
    let _ = std::fs::remove_dir_all(out);
    let line = line.replace("{golden}", &runs_file("tests/golden"));
    let output = Command::new(binary)
        .arg("run")
        .args(words(&line))
        .args(["--threads", "1", "--seed", "1", "--quiet", "--out"])
        .arg(out)
        .output()
        .expect("netsim runs");
    assert!(
        output.status.success(),
        "golden run {name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tables = tables(out);
    assert!(!tables.is_empty(), "golden run {name} wrote no rows");
    for (table, rows) in &tables {
        std::fs::write(out.join(format!("{table}.rows")), rows.join("\n") + "\n").unwrap();
    }
    tables
}

/// `run table rows hash` lines of one run's tables.
fn checksum_lines(name: &str, tables: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    tables
        .iter()
        .map(|(table, rows)| {
            let hash = rows
                .iter()
                .fold(FNV_OFFSET, |h, row| fnv1a(fnv1a(h, row.as_bytes()), b"\n"));
            format!("{name} {table} {} {hash:016x}", rows.len())
        })
        .collect()
}

/// The blessed lines of run `name`, in file order.
fn blessed(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.split(' ').next() == Some(name))
        .map(str::to_owned)
        .collect()
}

/// Serialises the runs that bless at once: each rewrites its own lines of
/// the one file.
static BLESS: Mutex<()> = Mutex::new(());

/// Replaces the blessed lines of run `name` by `lines`, where its old ones
/// were (a new run's go last).
fn bless(name: &str, lines: &[String], file: &str) {
    let _guard = BLESS.lock().unwrap_or_else(|e| e.into_inner());
    let path = golden_dir().join(file);
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut text = String::new();
    let mut written = false;
    for line in old.lines() {
        if line.split(' ').next() != Some(name) {
            text.push_str(line);
            text.push('\n');
        } else if !written {
            written = true;
            lines.iter().for_each(|l| text.push_str(&format!("{l}\n")));
        }
    }
    if !written {
        lines.iter().for_each(|l| text.push_str(&format!("{l}\n")));
    }
    std::fs::write(&path, text).unwrap();
}

/// Runs golden run `name` and compares its checksums with the ones blessed
/// in `file` (or blesses them).
fn check(name: &str, line: &str, file: &str) {
    // NETSIM_GOLDEN_BIN runs another build (say, one from before a change)
    // against the same checksums, or blesses with it.
    let binary = std::env::var_os("NETSIM_GOLDEN_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_netsim")),
        PathBuf::from,
    );
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("golden");
    let dir = if file == CHECKSUMS {
        scratch.join(name)
    } else {
        scratch.join("keep-idle-rows").join(name)
    };
    let tables = run(&binary, name, line, &dir);
    let actual = checksum_lines(name, &tables);
    if std::env::var_os("NETSIM_BLESS").is_some() {
        bless(name, &actual, file);
        return;
    }
    let path = golden_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; bless with NETSIM_BLESS=1", path.display()));
    let expected = blessed(&text, name);
    assert!(
        !expected.is_empty(),
        "{name} has no blessed checksums in {}; bless with NETSIM_BLESS=1",
        path.display()
    );
    if expected == actual {
        return;
    }
    let mut report = Vec::new();
    for l in expected.iter().filter(|l| !actual.contains(l)) {
        report.push(format!("- {l}"));
    }
    for l in actual.iter().filter(|l| !expected.contains(l)) {
        report.push(format!("+ {l}"));
    }
    report.push(String::new());
    report.extend(rows_report(
        name,
        line,
        &expected,
        &tables,
        dir.parent().expect("a run dir has a parent"),
    ));
    panic!(
        "golden run {name}: output tables differ from {} (bless with NETSIM_BLESS=1 if the \
         change is intended):\n{}",
        path.display(),
        report.join("\n")
    );
}

/// The tables named by `lines` (`run table ...`).
fn table_names(lines: &[String]) -> Vec<&str> {
    lines.iter().filter_map(|l| l.split(' ').nth(1)).collect()
}

/// The rows that show how each differing table differs: against a
/// baseline build's rows when `NETSIM_GOLDEN_BASELINE` names one, else this
/// build's first rows.
fn rows_report(
    name: &str,
    line: &str,
    expected: &[String],
    tables: &BTreeMap<String, Vec<String>>,
    scratch: &Path,
) -> Vec<String> {
    let actual = checksum_lines(name, tables);
    let mut differing: Vec<&str> = table_names(expected);
    differing.extend(table_names(&actual));
    differing.sort_unstable();
    differing.dedup();
    differing.retain(|t| {
        let mine = |lines: &[String]| {
            lines
                .iter()
                .find(|l| l.split(' ').nth(1) == Some(t))
                .cloned()
        };
        mine(expected) != mine(&actual)
    });
    let empty = Vec::new();
    let mut report = Vec::new();
    let Some(baseline) = std::env::var_os("NETSIM_GOLDEN_BASELINE") else {
        for table in differing {
            let rows = tables.get(table).unwrap_or(&empty);
            report.push(format!(
                "{table}: first rows of {} in this build:",
                rows.len()
            ));
            report.extend(rows.iter().take(ROWS_SHOWN).map(|r| format!("  {r}")));
        }
        report.push(format!(
            "(rows in {}; NETSIM_GOLDEN_BASELINE=<netsim built before the change> prints the \
             first rows that differ)",
            scratch.join(name).display()
        ));
        return report;
    };
    let base = run(
        Path::new(&baseline),
        name,
        line,
        &scratch.join(format!("{name}.baseline")),
    );
    for table in differing {
        let (old, new) = (
            base.get(table).unwrap_or(&empty),
            tables.get(table).unwrap_or(&empty),
        );
        report.push(format!(
            "{table}: first rows that differ (- baseline, + this build; {} and {} rows):",
            old.len(),
            new.len()
        ));
        let rows = first_differences(old, new, ROWS_SHOWN);
        if rows.is_empty() {
            report.push(
                "  (the same rows in both: the baseline does not give the blessed ones)".into(),
            );
        }
        report.extend(rows);
    }
    report
}

/// The first `limit` rows in only one of two sorted tables, in sort order:
/// `- row` in `old` only, `+ row` in `new` only, and `~ first cell: the
/// cells that changed` for a row of each that share their first cell (a
/// flow's id, say).
fn first_differences(old: &[String], new: &[String], limit: usize) -> Vec<String> {
    let mut only = Vec::new();
    let (mut i, mut j) = (0, 0);
    while only.len() < 2 * limit && (i < old.len() || j < new.len()) {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => (i, j) = (i + 1, j + 1),
            (Some(a), b) if b.is_none_or(|b| a < b) => {
                only.push(('-', a.as_str()));
                i += 1;
            }
            (_, Some(b)) => {
                only.push(('+', b.as_str()));
                j += 1;
            }
            _ => unreachable!("the loop stops when both are done"),
        }
    }
    let first_cell = |row: &str| row.split('\t').next().unwrap_or_default().to_owned();
    let mut out = Vec::new();
    let mut used = vec![false; only.len()];
    for k in 0..only.len() {
        if used[k] || out.len() == limit {
            continue;
        }
        let (side, row) = only[k];
        let twin = (k + 1..only.len())
            .find(|&m| !used[m] && only[m].0 != side && first_cell(only[m].1) == first_cell(row));
        let Some(m) = twin else {
            out.push(format!("  {side} {row}"));
            continue;
        };
        used[m] = true;
        let (old_row, new_row) = if side == '-' {
            (row, only[m].1)
        } else {
            (only[m].1, row)
        };
        out.push(format!(
            "  ~ {}: {}",
            first_cell(row),
            changed(old_row, new_row)
        ));
    }
    out
}

/// The cells of row `new` that differ from row `old` (same columns), as
/// `column old -> new`.
fn changed(old: &str, new: &str) -> String {
    let value = |cell: &str| {
        cell.split_once('=')
            .map_or((cell, ""), |(c, v)| (c, v))
            .1
            .to_owned()
    };
    old.split('\t')
        .zip(new.split('\t'))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| {
            let column = a.split('=').next().unwrap_or_default();
            format!("{column} {} -> {}", value(a), value(b))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn first_differences_walks_both_sorted_tables() {
    let t = |rows: &[&str]| rows.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>();
    let diff = first_differences(&t(&["a", "b", "d"]), &t(&["a", "c", "d", "e"]), 5);
    assert_eq!(diff, ["  - b", "  + c", "  + e"]);
    assert_eq!(first_differences(&t(&["a"]), &t(&["b", "c"]), 2).len(), 2);
    // The same flow in both, one cell changed.
    let diff = first_differences(&t(&["id=1\tfct=5\tx=0"]), &t(&["id=1\tfct=6\tx=0"]), 5);
    assert_eq!(diff, ["  ~ id=1: fct 5 -> 6"]);
    // Paired whichever sorts first.
    let diff = first_differences(&t(&["id=1\tfct=6"]), &t(&["id=1\tfct=5"]), 5);
    assert_eq!(diff, ["  ~ id=1: fct 6 -> 5"]);
}
