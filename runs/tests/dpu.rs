//! `netsim dpu-bench` and DPU-staged collectives in `netsim run`, end to end.

use std::path::PathBuf;
use std::process::{Command, Output};

fn netsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netsim"))
        .args(args)
        .output()
        .expect("netsim runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netsim-dpu-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn run_json(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap()
}

#[test]
fn dpu_bench_writes_its_table_and_a_summary() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let out = scratch("bench").join("out");
    let o = netsim(&[
        "dpu-bench",
        "--sizes",
        "64KiB",
        "--patterns",
        "broadcast,allgather_all_in",
        "--workers",
        "1,8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("allgather_all_in"), "{stdout}");
    assert_eq!(run_json(&out)["points"], 8);
    let part = out.join("dpu_bench").join("part-00000-00000.parquet");
    let reader = SerializedFileReader::new(std::fs::File::open(part).unwrap()).unwrap();
    let meta = reader.metadata();
    assert_eq!(meta.file_metadata().num_rows(), 8);
    let names: Vec<String> = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "pattern",
            "assign",
            "workers",
            "wpn",
            "size_bytes",
            "reference_ns",
            "pure_comm_ns",
            "compute_ns",
            "offload_efficiency_pct"
        ]
    );
}

#[test]
fn dpu_bench_bad_flags_exit_2_naming_the_flag() {
    let out = scratch("bad").join("out");
    for (args, flag) in [
        (vec!["--workers", "0"], "--workers"),
        (vec!["--workers", "72"], "--workers"),
        (vec!["--sizes", "0"], "--sizes"),
        (vec!["--patterns", "scatter"], "--patterns"),
        (vec!["--nodes", "0"], "--nodes"),
        (vec!["--dpu-cores", "0"], "cores"),
        (vec!["--topo", "ring"], "--topo"),
    ] {
        let mut all = vec!["dpu-bench", "--out", out.to_str().unwrap()];
        all.extend(args);
        let o = netsim(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{all:?}: {}", stderr(&o));
        assert!(!out.join("run.json").exists());
    }
}

#[test]
fn a_dpu_staged_allgather_runs_in_a_workload_on_a_fat_tree() {
    let out = scratch("run").join("out");
    let o = netsim(&[
        "--topo",
        "fat-tree",
        "--k",
        "4",
        "--workload",
        "allgather",
        "--algo",
        "dpu",
        "--dpu-workers",
        "2",
        "--size",
        "64KiB",
        "--threads",
        "2",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = run_json(&out);
    assert_eq!(run["collectives_finished"], 1);
    // Ranks run on the 16 host memories, not on the DPUs.
    assert_eq!(run["hosts"], 32);
    let o = netsim(&[
        "--topo",
        "fat-tree",
        "--k",
        "4",
        "--workload",
        "allgather",
        "--algo",
        "dpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--dpu-workers"), "{}", stderr(&o));
}
