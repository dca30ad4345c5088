//! `netsim dpu-bench` and DPU-staged collectives in `netsim run`, end to end.

use crate::common::{netsim, run_json, scratch, stderr};

#[test]
fn dpu_bench_writes_its_table_and_a_summary() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let out = scratch("bench").join("out");
    let o = netsim(format!(
        "dpu-bench --sizes 64KiB --patterns broadcast,allgather_all_in --workers 1,8 --out {}",
        out.display()
    ));
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
        ("--workers 0", "--workers"),
        ("--workers 72", "--workers"),
        ("--sizes 0", "--sizes"),
        ("--patterns scatter", "--patterns"),
        ("--nodes 0", "--nodes"),
        ("--dpu-cores 0", "--dpu-cores"),
        ("--dpu-chunk 2KiB", "--dpu-chunk"),
        ("--allgather-sizes 0", "--allgather-sizes"),
        ("--topo ring", "--topo"),
    ] {
        let all = format!("dpu-bench --out {} {args}", out.display());
        let o = netsim(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{all:?}: {}", stderr(&o));
        assert!(!out.join("run.json").exists());
    }
}

#[test]
fn a_dpu_staged_allgather_runs_in_a_workload_on_a_fat_tree() {
    let out = scratch("run").join("out");
    let o = netsim(format!(
        "--topo fat-tree --k 4 --workload allgather --algo dpu --dpu-workers 2 \
        --size 64KiB --threads 2 --quiet --out {}",
        out.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let run = run_json(&out);
    assert_eq!(run["collectives_finished"], 1);
    // Ranks run on the 16 host memories, not on the DPUs.
    assert_eq!(run["hosts"], 32);
    let o = netsim(format!(
        "--topo fat-tree --k 4 --workload allgather --algo dpu --out {}",
        out.display()
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--dpu-workers"), "{}", stderr(&o));
}

#[test]
fn dpu_flags_and_scenario_keys_reach_the_workload() {
    let dir = scratch("flags");
    let run = |extra: &str, name: &str| -> serde_json::Value {
        let out = dir.join(name);
        let o = netsim(format!(
            "--topo fat-tree --k 4 --workload broadcast --algo dpu \
            --dpu-workers 1 --size 256KiB --quiet --out {} {extra}",
            out.display()
        ));
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let json = run_json(&out);
        assert_eq!(json["collectives_finished"], 1, "{extra:?}");
        json
    };
    let end = |j: &serde_json::Value| j["sim_end_ns"].as_u64().unwrap();
    let base = run("", "base");
    // A rank's worker posts a read, then a write, one after the other: at
    // 100 us per post (99 more than the default) the broadcast ends about
    // 198 us later.
    let slow_post = run("--dpu-post-ns 100000", "post");
    let (b, p) = (end(&base), end(&slow_post));
    assert!(p >= b + 190_000 && p <= b + 210_000, "{b} vs {p} ns");
    // A narrower PCIe path slows the reads out of the root's host memory.
    let slow_pcie = run("--dpu-pcie-gbps 10", "pcie");
    assert!(end(&slow_pcie) > b, "{b} vs {} ns", end(&slow_pcie));
    // The same flags as scenario keys.
    let scenario = dir.join("dpu.toml");
    std::fs::write(
        &scenario,
        "topo = \"fat-tree\"\nk = 4\n[workload]\nworkload = \"broadcast\"\nalgo = \"dpu\"\n\
         size = \"256KiB\"\ndpu-workers = 1\ndpu-post-ns = 100000\n",
    )
    .unwrap();
    let out = dir.join("scenario");
    let o = netsim(format!(
        "--config {} --quiet --out {}",
        scenario.display(),
        out.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(end(&run_json(&out)), end(&slow_post));
    // Bad values: one line naming the flag (or the file, line and key), exit 2.
    for (args, needle) in [
        ("--dpu-mem-gbps 0", "--dpu-mem-gbps"),
        ("--dpu-chunk 1KiB", "--dpu-chunk"),
        ("--dpu-chunk lots", "--dpu-chunk"),
        ("--dpu-cores 0", "--dpu-cores"),
        ("--dpu-workers 4 --dpu-cores 2", "--dpu-workers"),
    ] {
        let mut all = format!(
            "--topo fat-tree --k 4 --workload broadcast --algo dpu --quiet --out {}",
            out.display()
        );
        if !args.contains("--dpu-workers") {
            all.push_str(" --dpu-workers 1");
        }
        let o = netsim(format!("{all} {args}"));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
    std::fs::write(&scenario, "dpu-chunk = \"lots\"\n").unwrap();
    let o = netsim(format!(
        "--config {} --out {}",
        scenario.display(),
        out.display()
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("dpu.toml:1"), "{}", stderr(&o));
}
