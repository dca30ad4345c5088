//! Faults end to end: failed links and switches are routed around, lost
//! packets are recovered, unreachable flows give up with a reason, lossy
//! links, the same tables on 1 and 2 shards, and a closed form.

use std::path::Path;

use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::Array;

use crate::common::tables::{batches, column, strings};
use crate::common::{netsim, run_json, scratch};

/// Runs `line` into `out` (quiet), expecting exit 0; returns run.json.
fn run(out: &Path, line: &str) -> serde_json::Value {
    let all = format!("{line} --out {} --quiet", out.display());
    let o = netsim(&all);
    assert!(
        o.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    run_json(out)
}

/// Every row of a table as text, sorted: the table's content whatever the
/// shards that wrote its parts.
fn rows(dir: &Path) -> Vec<String> {
    let mut rows = Vec::new();
    for b in batches(dir) {
        for i in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| format!("{:?}", c.slice(i, 1)))
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

/// One flow's row: (src, dst, fct_ns, ideal_fct_ns, reason, retransmitted).
type Flow = (u32, u32, Option<u64>, u64, Option<String>, u64);

fn flows(out: &Path) -> Vec<Flow> {
    let mut v = Vec::new();
    for b in batches(&out.join("flows")) {
        let u32s = |n: &str| column::<UInt32Type>(&b, n);
        let u64s = |n: &str| column::<UInt64Type>(&b, n);
        let (src, dst, fct, ideal, retx) = (
            u32s("src"),
            u32s("dst"),
            u64s("fct_ns"),
            u64s("ideal_fct_ns"),
            u64s("retransmitted_pkts"),
        );
        let reason = strings(&b, "reason");
        for i in 0..b.num_rows() {
            v.push((
                src.value(i),
                dst.value(i),
                fct.is_valid(i).then(|| fct.value(i)),
                ideal.value(i),
                reason.is_valid(i).then(|| reason.value(i).to_string()),
                retx.value(i),
            ));
        }
    }
    v.sort();
    v
}

/// Bytes the links between `a` and `b` (either direction) carried in the
/// intervals ending after `after_ns`.
fn link_bytes(out: &Path, touches: impl Fn(u32, u32) -> bool, after_ns: u64) -> u64 {
    let mut total = 0;
    for b in batches(&out.join("links")) {
        let u32s = |n: &str| column::<UInt32Type>(&b, n);
        let u64s = |n: &str| column::<UInt64Type>(&b, n);
        let (src, dst, time, bytes) = (u32s("src"), u32s("dst"), u64s("time_ns"), u64s("tx_bytes"));
        for i in 0..b.num_rows() {
            if time.value(i) > after_ns && touches(src.value(i), dst.value(i)) {
                total += bytes.value(i);
            }
        }
    }
    total
}

#[test]
fn an_agg_core_link_failing_at_50us_loses_packets_every_flow_finishes_same_on_1_and_2_shards() {
    let dir = scratch("aggcore");
    // k = 4: hosts 0..16, edges 16..24, aggregations 24..32, cores 32..36.
    let args = |shards: &'static str| {
        format!(
            "--topo fat-tree --k 4 --fault link-down:24-32@50us --shards {shards} --threads \
            {shards}"
        )
    };
    let (one, two) = (dir.join("one"), dir.join("two"));
    let j1 = run(&one, &args("1"));
    let j2 = run(&two, &args("2"));
    for j in [&j1, &j2] {
        assert_eq!(j["flows_finished"], 16, "{j}");
        assert!(
            j["dropped_pkts"].as_u64().unwrap() > 0,
            "nothing was lost: {j}"
        );
        assert!(j["retransmitted_pkts"].as_u64().unwrap() > 0, "{j}");
        assert_eq!(j["rows"]["faults"], 1);
    }
    for table in ["flows", "faults", "links", "queues"] {
        assert_eq!(rows(&one.join(table)), rows(&two.join(table)), "{table}");
    }
    let fs = flows(&one);
    assert!(fs.iter().all(|f| f.2.is_some() && f.4.is_none()), "{fs:?}");
    // The dead link carries nothing once it is dead (samples every 100 us).
    let dead = |s, d| (s, d) == (24, 32) || (s, d) == (32, 24);
    assert_eq!(link_bytes(&one, dead, 100_000), 0);
    let faults = rows(&one.join("faults"));
    assert_eq!(faults.len(), 1);
    assert!(
        faults[0].contains("50000")
            && faults[0].contains("link-down")
            && faults[0].contains("24-32"),
        "{faults:?}"
    );
}

/// HPN, 32 GPUs: host 0 (GPU) is dual-homed to ToRs 36 and 44.
fn hpn_allreduce(out: &Path, fault: &str) -> serde_json::Value {
    run(
        out,
        &format!(
            "--topo hpn --gpus 32 --workload allreduce --size 67108864 --algo ring --fault {fault}"
        ),
    )
}

#[test]
fn a_64_mib_ring_allreduce_on_hpn_survives_a_tor_failure() {
    let dir = scratch("hpn");
    // At 20 us (the intra-server phase): the GPUs send through their other ToR.
    let early = dir.join("early");
    let j = hpn_allreduce(&early, "node-down:44@20us");
    assert_eq!(j["collectives_finished"], 1, "{j}");
    assert_eq!(j["flows_finished"], j["flows"], "{j}");
    let tor = |t: u32| move |s: u32, d: u32| s == t || d == t;
    assert_eq!(
        link_bytes(&early, tor(44), 0),
        0,
        "the dead ToR carried traffic"
    );
    assert!(link_bytes(&early, tor(36), 0) > 0);
    // At 200 us, while the ToRs carry the inter-server phase: packets are
    // lost and recovered.
    let mid = dir.join("mid");
    let j = hpn_allreduce(&mid, "node-down:44@200us");
    assert_eq!(j["collectives_finished"], 1, "{j}");
    assert_eq!(j["flows_finished"], j["flows"], "{j}");
    assert!(j["dropped_pkts"].as_u64().unwrap() > 0, "{j}");
    assert!(j["retransmitted_pkts"].as_u64().unwrap() > 0, "{j}");
}

#[test]
fn a_host_cut_off_leaves_its_flows_unfinished_with_a_reason_and_the_run_ends() {
    let out = scratch("cutoff");
    // Host 0's only link fails at 20 us.
    let j = run(&out, "--topo fat-tree --k 4 --fault link-down:0-16@20us");
    let fs = flows(&out);
    for f in &fs {
        if f.0 == 0 || f.1 == 0 {
            assert_eq!((f.2, f.4.as_deref()), (None, Some("retry-limit")), "{f:?}");
        } else {
            assert!(f.2.is_some() && f.4.is_none(), "{f:?}");
        }
    }
    assert_eq!(fs.iter().filter(|f| f.2.is_none()).count(), 2);
    assert_eq!(j["flows_finished"], 14);
    // It ended by itself: the queue pairs gave up after the default 7
    // retries of the default 500 us timeout (plus the first, unretried).
    let end_ns = j["sim_end_ns"].as_u64().unwrap();
    assert!(end_ns <= 20_000 + 9 * 500_000, "{end_ns}");
}

#[test]
fn lossy_links_without_pfc_lose_packets_that_go_back_n_recovers() {
    let dir = scratch("lossy");
    let args = |shards: &'static str| {
        format!(
            "--topo fat-tree --k 4 --pfc off --link-error-rate 1e-4 --flow-size 4000000 \
            --shards {shards} --threads {shards}"
        )
    };
    let (one, two) = (dir.join("one"), dir.join("two"));
    let j = run(&one, &args("1"));
    run(&two, &args("2"));
    assert_eq!(j["flows_finished"], 16, "{j}");
    assert!(j["dropped_pkts"].as_u64().unwrap() > 0, "{j}");
    let retransmitted: u64 = flows(&one).iter().map(|f| f.5).sum();
    assert!(retransmitted > 0);
    assert_eq!(j["retransmitted_pkts"], retransmitted);
    // Each link draws from its own stream: the same losses on any shard count.
    assert_eq!(rows(&one.join("flows")), rows(&two.join("flows")));
}

#[test]
fn a_dead_uplink_halves_a_leaf_and_the_last_flow_ends_at_the_closed_form() {
    // Leaf-spine (k = 4, 2 tiers): hosts 0..8, leaves 8..12 (two hosts
    // each), spines 12, 13. Hosts 0 and 1 send 4 MB to other leaves; with
    // leaf 8's uplink to spine 13 dead from the start, both flows share the
    // other uplink, so the last ends at ideal + wire / B: the other flow's
    // wire bytes serialise first.
    let dir = scratch("closed");
    let tm = dir.join("tm.txt");
    std::fs::write(
        &tm,
        "Nodes 8\nConnections 2\n0->2 start 0 size 4000000\n1->4 start 0 size 4000000\n",
    )
    .unwrap();
    let traffic = format!("tm:{}", tm.display());
    let out = dir.join("out");
    run(
        &out,
        &format!(
            "--topo fat-tree --k 4 --tiers 2 --traffic {traffic} --cc none --fault \
            link-down:8-13@0us --reroute-us 0"
        ),
    );
    let fs = flows(&out);
    let last = fs.iter().map(|f| f.2.unwrap()).max().unwrap();
    let ideal = fs[0].3;
    // 977 packets of 62 header bytes each over 100 Gb/s.
    let wire_bytes = 4_000_000 + 4_000_000u64.div_ceil(4096) * 62;
    let expected = ideal + wire_bytes * 8 / 100;
    let error = (last as f64 - expected as f64).abs() / expected as f64;
    assert!(error < 0.01, "last {last} ns, closed form {expected} ns");
}

#[test]
fn faults_from_a_scenario_and_a_simai_file_are_the_same_as_flags() {
    let dir = scratch("sources");
    std::fs::write(
        dir.join("s.toml"),
        "topo = \"fat-tree\"\nk = 4\n\n[[fault]]\nkind = \"link-down\"\ntarget = \"24-32\"\ntime = \"50us\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("SimAI.conf"), "ENABLE_QCN 1\nLINK_DOWN 50 24 32\n").unwrap();
    let (a, b, c) = (dir.join("a"), dir.join("b"), dir.join("c"));
    let conf = dir.join("s.toml");
    run(&a, &format!("--config {}", conf.display()));
    let faults = dir.join("SimAI.conf");
    run(
        &b,
        &format!("--topo fat-tree --k 4 --faults {}", faults.display()),
    );
    run(&c, "--topo fat-tree --k 4 --fault link-down:24-32@50us");
    for table in ["flows", "faults"] {
        assert_eq!(rows(&a.join(table)), rows(&c.join(table)), "{table}");
        assert_eq!(rows(&b.join(table)), rows(&c.join(table)), "{table}");
    }
}

#[test]
fn a_simai_files_error_rate_column_loses_packets_as_the_flag_does() {
    let dir = scratch("error-column");
    let (lossless, lossy) = (dir.join("lossless.txt"), dir.join("lossy.txt"));
    let o = netsim(format!(
        "topo fat-tree --k 4 --format simai -o {}",
        lossless.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Every link line (src dst bandwidth latency error_rate) loses 1e-4.
    let text = std::fs::read_to_string(&lossless).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for line in lines.iter_mut().skip(2) {
        let cut = line.rfind(' ').unwrap();
        line.replace_range(cut.., " 0.0001");
    }
    std::fs::write(&lossy, lines.join("\n") + "\n").unwrap();
    let topo = |file: &Path| format!("simai:{}", file.display());
    let args = |topo: &str, shards: &str, flag: &str| {
        let mut a = format!(
            "--topo {topo} --pfc off --flow-size 4000000 --shards {shards} --threads {shards}"
        );
        if !flag.is_empty() {
            a.push_str(&format!(" --link-error-rate {flag}"));
        }
        a
    };
    let (column, column2, flag) = (dir.join("column"), dir.join("column2"), dir.join("flag"));
    let j = run(&column, &args(&topo(&lossy), "1", ""));
    run(&column2, &args(&topo(&lossy), "2", ""));
    run(&flag, &args(&topo(&lossless), "1", "1e-4"));
    assert_eq!(j["flows_finished"], 16, "{j}");
    assert!(j["dropped_pkts"].as_u64().unwrap() > 0, "{j}");
    assert!(j["retransmitted_pkts"].as_u64().unwrap() > 0, "{j}");
    // The column is the flag, link by link, and shards do not change it.
    assert_eq!(rows(&column.join("flows")), rows(&flag.join("flows")));
    assert_eq!(rows(&column.join("flows")), rows(&column2.join("flows")));
    // The flow level, which loses nothing, refuses a lossy file.
    let o = netsim(format!("--topo {} --fidelity flow --quiet", topo(&lossy)));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error_rate"));
    // The topology writer keeps the column.
    let again = dir.join("again.txt");
    let o = netsim(format!(
        "topo {} --format simai -o {}",
        topo(&lossy),
        again.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        std::fs::read_to_string(&lossy).unwrap()
    );
}
