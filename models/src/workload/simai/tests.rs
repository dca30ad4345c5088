//! The SimAI importer against hand-written files, SimAI's shipped examples and bad input.

use super::*;
use crate::workload::spec::PhaseKind;

const MICRO: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0\n2\nl0 -1 1000 ALLREDUCE 4096 2000 NONE 0 3000 REDUCESCATTER 8192 100\nl1 -1 1000 NONE 0 2000 ALLGATHER 1024 3000 ALLREDUCE 8192 100\n";

fn parse_ok(text: &str, hosts: u32) -> WorkloadSpec {
    parse(text, "w.txt", hosts, Algorithm::Ring).unwrap()
}

fn parse_err(text: &str, hosts: u32) -> WorkloadFileError {
    parse(text, "w.txt", hosts, Algorithm::Ring).unwrap_err()
}

fn collective(spec: &WorkloadSpec, i: usize) -> &OpSpec {
    match &spec.phases[i].kind {
        PhaseKind::Collective(op) => op,
        _ => panic!("phase {i} is not a collective"),
    }
}

#[test]
fn hybrid_layers_become_phases_on_tp_and_dp() {
    let spec = parse_ok(MICRO, 8);
    assert_eq!(
        spec.parallelism,
        Some(Parallelism::new(8, 2, 1, 1).unwrap())
    );
    let names: Vec<&str> = spec.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "l0.fwd",
            "l0.fwd.allreduce",
            "l1.fwd",
            "l1.ig",
            "l1.ig.allgather",
            "l1.wg",
            "l1.wg.allreduce",
            "l1.update",
            "l0.ig",
            "l0.wg",
            "l0.wg.reducescatter",
            "l0.update"
        ]
    );
    assert_eq!(collective(&spec, 1).group, GroupSpec::Tp);
    assert_eq!(collective(&spec, 6).group, GroupSpec::Dp);
    // The next layer's backward does not wait for the weight-gradient collective.
    assert_eq!(spec.phases[8].after, vec![5]);
    assert_eq!(spec.phases[7].after, vec![6]);
}

#[test]
fn zero_sizes_are_no_ops_and_small_forward_messages_are_4_kib() {
    let text = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 all_gpus: 4\n1\nl0 -1 5 ALLGATHER 100 5 REDUCESCATTER 0 5 ALLTOALL_EP 0 5\n";
    let spec = parse_ok(text, 4);
    let names: Vec<&str> = spec.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["l0.fwd", "l0.fwd.allgather", "l0.ig", "l0.wg", "l0.update"]
    );
    assert_eq!(collective(&spec, 1).size_bytes, MIN_FWD_COMM_BYTES);
    // HYBRID_TRANSFORMER keeps the size as written.
    let spec = parse_ok(&text.replace("_FWD_IN_BCKWD", ""), 4);
    assert_eq!(collective(&spec, 1).size_bytes, 100);
}

#[test]
fn suffixes_pick_expert_groups() {
    let text = "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 ep: 2 all_gpus: 8\n1\nl0 -1 5 ALLTOALL_EP 64 5 ALLTOALL 64 5 ALLGATHER_DP_EP 64 5\n";
    let spec = parse_ok(text, 8);
    assert_eq!(collective(&spec, 1).group, GroupSpec::Ep);
    assert_eq!(collective(&spec, 3).group, GroupSpec::Tp);
    assert_eq!(collective(&spec, 5).group, GroupSpec::DpEp);
}

#[test]
fn recomputation_reruns_forwards_from_the_checkpoint() {
    let text = "HYBRID_TRANSFORMER_FWD_IN_BCKWD all_gpus: 2 checkpoints: 1 0 checkpoint_initiates: 1 2\n3\na -1 5 NONE 0 5 NONE 0 5 NONE 0 5\nb -1 5 NONE 0 5 NONE 0 5 NONE 0 5\nc -1 5 NONE 0 5 NONE 0 5 NONE 0 5\n";
    let spec = parse_ok(text, 2);
    let names: Vec<&str> = spec.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names[3..7], ["a.fwd", "b.fwd", "c.ig", "c.wg"], "{names:?}");
}

#[test]
fn a_pipeline_sends_activations_forward_and_gradients_back() {
    let text = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 pp: 2 ga: 2 all_gpus: 2 pp_comm: 4096\n3\npro -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\nembedding_layer -1 5 NONE 0 5 NONE 0 5 NONE 0 5\nembedding_layer -1 5 NONE 0 5 NONE 0 5 NONE 0 5\n";
    let spec = parse_ok(text, 2);
    let find = |name: &str| {
        spec.phases
            .iter()
            .position(|p| p.name == name)
            .unwrap_or_else(|| panic!("no phase {name}"))
    };
    let act = find("s0.mb1.activations");
    assert_eq!(
        spec.phases[act].kind,
        PhaseKind::Send {
            size_bytes: 4096,
            from: 0,
            to: 1
        }
    );
    // Stage 1's forward of micro-batch 1 waits for it; stage 0's backward
    // of micro-batch 0 waits for stage 1's gradients.
    assert!(spec.phases[find("s1.mb1.embedding_layer.fwd")]
        .after
        .contains(&act));
    let grad = find("s1.mb0.gradients");
    assert!(spec.phases[find("s0.mb0.embedding_layer.ig")]
        .after
        .contains(&grad));
    assert!(!spec.phases.iter().any(|p| p.name == "s0.mb0.gradients"));
    let sends = spec
        .phases
        .iter()
        .filter(|p| matches!(p.kind, PhaseKind::Send { .. }))
        .count();
    // 2 micro-batches, 1 stage boundary, both ways.
    assert_eq!(sends, 4);
    // Every `after` names an earlier phase.
    for (i, p) in spec.phases.iter().enumerate() {
        assert!(p.after.iter().all(|&a| a < i), "{}", p.name);
    }
}

#[test]
fn simai_shipped_examples_are_accepted_unchanged() {
    let micro = include_str!("../../../../runs/scenarios/workloads/simai-microAllReduce.txt");
    let spec = parse_ok(micro, 8);
    assert_eq!(collective(&spec, 1).size_bytes, 16 << 20);
    let ep = include_str!("../../../../runs/scenarios/workloads/simai-ep-test-32.txt");
    assert_eq!(
        parse_ok(ep, 32).parallelism,
        Some(Parallelism::new(32, 4, 1, 4).unwrap())
    );
    let moe = include_str!("../../../../runs/scenarios/workloads/simai-moe-9216.txt");
    let spec = parse_ok(moe, 9216);
    let p = spec.parallelism.unwrap();
    assert_eq!((p.tp, p.pp, p.dp, p.ep), (2, 12, 384, 16));
    let sends = spec
        .phases
        .iter()
        .filter(|p| {
            matches!(
                p.kind,
                PhaseKind::Send {
                    size_bytes: 50331648,
                    ..
                }
            )
        })
        .count();
    // ga 24 micro-batches, each across 11 stage boundaries, both ways.
    assert_eq!(sends, 24 * 11 * 2);
    let e = parse_err(moe, 9215);
    assert!(e.message.starts_with("all_gpus: 9216"), "{e}");
}

#[test]
fn bad_input_names_the_line_and_field() {
    let h = "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 all_gpus: 8\n";
    let cases = [
        ("DATA\n1\nl0 -1 5 ALLREDUCE\n".to_string(), 3, "expected 12 fields"),
        ("DATA\n1\nl0 -1 5 SHUFFLE 8 5 NONE 0 5 NONE 0 5\n".into(), 3, "fwd_comm_type: unknown communication type `SHUFFLE`"),
        ("DATA\n1\nl0 -1 5 ALLREDUCE_TP 8 5 NONE 0 5 NONE 0 5\n".into(), 3, "ALLREDUCE_TP"),
        ("NOPE\n1\n".into(), 1, "parallelism policy"),
        ("DATA\n2\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n".into(), 2, "layer count"),
        ("DATA\n99999999999999\nl0 -1 5 NONE 0 5 NONE 0 5 NONE 0 5\n".into(), 2, "layer count"),
        (format!("{h}1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE -8 5\n"), 3, "wg_comm_size: `-8` is negative"),
        (format!("{h}1\nl0 -1 -5 NONE 0 5 NONE 0 5 NONE 0 5\n"), 3, "fwd_compute: `-5` is negative"),
        ("HYBRID_TRANSFORMER tp: 2\n1\n".into(), 1, "unknown setting `tp`"),
        ("HYBRID_TRANSFORMER pp: -2\n1\n".into(), 1, "pp: `-2` is negative"),
        ("HYBRID_TRANSFORMER model_parallel_NPU_group: 3 all_gpus: 8\n1\n".into(), 1, "all_gpus: 8 GPUs do not fit"),
        ("HYBRID_TRANSFORMER model_parallel_NPU_group: 2 ep: 3 all_gpus: 8\n1\n".into(), 1, "ep 3"),
        ("HYBRID_TRANSFORMER pp: 2 all_gpus: 8\n1\n".into(), 1, "pp_comm"),
        ("HYBRID_TRANSFORMER pp: 2 ga: 2 all_gpus: 8 pp_comm: 8\n1\nembedding_layer -1 5 NONE 0 5 NONE 0 5 NONE 0 5\n".into(), 1, "ga: 2 micro-batches"),
        ("HYBRID_TRANSFORMER_FWD_IN_BCKWD checkpoints: 1 7\n1\nl0 -1 5 NONE 0 5 NONE 0 5 NONE 0 5\n".into(), 1, "checkpoints: layer 7"),
        ("HYBRID_TRANSFORMER checkpoints: 3 1\n1\n".into(), 1, "checkpoints: 3 layers announced"),
    ];
    for (text, line, needle) in cases {
        let e = parse_err(&text, 8);
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.to_string().starts_with(&format!("w.txt:{line}: ")), "{e}");
        assert!(e.message.contains(needle), "{text:?}: {e}");
    }
}

/// Seeded token mutations of SimAI's examples (and of a pipelined file):
/// the importer never panics, and every error names a line of the file.
#[test]
fn mutated_files_fail_cleanly() {
    let pipelined = include_str!("../../../../runs/scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    let micro = include_str!("../../../../runs/scenarios/workloads/simai-microAllReduce.txt");
    let replacements = [
        "-1",
        "0",
        "18446744073709551616",
        "4294967297",
        "NONE",
        "ALLTOALL_DP_EP",
        "x",
        "pp:",
        "embedding_layer",
        "",
    ];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for (text, hosts) in [(pipelined, 128), (micro, 8)] {
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        for _ in 0..2000 {
            let mut mutated = lines.clone();
            for _ in 0..1 + next(3) {
                let l = next(mutated.len());
                if mutated[l].is_empty() {
                    continue;
                }
                let t = next(mutated[l].len());
                mutated[l][t] = replacements[next(replacements.len())];
            }
            let text: String = mutated.iter().map(|l| l.join(" ") + "\n").collect();
            if let Err(e) = parse(&text, "m.txt", hosts, Algorithm::Ring) {
                assert!((1..=lines.len()).contains(&e.line), "{e} for\n{text}");
            }
        }
    }
}

/// AICB's Megatron files start with a `norm` BROADCAST: it runs as a
/// broadcast on the layer's group, and the spec notes that SimAI would have
/// sent nothing; REDUCE and BARRIER likewise. Files without them have no note.
#[test]
fn collectives_simai_ignores_run_with_a_note() {
    let h = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 all_gpus: 8\n";
    let text = format!(
        "{h}4\nnorm -1 0 BROADCAST 16384 1 NONE 0 1 NONE 0 100\n\
         l1 -1 5 NONE 0 5 REDUCE 4096 5 BARRIER 8 5\n\
         l2 -1 5 BROADCAST 1024 5 NONE 0 5 NONE 0 5\n\
         l3 -1 5 ALLREDUCE 1024 5 NONE 0 5 BROADCAST_DP_EP 0 5\n"
    );
    let spec = parse_ok(&text, 8);
    let ops: Vec<(CollectiveOp, u64, GroupSpec)> = spec
        .phases
        .iter()
        .filter_map(|p| match &p.kind {
            PhaseKind::Collective(op) => Some((op.op, op.size_bytes, op.group.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ops,
        [
            (CollectiveOp::Broadcast, 16384, GroupSpec::Tp),
            (CollectiveOp::Broadcast, 4096, GroupSpec::Tp),
            (CollectiveOp::AllReduce, 4096, GroupSpec::Tp),
            (CollectiveOp::Reduce, 4096, GroupSpec::Tp),
            (CollectiveOp::Barrier, 8, GroupSpec::Dp),
        ]
    );
    assert_eq!(
        spec.notes,
        [
            "note: w.txt: BROADCAST (2 times, first at line 3), REDUCE (line 4), BARRIER \
             (line 4) run as the collectives they name, where SimAI reads them as no \
             communication"
        ]
    );
    assert!(parse_ok(MICRO, 8).notes.is_empty());
}
