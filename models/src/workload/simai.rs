//! SimAI/AICB (and ASTRA-sim) layer-wise workload text.
//!
//! ```text
//! HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 32 ...
//! 2
//! attn  -1  1055000 ALLREDUCE 1048576  1055000 NONE 0  1055000 REDUCESCATTER 2097152  100
//! mlp   -1  ...
//! ```
//!
//! Line 1: parallelism policy (`DATA`, `MICRO`, `MODEL`, `HYBRID_TRANSFORMER`,
//! `HYBRID_TRANSFORMER_FWD_IN_BCKWD`) and `key: value` sizes. Line 2: layer
//! count. Then per layer: name, dependency (unused), forward compute time,
//! forward communication type and size, input-gradient compute, type, size,
//! weight-gradient compute, type, size, and update time. Times are in ns
//! (SimAI's tick), sizes in bytes.
//!
//! One iteration: forward through the layers (compute, then its collective,
//! blocking); backward in reverse (input-gradient compute and collective,
//! blocking; weight-gradient compute, then its collective, which overlaps the
//! next layer's backward); each update waits for its layer's weight-gradient
//! collective. As in SimAI, forward and input-gradient collectives run on the
//! TP group and weight-gradient ones on the DP group (`DATA`/`MICRO`/`MODEL`:
//! all ranks); a `_EP` or `_DP_EP` suffix picks the expert groups.

use super::file::WorkloadFileError;
use super::groups::{GroupSpec, Parallelism};
use super::offload::{Dtype, ReduceOp};
use super::spec::{Algorithm, CollectiveOp, OpSpec, Phase, PhaseKind, WorkloadSpec};
use netsim_engine::SimTime;
use std::path::Path;

/// Which collectives run where, by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// Every collective on all ranks.
    AllRanks,
    /// Forward and input-gradient on TP, weight-gradient on DP.
    Hybrid,
}

pub fn read(
    path: &Path,
    hosts: u32,
    algorithm: Algorithm,
) -> Result<WorkloadSpec, WorkloadFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadFileError {
        path: path.display().to_string(),
        line: 0,
        message: format!("cannot read workload file: {e}"),
    })?;
    parse(&text, &path.display().to_string(), hosts, algorithm)
}

/// Parses SimAI workload `text` for `hosts` hosts; collectives use
/// `algorithm` where it implements them, their default otherwise.
pub fn parse(
    text: &str,
    path: &str,
    hosts: u32,
    algorithm: Algorithm,
) -> Result<WorkloadSpec, WorkloadFileError> {
    let err = |line: usize, message: String| WorkloadFileError {
        path: path.to_string(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    let (n1, header) = lines
        .next()
        .ok_or_else(|| err(1, "empty workload file".into()))?;
    let tokens: Vec<&str> = header.split_whitespace().collect();
    let policy = match tokens[0] {
        "DATA" | "MICRO" | "MODEL" => Policy::AllRanks,
        "HYBRID_TRANSFORMER" | "HYBRID_TRANSFORMER_FWD_IN_BCKWD" => Policy::Hybrid,
        other => {
            return Err(err(
                n1,
                format!("parallelism policy: unknown `{other}` (DATA, MICRO, MODEL, HYBRID_TRANSFORMER, HYBRID_TRANSFORMER_FWD_IN_BCKWD)"),
            ))
        }
    };
    let key = |name: &str| -> Result<Option<u32>, WorkloadFileError> {
        match tokens.iter().position(|t| *t == name) {
            None => Ok(None),
            Some(i) => tokens
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .map(Some)
                .ok_or_else(|| err(n1, format!("`{name}` needs an integer value"))),
        }
    };
    let world = key("all_gpus:")?.unwrap_or(hosts);
    if world == 0 || world > hosts {
        return Err(err(
            n1,
            format!("all_gpus: {world} GPUs but the topology has {hosts} hosts"),
        ));
    }
    let parallelism = match policy {
        Policy::AllRanks => Parallelism::data_parallel(world),
        Policy::Hybrid => {
            let tp = key("model_parallel_NPU_group:")?.unwrap_or(1);
            let pp = key("pp:")?.unwrap_or(1);
            let ep = key("ep:")?.unwrap_or(1);
            if pp > 1 {
                return Err(err(
                    n1,
                    "pp: pipeline parallelism (pp > 1) is not supported by the SimAI import".into(),
                ));
            }
            Parallelism::new(world, tp, pp, ep).map_err(|e| err(n1, e.to_string()))?
        }
    };
    let (n2, count) = lines
        .next()
        .ok_or_else(|| err(2, "missing the layer count".into()))?;
    let layers: usize = count.trim().parse().map_err(|_| {
        err(
            n2,
            format!("layer count: `{}` is not a number", count.trim()),
        )
    })?;
    if layers == 0 {
        return Err(err(n2, "layer count: must be positive".into()));
    }

    struct Layer {
        name: String,
        compute: [SimTime; 3],
        comm: [Option<OpSpec>; 3],
        update: SimTime,
    }
    const FIELDS: [&str; 12] = [
        "name",
        "dependency",
        "fwd_compute",
        "fwd_comm_type",
        "fwd_comm_size",
        "ig_compute",
        "ig_comm_type",
        "ig_comm_size",
        "wg_compute",
        "wg_comm_type",
        "wg_comm_size",
        "wg_update",
    ];
    let mut parsed = Vec::with_capacity(layers);
    for k in 0..layers {
        let (n, line) = lines.next().ok_or_else(|| {
            err(
                n2,
                format!("layer count says {layers} but the file has {k} layer lines"),
            )
        })?;
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < FIELDS.len() {
            return Err(err(
                n,
                format!(
                    "expected {} fields ({}), found {}",
                    FIELDS.len(),
                    FIELDS.join(" "),
                    f.len()
                ),
            ));
        }
        let time = |i: usize| -> Result<SimTime, WorkloadFileError> {
            f[i].parse::<u64>()
                .map(SimTime::from_ns)
                .map_err(|_| err(n, format!("{}: `{}` is not a time in ns", FIELDS[i], f[i])))
        };
        let comm = |i: usize, phase: usize| -> Result<Option<OpSpec>, WorkloadFileError> {
            let size: u64 = f[i + 1].parse().map_err(|_| {
                err(
                    n,
                    format!("{}: `{}` is not a size in bytes", FIELDS[i + 1], f[i + 1]),
                )
            })?;
            let kind = f[i];
            if kind == "NONE" {
                return Ok(None);
            }
            let (base, suffix) = match kind.find('_') {
                Some(u) => (&kind[..u], &kind[u..]),
                None => (kind, ""),
            };
            let op = match base {
                "ALLREDUCE" => CollectiveOp::AllReduce,
                "ALLGATHER" => CollectiveOp::AllGather,
                "REDUCESCATTER" => CollectiveOp::ReduceScatter,
                "ALLTOALL" => CollectiveOp::AllToAll,
                "BROADCAST" => CollectiveOp::Broadcast,
                _ => return Err(err(n, format!("{}: unknown communication type `{kind}` (NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, BROADCAST, with optional _EP or _DP_EP)", FIELDS[i]))),
            };
            let group = match (suffix, policy, phase) {
                ("_EP", _, _) => GroupSpec::Ep,
                ("_DP_EP", _, _) => GroupSpec::DpEp,
                ("", Policy::AllRanks, _) => GroupSpec::All,
                ("", Policy::Hybrid, 2) => GroupSpec::Dp,
                ("", Policy::Hybrid, _) => GroupSpec::Tp,
                _ => {
                    return Err(err(
                        n,
                        format!(
                            "{}: unknown group suffix in `{kind}` (_EP, _DP_EP)",
                            FIELDS[i]
                        ),
                    ))
                }
            };
            if size == 0 {
                return Err(err(
                    n,
                    format!("{}: a {} of 0 bytes", FIELDS[i + 1], op.name()),
                ));
            }
            let algorithm = if op.algorithms().contains(&algorithm) {
                algorithm
            } else {
                op.default_algorithm()
            };
            Ok(Some(OpSpec {
                op,
                algorithm,
                size_bytes: size,
                group,
                dtype: Dtype::Float32,
                reduce_op: ReduceOp::Sum,
            }))
        };
        parsed.push(Layer {
            name: f[0].to_string(),
            compute: [time(2)?, time(5)?, time(8)?],
            comm: [comm(3, 0)?, comm(6, 1)?, comm(9, 2)?],
            update: time(11)?,
        });
    }
    if let Some((n, _)) = lines.next() {
        return Err(err(
            n,
            format!("more layer lines than the layer count {layers}"),
        ));
    }

    // The program: each phase waits for `last` (the critical path so far)
    // unless said otherwise.
    let mut phases: Vec<Phase> = Vec::new();
    let push = |phases: &mut Vec<Phase>, name: String, kind: PhaseKind, after: Vec<usize>| {
        phases.push(Phase { name, kind, after });
        phases.len() - 1
    };
    let compute = |d: SimTime| PhaseKind::Compute {
        duration: d,
        group: GroupSpec::All,
    };
    let mut last: Option<usize> = None;
    let dep = |l: Option<usize>| l.into_iter().collect::<Vec<_>>();
    for l in &parsed {
        last = Some(push(
            &mut phases,
            format!("{}.fwd", l.name),
            compute(l.compute[0]),
            dep(last),
        ));
        if let Some(op) = &l.comm[0] {
            last = Some(push(
                &mut phases,
                format!("{}.fwd.{}", l.name, op.op.name()),
                PhaseKind::Collective(op.clone()),
                dep(last),
            ));
        }
    }
    for l in parsed.iter().rev() {
        last = Some(push(
            &mut phases,
            format!("{}.ig", l.name),
            compute(l.compute[1]),
            dep(last),
        ));
        if let Some(op) = &l.comm[1] {
            last = Some(push(
                &mut phases,
                format!("{}.ig.{}", l.name, op.op.name()),
                PhaseKind::Collective(op.clone()),
                dep(last),
            ));
        }
        last = Some(push(
            &mut phases,
            format!("{}.wg", l.name),
            compute(l.compute[2]),
            dep(last),
        ));
        let mut update_after = dep(last);
        if let Some(op) = &l.comm[2] {
            // Overlaps the rest of the backward pass.
            update_after = vec![push(
                &mut phases,
                format!("{}.wg.{}", l.name, op.op.name()),
                PhaseKind::Collective(op.clone()),
                dep(last),
            )];
        }
        push(
            &mut phases,
            format!("{}.update", l.name),
            compute(l.update),
            update_after,
        );
    }
    let mut spec = WorkloadSpec::single(OpSpec {
        op: CollectiveOp::Barrier,
        algorithm: Algorithm::Dissemination,
        size_bytes: 0,
        group: GroupSpec::All,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    spec.parallelism = Some(parallelism);
    spec.phases = phases;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MICRO: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0\n2\nl0 -1 1000 ALLREDUCE 4096 2000 NONE 0 3000 REDUCESCATTER 8192 100\nl1 -1 1000 NONE 0 2000 ALLGATHER 1024 3000 ALLREDUCE 8192 100\n";

    #[test]
    fn hybrid_layers_become_phases_on_tp_and_dp() {
        let spec = parse(MICRO, "w.txt", 8, Algorithm::Ring).unwrap();
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
        let group = |i: usize| match &spec.phases[i].kind {
            PhaseKind::Collective(op) => op.group.clone(),
            _ => panic!("not a collective"),
        };
        assert_eq!(group(1), GroupSpec::Tp);
        assert_eq!(group(6), GroupSpec::Dp);
        // The next layer's backward does not wait for the weight-gradient collective.
        assert_eq!(spec.phases[8].after, vec![5]);
        assert_eq!(spec.phases[7].after, vec![6]);
    }

    #[test]
    fn bad_lines_are_named() {
        let e = parse("DATA\n1\nl0 -1 5 ALLREDUCE\n", "w.txt", 8, Algorithm::Ring).unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse(
            "DATA\n1\nl0 -1 5 SHUFFLE 8 5 NONE 0 5 NONE 0 5\n",
            "w.txt",
            8,
            Algorithm::Ring,
        )
        .unwrap_err();
        assert!(e.message.contains("SHUFFLE"), "{e}");
        let e = parse("NOPE\n1\n", "w.txt", 8, Algorithm::Ring).unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse(
            "DATA\n2\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n",
            "w.txt",
            8,
            Algorithm::Ring,
        )
        .unwrap_err();
        assert!(e.message.contains("layer count"), "{e}");
    }
}
