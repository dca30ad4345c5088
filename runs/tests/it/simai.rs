//! SimAI/AICB workloads through the command line: SimAI's run-time knobs
//! mapped onto netsim's flags, a pipelined MoE job, bad input.

use std::path::Path;

use arrow_array::types::{UInt32Type, UInt64Type};

use crate::common::tables::{batches, column, strings};
use crate::common::{netsim, run_json, runs_file, scratch};

fn workload(name: &str) -> String {
    runs_file(&format!("scenarios/workloads/{name}"))
}

/// `(name, op, group_size, start_ns, duration_ns)` of every collective.
fn collectives(out: &Path) -> Vec<(String, String, u32, u64, u64)> {
    let mut rows = Vec::new();
    for b in batches(&out.join("collectives")) {
        let (name, op) = (strings(&b, "name"), strings(&b, "op"));
        let group = column::<UInt32Type>(&b, "group_size");
        let (start, duration) = (
            column::<UInt64Type>(&b, "start_ns"),
            column::<UInt64Type>(&b, "duration_ns"),
        );
        for i in 0..b.num_rows() {
            rows.push((
                name.value(i).to_string(),
                op.value(i).to_string(),
                group.value(i),
                start.value(i),
                duration.value(i),
            ));
        }
    }
    rows.sort_by_key(|r| r.3);
    rows
}

/// SimAI's 8-GPU example (two TP all-reduces of 16 and 64 MiB over NVSwitch)
/// with its packet-level settings mapped: `AS_SEND_LAT=0` is
/// `--host-overhead-ns 0`, its 9000-byte packets `--mtu 9000`. Measured
/// against SimAI's ns-3 backend, netsim came within 1.4%; here each
/// all-reduce is pinned to the ring's cost on the 2.88 Tb/s NVLink so the
/// agreement cannot drift unnoticed.
#[test]
fn simai_8_gpu_all_reduces_with_send_latency_0_and_9000_byte_packets() {
    let out = scratch("micro");
    let o = netsim(format!(
        "--topo spectrum-x --gpus 8 --workload {} --host-overhead-ns 0 --mtu 9000 --out {} --quiet",
        workload("simai-microAllReduce.txt"),
        out.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = collectives(&out);
    assert_eq!(rows.len(), 2);
    let nvlink_bps = 2.88e12;
    let header = 48.0;
    for (row, size) in rows.iter().zip([16u64 << 20, 64 << 20]) {
        assert_eq!((row.1.as_str(), row.2), ("allreduce", 8));
        // 2(N-1)/N of the buffer at the payload rate, plus 14 steps of two
        // NVLink hops (25 ns each) and a 9000-byte store-and-forward.
        let beta_ns =
            2.0 * 7.0 / 8.0 * size as f64 * 8.0 / nvlink_bps * 1e9 * (9000.0 + header) / 9000.0;
        let alpha_ns = 14.0 * (50.0 + (9000.0 + header) * 8.0 / nvlink_bps * 1e9);
        let expected = beta_ns + alpha_ns;
        let error = (row.4 as f64 - expected).abs() / expected;
        assert!(
            error < 0.014,
            "{size} B: {} ns, ring cost {expected:.0} ns ({:.2}% off)",
            row.4,
            error * 100.0
        );
    }
    // Blocking forward collectives: the second layer computes (556 us) after the first.
    assert_eq!(rows[1].3, rows[0].3 + rows[0].4 + 556_000);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_pp4_ep2_tp8_moe_job_on_128_gpus_finishes_every_transfer() {
    let out = scratch("moe");
    let o = netsim(format!(
        "--topo spectrum-x --gpus 128 --workload {} --out {} --quiet",
        workload("moe-pp4-ep2-tp8-128.txt"),
        out.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = run_json(&out);
    assert_eq!(run["collectives"], run["collectives_finished"]);
    let rows = collectives(&out);
    let count = |op: &str| rows.iter().filter(|r| r.1 == op).count();
    assert_eq!(count("send"), 384);
    assert_eq!(count("alltoall"), 512);
    // Senders are made as flows start: at most 224 of the 22,144 flows are
    // in flight at once, within the memory check's 16 per host.
    let slots = run["sender_slots"].as_u64().unwrap();
    assert!(slots > 0 && slots <= 16 * 128, "{slots}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_memory_check_predicts_a_packet_level_peak_within_15_percent() {
    // Without sampling: the queues' and links' writers are not counted.
    let out = scratch("moe-memory");
    let o = netsim(format!(
        "--topo spectrum-x --gpus 128 --workload {} --sample-ns 0 --out {} --quiet",
        workload("moe-pp4-ep2-tp8-128.txt"),
        out.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = run_json(&out);
    let predicted = run["peak_rss_predicted_bytes"].as_f64().unwrap();
    let measured = run["peak_rss_bytes"].as_f64().unwrap();
    // A debug binary touches ~20 MB more of its code and of the heap after
    // the check than a release one (66 MB measured against 47 MB, 51 MB
    // predicted): the bound is 15% for the release build that runs are
    // measured with.
    let bound = if cfg!(debug_assertions) { 0.35 } else { 0.15 };
    assert!(
        (predicted / measured - 1.0).abs() <= bound,
        "predicted {predicted} B, measured {measured} B"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_simai_input_is_one_line_with_file_line_and_field() {
    let dir = scratch("bad");
    let out = dir.join("out");
    for (text, needle) in [
        (
            "HYBRID_TRANSFORMER model_parallel_NPU_group: 8 ep: 2 pp: 2 all_gpus: 16 pp_comm: 8\n1\n",
            "w.txt:1: all_gpus: 16 GPUs do not fit",
        ),
        (
            "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 tensor: 4\n1\n",
            "w.txt:1: unknown setting `tensor`",
        ),
        (
            "HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n1\nl0 -1 5 ALLREDUCE -64 5 NONE 0 5 NONE 0 5\n",
            "w.txt:3: fwd_comm_size: `-64` is negative",
        ),
        (
            "HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n1\nl0 -1 5 ALLSCATTER 64 5 NONE 0 5 NONE 0 5\n",
            "w.txt:3: fwd_comm_type: unknown communication type `ALLSCATTER`",
        ),
        (
            "HYBRID_TRANSFORMER all_gpus: 64\n1\nl0 -1 5 NONE 0 5 NONE 0 5 NONE 0 5\n",
            "all_gpus: 64 GPUs but the topology has 16 hosts",
        ),
    ] {
        let file = dir.join("w.txt");
        std::fs::write(&file, text).unwrap();
        let o = netsim(format!("--topo fat-tree --k 4 --workload {} --out {}", file.display(), out.display()));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One 16 MiB collective on SimAI's own Spectrum-X topology files against
/// SimAI 1.6's ns-3 packet backend (`tests/data/simai-packet/`, which says
/// how SimAI ran): every case marked `asserted` within the file's tolerance
/// of SimAI's last rank (`simai_end_us`), the end netsim's collective has.
/// SimAI's own report (`simai_us`) is rank 0's alone, up to 12.7% earlier on
/// 128 GPUs. Where SimAI was also run on other ECMP draws
/// (`simai_draws_end_us`, its stock run among them) the median draw is the
/// reference: one draw is one sample. A case's own `common` replaces the
/// file's. The others are recorded with the gap and its reason.
#[test]
fn spectrum_x_collectives_agree_with_simais_packet_backend() {
    let dir = runs_file("tests/data/simai-packet");
    let text = std::fs::read_to_string(format!("{dir}/collectives-spectrum-x.toml")).unwrap();
    let data: toml::Value = toml::from_str(&text).unwrap();
    let tolerance = data["tolerance"].as_float().unwrap();
    let common = data["common"].as_str().unwrap();
    let cases = data["case"].as_array().unwrap();
    let asserted: Vec<&toml::Value> = cases
        .iter()
        .filter(|c| c["asserted"].as_bool().unwrap())
        .collect();
    assert!(
        asserted.len() >= 6,
        "the 8- and 16-GPU ring cases are asserted"
    );
    assert!(
        asserted
            .iter()
            .any(|c| c["topology"].as_str().unwrap().contains("_128g_")),
        "a 128-GPU case is asserted"
    );
    for case in asserted {
        let name = case["name"].as_str().unwrap();
        let out = scratch(name);
        let flags = case.get("common").map_or(common, |c| c.as_str().unwrap());
        let o = netsim(format!(
            "--topo simai:{dir}/{} {} {flags} --out {} --quiet",
            case["topology"].as_str().unwrap(),
            case["netsim"].as_str().unwrap(),
            out.display()
        ));
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let rows = collectives(&out);
        assert_eq!(rows.len(), 1, "{name}");
        let ours_us = rows[0].4 as f64 / 1e3;
        let stock_us = case["simai_end_us"].as_float().unwrap();
        let simai_us = match case.get("simai_draws_end_us") {
            Some(draws) => {
                let mut draws: Vec<f64> = draws
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_float().unwrap())
                    .collect();
                assert!(draws.contains(&stock_us), "{name}: the stock run is a draw");
                draws.sort_by(f64::total_cmp);
                draws[draws.len() / 2]
            }
            None => stock_us,
        };
        assert!(
            (ours_us - simai_us).abs() / simai_us < tolerance,
            "{name}: {ours_us:.3} us against SimAI's last rank at {simai_us:.3} us"
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// The 128-GPU all-gather with SimAI's two ns-3 mechanisms
/// (`--recv-complete acked`, `--qp-round-robin after-last`): slower than
/// without them, toward SimAI's time, and still at most SimAI's (the bound
/// that holds; the gap left is in docs/perf/2026-11-28-nccl-2.md).
#[test]
fn simai_mechanisms_move_the_128_gpu_all_gather_toward_simai() {
    let dir = runs_file("tests/data/simai-packet");
    let text = std::fs::read_to_string(format!("{dir}/collectives-spectrum-x.toml")).unwrap();
    let data: toml::Value = toml::from_str(&text).unwrap();
    let common = data["common"].as_str().unwrap();
    let case = data["case"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str() == Some("allgather-128-simai-mechanisms"))
        .expect("the case is recorded");
    let flags = case["netsim"].as_str().unwrap();
    let plain = flags
        .replace(" --recv-complete acked", "")
        .replace(" --qp-round-robin after-last", "");
    assert_ne!(plain, flags);
    let time_us = |name: &str, flags: &str| {
        let out = scratch(name);
        let o = netsim(format!(
            "--topo simai:{dir}/{} {flags} {common} --out {} --quiet",
            case["topology"].as_str().unwrap(),
            out.display()
        ));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows = collectives(&out);
        let _ = std::fs::remove_dir_all(&out);
        rows[0].4 as f64 / 1e3
    };
    let with_us = time_us("ag128-mechanisms", flags);
    let without_us = time_us("ag128-plain", &plain);
    let simai_us = case["simai_us"].as_float().unwrap();
    let recorded_us = case["netsim_us"].as_float().unwrap();
    assert!(
        (with_us - recorded_us).abs() / recorded_us < 0.01,
        "{with_us} us"
    );
    assert!(
        without_us < with_us && with_us < simai_us,
        "{without_us} < {with_us} < {simai_us} us"
    );
}
