//! Property tests over the readers of a user's files and values: htsim
//! connection matrices, TOML workload files (parsed and built into a task
//! DAG), Chakra execution traces (bytes), SimAI topology files, rank lists, sizes, bandwidths, latencies and
//! user times. Valid samples are mutated (numbers and tokens replaced by
//! values that break parsers, lines dropped or repeated, bytes changed) and
//! arbitrary text is fed too: a reader returns a value or a one-line error,
//! never panics, and what it returns keeps its invariants.
//!
//! The black-box campaign over the whole binary is `runs/tests/it/fuzz.rs`.

use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::traffic::parse_connection_matrix;
use netsim_models::workload::file::{self, parse_size};
use netsim_models::workload::groups::parse_rank_list;
use netsim_models::workload::trace::chakra;
use netsim_models::workload::{self as workload};
use netsim_topo::units::{parse_bandwidth_bps, parse_gbps, parse_latency_ps, parse_ns};
use netsim_topo::{build, parse_simai, StarParams, TopoSpec};
use proptest::prelude::*;
use proptest::sample::{select, Index};

/// Values that break parsers.
const TOKENS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "16",
    "255",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "1e30",
    "-1e30",
    "NaN",
    "inf",
    "0.5",
    "",
    "x",
    "->",
    "0-4294967295",
    "1,1",
    "\"",
    "[",
    "]",
    "[[phase]]",
    "=",
    "#",
    "\u{e9}",
    "size",
    "start",
    "Nodes",
    "Connections",
    "ms",
    "Gbps",
    "0.0000001ms",
    "num_ranks",
    "rank",
    "{",
    "}",
    ":",
    "requires",
    "irequires",
    "/*",
    "//",
];

/// One edit: where, what kind, and a token to use.
type Edit = (Index, u8, &'static str);

pub(crate) fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec((any::<Index>(), 0u8..6, select(TOKENS)), 0..6)
}

/// `text` with `edits` applied: a number replaced, a token inserted, a
/// line dropped or repeated, a byte changed, the text cut short.
pub(crate) fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut out: Vec<u8> = text.as_bytes().to_vec();
    for (at, kind, token) in edits {
        let len = out.len();
        let i = at.index(len + 1);
        match kind {
            0 => {
                let (mut a, mut b) = (i, i);
                while a > 0 && out[a - 1].is_ascii_digit() {
                    a -= 1;
                }
                while b < len && out[b].is_ascii_digit() {
                    b += 1;
                }
                out.splice(a..b, token.bytes());
            }
            1 => {
                out.splice(i..i, token.bytes());
            }
            2 | 3 => {
                let mut lines: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
                let l = at.index(lines.len());
                if *kind == 2 {
                    lines.remove(l);
                } else {
                    lines.insert(l, lines[l]);
                }
                out = lines.join(&b'\n');
            }
            4 if i < len => out[i] = b' ' + (i % 95) as u8,
            _ => out.truncate(i),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

const MATRIX: &str = "Nodes 8\nConnections 3\n0->1 id 1 start 0 size 65536\n\
                      2->3 start 1.5 size 100000\n7->6 size 1\n";

const WORKLOAD: &str = "iterations = 2\nhost_overhead_ns = 1000\n\
    [parallelism]\ntp = 2\n\
    [[phase]]\nname = \"fwd\"\ncompute_ns = 2000\n\
    [[phase]]\nname = \"ar\"\ncollective = \"allreduce\"\nalgo = \"ring\"\nsize = \"64KiB\"\ngroup = \"dp\"\n\
    [[phase]]\nname = \"a2a\"\ncollective = \"alltoall\"\nsize = \"1MiB\"\ngroup = \"0-7\"\nafter = [\"ar\"]\n";

/// Rank files of Chakra traces: ASTRA-sim's microbenchmarks and one with
/// process groups, dependencies, metadata and host-side calls.
fn chakra_samples() -> Vec<Vec<u8>> {
    use crate::chakra::{file, A, N, NODE};
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../runs/tests/data/chakra");
    let mut samples: Vec<Vec<u8>> = ["all_reduce", "all_gather", "all_to_all", "reduce_scatter"]
        .iter()
        .map(|c| std::fs::read(data.join(format!("{c}/4npus_1MB/{c}.1.et"))).unwrap())
        .collect();
    let pg = r#"['[{"pg_name": "1", "ranks": [0]}]']"#;
    let coll = [
        ("comm_type", A::I(5)),
        ("comm_size", A::I(64)),
        ("pg_name", A::S("1")),
    ];
    samples.push(file(&[
        N {
            id: 1,
            ty: 1,
            inputs: pg,
            ..NODE
        },
        N {
            id: 2,
            micros: 7,
            data: &[1],
            ctrl: &[9],
            ..NODE
        },
        N {
            id: 3,
            ty: 7,
            data: &[2, 4],
            attrs: &coll,
            ..NODE
        },
        N {
            id: 4,
            ty: 7,
            micros: 2,
            attrs: &[("is_cpu_op", A::B(true))],
            ..NODE
        },
    ]));
    samples
}

/// `bytes` with `edits` applied: a byte set, inserted or removed, or the
/// bytes cut short.
fn mutate_bytes(bytes: &[u8], edits: &[(Index, u8, u8)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (at, kind, value) in edits {
        let i = at.index(out.len() + 1);
        match kind {
            0 if i < out.len() => out[i] = *value,
            1 => out.insert(i, *value),
            2 if i < out.len() => {
                out.remove(i);
            }
            _ => out.truncate(i),
        }
    }
    out
}

fn star(hosts: u32) -> netsim_topo::Topology {
    build(&TopoSpec::Star(StarParams {
        hosts,
        ..StarParams::default()
    }))
    .unwrap()
}

pub(crate) fn one_line(message: &str) -> Result<(), TestCaseError> {
    prop_assert!(!message.contains('\n'), "a multi-line error: {message}");
    Ok(())
}

proptest! {
    // 256 cases each unless PROPTEST_CASES says otherwise; inputs found are
    // kept as the regression tests below, not in files.
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn connection_matrices(edits in edits(), hosts in 1u32..16) {
        let text = mutate(MATRIX, &edits);
        match parse_connection_matrix(&text, "cm.txt", hosts) {
            Ok(flows) => {
                prop_assert!(!flows.is_empty());
                for f in &flows {
                    prop_assert!(f.src < hosts && f.dst < hosts && f.src != f.dst);
                    prop_assert!(f.size_bytes > 0 && f.start != SimTime::MAX);
                }
            }
            Err(e) => one_line(&e.to_string())?,
        }
    }

    #[test]
    fn arbitrary_connection_matrices(text in "\\PC{0,200}") {
        if let Err(e) = parse_connection_matrix(&text, "cm.txt", 8) {
            one_line(&e.to_string())?;
        }
    }

    #[test]
    fn workload_files_parse_and_build(edits in edits()) {
        let text = mutate(WORKLOAD, &edits);
        let topo = star(8);
        match file::parse(&text, "w.toml", topo.host_count()) {
            Ok(spec) => match workload::build(&spec, &topo, &NetConfig::default()) {
                Ok(w) => {
                    for f in &w.flows {
                        prop_assert!(f.src < 8 && f.dst < topo.node_count() && f.size_bytes > 0);
                    }
                }
                Err(e) => one_line(&e.to_string())?,
            },
            Err(e) => one_line(&e.to_string())?,
        }
    }

    #[test]
    fn chakra_traces(sample in 0usize..5, edits in prop::collection::vec((any::<Index>(), 0u8..4, any::<u8>()), 0..6)) {
        let bytes = mutate_bytes(&chakra_samples()[sample], &edits);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.0.et");
        std::fs::write(&path, bytes).unwrap();
        match chakra::read(&[path]) {
            Ok(trace) => {
                prop_assert_eq!(trace.ranks(), 1);
                prop_assert!(trace.deps.iter().all(|d| (d.op as usize) < trace.ops.len()));
                prop_assert!(trace.groups.iter().all(|g| g == &[0]));
            }
            Err(e) => one_line(&e.to_string())?,
        }
    }

    #[test]
    fn simai_topology_files(edits in edits()) {
        let seed = netsim_topo::to_simai_string(&star(4));
        let text = mutate(&seed, &edits);
        match parse_simai(&text, "topo.txt") {
            Ok(topo) => prop_assert!(topo.host_count() <= topo.node_count()),
            Err(e) => one_line(&e.to_string())?,
        }
    }

    #[test]
    fn rank_lists_are_bounded(text in "[0-9,\\- ]{0,40}|(0|1|4294967295|67108863|67108864)-(0|3|4294967295|67108864)") {
        match parse_rank_list(&text) {
            Ok(ranks) => {
                prop_assert!(ranks.len() as u64 <= u64::from(netsim_models::workload::groups::MAX_RANKS));
                prop_assert!(ranks.iter().all(|&r| r < netsim_models::workload::groups::MAX_RANKS));
            }
            Err(e) => one_line(&e.to_string())?,
        }
    }

    #[test]
    fn sizes_and_units(text in "\\PC{0,30}|[0-9.e+-]{1,25}(B|KiB|MiB|GiB|KB|GB|ms|us|ns|ps|s|Gbps|Mbps)?") {
        let _ = parse_size(&text);
        let _ = parse_bandwidth_bps(&text);
        let _ = parse_gbps(&text);
        if let Ok(ps) = parse_latency_ps(&text) {
            prop_assert!((1..=netsim_topo::units::MAX_LATENCY_PS).contains(&ps));
        }
        if let Ok(ps) = parse_ns(&text) {
            prop_assert!((1..=netsim_topo::units::MAX_LATENCY_PS).contains(&ps));
        }
    }

    #[test]
    fn user_times_fit_or_are_errors(value in any::<f64>(), unit in select(&[1.0, 1e3, 1e6][..])) {
        match SimTime::try_from_f64(value, unit, "us") {
            Ok(t) => {
                prop_assert!(t != SimTime::MAX);
                prop_assert!(((t.as_ps() as f64) - (value * unit).round()).abs() <= (value * unit).abs() * 1e-15 + 1.0);
            }
            Err(e) => one_line(&e.to_string())?,
        }
    }

    #[test]
    fn integer_times_fit_or_are_errors(value in any::<u64>()) {
        if let Ok(t) = SimTime::try_from_ns(value) {
            prop_assert_eq!(t.as_ns(), value);
        }
        if let Ok(t) = SimTime::try_from_us(value) {
            prop_assert_eq!(t.as_ps() / 1_000_000, value);
        }
    }
}

/// Found by `workload_files_parse_and_build`: a TOML syntax error in a
/// workload file took two lines.
#[test]
fn a_workload_file_syntax_error_is_one_line() {
    let e = file::parse("[[phase]\nname = \"x\"\n", "w.toml", 8).unwrap_err();
    assert!(!e.to_string().contains('\n'), "{e}");
    assert!(e.to_string().starts_with("w.toml:1:"), "{e}");
}
