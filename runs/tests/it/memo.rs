//! `--ff-memo on` (DESIGN.md §3c, "Memoization"): a contention domain
//! about to start on quiet resources is replayed from its record (made in
//! a sandbox the first time), and the replay equals simulating it: the
//! same flows table as `--ff-memo off`, one miss and N - 1 hits for N
//! identical domains (repeated, or concurrent on two servers), bytes sent
//! = delivered, the same outputs on 1, 2 and 4 threads; traffic elsewhere
//! leaves a domain replayed, a flow through its resources makes it a miss.
//! ECMP entropy and RED draws: `memo_draws.rs`.

use crate::common;
use std::path::{Path, PathBuf};

use crate::common::run_json as summary;
use crate::common::tables::{flow_outcomes as flows, rows as read_rows, Row};
use crate::common::{assert_conserved, memo_counts};

/// Four identical layers on 8 ranks: 20 us of compute, then a 1 MiB ring
/// all-reduce over the 8 GPUs.
const REPEATED: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0
4
layer0   -1 20000 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
layer1   -1 20000 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
layer2   -1 20000 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
layer3   -1 20000 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
";

/// Two identical layers on 8 ranks whose 64 MiB all-reduce's ring steps
/// (8 MiB flows, ~23 us on NVLink) are long enough to be jumped at a 1 us
/// check period.
const LONG: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0
2
layer0   -1 20000 ALLREDUCE 67108864 20000 NONE 0 20000 NONE 0 1000
layer1   -1 20000 ALLREDUCE 67108864 20000 NONE 0 20000 NONE 0 1000
";

/// AICB's layout of a GPT (`aicb_cut.py`'s `workload`, hidden 512, seq 256,
/// vocab 1000) with TP 8 x PP 2 on 16 GPUs, 2 micro-batches, one layer per
/// stage: TP collectives on each server's NVSwitch, activations and
/// gradients sent between the stages over the rails.
const PIPELINE: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 2 vpp: 2 ga: 2 all_gpus: 16 checkpoints: 0 checkpoint_initiates: 0 pp_comm: 32768
23
grad_gather -1 1 NONE 0 1 NONE 0 1 ALLGATHER 919168 100
grad_param_comm -1 1 NONE 0 1 NONE 0 1 REDUCESCATTER 1838336 100
grad_param_compute -1 1 NONE 0 2 NONE 0 1 NONE 0 100
embedding_grads -1 1 NONE 0 1 ALLREDUCE 262144 1 NONE 0 100
embedding_layer -1 1 ALLREDUCE 262144 1 NONE 0 1 NONE 0 100
attention_column -1 0 ALLGATHER 262144 0 REDUCESCATTER 0 0 NONE 0 100
attention_row -1 0 REDUCESCATTER 262144 0 ALLGATHER 262144 0 NONE 0 100
mlp_column -1 0 ALLGATHER 262144 0 REDUCESCATTER 0 0 NONE 0 100
mlp_row -1 0 REDUCESCATTER 262144 0 ALLGATHER 262144 0 NONE 0 100
final_column -1 0 ALLGATHER 262144 0 REDUCESCATTER 0 0 NONE 0 100
embedding_layer -1 1 ALLREDUCE 262144 1 NONE 0 1 NONE 0 100
attention_column -1 0 ALLGATHER 262144 0 REDUCESCATTER 0 0 NONE 0 100
attention_row -1 0 REDUCESCATTER 262144 0 ALLGATHER 262144 0 NONE 0 100
mlp_column -1 0 ALLGATHER 262144 0 REDUCESCATTER 0 0 NONE 0 100
mlp_row -1 0 REDUCESCATTER 262144 0 ALLGATHER 262144 0 NONE 0 100
final_column -1 0 ALLGATHER 262144 0 REDUCESCATTER 0 0 NONE 0 100
cross_entropy1 -1 0 ALLREDUCE 1024 0 NONE 0 0 NONE 0 100
cross_entropy2 -1 0 ALLREDUCE 1024 0 NONE 0 0 NONE 0 100
cross_entropy3 -1 0 ALLREDUCE 1024 0 NONE 0 0 NONE 0 100
optimizer1 -1 0 ALLREDUCE 4 0 NONE 0 0 NONE 0 100
optimizer2 -1 0 ALLREDUCE 4 0 NONE 0 0 NONE 0 100
optimizer3 -1 0 ALLREDUCE 4 0 NONE 0 0 NONE 0 100
optimizer4 -1 0 ALLREDUCE 4 0 NONE 0 0 NONE 0 100
";

/// The repeated layers with each layer's compute within 1% of 20 us
/// (profiled times are never equal), as `benches/gen_workload.py` jitters
/// them.
const JITTERED: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0
4
layer0   -1 20000 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
layer1   -1 20200 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
layer2   -1 19830 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
layer3   -1 20117 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
";

/// Four layers whose all-reduces all differ in size: nothing repeats.
const UNIQUE: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0
4
layer0   -1 20000 ALLREDUCE 1048576 20000 NONE 0 20000 NONE 0 1000
layer1   -1 20000 ALLREDUCE 1064960 20000 NONE 0 20000 NONE 0 1000
layer2   -1 20000 ALLREDUCE 1081344 20000 NONE 0 20000 NONE 0 1000
layer3   -1 20000 ALLREDUCE 1097728 20000 NONE 0 20000 NONE 0 1000
";

fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch(name);
    std::fs::write(dir.join("repeated.txt"), REPEATED).unwrap();
    // The same layers on 16 ranks: two tensor-parallel groups, one per
    // server, run each layer's all-reduce at the same instant.
    std::fs::write(
        dir.join("twins.txt"),
        REPEATED.replace("all_gpus: 8", "all_gpus: 16"),
    )
    .unwrap();
    std::fs::write(dir.join("pipeline.txt"), PIPELINE).unwrap();
    std::fs::write(dir.join("long.txt"), LONG).unwrap();
    std::fs::write(dir.join("jittered.txt"), JITTERED).unwrap();
    std::fs::write(dir.join("unique.txt"), UNIQUE).unwrap();
    dir
}

/// Runs the repeated workload with `--ff-memo memo` and `extra`; returns
/// the output directory.
fn run(dir: &Path, out: &str, memo: &str, extra: &str) -> PathBuf {
    run_workload(dir, "repeated.txt", out, memo, extra)
}

fn run_workload(dir: &Path, file: &str, out: &str, memo: &str, extra: &str) -> PathBuf {
    let mode = format!("--fast-forward on --ff-memo {memo}");
    run_spectrum_x(dir, file, out, &format!("{mode} {extra}"))
}

/// Runs workload `file` on a 16-GPU Spectrum-X fabric with `args`; returns
/// the output directory.
fn run_spectrum_x(dir: &Path, file: &str, out: &str, args: &str) -> PathBuf {
    let workload = dir.join(file);
    let base = format!(
        "run --topo spectrum-x --gpus 16 --workload {}",
        workload.display()
    );
    common::run_out(dir, &format!("{base} {args}"), out)
}

#[test]
fn a_repeated_collective_is_replayed_and_equals_simulating_it() {
    let dir = scratch("repeat");
    let off = run(&dir, "off", "off", "--threads 1");
    let on = run(&dir, "on", "on", "--threads 1");
    let (s_off, s_on) = (summary(&off), summary(&on));
    // Four repeats: the first is simulated and recorded, three replayed.
    assert_eq!(memo_counts(&s_on), (3, 1));
    assert!(
        s_on["fast_forward"]["memo_events_avoided"]
            .as_u64()
            .unwrap()
            > 0
    );
    // The first layer is simulated once, in the sandbox, and replayed too.
    let sandbox = s_on["fast_forward"]["memo_sandbox_events"]
        .as_u64()
        .unwrap();
    assert!(sandbox > 0);
    assert!(
        (s_on["events"].as_u64().unwrap() + sandbox) * 2 < s_off["events"].as_u64().unwrap(),
        "memo avoids most events: {} + {sandbox} against {}",
        s_on["events"],
        s_off["events"]
    );
    // Every flow of the replayed repeats, and so the run, as simulated.
    let (f_off, f_on) = (flows(&off), flows(&on));
    assert_eq!(f_off.len(), 4 * 112);
    assert_eq!(f_off, f_on);
    assert_eq!(s_off["sim_end_ns"], s_on["sim_end_ns"]);
    // Conservation across the replays.
    for s in [&s_off, &s_on] {
        assert_conserved(s, 4 * 1_048_576 * 2 * 7);
    }
    // The replayed flows say so: all of their bytes skipped.
    let rows = read_rows(&on.join("flows"));
    let replayed = rows
        .iter()
        .filter(|r| r["skipped_bytes"] == r["size_bytes"])
        .count();
    assert_eq!(replayed, 4 * 112);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Link samples of a run: per (time, node, port), the bytes on the wire in
/// the interval and its utilization.
fn link_samples(out: &Path) -> std::collections::BTreeMap<(u64, u64, u64), (u64, f64)> {
    read_rows(&out.join("links"))
        .iter()
        .map(|r| {
            let n = |c: &str| r[c].parse::<u64>().unwrap();
            let key = (n("time_ns"), n("src"), n("src_port"));
            // Floats are rendered by their bit pattern, `f` + 16 hex digits.
            let bits = u64::from_str_radix(&r["utilization"][1..], 16).unwrap();
            (key, (n("tx_bytes"), f64::from_bits(bits)))
        })
        .collect()
}

#[test]
fn a_replay_puts_its_bytes_on_the_wire_over_its_span_in_the_samples() {
    let dir = scratch("samples");
    let args = "--threads 1 --sample-ns 5000";
    let off = link_samples(&run(&dir, "off", "off", args));
    let on_dir = run(&dir, "on", "on", args);
    assert_eq!(memo_counts(&summary(&on_dir)), (3, 1));
    let on = link_samples(&on_dir);
    assert_eq!(
        off.keys().collect::<Vec<_>>(),
        on.keys().collect::<Vec<_>>()
    );
    // No link reads more than its line rate: a replay's bytes are not
    // all counted at its decision.
    let busiest = on.values().map(|&(_, u)| u).fold(0.0, f64::max);
    assert!(busiest <= 1.0 + 1e-9, "utilization {busiest}");
    // Every link carries what simulating carries, in the same intervals
    // but for the shape within a port's busy stretch (spread evenly).
    let mut totals = std::collections::BTreeMap::new();
    let (mut moved, mut total) = (0u64, 0u64);
    for (key, &(bytes_off, _)) in &off {
        let bytes_on = on[key].0;
        let t = totals.entry((key.1, key.2)).or_insert((0, 0));
        t.0 += bytes_off;
        t.1 += bytes_on;
        moved += bytes_off.abs_diff(bytes_on);
        total += bytes_off;
    }
    assert!(totals.values().all(|&(a, b)| a == b));
    assert!(
        moved * 20 < total,
        "{moved} of {total} bytes sampled in other intervals than simulated"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_identical_concurrent_domains_cost_one_simulation() {
    let dir = scratch("twins");
    let off = run_workload(&dir, "twins.txt", "off", "off", "--threads 1");
    let on = run_workload(&dir, "twins.txt", "on", "on", "--threads 1");
    let (s_off, s_on) = (summary(&off), summary(&on));
    // Eight collectives (two groups x four layers), all of one key: the
    // first group's first layer is simulated, in the sandbox.
    assert_eq!(memo_counts(&s_on), (7, 1));
    let rows = read_rows(&on.join("flows"));
    assert_eq!(rows.len(), 8 * 112);
    assert!(rows.iter().all(|r| r["skipped_bytes"] == r["size_bytes"]));
    let first: Vec<&Row> = rows
        .iter()
        .filter(|r| r["collective_id"] == "0" || r["collective_id"] == "1")
        .collect();
    let servers: std::collections::BTreeSet<u64> = first
        .iter()
        .map(|r| r["src"].parse::<u64>().unwrap() / 8)
        .collect();
    assert_eq!(servers.len(), 2, "the two groups are on two servers");
    assert_eq!(flows(&off), flows(&on));
    assert_eq!(s_off["sim_end_ns"], s_on["sim_end_ns"]);
    for s in [&s_off, &s_on] {
        assert_conserved(s, 8 * 1_048_576 * 2 * 7);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_pipeline_stages_replay_every_flow_as_simulated() {
    let dir = scratch("pipeline");
    let off = run_workload(&dir, "pipeline.txt", "off", "off", "--threads 1");
    let reference = flows(&off);
    for threads in ["1", "2"] {
        let on = run_workload(
            &dir,
            "pipeline.txt",
            &format!("t{threads}"),
            "on",
            &format!("--threads {threads}"),
        );
        // The PP sends too: the guard bounds the other stage's sends by
        // the backward pass's flows at line rate, not as instantaneous.
        let rows = read_rows(&on.join("flows"));
        assert!(
            rows.iter().all(|r| r["skipped_bytes"] == r["size_bytes"]),
            "{threads} threads"
        );
        assert_eq!(flows(&on), reference, "{threads} threads");
        let (hits, misses) = memo_counts(&summary(&on));
        assert!(hits > 10 * misses, "{hits} hits, {misses} misses");
    }
    let names: Vec<String> = read_rows(&off.join("collectives"))
        .into_iter()
        .map(|r| r["name"].clone())
        .collect();
    assert!(names.iter().any(|n| n.ends_with("activations")));
    assert!(names.iter().any(|n| n.ends_with("gradients")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sandbox_jumps_the_steady_stretches_of_its_domain() {
    let dir = scratch("jumps");
    let period = "--ff-period-us 1";
    let off = run_spectrum_x(&dir, "long.txt", "off", "--fast-forward off");
    let one = run_workload(
        &dir,
        "long.txt",
        "t1",
        "on",
        &format!("{period} --threads 1"),
    );
    let (s_off, s_on) = (summary(&off), summary(&one));
    assert_eq!(memo_counts(&s_on), (1, 1));
    // The sandbox simulates the first layer, half the run without jumps;
    // its jumps leave it a fraction of that.
    let sandbox = s_on["fast_forward"]["memo_sandbox_events"]
        .as_u64()
        .unwrap();
    let half = s_off["events"].as_u64().unwrap() / 2;
    assert!(
        sandbox * 2 < half,
        "{sandbox} sandbox events against {half}"
    );
    // A jump is approximate: every flow's completion within the tolerance.
    let (f_off, f_on) = (flows(&off), flows(&one));
    assert_eq!(f_off.len(), 2 * 112);
    for (a, b) in f_off.iter().zip(&f_on) {
        assert_eq!(a[0], b[0]);
        let (fa, fb): (f64, f64) = (a[6].parse().unwrap(), b[6].parse().unwrap());
        assert!(
            (fb - fa).abs() <= 0.01 * fa,
            "flow {}: FCT {fb} against {fa}",
            a[0]
        );
    }
    assert_conserved(&s_off, 2 * 8_388_608 * 112);
    assert_conserved(&s_on, 2 * 8_388_608 * 112);
    // The sandbox is a one-shard run: the same record on 2 threads.
    let two = run_workload(
        &dir,
        "long.txt",
        "t2",
        "on",
        &format!("{period} --threads 2"),
    );
    assert_eq!(flows(&two), f_on);
    assert_eq!(summary(&two)["fast_forward"], s_on["fast_forward"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn memoized_runs_are_identical_on_1_2_and_4_threads() {
    let dir = scratch("shards");
    let one = run_workload(&dir, "twins.txt", "t1", "on", "--threads 1");
    let reference = (flows(&one), summary(&one));
    assert_eq!(memo_counts(&reference.1), (7, 1));
    for threads in ["2", "4"] {
        let out = run_workload(
            &dir,
            "twins.txt",
            &format!("t{threads}"),
            "on",
            &format!("--threads {threads}"),
        );
        let s = summary(&out);
        assert_eq!(flows(&out), reference.0, "{threads} threads");
        for field in ["events", "sim_end_ns", "sent_payload_bytes"] {
            assert_eq!(s[field], reference.1[field], "{field} on {threads} threads");
        }
        assert_eq!(s["fast_forward"], reference.1["fast_forward"]);
        for table in ["collectives", "links", "queues"] {
            assert_eq!(
                read_rows(&out.join(table)),
                read_rows(&one.join(table)),
                "{table} on {threads} threads"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The repeated layers with one more flow, `src -> dst`, from 75 us: it
/// runs during the third repeat (the repeats start about 26 us apart from
/// 20 us and last about 6 us) and ends before the fourth. Returns, per
/// collective, whether it was replayed.
fn beside(name: &str, src: u32, dst: u32, hits: (u64, u64)) -> Vec<bool> {
    let dir = scratch(name);
    std::fs::write(
        dir.join("beside.cm"),
        format!("Nodes 16\nConnections 1\n{src}->{dst} start 75 size 2000000\n"),
    )
    .unwrap();
    let tm = format!("tm:{}", dir.join("beside.cm").display());
    let extra = &format!("--threads 2 --traffic {tm}");
    let off = run(&dir, "off", "off", extra);
    let on = run(&dir, "on", "on", extra);
    let s_on = summary(&on);
    assert_eq!(memo_counts(&s_on), hits);
    let rows = read_rows(&on.join("flows"));
    let replayed = (0..4)
        .map(|c| {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r["collective_id"] == c.to_string())
                .collect();
            assert_eq!(mine.len(), 112);
            mine.iter().all(|r| r["skipped_bytes"] == r["size_bytes"])
        })
        .collect();
    assert_eq!(flows(&off), flows(&on));
    assert_conserved(&s_on, 4 * 1_048_576 * 2 * 7 + 2_000_000);
    let _ = std::fs::remove_dir_all(&dir);
    replayed
}

#[test]
fn a_domain_beside_unrelated_traffic_is_replayed() {
    // Hosts 8 and 9 are on the other server: their flow shares no port or
    // switch with the job's all-reduces, which all replay around it.
    assert_eq!(beside("elsewhere", 8, 9, (3, 1)), [true; 4]);
}

#[test]
fn a_flow_through_a_domains_resources_makes_it_a_miss() {
    // Hosts 0 and 1 are the job's: their flow crosses the server's
    // NVSwitch, so the third repeat is simulated beside it. It also moved
    // host 0's round-robin pointer, which is in the key: the fourth is a
    // new key, simulated in the sandbox (a miss) and replayed.
    assert_eq!(beside("through", 0, 1, (1, 3)), [true, true, false, true]);
}

#[test]
fn what_memo_does_not_cover_is_refused_with_one_line() {
    let dir = scratch("refused");
    for (extra, line) in [
        ("--ecmp spray", "--ff-memo: per-packet spraying"),
        ("--cc hpcc", "--ff-memo: HPCC"),
        ("--ff-memo maybe", "--ff-memo: expected on or off"),
    ] {
        let args =
            format!("run --topo star --hosts 4 --fast-forward on --ff-memo on --out out {extra}");
        common::rejects(&dir, &args, &[], line);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_jittered_repeat_hits_the_record_of_the_last() {
    // A layer whose compute is ~1% longer or shorter than the last starts
    // its all-reduce at another instant; the key holds start offsets from
    // the domain's first start, so it is the same key.
    let dir = scratch("jittered");
    let off = run_workload(&dir, "jittered.txt", "off", "off", "--threads 1");
    let on = run_workload(&dir, "jittered.txt", "on", "on", "--threads 1");
    let (s_off, s_on) = (summary(&off), summary(&on));
    assert_eq!(memo_counts(&s_on), (3, 1));
    // Within the bounds (iteration 1%, FCT 5%); the replays are
    // exact here: the same flows table.
    let (end_off, end_on) = (
        s_off["sim_end_ns"].as_f64().unwrap(),
        s_on["sim_end_ns"].as_f64().unwrap(),
    );
    assert!((end_on - end_off).abs() <= 0.01 * end_off);
    assert_eq!(flows(&off), flows(&on));
    assert_conserved(&s_on, 4 * 1_048_576 * 2 * 7);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_workload_without_repeats_spends_no_sandbox() {
    // No collective shares another's shape: a record could only replay
    // the domain it was made for, so none is made and all is simulated.
    let dir = scratch("unique");
    let off = run_workload(&dir, "unique.txt", "off", "off", "--threads 1");
    let on = run_workload(&dir, "unique.txt", "on", "on", "--threads 1");
    let s_on = summary(&on);
    assert_eq!(memo_counts(&s_on), (0, 4));
    assert_eq!(s_on["fast_forward"]["memo_sandbox_events"], 0);
    assert_eq!(summary(&off)["events"], s_on["events"]);
    assert_eq!(flows(&off), flows(&on));
    let _ = std::fs::remove_dir_all(&dir);
}
