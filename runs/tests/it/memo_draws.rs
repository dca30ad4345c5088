//! `--ff-memo on` where a domain's outcome depends on its packets' 5-tuples
//! (DESIGN.md §3c, "Memoization"): with `--ecmp-entropy connection` a
//! repeated all-to-all through the spine takes its first layer's paths and
//! replays; a record that took RED draws replays only for the connections
//! it was made for; a bad `--ecmp-entropy` is refused with one line.

use crate::common;
use std::path::{Path, PathBuf};

use crate::common::run_json as summary;
use crate::common::tables::{flow_outcomes as flows, rows as read_rows};
use crate::common::{assert_conserved, memo_counts, scratch};

/// Four identical layers of a 2-rank expert all-to-all (4 MiB, one flow
/// each way) with 20 us of compute before each.
const EXPERTS: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 2 pp: 1 vpp: 1 ga: 1 all_gpus: 2 checkpoints: 0 checkpoint_initiates: 0
4
layer0   -1 20000 ALLTOALL_EP 4194304 20000 NONE 0 20000 NONE 0 1000
layer1   -1 20000 ALLTOALL_EP 4194304 20000 NONE 0 20000 NONE 0 1000
layer2   -1 20000 ALLTOALL_EP 4194304 20000 NONE 0 20000 NONE 0 1000
layer3   -1 20000 ALLTOALL_EP 4194304 20000 NONE 0 20000 NONE 0 1000
";

/// Runs `EXPERTS` on GPU 0 of server 0 and GPU 1 of server 1 (different
/// rails: every flow crosses a spine, chosen by ECMP) on `threads` with
/// `args`.
fn run_experts(dir: &Path, out: &str, threads: &str, args: &str) -> PathBuf {
    std::fs::write(dir.join("experts.txt"), EXPERTS).unwrap();
    let job = format!(
        "{{name=\"ep\",workload=\"{}\",hosts=\"0,9\"}}",
        dir.join("experts.txt").display()
    );
    let base = format!("run --topo spectrum-x --gpus 16 --job {job} --threads {threads}");
    common::run_out(dir, &format!("{base} {args}"), out)
}

#[test]
fn a_repeated_all_to_all_through_the_spine_replays_with_connection_entropy() {
    let dir = scratch("experts");
    let memo = "--fast-forward on --ff-memo on";
    // A new source port per flow: each layer's flows hash onto other
    // spines. A key names ports by class (DESIGN.md §3c, "Path classes"),
    // so a layer whose paths cross other spines in the same pattern
    // replays an earlier layer's record across paths (a key naming port
    // numbers made 0 hits and 4 misses), exactly as simulated.
    let flow_off = run_experts(&dir, "flow_off", "1", "--fast-forward off");
    let flow = run_experts(&dir, "flow", "1", memo);
    let s_flow = summary(&flow);
    let (hits, misses) = memo_counts(&s_flow);
    assert_eq!(hits + misses, 4);
    assert!(hits >= 1, "{s_flow}");
    assert_eq!(
        s_flow["fast_forward"]["memo_path_hits"].as_u64(),
        Some(hits)
    );
    assert_eq!(flows(&flow_off), flows(&flow));
    assert_eq!(summary(&flow_off)["sim_end_ns"], s_flow["sim_end_ns"]);
    // The connection's source port (NCCL keeps its queue pairs): every
    // layer takes the first one's paths; one record, three replays.
    let entropy = "--ecmp-entropy connection";
    let off = run_experts(&dir, "off", "1", &format!("--fast-forward off {entropy}"));
    let on = run_experts(&dir, "on", "1", &format!("{memo} {entropy}"));
    let (s_off, s_on) = (summary(&off), summary(&on));
    assert_eq!(memo_counts(&s_on), (3, 1));
    let (f_off, f_on) = (flows(&off), flows(&on));
    assert_eq!(f_off.len(), 8);
    assert_eq!(f_off, f_on);
    assert_eq!(s_off["sim_end_ns"], s_on["sim_end_ns"]);
    // One connection each way: two paths for the eight flows.
    let paths: std::collections::BTreeSet<&String> = f_on.iter().map(|r| &r[8]).collect();
    assert_eq!(paths.len(), 2);
    assert_conserved(&s_on, 4 * 4_194_304);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_ecmp_entropy_is_refused_with_one_line() {
    let dir = scratch("entropy");
    let args = "run --topo star --hosts 4 --ecmp-entropy qp --out out";
    common::rejects(
        &dir,
        args,
        &[],
        "--ecmp-entropy: expected flow or connection",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// RED between its thresholds on `EXPERTS`: one spine (every flow takes
/// it, whatever its source port, so every layer has the first one's key)
/// reached at half the NICs' rate (its uplinks queue), RED from 10 KB with
/// Kmax above the layer's 4 MiB (no queue reaches it: every mark is a
/// draw, `switch::red_draw`, a hash of the packet and the port).
const RED: &str = "--psw 1 --asw-psw-gbps 200 --ecn-kmin-kb 10 --ecn-kmax-kb 8192 --ecn-pmax 1";

/// Per flow of the run in `out`, in flow id order: whether all of its bytes
/// were skipped (replayed, or simulated in the sandbox).
fn skipped(out: &Path) -> Vec<bool> {
    let mut rows = read_rows(&out.join("flows"));
    rows.sort_by_key(|r| r["flow_id"].parse::<u64>().unwrap());
    rows.iter()
        .map(|r| r["skipped_bytes"] == r["size_bytes"])
        .collect()
}

#[test]
fn a_record_that_took_red_draws_replays_only_for_its_own_connections() {
    let dir = scratch("red");
    let [memo, plain] =
        ["--ff-memo on", "--ff-memo off"].map(|m| format!("--fast-forward on {m} {RED}"));
    let connection = "--ecmp-entropy connection";
    // The connection's source port: every layer's packets hash as the
    // first one's, so its record, draws included, replays three times.
    let off = run_experts(&dir, "off", "1", &format!("{plain} {connection}"));
    let f_off = flows(&off);
    assert_eq!(f_off.len(), 8);
    for threads in ["1", "2"] {
        let on = run_experts(
            &dir,
            &format!("on{threads}"),
            threads,
            &format!("{memo} {connection}"),
        );
        let s_on = summary(&on);
        assert_eq!(memo_counts(&s_on), (3, 1), "{threads} threads");
        assert_eq!(skipped(&on), vec![true; 8], "{threads} threads");
        // Every flow, marks and CNPs included, as simulated.
        assert_eq!(flows(&on), f_off, "{threads} threads");
        assert_eq!(s_on["sim_end_ns"], summary(&off)["sim_end_ns"]);
        assert_conserved(&s_on, 4 * 4_194_304);
    }
    // The record took draws: the replayed layers' flows carry marks
    // (column 9, `ecn_marked_pkts`), every one of them a draw (above).
    assert!(f_off[2..].iter().all(|f| f[9] != "0"), "{f_off:?}");
    // A new source port per flow: the same key every layer, but each
    // layer's packets draw anew (other marks than the first layer's), so
    // the record does not fit: layers 2 to 4 are keyed with their own
    // identity (DESIGN.md §3c, "Path classes"), none repeats another's:
    // layers 2 and 3 are recorded in a sandbox of their own and replayed
    // fresh (misses), the last one, with no layer of its shape ahead to
    // repay a sandbox, is simulated in the run, and every flow is as
    // simulated.
    let flow_off = run_experts(&dir, "flow-off", "1", &plain);
    let flow = run_experts(&dir, "flow", "1", &memo);
    assert_eq!(memo_counts(&summary(&flow)), (0, 4));
    let sandboxed = [true, true, true, true, true, true, false, false];
    assert_eq!(skipped(&flow), sandboxed);
    let f_flow = flows(&flow_off);
    assert_eq!(flows(&flow), f_flow);
    // The first two layers' marks differ. (Their FCTs do not: the spine
    // link bounds them; a Pmax that made them differ would also end the
    // two directions a few ns apart, and the next layer's entry offsets,
    // in the key, would drift: DESIGN.md §3c, "Entry offsets drift".)
    let marks = |f: &[Vec<String>]| f.iter().map(|r| r[9].clone()).collect::<Vec<_>>();
    assert_ne!(marks(&f_flow[..2]), marks(&f_flow[2..4]), "{f_flow:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
