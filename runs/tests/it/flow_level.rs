//! `--fidelity flow` end to end: the same dataset as packet level (empty
//! queue and PFC tables), identical for any thread count, and clear refusals.

use crate::common;
use std::path::Path;

use crate::common::{netsim, run_json, runs_file, scratch};

/// Every part file of a run, by its path under the output directory.
fn parts(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut parts = Vec::new();
    for table in [
        "flows",
        "queues",
        "pfc",
        "switch_offload",
        "collectives",
        "links",
    ] {
        let dir = out.join(table);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for path in names {
            let name = path.strip_prefix(out).unwrap().display().to_string();
            parts.push((name, std::fs::read(&path).unwrap()));
        }
    }
    parts
}

#[test]
fn a_workload_at_flow_level_writes_the_same_tables_on_any_thread_count() {
    let dir = scratch("workload");
    let mut outputs = Vec::new();
    for threads in ["1", "2"] {
        let out = dir.join(format!("t{threads}"));
        let o = netsim(format!(
            "--topo spectrum-x --gpus 32 --workload allreduce --size 1MiB \
            --fidelity flow --sample-ns 5000 --threads {threads} --quiet --out {}",
            out.display()
        ));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let run = run_json(&out);
        assert_eq!(run["fidelity"], "flow");
        assert_eq!(run["shards"], 1);
        assert_eq!(run["collectives_finished"], 1);
        assert_eq!(run["flows_finished"], run["flows"]);
        assert_eq!(run["sent_payload_bytes"], run["delivered_payload_bytes"]);
        let rows = &run["rows"];
        assert_eq!(rows["queues"], 0);
        assert_eq!(rows["pfc"], 0);
        assert_eq!(rows["collectives"], 1);
        assert!(rows["links"].as_u64().unwrap() > 0);
        outputs.push(parts(&out));
    }
    assert_eq!(outputs[0].len(), outputs[1].len());
    for (a, b) in outputs[0].iter().zip(&outputs[1]) {
        assert!(a == b, "{} differs between 1 and 2 threads", a.0);
    }
}

#[test]
fn what_flow_level_cannot_model_is_refused_in_one_line() {
    let dir = scratch("refused");
    for extra in ["--ecmp spray", "--transport uec"] {
        let out = dir.join("out");
        let args = format!(
            "--topo star --hosts 8 --fidelity flow {extra} --out {}",
            out.display()
        );
        common::rejects(&dir, &args, &[], "--fidelity flow");
        assert!(!out.join("run.json").exists());
    }
}

/// The arguments of a 4 MiB all-reduce over the DP groups of TP-8 replicas
/// on a Spectrum-X fabric of `gpus`, folded by `fold`, at `fidelity`.
fn folded_allreduce(gpus: &str, fold: &str, fidelity: &str, out: &Path) -> String {
    format!(
        "--topo spectrum-x --gpus {gpus} --workload allreduce --group dp --tp 8 --size 4MiB \
        --fidelity {fidelity} --fold-dp {fold} --quiet --out {}",
        out.display()
    )
}

#[test]
fn a_folded_workload_runs_a_fraction_of_the_flows_and_says_so() {
    let dir = scratch("fold");
    let mut flows = Vec::new();
    for fold in ["1", "2"] {
        let out = dir.join(format!("f{fold}"));
        let o = netsim(folded_allreduce("32", fold, "flow", &out));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{stderr}");
        assert_eq!(
            stderr.contains("--fold-dp 2: 2 of 4"),
            fold == "2",
            "{stderr}"
        );
        let run = run_json(&out);
        assert_eq!(run["fold_dp"], fold.parse::<u32>().unwrap());
        assert_eq!(run["collectives_finished"], run["collectives"]);
        assert_eq!(run["flows_finished"], run["flows"]);
        flows.push((
            run["flows"].as_u64().unwrap(),
            run["collectives"].as_u64().unwrap(),
        ));
    }
    // 8 DP rings of 4 ranks x 6 steps, then 8 rings of 2 kept ranks x 6 steps.
    assert_eq!(flows, [(8 * 4 * 6, 8), (8 * 2 * 6, 8)]);
    // A fold that leaves a DP_EP group one member is a one-line error.
    let out = dir.join("bad");
    let moe = runs_file("scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    let args = &format!(
        "--topo spectrum-x --gpus 128 --workload {moe} --fidelity flow --fold-dp 2 --out {}",
        out.display()
    );
    common::rejects(&dir, args, &[], "would keep 1 of its members");
}

#[test]
fn folded_classes_write_the_same_tables_on_any_thread_count_and_refuse_fifo_sharing() {
    let dir = scratch("fold-classes");
    let classes = |threads: &str| format!("--fold-classes --sample-ns 5000 --threads {threads}");
    let mut outputs = Vec::new();
    for threads in ["1", "2"] {
        let out = dir.join(format!("t{threads}"));
        let a = folded_allreduce("64", "2", "flow", &out);
        let o = netsim(format!("{a} {}", classes(threads)));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let run = run_json(&out);
        // One row per class: 8 DP rings of 4 kept ranks x 14 steps.
        assert_eq!(run["flows"], 8 * 4 * 14);
        assert_eq!(run["flows_finished"], run["flows"]);
        outputs.push(parts(&out));
    }
    assert!(
        outputs[0] == outputs[1],
        "tables differ between 1 and 2 threads"
    );
    // FIFO sharing has no classes: a one-line error, nothing written.
    let out = dir.join("fifo");
    let a = folded_allreduce("64", "2", "flow", &out);
    let a = format!("{a} {} --cc none", classes("1"));
    common::rejects(&dir, &a, &[], "--cc none");
    assert!(!out.join("run.json").exists());
    // Classes are a flow-level model.
    let out = dir.join("packet");
    let a = folded_allreduce("64", "2", "packet", &out);
    let a = format!("{a} {}", classes("1"));
    common::rejects(&dir, &a, &[], "--fold-classes");
    assert!(!out.join("run.json").exists());
}
