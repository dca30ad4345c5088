//! The Chakra execution trace reader on real inputs (ASTRA-sim's
//! microbenchmarks, Chakra's feeder test trace, in `runs/tests/data/chakra/`)
//! and on traces written here node by node: what each node becomes, process
//! groups, dependencies, and one-line errors naming file, record, node and
//! field for corrupt or unmodelled input.

use netsim_engine::SimTime;
use netsim_models::workload::spec::CollectiveOp;
use netsim_models::workload::trace::chakra;
use netsim_models::workload::trace::{Dep, Op, OpKind, Trace};
use std::path::{Path, PathBuf};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runs/tests/data/chakra")
}

#[test]
fn astra_sim_microbenchmarks_are_one_collective_on_every_rank() {
    let mib = 1 << 20;
    for (dir, op) in [
        ("all_reduce", CollectiveOp::AllReduce),
        ("all_gather", CollectiveOp::AllGather),
        ("all_to_all", CollectiveOp::AllToAll),
        ("reduce_scatter", CollectiveOp::ReduceScatter),
    ] {
        for n in [4u32, 8, 16] {
            let set = data().join(format!("{dir}/{n}npus_1MB"));
            let files = chakra::files(&set).unwrap().unwrap();
            assert_eq!(files.len(), n as usize);
            assert_eq!(chakra::files(&set.join(dir)).unwrap().unwrap(), files);
            let (trace, notes) = chakra::read_noted(&files).unwrap();
            assert!(notes.is_empty(), "{notes:?}");
            // ASTRA-sim's all-gather size is each rank's input; netsim's the output.
            let bytes = if op == CollectiveOp::AllGather {
                u64::from(n) * mib
            } else {
                mib
            };
            let kind = OpKind::Collective {
                op,
                bytes,
                group: 0,
            };
            let ops: Vec<Op> = (0..n)
                .map(|r| Op {
                    kind,
                    label: u64::from(r),
                })
                .collect();
            assert_eq!(trace.ranks(), n);
            assert_eq!(trace.ops, ops, "{dir} {n}");
            assert_eq!(trace.groups, vec![(0..n).collect::<Vec<_>>()]);
            assert!(trace.deps.is_empty());
            assert_eq!(trace.sources[1], files[1].display().to_string());
        }
    }
}

#[test]
fn a_path_that_is_no_chakra_trace_is_none() {
    assert_eq!(chakra::files(&data().join("all_reduce")).unwrap(), None);
    assert_eq!(
        chakra::files(&data().join("all_reduce/4npus_1MB/all_gather")).unwrap(),
        None
    );
    assert_eq!(chakra::files(&data().join("README.md")).unwrap(), None);
}

/// Chakra's own feeder test trace: one rank of a PyTorch run, unpacked
/// with `tar` where there is one.
#[test]
fn chakras_feeder_test_trace_reads() {
    let dir = tempfile::tempdir().unwrap();
    let unpacked = std::process::Command::new("tar")
        .arg("xzf")
        .arg(data().join("feeder_tests_trace.tar.gz"))
        .arg("-C")
        .arg(dir.path())
        .status();
    if !unpacked.is_ok_and(|s| s.success()) {
        eprintln!("no tar: Chakra's feeder test trace is not read");
        return;
    }
    let files = chakra::files(&dir.path().join("tests/data"))
        .unwrap()
        .unwrap();
    let (trace, notes) = chakra::read_noted(&files).unwrap();
    assert_eq!(trace.ranks(), 1);
    assert_eq!(trace.ops.len(), 3664);
    let collectives: Vec<_> = trace
        .ops
        .iter()
        .filter_map(|o| match o.kind {
            OpKind::Collective { op, bytes, group } => Some((o.label, op, bytes, group)),
            _ => None,
        })
        .collect();
    assert_eq!(collectives.len(), 7);
    assert_eq!(collectives[0], (435, CollectiveOp::Broadcast, 212480, 0));
    assert_eq!(collectives[2], (3256, CollectiveOp::AllReduce, 8196000, 0));
    assert_eq!(trace.groups, vec![vec![0]]);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(
        notes[0].contains("14 communication nodes with is_cpu_op"),
        "{notes:?}"
    );
    assert!(notes[1].contains("ctrl_deps are ignored"), "{notes:?}");
    assert!(notes[2].contains("2 BROADCAST"), "{notes:?}");
    // Node 217 waits on node 216 (its data dependency; its control
    // dependency on node 3, not in the file, is ignored).
    let op = trace.ops.iter().position(|o| o.label == 217).unwrap() as u32;
    let on = trace.ops.iter().position(|o| o.label == 216).unwrap() as u32;
    assert_eq!(
        trace.op_deps(op),
        &[Dep {
            op: on,
            on_start: false
        }]
    );
}

// --- Traces written here -------------------------------------------------

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, number: u64, wire: u64) {
    varint(out, number << 3 | wire);
}

fn bytes_field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
    key(out, number, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// An attribute's value: int64 (field 9), string (29) or bool (27).
pub(crate) enum A<'a> {
    I(i64),
    S(&'a str),
    B(bool),
}

/// A `Node`: id, type, ctrl and data dependencies, duration, attributes.
pub(crate) struct N<'a> {
    pub(crate) id: u64,
    pub(crate) ty: u64,
    pub(crate) ctrl: &'a [u64],
    pub(crate) data: &'a [u64],
    pub(crate) micros: u64,
    pub(crate) attrs: &'a [(&'a str, A<'a>)],
    pub(crate) inputs: &'a str,
}

pub(crate) const NODE: N = N {
    id: 0,
    ty: 4,
    ctrl: &[],
    data: &[],
    micros: 0,
    attrs: &[],
    inputs: "",
};

fn node(n: &N) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, 1, 0);
    varint(&mut out, n.id);
    key(&mut out, 3, 0);
    varint(&mut out, n.ty);
    for (number, ids) in [(4, n.ctrl), (5, n.data)] {
        let mut packed = Vec::new();
        ids.iter().for_each(|&d| varint(&mut packed, d));
        bytes_field(&mut out, number, &packed);
    }
    key(&mut out, 7, 0);
    varint(&mut out, n.micros);
    let mut io = Vec::new();
    bytes_field(&mut io, 1, n.inputs.as_bytes());
    bytes_field(&mut out, 8, &io);
    for (name, value) in n.attrs {
        let mut a = Vec::new();
        bytes_field(&mut a, 1, name.as_bytes());
        match value {
            A::I(v) => {
                key(&mut a, 9, 0);
                varint(&mut a, *v as u64);
            }
            A::S(s) => bytes_field(&mut a, 29, s.as_bytes()),
            A::B(b) => {
                key(&mut a, 27, 0);
                varint(&mut a, u64::from(*b));
            }
        }
        bytes_field(&mut out, 10, &a);
    }
    out
}

/// A rank's file: the GlobalMetadata, then the nodes, each length-prefixed.
pub(crate) fn file(nodes: &[N]) -> Vec<u8> {
    let mut metadata = Vec::new();
    bytes_field(&mut metadata, 1, b"0.0.4");
    let mut out = Vec::new();
    for record in std::iter::once(metadata).chain(nodes.iter().map(node)) {
        varint(&mut out, record.len() as u64);
        out.extend_from_slice(&record);
    }
    out
}

/// Writes `PREFIX.r.et` for each rank's bytes; returns the directory and the files.
fn write(ranks: &[Vec<u8>]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..ranks.len())
        .map(|r| dir.path().join(format!("t.{r}.et")))
        .collect();
    for (f, bytes) in files.iter().zip(ranks) {
        std::fs::write(f, bytes).unwrap();
    }
    (dir, files)
}

fn trace(ranks: &[Vec<u8>]) -> (Trace, Vec<String>) {
    let (_dir, files) = write(ranks);
    chakra::read_noted(&files).unwrap()
}

/// The one-line error reading `ranks` gives, checked to name the file.
fn error(ranks: &[Vec<u8>]) -> String {
    let (_dir, files) = write(ranks);
    let e = chakra::read(&files).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
    assert!(e.contains(".et:"), "{e}");
    e
}

/// A node: its id and type, the nodes it waits on, its attributes.
fn nd<'a>(id: u64, ty: u64, data: &'a [u64], attrs: &'a [(&'a str, A<'a>)]) -> N<'a> {
    N {
        id,
        ty,
        data,
        attrs,
        ..NODE
    }
}

fn compute(us: u64) -> OpKind {
    let duration = SimTime::from_us(us);
    OpKind::Compute { duration }
}

fn coll(op: CollectiveOp, bytes: u64) -> OpKind {
    OpKind::Collective {
        op,
        bytes,
        group: 0,
    }
}

fn after(ops: &[u32]) -> Vec<Dep> {
    ops.iter()
        .map(|&op| Dep {
            op,
            on_start: false,
        })
        .collect()
}

#[test]
fn nodes_become_operations_with_their_dependencies() {
    let pg = r#"['[{"pg_name": "1", "x": 0, "ranks": [1, 0]}, {"pg_name": "2", "ranks": []}]']"#;
    let gather = [
        ("comm_type", A::I(2)),
        ("comm_size", A::I(100)),
        ("pg_name", A::S("1")),
    ];
    let barrier = [("comm_type", A::I(9)), ("pg_name", A::S("2"))];
    let rank = |r: i64| {
        let peer = if r == 0 { "comm_dst" } else { "comm_src" };
        let p2p = [
            (peer, A::I(1 - r)),
            ("comm_size", A::I(64)),
            ("comm_tag", A::I(7)),
        ];
        file(&[
            N {
                inputs: pg,
                ..nd(9, 1, &[], &[])
            },
            N {
                micros: 5,
                ..nd(1, 4, &[3], &[])
            },
            N {
                ctrl: &[1, 77],
                ..nd(2, 7, &[], &gather)
            },
            nd(3, 1, &[9], &[]),
            nd(4, if r == 0 { 5 } else { 6 }, &[2], &p2p),
            nd(5, 7, &[], &barrier),
        ])
    };
    let (t, notes) = trace(&[rank(0), rank(1)]);
    assert_eq!(t.ranks(), 2);
    assert_eq!(t.groups, vec![vec![0, 1]]);
    // Node 9 (metadata, no dependencies) is dropped; node 3 (metadata that
    // waits on it) is a zero compute; node 2's control dependencies are
    // ignored.
    let labels: Vec<u64> = t.rank_ops(1).map(|i| t.ops[i as usize].label).collect();
    assert_eq!(labels, [1, 2, 3, 4, 5]);
    let kinds: Vec<OpKind> = t.ops.iter().map(|o| o.kind).collect();
    let send = OpKind::Send {
        to: 1,
        bytes: 64,
        tag: 7,
    };
    let (gather, barrier) = (
        coll(CollectiveOp::AllGather, 200),
        coll(CollectiveOp::Barrier, 0),
    );
    assert_eq!(kinds[..5], [compute(5), gather, compute(0), send, barrier]);
    let recv = OpKind::Recv {
        from: Some(0),
        bytes: 64,
        tag: Some(7),
    };
    assert_eq!(kinds[8], recv);
    let deps: Vec<Vec<Dep>> = (0..10).map(|i| t.op_deps(i).to_vec()).collect();
    assert_eq!(
        deps[..5],
        [after(&[2]), after(&[]), after(&[]), after(&[1]), after(&[])]
    );
    assert_eq!(deps[8], after(&[6]));
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].contains("4 ctrl_deps"), "{notes:?}");
    assert!(
        notes[1].contains("2 REDUCE, REDUCE_SCATTER_BLOCK or BARRIER"),
        "{notes:?}"
    );
}

#[test]
fn a_host_side_communication_node_is_compute() {
    let cpu = [("is_cpu_op", A::B(true))];
    let (t, notes) = trace(&[file(&[N {
        micros: 3,
        ..nd(4, 7, &[], &cpu)
    }])]);
    assert_eq!(t.ops[0].kind, compute(3));
    assert!(
        notes[0].contains("1 communication nodes with is_cpu_op"),
        "{notes:?}"
    );
}

#[test]
fn corrupt_files_are_one_line_errors_naming_record_and_node() {
    let good = file(&[nd(
        3,
        7,
        &[],
        &[("comm_type", A::I(0)), ("comm_size", A::I(8))],
    )]);
    let e = error(&[good[..good.len() - 1].to_vec()]);
    assert!(e.contains("t.0.et:2: record 2: a length of"), "{e}");
    let mut huge = good.clone();
    let meta = huge[0] as usize + 1;
    huge.splice(meta..meta + 1, [0xff, 0xff, 0xff, 0xff, 0x0f]);
    let e = error(&[huge]);
    assert!(
        e.contains(":2: record 2: a length of 4294967295 bytes runs past"),
        "{e}"
    );
    let e = error(&[vec![]]);
    assert!(
        e.ends_with("is empty: a Chakra trace starts with its GlobalMetadata"),
        "{e}"
    );
    let e = error(&[vec![0x1f, 0x8b, 8, 0]]);
    assert!(
        e.ends_with("is gzip-compressed; decompress it (gunzip) first"),
        "{e}"
    );
    // A varint that never ends, inside a node.
    let e = error(&[[file(&[]), vec![3, 0x08, 0xff, 0xff]].concat()]);
    assert!(
        e.contains(":2: node record: a number runs past the end"),
        "{e}"
    );
}

/// Each case's node, after a plain compute node, is refused with a line
/// naming the file, record 3 and `expected`.
fn refused(cases: &[(N, &str)]) {
    for (n, expected) in cases {
        let e = error(&[file(&[NODE, N { ..*n }])]);
        assert!(
            e.contains("t.0.et:3: ") && e.contains(expected),
            "{e}\nwanted {expected}"
        );
    }
}

#[test]
fn unmodelled_and_unknown_node_types_are_refused() {
    refused(&[
        (
            nd(5, 2, &[], &[]),
            "node 5 (MEM_LOAD_NODE): memory loads and stores are not modelled",
        ),
        (nd(5, 3, &[], &[]), "node 5 (MEM_STORE_NODE): memory loads"),
        (
            nd(6, 12, &[], &[]),
            "node 6 (unknown type): type 12 is not a Chakra node type",
        ),
        (
            nd(8, 4, &[99], &[]),
            "node 8 (COMP_NODE): data_deps: node 99 is not in the file",
        ),
    ]);
    // Node 1 waits on the cycle of nodes 2 and 3; one on it is named.
    let cycle = [
        nd(1, 4, &[2], &[]),
        nd(2, 4, &[3], &[]),
        nd(3, 4, &[2], &[]),
    ];
    let e = error(&[file(&cycle)]);
    let on = ":3: node 2 (COMP_NODE): its dependencies lead back to it";
    assert!(e.contains(on), "{e}");
    let e = error(&[file(&[NODE, NODE])]);
    let twice = ":3: node 0 (COMP_NODE): the id is also that of the node in record 2";
    assert!(e.contains(twice), "{e}");
}

#[test]
fn bad_attributes_are_refused_by_name() {
    let (t, s) = (|v| ("comm_type", A::I(v)), |v| ("comm_size", A::I(v)));
    refused(&[
        (
            nd(7, 7, &[], &[s(1)]),
            "node 7 (COMM_COLL_NODE): attribute comm_type is missing",
        ),
        (
            nd(7, 7, &[], &[t(3), s(1)]),
            "comm_type 3 (GATHER) is not modelled",
        ),
        (
            nd(7, 7, &[], &[t(10), s(1)]),
            "comm_type 10 is not a Chakra collective",
        ),
        (nd(7, 7, &[], &[t(0)]), "attribute comm_size is missing"),
        (
            nd(7, 7, &[], &[t(0), s(-1)]),
            "attribute comm_size is -1, outside 0..=",
        ),
        (
            nd(7, 7, &[], &[("comm_type", A::S("0")), s(1)]),
            "attribute comm_type is not an integer",
        ),
        (
            nd(7, 7, &[], &[t(0), s(1), ("pg_name", A::S("4"))]),
            "process group \"4\" is not defined",
        ),
        (
            nd(8, 5, &[], &[("comm_dst", A::I(0)), s(1)]),
            "comm_dst is 0: the peer must be another",
        ),
    ]);
}

#[test]
fn rank_files_must_run_without_gaps() {
    let one = file(&[NODE]);
    let (dir, _) = write(&[one.clone(), one.clone(), one]);
    std::fs::remove_file(dir.path().join("t.1.et")).unwrap();
    let gap = "t.1.et:0: missing: the trace's files run to rank 2";
    let e = chakra::files(dir.path()).unwrap_err().to_string();
    assert!(e.ends_with(gap), "{e}");
    let e = chakra::files(&dir.path().join("t"))
        .unwrap_err()
        .to_string();
    assert!(e.ends_with(gap), "{e}");
    std::fs::write(dir.path().join("u.0.et"), file(&[])).unwrap();
    let e = chakra::files(dir.path()).unwrap_err().to_string();
    let several = "holds several Chakra traces (t.*.et, u.*.et); name one by its prefix";
    assert!(e.ends_with(several), "{e}");
    let e = chakra::files(&dir.path().join("u.0.et"))
        .unwrap_err()
        .to_string();
    let one = "u.0.et:0: is one rank's file of a Chakra trace: name the trace by its directory or its prefix `u`";
    assert!(e.ends_with(one), "{e}");
}
