//! The scenarios the htsim comparisons run (matrix, flags, fabric), how
//! one netsim run of a scenario is reduced to its figures, htsim_uec's
//! figures read from the data files, and the median over seeds.

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::Array;
use std::path::Path;

use crate::common::tables::batches;
use crate::common::{run_json, runs_file, scratch, words};

/// The statistics of one run (FCT in microseconds), or their medians.
#[derive(Clone, Copy, Debug)]
pub(super) struct Figures {
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) max: f64,
    pub(super) min: f64,
    pub(super) trim: f64,
    /// SACKs the senders received (htsim: ACKs).
    pub(super) acks: f64,
    /// Packets resent (htsim: `Rtx`).
    pub(super) retx: f64,
}

/// The `p` quantile as the measurement took it: the sorted value at
/// index `p x n` (the upper median for an even count).
fn quantile(sorted: &[f64], p: f64) -> f64 {
    sorted[((p * sorted.len() as f64) as usize).min(sorted.len() - 1)]
}

/// The middle value, or the mean of the middle two.
pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The median over seeds 1-3 of one figure of netsim's runs of `sc`.
pub(super) fn netsim_median(sc: Scenario, lb: &str, get: fn(&Figures) -> f64) -> f64 {
    median((1..=3).map(|s| get(&netsim_figures(sc, lb, s))).collect())
}

/// One scenario of the data file: its name there, its matrix, and what
/// netsim adds to the command.
#[derive(Clone, Copy)]
pub(super) struct Scenario {
    pub(super) name: &'static str,
    pub(super) matrix: &'static str,
    pub(super) extra: &'static str,
    /// The fat-tree's `k`: 8 (128 hosts) or 32 (uet-htsim's 8,192).
    pub(super) k: u32,
}

pub(super) const INC8: Scenario = Scenario {
    name: "inc8",
    matrix: "inc8.cm",
    extra: "",
    k: 8,
};
pub(super) const INC32: Scenario = Scenario {
    name: "inc32",
    matrix: "inc32.cm",
    extra: "",
    k: 8,
};
pub(super) const PERM: Scenario = Scenario {
    name: "perm",
    matrix: "perm.cm",
    extra: "",
    k: 8,
};
/// htsim's `-failed 1`: core 0 -> pod 0's first aggregation switch at a
/// quarter of the rate (node 192 is netsim's first core, 160 that switch).
pub(super) const PERM_FAILED: Scenario = Scenario {
    name: "perm-failed",
    matrix: "perm.cm",
    extra: "--fault link-rate:192->160@0ns=25",
    k: 8,
};

/// Runs netsim with the profile on `sc` (its matrix, fabric and extra
/// flags, then `flags`) with load balancer `lb` and seed `seed`, writing
/// its tables under `out`; fails the test unless it exits 0.
pub(super) fn run_netsim(sc: Scenario, lb: &str, seed: u32, flags: &str, out: &Path) {
    let matrix = runs_file(&format!("tests/data/uet-htsim/{}", sc.matrix));
    let line = format!(
        "run --topo fat-tree --k {} --link-gbps 100 --link-latency-ns 1000 --traffic tm:{matrix} \
         --transport uec --uec-profile uet-htsim --uec-lb {lb} --seed {seed} --quiet {} {flags}",
        sc.k, sc.extra
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_netsim"))
        .args(words(&line))
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

pub(super) fn netsim_figures(sc: Scenario, lb: &str, seed: u32) -> Figures {
    // The flags name the directory too: one scenario runs with several.
    let flags: String = sc
        .extra
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let out = scratch(&format!("{}-{lb}-{seed}-{flags}", sc.name));
    run_netsim(sc, lb, seed, "--sample-ns 0", &out);
    let network = &run_json(&out)["network"];
    assert_eq!(network["uec_profile"], "uet-htsim");
    // htsim_uec's own figures for this fabric: a 43-packet queue, its
    // 100.656 us RTO and 14.02 us network RTT.
    assert_eq!(network["port_buffer_bytes"], 43 * 4150);
    assert_eq!(network["rto_ns"], 100_656.0);
    assert_eq!(network["uec"]["fabric_rtt_ns"], 14_022.72);
    // htsim_uec's path_entropy_size, and its failed link's smaller queue.
    assert_eq!(network["uec"]["entropies"], 64);
    assert_eq!(network["degraded_queue_scales"], true);
    let (mut fcts, mut trim, mut acks, mut retx) = (Vec::new(), 0u64, 0u64, 0u64);
    for b in batches(&out.join("flows")) {
        let col = |n| b.column_by_name(n).unwrap();
        let fct = col("fct_ns").as_primitive::<UInt64Type>();
        assert_eq!(fct.null_count(), 0, "every flow finishes");
        fcts.extend(fct.values().iter().map(|&ns| ns as f64 / 1e3));
        trim += col("trimmed_pkts")
            .as_primitive::<UInt64Type>()
            .values()
            .iter()
            .sum::<u64>();
        acks += col("sacks")
            .as_primitive::<UInt64Type>()
            .values()
            .iter()
            .sum::<u64>();
        retx += col("retransmitted_pkts")
            .as_primitive::<UInt64Type>()
            .values()
            .iter()
            .sum::<u64>();
    }
    fcts.sort_by(f64::total_cmp);
    Figures {
        p50: quantile(&fcts, 0.5),
        p99: quantile(&fcts, 0.99),
        max: fcts[fcts.len() - 1],
        min: fcts[0],
        trim: trim as f64,
        acks: acks as f64,
        retx: retx as f64,
    }
}

/// htsim_uec's medians for scenario `name` with load balancer `lb`, from
/// data file `file` (under `tests/data/uet-htsim`).
pub(super) fn htsim_figures(file: &str, name: &str, lb: &str) -> Figures {
    let text = std::fs::read_to_string(runs_file(&format!("tests/data/uet-htsim/{file}"))).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let row = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scenario"] == name && r["lb"] == lb)
        .unwrap_or_else(|| panic!("no htsim figures for {name} {lb}"));
    let h = &row["htsim"];
    let get = |k: &str| h[k].as_f64().unwrap();
    Figures {
        p50: get("p50"),
        p99: get("p99"),
        max: get("max"),
        min: get("min"),
        trim: get("trim"),
        acks: get("acks"),
        retx: h["retx"].as_f64().unwrap_or(f64::NAN),
    }
}

/// 127 -> 1 x 1 MB on the k=8 fabric: at ~1 packet per 40 us per sender, a
/// flow can go an RTO with NACKs alone (its packet trimmed again and
/// again). htsim's timer is per packet, so only NACKs resend: its `Rtx`
/// equals its NACKs. A per-flow timer then resent the fresh resend as well
/// (netsim resent more than was trimmed, as at 128 senders on 8,192 hosts).
pub(super) const INC127: Scenario = Scenario {
    name: "inc127",
    matrix: "inc127.cm",
    extra: "",
    k: 8,
};

/// uet-htsim's own 8,192-host random incast, 32 x 2 MB
/// (`connection_matrices/incast/gen_random_incast_8192n_32c_0us_2Ms.cm`
/// of the snapshot, beside the data file), on netsim's k=32 fat-tree
/// (8,192 hosts, the same six-hop diameter, queue and RTO as k=8).
pub(super) const INC32_8K: Scenario = Scenario {
    name: "gen_random_incast_8192n_32c_0us_2Ms",
    matrix: "gen_random_incast_8192n_32c_0us_2Ms.cm",
    extra: "",
    k: 32,
};

/// The permutation on two planes (`--planes 2`; htsim_uec `-planes 2`,
/// `k8-128-planes.json`): a flow sprays over its host's two ports. htsim's
/// NIC has one link speed per port and NSCC's window follows it, so a
/// flow keeps at most 1.5 BDPs of one port in flight (about 123 Gb/s over
/// the two). With the ports' combined rate (`--uec-plane-window sum`,
/// netsim's profile) netsim's flows finished 19% earlier and trimmed
/// 108-266 packets where htsim trims none.
pub(super) const PERM_PLANES: Scenario = Scenario {
    name: "perm-planes",
    matrix: "perm.cm",
    extra: "--planes 2",
    k: 8,
};

/// The incasts on two planes (`k8-128-planes-incasts.json`, htsim_uec
/// `-planes 2`): the receiver's two downlinks are the bottleneck. htsim's
/// NIC offers a packet to the free port after the one it used last; when
/// netsim offered the ports lowest first, a window-bound flow left almost
/// only by plane 0, and the 8->1 p50 was 63% late, the 32->1 trims +84%.
pub(super) const INC8_PLANES: Scenario = Scenario {
    name: "inc8-planes",
    matrix: "inc8.cm",
    extra: "--planes 2",
    k: 8,
};
pub(super) const INC32_PLANES: Scenario = Scenario {
    name: "inc32-planes",
    matrix: "inc32.cm",
    extra: "--planes 2",
    k: 8,
};
