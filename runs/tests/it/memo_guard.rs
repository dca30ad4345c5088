//! What keeps `--ff-memo on` from replaying a domain that other traffic
//! would meet (DESIGN.md §3c, "Guard", "Held" and the pre-check): a flow
//! outside a domain that the guard reaches, following the DAG with each
//! flow's payload at line rate, before the domain's span ends; a replay
//! still holding a resource; and, for a new key, the same refusals at the
//! least span its flows allow, which make no sandbox, while the next
//! domain of the key that is not refused makes it.
//!
//! Every case runs on a two-tier fat-tree with k = 4: leaf `i` holds hosts
//! `2i` and `2i + 1` at 100 Gb/s, and a collective inside one leaf uses
//! only its hosts' ports and that leaf. A background flow (`--traffic`)
//! on another leaf keeps a collective there simulated (the guard refuses
//! it), so that what follows it is known to the guard only through its
//! flows' payloads, not through a record. Each case checks that the flows
//! table equals `--ff-memo off`, and which collectives were replayed.

use crate::common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::tables::{flow_outcomes, rows};

/// A `[[phase]]` computing for `us` microseconds on each host of `group`,
/// after the phases `after`.
fn compute(name: &str, us: u32, group: &str, after: &[&str]) -> String {
    format!(
        "[[phase]]\nname = \"{name}\"\ncompute_us = {us}\ngroup = \"{group}\"\nafter = {after:?}\n"
    )
}

/// A `[[phase]]` running collective `op` (ring algorithm) of `size` over
/// `group`, after the phases `after`.
fn collective(name: &str, op: &str, size: &str, group: &str, after: &[&str]) -> String {
    format!(
        "[[phase]]\nname = \"{name}\"\ncollective = \"{op}\"\nsize = \"{size}\"\nalgo = \"ring\"\n\
         group = \"{group}\"\nafter = {after:?}\n"
    )
}

/// A connection matrix of one background flow `src -> dst` of `bytes`
/// from `start_us`.
fn background(src: u32, dst: u32, start_us: u32, bytes: u64) -> String {
    format!("Nodes 8\nConnections 1\n{src}->{dst} start {start_us} size {bytes}\n")
}

/// A case's runs with `--ff-memo off` and `on`, in a scratch directory.
struct Case {
    dir: PathBuf,
    off: PathBuf,
    on: PathBuf,
}

impl Case {
    /// Runs `workload` (phases) with the background flows `matrix`, memo
    /// off and on, on one thread.
    fn run(name: &str, workload: &str, matrix: &str) -> Case {
        let dir = common::scratch(name);
        std::fs::write(dir.join("workload.toml"), workload).unwrap();
        std::fs::write(dir.join("background.cm"), matrix).unwrap();
        let off = run(&dir, "off", "off", "1");
        let on = run(&dir, "on", "on", "1");
        Case { dir, off, on }
    }

    /// Memo on: hits, misses, events of the sandboxes.
    fn counts(&self) -> (u64, u64, u64) {
        let s = common::run_json(&self.on);
        let ff = &s["fast_forward"];
        let get = |k: &str| ff[k].as_u64().unwrap_or_else(|| panic!("no {k}"));
        (
            get("memo_hits"),
            get("memo_misses"),
            get("memo_sandbox_events"),
        )
    }

    /// Memo on: per collective (by id), whether its flows were replayed
    /// (every byte skipped) rather than simulated.
    fn replayed(&self) -> Vec<bool> {
        let mut by: BTreeMap<u32, bool> = BTreeMap::new();
        for r in rows(&self.on.join("flows")) {
            if let Ok(c) = r["collective_id"].parse::<u32>() {
                let all = by.entry(c).or_insert(true);
                *all &= r["skipped_bytes"] == r["size_bytes"];
            }
        }
        assert!(by.keys().copied().eq(0..by.len() as u32));
        by.into_values().collect()
    }

    /// Memo off: collective `c`'s flows (start, end, FCT), ns, in flow id
    /// order.
    fn simulated(&self, c: u32) -> Vec<(u64, u64, u64)> {
        flow_outcomes(&self.off)
            .iter()
            .filter(|r| r[13] == c.to_string())
            .map(|r| (num(&r[4]), num(&r[5]), num(&r[6])))
            .collect()
    }

    /// Memo off: collective `c`'s first start and last end, ns.
    fn window(&self, c: u32) -> (u64, u64) {
        let flows = self.simulated(c);
        (
            flows.iter().map(|f| f.0).min().unwrap(),
            flows.iter().map(|f| f.1).max().unwrap(),
        )
    }

    /// What every case asserts: the replays changed no flow's outcome.
    fn assert_flows_as_simulated(&self) {
        assert_eq!(flow_outcomes(&self.off), flow_outcomes(&self.on));
        let (s_off, s_on) = (common::run_json(&self.off), common::run_json(&self.on));
        assert_eq!(s_off["sim_end_ns"], s_on["sim_end_ns"]);
        assert_eq!(s_on["sent_payload_bytes"], s_on["delivered_payload_bytes"]);
        assert_eq!(s_off["sent_payload_bytes"], s_on["sent_payload_bytes"]);
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn num(cell: &str) -> u64 {
    cell.parse().unwrap()
}

/// Runs `dir`'s case with `--ff-memo memo` on `threads` threads into `out`.
fn run(dir: &Path, out: &str, memo: &str, threads: &str) -> PathBuf {
    let workload = dir.join("workload.toml");
    let matrix = format!("tm:{}", dir.join("background.cm").display());
    let args = format!(
        "run --topo fat-tree --k 4 --tiers 2 --workload {} --traffic {matrix} \
         --fast-forward on --ff-memo {memo} --threads {threads}",
        workload.display()
    );
    common::run_out(dir, &args, out)
}

/// Two identical all-reduces on hosts 0 and 1 (`d1`, then `d2` after `gap_us`
/// of compute), and on the next leaf an all-reduce `x` of `x_size` (after
/// 5 us), kept simulated by a background flow on its leaf, then a
/// broadcast `f` from host 2 to host 0, which crosses `d`'s leaf. The
/// guard knows when `f` may start only from `x`'s flows: each no faster
/// than its payload at line rate. Collectives: d1 0, d2 1, x 2, f 3.
fn guarded(name: &str, x_size: &str, gap_us: u32) -> Case {
    let workload = [
        compute("c1", 5, "0,1", &[]),
        collective("d1", "allreduce", "256KiB", "0,1", &["c1"]),
        compute("c2", gap_us, "0,1", &["d1"]),
        collective("d2", "allreduce", "256KiB", "0,1", &["c2"]),
        compute("cx", 5, "2,3", &[]),
        collective("x", "allreduce", x_size, "2,3", &["cx"]),
        collective("f", "broadcast", "64KiB", "2,0", &["x"]),
    ]
    .concat();
    Case::run(name, &workload, &background(3, 2, 0, 200_000))
}

#[test]
fn a_flow_the_guard_reaches_before_the_span_ends_prevents_the_replay() {
    // `x`'s two ring steps of 192 KiB take at least 2 x 15.7 us at line
    // rate: `f` cannot start before ~36 us, after `d1` (5-33 us), which is
    // replayed from its sandbox, but before `d2` ends.
    let case = guarded("reached", "384KiB", 20);
    let (d1, d2, f) = (case.window(0), case.window(1), case.window(3));
    assert!(d1.1 < f.0 && f.0 < d2.1, "f {f:?} starts within d2 {d2:?}");
    // `f` meets `d2` on host 0's leaf: a replay of `d1`'s record would be
    // wrong.
    let fct = |c| case.simulated(c).iter().map(|f| f.2).collect::<Vec<_>>();
    assert_ne!(fct(0), fct(1), "d2 runs beside f, d1 alone");
    case.assert_flows_as_simulated();
    // `d1` is simulated in the sandbox and replayed (a miss), `d2`
    // simulated beside `f`; `x` and `f` simulated.
    assert_eq!(case.replayed(), [true, false, false, false]);
    let (hits, misses, sandbox) = case.counts();
    assert_eq!((hits, misses), (0, 4));
    assert!(sandbox > 0);
}

#[test]
fn the_line_rate_bound_lets_a_replay_that_instantaneous_flows_would_refuse() {
    // `x`'s two ring steps of 512 KiB take at least 2 x 42 us at line rate:
    // `f` cannot start before ~89 us, after `d2`. Were `x`'s flows
    // instantaneous, `f` could start when `x` does, within `d1`.
    let case = guarded("line-rate", "1MiB", 5);
    let (d1, d2, x, f) = (
        case.window(0),
        case.window(1),
        case.window(2),
        case.window(3),
    );
    assert!(x.0 < d1.1, "x {x:?} starts within d1 {d1:?}");
    assert!(d2.1 < f.0, "f {f:?} starts after d2 {d2:?}");
    // `d1` in the sandbox (a miss), `d2` replayed from its record (a hit).
    assert_eq!(case.replayed(), [true, true, false, false]);
    let (hits, misses, sandbox) = case.counts();
    assert_eq!((hits, misses), (1, 3));
    assert!(sandbox > 0);
    case.assert_flows_as_simulated();
}

#[test]
fn a_domain_overlapping_a_replay_on_a_resource_is_not_replayed() {
    // `b` on hosts 4 and 5 (leaf 2) is replayed at instant 0: nothing can
    // reach its leaf before it ends. `a`, a chain 2 -> 3 -> 4, starts when
    // `x` (kept simulated by the background flow) and 12 us of compute
    // are done, so it is foreseen only at a later check, while `b`'s replay
    // still holds leaf 2, on which `a`'s second flow will run: a new key
    // that the held resource refuses, so it gets no sandbox and runs packet
    // by packet. `b2`, `b`'s twin on leaf 3, is what makes `b`'s record
    // pay (a record no other collective can use is not made) and replays
    // from it. Collectives: b 0, x 1, b2 2, a 3.
    let before_a = [
        compute("c", 5, "2,3,4,5,6,7", &[]),
        collective("b", "allreduce", "384KiB", "4,5", &["c"]),
        collective("x", "allreduce", "64KiB", "2,3", &["c"]),
        collective("b2", "allreduce", "384KiB", "6,7", &["c"]),
        compute("ca", 12, "2,3", &["x"]),
    ]
    .concat();
    let workload = before_a.clone() + &collective("a", "broadcast", "384KiB", "2,3,4", &["ca"]);
    let case = Case::run("held", &workload, &background(3, 2, 0, 200_000));
    let (b, a) = (case.window(0), case.window(3));
    assert!(b.0 < a.0 && a.0 < b.1, "a {a:?} starts within b {b:?}");
    // Its flow onto leaf 2 starts after `b` ends: the guard let `b` replay.
    let into_leaf_2 = case.simulated(3)[1];
    assert!(b.1 < into_leaf_2.0, "{into_leaf_2:?} after b {b:?}");
    assert_eq!(case.replayed(), [true, false, true, false]);
    let (hits, misses, sandbox) = case.counts();
    assert_eq!((hits, misses), (1, 3));
    // The only sandbox is `b`'s: without `a`, the same events.
    let without_a = Case::run("held-without-a", &before_a, &background(3, 2, 0, 200_000));
    assert_eq!(without_a.counts(), (1, 2, sandbox));
    assert!(sandbox > 0);
    case.assert_flows_as_simulated();
}

/// All-reduces of one key on the leaves `groups` (hosts 2i and 2i + 1),
/// after 5 us; a background flow from host 2 into host 1 from 6 us
/// crosses leaf 0. Collectives in the order of `groups`.
fn concurrent(name: &str, groups: &[&str]) -> Case {
    let all = groups.join(",");
    let mut workload = compute("c", 5, &all, &[]);
    for (i, g) in groups.iter().enumerate() {
        workload += &collective(&format!("g{i}"), "allreduce", "256KiB", g, &["c"]);
    }
    Case::run(name, &workload, &background(2, 1, 6, 100_000))
}

#[test]
fn no_sandbox_for_a_new_key_the_guard_refuses_at_its_least_span() {
    // The background flow starts 1 us into the all-reduce on leaf 0, less
    // than its flows' payload at line rate: no record could be replayed.
    let case = concurrent("least-span", &["0,1"]);
    let g = case.window(0);
    let started = flow_outcomes(&case.off)
        .iter()
        .find(|r| r[13] == "null")
        .map(|r| num(&r[4]))
        .expect("the background flow");
    assert!(g.0 < started && started < g.1, "{started} within {g:?}");
    assert_eq!(case.replayed(), [false]);
    // Simulated packet by packet, a miss, and no sandbox made for it.
    assert_eq!(case.counts(), (0, 1, 0));
    case.assert_flows_as_simulated();
}

#[test]
fn the_first_domain_of_a_key_not_refused_makes_its_record() {
    // Three concurrent domains of one key; the first (leaf 0) is refused,
    // the second (leaf 2) is simulated in the sandbox, and the third
    // (leaf 3) replays its record in the same round.
    let case = concurrent("first-not-refused", &["0,1", "4,5", "6,7"]);
    assert_eq!(case.replayed(), [false, true, true]);
    let (hits, misses, sandbox) = case.counts();
    assert_eq!((hits, misses), (1, 2));
    assert!(sandbox > 0);
    case.assert_flows_as_simulated();
    // The decisions are the same on two threads.
    let two = run(&case.dir, "on2", "on", "2");
    assert_eq!(flow_outcomes(&two), flow_outcomes(&case.on));
    assert_eq!(
        common::run_json(&two)["fast_forward"],
        common::run_json(&case.on)["fast_forward"]
    );
}
