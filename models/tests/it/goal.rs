//! The GOAL reader (`workload::trace::goal`): a ring of sends, receives and
//! computations reads into the expected trace, the grammar's corners
//! (wildcards, defaults, comments, labels used before they are defined)
//! read as LogGOPSim's `txt2bin` reads them, every malformed file is one
//! error naming its line, and mutated files never panic.

use crate::parser_properties::{edits, mutate, one_line};
use netsim_engine::SimTime;
use netsim_models::workload::trace::goal::{self, MAX_RANKS};
use netsim_models::workload::trace::{Dep, Op, OpKind, Trace, TraceBuilder};
use proptest::prelude::*;

/// Four ranks in a ring: compute 1 us, send 1000 B to the next rank after
/// it, receive from the previous one.
const RING: &str = "\
// a ring of four
num_ranks 4
rank 0 {
l1: calc 1000
l2: send 1000b to 1 tag 1
l3: recv 1000b from 3 tag 1
l2 requires l1
}
rank 1 {
l1: calc 1000
l2: send 1000b to 2 tag 1
l3: recv 1000b from 0 tag 1
l2 requires l1
}
rank 2 {
l1: calc 1000
l2: send 1000b to 3 tag 1
l3: recv 1000b from 1 tag 1
l2 requires l1
}
rank 3 {
l1: calc 1000
l2: send 1000b to 0 tag 1
l3: recv 1000b from 2 tag 1
l2 requires l1
}
";

#[test]
fn a_ring_reads_into_its_trace() {
    let trace = goal::parse(RING, "ring.goal").unwrap();
    let mut want = TraceBuilder::new();
    for rank in 0..4u32 {
        let line = 3 + 6 * rank as u64;
        let base = 3 * rank;
        let calc = OpKind::Compute {
            duration: SimTime::from_ns(1000),
        };
        want.op(
            Op {
                kind: calc,
                label: line + 1,
            },
            &[],
        );
        let send = OpKind::Send {
            to: (rank + 1) % 4,
            bytes: 1000,
            tag: 1,
        };
        let after_calc = Dep {
            op: base,
            on_start: false,
        };
        want.op(
            Op {
                kind: send,
                label: line + 2,
            },
            &[after_calc],
        );
        let recv = OpKind::Recv {
            from: Some((rank + 3) % 4),
            bytes: 1000,
            tag: Some(1),
        };
        want.op(
            Op {
                kind: recv,
                label: line + 3,
            },
            &[],
        );
        want.end_rank(format!("ring.goal:{line}"));
    }
    assert_eq!(trace, want.finish());
    assert_eq!(trace.ranks(), 4);
}

#[test]
fn the_grammar_reads_as_txt2bin_does() {
    let text = "/* two ranks,\n   given out of order */\nnum_ranks 2\n\
                rank 1 {\n\
                a: recv 0b from -1 tag -1 cpu 3 nic 1\n\
                b_2: calc 5 cpu 255 // trailing comment\n\
                b_2 irequires a\n\
                }\n\
                rank 0 {\n\
                z requires y\n\
                y: send 7 b to 1\n\
                z: send 8b to 1 tag 4 nic 2 cpu 1\n\
                calc 0\n\
                }\n";
    let trace = goal::parse(text, "t.goal").unwrap();
    let kinds: Vec<OpKind> = trace.ops.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [
            OpKind::Send {
                to: 1,
                bytes: 7,
                tag: 0
            },
            OpKind::Send {
                to: 1,
                bytes: 8,
                tag: 4
            },
            OpKind::Compute {
                duration: SimTime::ZERO
            },
            // A zero-byte message carries one byte; -1 is any source or tag.
            OpKind::Recv {
                from: None,
                bytes: 1,
                tag: None
            },
            OpKind::Compute {
                duration: SimTime::from_ns(5)
            },
        ]
    );
    // Rank 0 first: `z requires y`, named before `y` is defined.
    assert_eq!(
        trace.op_deps(1),
        [Dep {
            op: 0,
            on_start: false
        }]
    );
    assert_eq!(
        trace.op_deps(4),
        [Dep {
            op: 3,
            on_start: true
        }]
    );
    assert_eq!(trace.rank_ops(0), 0..3);
    assert_eq!(trace.sources, ["t.goal:9", "t.goal:4"]);
}

/// Each malformed file and the line and words of its error.
const REJECTED: &[(&str, usize, &str)] = &[
    ("rank 0 {\n}\n", 1, "`rank` before `num_ranks N`"),
    (
        "num_ranks 1\nrank 0 {\nl1: bcast 8b to 0\n}\n",
        3,
        "unknown operation `bcast`",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1 needs l2\n}\n",
        3,
        "expected `:`, `requires` or `irequires`",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 1\nl1 requires l9\n}\n",
        4,
        "label `l9` is not defined in rank 0",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 1\nl1: calc 2\n}\n",
        4,
        "label `l1` defined twice in rank 0 (first at line 3)",
    ),
    ("num_ranks 2\nrank 2 {\n}\n", 2, "rank 2 is out of range"),
    (
        "num_ranks 2\nrank 0 {\nl1: send 1b to 2\n}\nrank 1 {\n}\n",
        3,
        "rank 2 is out of range",
    ),
    (
        "num_ranks 2\nrank 0 {\n}\nrank 0 {\n}\n",
        4,
        "rank 0 given twice (first at line 2)",
    ),
    (
        "num_ranks 3\nrank 0 {\n}\nrank 2 {\n}\n",
        1,
        "rank 1 has no block",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 18446744073709551616\n}\n",
        3,
        "does not fit in 64 bits",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 18446744073709551615\n}\n",
        3,
        "beyond the range of simulated time",
    ),
    (
        "num_ranks 4000000000\n",
        1,
        "num_ranks 4000000000 is not in 1..=1048576",
    ),
    ("num_ranks 0\n", 1, "num_ranks 0 is not in 1..="),
    ("num_ranks 1\nnum_ranks 1\n", 2, "`num_ranks` given twice"),
    (
        "num_ranks 1\nrank 0 {\nl1: send 1b to 0 tag -1\n}\n",
        3,
        "tag -1 (any tag) is only for a recv",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: send 1b to -1\n}\n",
        3,
        "expected a rank after `to`, found `-1`",
    ),
    // Found by hand: the network panicked on a message from host 0 to itself.
    (
        "num_ranks 2\nrank 0 {\n}\nrank 1 {\nl1: send 1b to 1\n}\n",
        5,
        "rank 1 sends to or receives from itself",
    ),
    (
        "num_ranks 2\nrank 0 {\nl1: recv 1b from 0 tag -1\n}\n",
        3,
        "rank 0 sends to or receives from itself",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: send 1 to 0\n}\n",
        3,
        "expected `b` after the size of `send`",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: recv 1b to 0\n}\n",
        3,
        "expected `from` after the size",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 1 nic 0\n}\n",
        3,
        "expected `cpu` or the end of the line",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 1 cpu 256\n}\n",
        3,
        "cpu 256 is not in 0..=255",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: recv 1b from 0 tag 1 tag 2\n}\n",
        3,
        "`tag` given twice",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: recv 1b from 0 tag -2\n}\n",
        3,
        "negative number -2",
    ),
    (
        "num_ranks 1\nl1: calc 1\n",
        2,
        "`l1` outside a `rank R { }` block",
    ),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 1\n",
        3,
        "rank 0's block (line 2) is not closed",
    ),
    (
        "num_ranks 2\nrank 0 {\nrank 1 {\n}\n",
        3,
        "`rank` inside rank 0's block",
    ),
    ("num_ranks 1\n}\n", 2, "`}` outside a rank block"),
    (
        "num_ranks 1\nrank 0 {\nl1: calc 1 @\n}\n",
        3,
        "unexpected character '@'",
    ),
    ("num_ranks 1 /* open\n", 1, "`/*` comment is not closed"),
    ("l1: calc 1\n", 1, "outside a `rank R { }` block"),
    ("", 1, "no `num_ranks N`: not a GOAL file"),
];

#[test]
fn each_malformed_file_is_one_error_at_its_line() {
    for &(text, line, words) in REJECTED {
        let e = goal::parse(text, "bad.goal").expect_err(text);
        let message = e.to_string();
        assert_eq!(
            (e.path.as_str(), e.line),
            ("bad.goal", line),
            "{text:?}: {message}"
        );
        assert!(message.contains(words), "{text:?}: {message}");
        assert!(!message.contains('\n'), "{message}");
    }
}

#[test]
fn a_huge_rank_count_allocates_nothing_per_rank() {
    // The largest count allowed, with no blocks: refused at once by the
    // first missing rank, having kept only the blocks given.
    let text = format!("num_ranks {MAX_RANKS}\nrank 7 {{\n}}\n");
    let e = goal::parse(&text, "big.goal").unwrap_err();
    assert_eq!(
        (e.line, e.message.as_str()),
        (1, "rank 0 has no block (num_ranks 1048576)")
    );
}

#[test]
fn goal_is_recognised_by_its_first_token() {
    assert!(goal::looks_like("num_ranks 16\n\nrank 0 {\n"));
    assert!(goal::looks_like(
        "// generated\n/* by schedgen */\n  num_ranks 2"
    ));
    assert!(!goal::looks_like(
        "HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n"
    ));
    assert!(!goal::looks_like("iterations = 2\n[[phase]]\n"));
    assert!(!goal::looks_like("rank 0 {\n"));
    assert!(!goal::looks_like(""));
}

#[test]
fn a_missing_file_names_itself() {
    let e = goal::read(std::path::Path::new("/nonexistent/x.goal")).unwrap_err();
    assert_eq!((e.path.as_str(), e.line), ("/nonexistent/x.goal", 0));
    assert!(e.message.starts_with("cannot read GOAL file"), "{e}");
}

/// What a trace read from any text must hold for the builder.
fn well_formed(trace: &Trace) -> Result<(), TestCaseError> {
    let ranks = trace.ranks();
    prop_assert!(ranks >= 1 && u64::from(ranks) <= MAX_RANKS);
    prop_assert_eq!(trace.dep_start.len(), trace.ops.len() + 1);
    prop_assert_eq!(trace.sources.len(), ranks as usize);
    for rank in 0..ranks {
        for op in trace.rank_ops(rank) {
            for dep in trace.op_deps(op) {
                prop_assert!(trace.rank_ops(rank).contains(&dep.op));
            }
            match trace.ops[op as usize].kind {
                OpKind::Send { to, bytes, .. } => {
                    prop_assert!(to < ranks && to != rank && bytes > 0)
                }
                OpKind::Recv { from, bytes, .. } => {
                    prop_assert!(from.is_none_or(|f| f < ranks && f != rank) && bytes > 0)
                }
                OpKind::Compute { duration } => prop_assert!(duration != SimTime::MAX),
                OpKind::Collective { .. } => prop_assert!(false, "GOAL has no collectives"),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_goal_files_read_or_fail_in_one_line(edits in edits()) {
        let text = mutate(RING, &edits);
        match goal::parse(&text, "m.goal") {
            Ok(trace) => well_formed(&trace)?,
            Err(e) => one_line(&e.to_string())?,
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        if let Err(e) = goal::parse(&text, "a.goal") {
            one_line(&e.to_string())?;
        }
    }
}
