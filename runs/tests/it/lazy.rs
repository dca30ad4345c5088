//! `--lazy-expansion on` against the eager build: collectives expanded
//! when they become ready write the same tables, byte for byte, what it
//! cannot run yet is refused with the reason, and its memory check counts
//! what can finish by the run's end.

use std::path::Path;

use crate::common::{rejects, run_json, run_out, runs_file, scratch};

/// Every file of the tables `names` under `a` and `b`, byte for byte.
fn same_files(a: &Path, b: &Path, names: &[&str]) {
    for name in names {
        let mut files: Vec<_> = std::fs::read_dir(a.join(name))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: no parts");
        for f in files {
            let (x, y) = (a.join(name).join(&f), b.join(name).join(&f));
            let (x, y) = (std::fs::read(&x).unwrap(), std::fs::read(&y).unwrap());
            assert!(
                x == y,
                "{name}/{}: lazy differs from eager",
                f.to_string_lossy()
            );
        }
    }
}

/// `line` eager and lazy: the flows and collectives tables (and the
/// queues and links) are the same bytes; returns the lazy run.json.
fn lazy_equals_eager(dir: &Path, line: &str) -> serde_json::Value {
    lazy_tables_equal_eager(dir, line, &["flows", "collectives", "queues", "links"])
}

/// `line` eager and lazy: the tables `names` are the same bytes, and so
/// is the simulated end; returns the lazy run.json.
fn lazy_tables_equal_eager(dir: &Path, line: &str, names: &[&str]) -> serde_json::Value {
    let eager = run_out(dir, &format!("{line} --lazy-expansion off"), "eager");
    let lazy = run_out(dir, &format!("{line} --lazy-expansion on"), "lazy");
    same_files(&eager, &lazy, names);
    let (e, l) = (run_json(&eager), run_json(&lazy));
    assert_eq!(e["sim_end_ns"], l["sim_end_ns"], "{line}");
    assert_eq!(e["events"], l["events"], "{line}");
    l
}

/// Flow level (which has no queues): a collective becomes flows when it
/// is ready and its flows' state is freed after, and the tables are the
/// eager run's, with max-min sharing and with FIFO queues (`--cc none`),
/// on 1 and 2 threads.
#[test]
fn flow_level_lazily_expanded_writes_the_eager_tables() {
    let moe = runs_file("scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    let spx = format!("--topo spectrum-x --gpus 128 --workload {moe}");
    for (name, line) in [
        ("flow-moe-1", format!("{spx} --threads 1")),
        ("flow-moe-2", format!("{spx} --threads 2")),
        ("flow-moe-fifo", format!("{spx} --cc none")),
        (
            "flow-hd",
            "--topo fat-tree --k 8 --workload allreduce --algo hd --size 4MiB --iterations 2"
                .into(),
        ),
        (
            "flow-rings",
            "--topo spectrum-x --gpus 64 --workload allgather --channels 2 --size 8MiB --iterations 3"
                .into(),
        ),
        ("flow-a2a", "--topo fat-tree --k 8 --workload alltoall --size 1MiB".into()),
    ] {
        let dir = scratch(name);
        let line = format!("run {line} --fidelity flow");
        let run = lazy_tables_equal_eager(&dir, &line, &["flows", "collectives", "links"]);
        assert_eq!(run["collectives"], run["collectives_finished"], "{line}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_128_gpu_moe_lazily_expanded_writes_the_eager_tables_on_1_and_2_threads() {
    let moe = runs_file("scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    for threads in [1, 2] {
        let dir = scratch(&format!("moe-{threads}"));
        let run = lazy_equals_eager(
            &dir,
            &format!("run --topo spectrum-x --gpus 128 --workload {moe} --threads {threads}"),
        );
        assert_eq!(run["collectives"], run["collectives_finished"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn trees_halving_doubling_nccl_rings_and_repeats_lazily_expanded_are_the_eager_runs() {
    let moe = runs_file("scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    for (name, line) in [
        ("tree", "--topo fat-tree --k 8 --workload allreduce --algo tree --size 4MiB"),
        (
            "hd",
            "--topo fat-tree --k 8 --workload allreduce --algo hd --size 4MiB --iterations 2",
        ),
        (
            "rings",
            "--topo spectrum-x --gpus 64 --workload allgather --channels 2 --size 8MiB --iterations 3",
        ),
        ("a2a", "--topo fat-tree --k 8 --workload alltoall --size 1MiB"),
        (
            "nccl",
            &format!("--topo spectrum-x --gpus 128 --workload {moe} --algo ring --sample-ns 0"),
        ),
    ] {
        let dir = scratch(name);
        lazy_equals_eager(&dir, &format!("run {line} --threads 2"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn what_lazy_expansion_cannot_run_yet_is_refused_with_the_reason() {
    let dir = scratch("refused");
    let base = "run --topo fat-tree --k 4 --workload allreduce --lazy-expansion on";
    let moe = runs_file("scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    rejects(
        &dir,
        &format!(
            "run --topo spectrum-x --gpus 128 --workload {moe} --lazy-expansion on \
             --fidelity flow --fold-dp 2 --fold-classes"
        ),
        &[],
        "--fold-classes reads every flow",
    );
    for (extra, needle) in [
        ("--transport uec", "UEC receivers"),
        ("--fast-forward on", "fast-forward reads the whole task DAG"),
        (
            "--algo ina --switch-profile sharp",
            "kept only by the eager build",
        ),
        (
            "--ecmp-entropy connection",
            "numbers every flow's connection",
        ),
        (
            "--ecn-draw rail",
            "finds twin rails from the whole flow list",
        ),
    ] {
        rejects(&dir, &format!("{base} {extra}"), &[], needle);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `steps` times: 1 ms of compute on every host, then a ring all-reduce
/// of 64 KiB over them (tens of microseconds on a k = 4 fat-tree).
fn compute_then_all_reduce(steps: usize) -> String {
    (0..steps)
        .map(|i| {
            format!(
                "[[phase]]\nname = \"c{i}\"\ncompute_us = 1000\n[[phase]]\nname = \"ar{i}\"\n\
                 collective = \"allreduce\"\nsize = \"64KiB\"\nalgo = \"ring\"\n"
            )
        })
        .collect()
}

/// The memory check counts a completion time for each flow that can
/// start before the run's end (issue 32): cut at 2.5 ms, the all-reduces
/// after 1 and 2 ms of compute finish, and the count is theirs (never
/// fewer, at most 15% more) however long the chain; a run to the end
/// counts every flow.
#[test]
fn a_lazy_run_s_memory_check_counts_the_flows_that_can_finish_by_its_end() {
    let dir = scratch("reach");
    let mut counted = Vec::new();
    for steps in [4, 32] {
        let file = dir.join(format!("chain-{steps}.toml"));
        std::fs::write(&file, compute_then_all_reduce(steps)).unwrap();
        let line = format!(
            "run --topo fat-tree --k 4 --workload {} --lazy-expansion on --sample-ns 0",
            file.display()
        );
        let cut = run_json(&run_out(&dir, &format!("{line} --end-us 2500"), "cut"));
        let finishing = cut["run_bytes_predicted"]["finishing_flows"]
            .as_u64()
            .unwrap();
        let finished = cut["flows_finished"].as_u64().unwrap();
        assert_eq!(cut["collectives_finished"], 2, "{steps} steps");
        assert!(
            finished > 0 && finishing >= finished,
            "{finishing} < {finished}"
        );
        assert!(
            finishing as f64 <= 1.15 * finished as f64,
            "{steps} steps: {finishing} counted, {finished} finished"
        );
        counted.push(finishing);
        let whole = run_json(&run_out(&dir, &line, "whole"));
        let flows = whole["flows"].as_u64().unwrap();
        assert_eq!(whole["flows_finished"].as_u64(), Some(flows));
        assert_eq!(
            whole["run_bytes_predicted"]["finishing_flows"].as_u64(),
            Some(flows)
        );
    }
    // Eight times the chain, the same count.
    assert_eq!(counted[0], counted[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On the 128-GPU MoE (4 pipeline stages, sends between them, where a
/// send's receiver waits for nothing), the flows the check counts at
/// each cut are never fewer than those that finish, and a cut at 100 us
/// counts far fewer than the workload's.
#[test]
fn the_lazy_check_never_counts_fewer_flows_than_finish() {
    let moe = runs_file("scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    let dir = scratch("never-fewer");
    for end_us in [100, 1000] {
        let line = format!(
            "run --topo spectrum-x --gpus 128 --workload {moe} --lazy-expansion on \
             --sample-ns 0 --threads 2 --end-us {end_us}"
        );
        let run = run_json(&run_out(&dir, &line, &format!("cut-{end_us}")));
        let finishing = run["run_bytes_predicted"]["finishing_flows"]
            .as_u64()
            .unwrap();
        let finished = run["flows_finished"].as_u64().unwrap();
        let flows = run["flows"].as_u64().unwrap();
        assert!(
            finished > 0 && finishing >= finished,
            "{end_us} us: {finishing} < {finished}"
        );
        if end_us == 100 {
            assert!(4 * finishing < flows, "{finishing} of {flows}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
