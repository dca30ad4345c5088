//! SimAI/AICB (and ASTRA-sim) layer-wise workload text.
//!
//! ```text
//! HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 16 pp: 12 vpp: 8 ga: 24 all_gpus: 9216 checkpoints: 0 checkpoint_initiates: 0 pp_comm 50331648
//! 1789
//! grad_gather  -1  1  NONE 0  1  NONE 0  1  ALLGATHER 2807758848  100
//! embedding_layer  -1  622731  ALLREDUCE 50331648  1  NONE 0  15091072  NONE 0  100
//! ...
//! ```
//!
//! Line 1: parallelism policy and `key: value` settings (see [`Header`]).
//! Line 2: the layer count. Then one line per layer: name, dependency
//! (unused, as in SimAI), forward compute time, forward communication type
//! and size, input-gradient compute, type, size, weight-gradient compute,
//! type, size, and update time. Times are in ns (SimAI's tick), sizes in
//! bytes; a size of 0 is no communication, as `NONE` is. `BROADCAST`,
//! `REDUCE` and `BARRIER` run as the collectives they name; SimAI reads
//! them as no communication, so the spec carries a note saying so.
//!
//! The lines are one pipeline stage's program, as AICB writes it and SimAI
//! runs it on every rank: forward through the lines (compute, then its
//! collective, blocking); backward in reverse (input-gradient compute and
//! collective, blocking; weight-gradient compute, then its collective, which
//! overlaps the rest of the backward pass); each update waits for its
//! layer's weight-gradient collective. Forward and input-gradient
//! collectives run on the TP group, weight-gradient ones on the DP group; a
//! `_EP` or `_DP_EP` suffix picks the expert groups (`DATA`/`MICRO`/`MODEL`:
//! all ranks). Like SimAI, a forward collective smaller than 4 KiB is sent
//! as 4 KiB under `HYBRID_TRANSFORMER_FWD_IN_BCKWD`.
//!
//! AICB unrolls the `ga` micro-batches into the file, each starting with an
//! `embedding_layer` line. SimAI does not run the pipeline (it adds a bubble
//! and `pp_comm` transfer estimate afterwards); netsim does: with `pp > 1`
//! every stage runs the lines, stage `s` starts micro-batch `m`'s forward
//! when its activations (`pp_comm` bytes) arrived from stage `s - 1`, and
//! starts its backward when the gradients arrived from stage `s + 1`; each
//! transfer is a `send` between the ranks of adjacent stages with the same
//! TP and DP coordinates. The order within a stage is the file's (all
//! forwards, then all backwards: GPipe), so the bubble is what it is. Phase
//! names then read `s<stage>.mb<micro-batch>.<layer>.<pass>[.<collective>]`,
//! and `s<stage>.mb<m>.activations` / `.gradients` are the sends of stage
//! `<stage>` to the next / previous one.

use super::file::WorkloadFileError;
use super::groups::{GroupSpec, Parallelism};
use super::offload::{Dtype, ReduceOp};
use super::spec::{Algorithm, CollectiveOp, OpSpec, WorkloadSpec};
use header::{header_parallelism, parse_header, recompute_from, Policy};
use netsim_engine::SimTime;
use program::Program;
use std::path::Path;

mod header;
mod program;

pub use header::Header;

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

/// One layer line.
struct Layer {
    name: String,
    /// Forward, input-gradient, weight-gradient compute.
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

const COMM_TYPES: &str = "NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, ALLREDUCEALLTOALL, BROADCAST, REDUCE, BARRIER, each with an optional _EP or _DP_EP";

/// Communication types netsim runs as the collective they name but SimAI
/// (1.6, `Workload.cc`) reads as no communication: its parser knows only
/// ALLREDUCE, ALLTOALL, ALLREDUCEALLTOALL, ALLGATHER and REDUCESCATTER and
/// leaves any other type `None`. AICB's Megatron files start with a
/// `norm` BROADCAST.
const BEYOND_SIMAI: [(&str, CollectiveOp); 3] = [
    ("BROADCAST", CollectiveOp::Broadcast),
    ("REDUCE", CollectiveOp::Reduce),
    ("BARRIER", CollectiveOp::Barrier),
];

/// SimAI's smallest forward message under `HYBRID_TRANSFORMER_FWD_IN_BCKWD`.
const MIN_FWD_COMM_BYTES: u64 = 4096;

fn parse_layer(
    line: &str,
    policy: Policy,
    algorithm: Algorithm,
    err: &dyn Fn(String) -> WorkloadFileError,
) -> Result<Layer, WorkloadFileError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != FIELDS.len() {
        return Err(err(format!(
            "expected {} fields ({}), found {}",
            FIELDS.len(),
            FIELDS.join(" "),
            f.len()
        )));
    }
    let number = |i: usize, what: &str| -> Result<u64, WorkloadFileError> {
        if f[i].starts_with('-') {
            return Err(err(format!("{}: `{}` is negative", FIELDS[i], f[i])));
        }
        f[i].parse::<u64>()
            .map_err(|_| err(format!("{}: `{}` is not {what}", FIELDS[i], f[i])))
    };
    let time = |i: usize| number(i, "a time in ns").map(SimTime::from_ns);
    f[1].parse::<i64>()
        .map_err(|_| err(format!("dependency: `{}` is not an integer", f[1])))?;
    let comm = |i: usize, phase: usize| -> Result<Option<OpSpec>, WorkloadFileError> {
        let mut size = number(i + 1, "a size in bytes")?;
        let kind = f[i];
        if kind == "NONE" {
            return Ok(None);
        }
        let (base, group) = if let Some(b) = kind.strip_suffix("_DP_EP") {
            (b, GroupSpec::DpEp)
        } else if let Some(b) = kind.strip_suffix("_EP") {
            (b, GroupSpec::Ep)
        } else {
            let group = match (policy, phase) {
                (Policy::AllRanks, _) => GroupSpec::All,
                (_, 2) => GroupSpec::Dp,
                _ => GroupSpec::Tp,
            };
            (kind, group)
        };
        let op = match base {
            "ALLREDUCE" => CollectiveOp::AllReduce,
            "ALLGATHER" => CollectiveOp::AllGather,
            "REDUCESCATTER" => CollectiveOp::ReduceScatter,
            "ALLTOALL" => CollectiveOp::AllToAll,
            "BROADCAST" => CollectiveOp::Broadcast,
            "REDUCE" => CollectiveOp::Reduce,
            "BARRIER" => CollectiveOp::Barrier,
            // SimAI parses it but its packet-level backend has no flow model
            // for it: no traffic.
            "ALLREDUCEALLTOALL" => return Ok(None),
            _ => {
                return Err(err(format!(
                    "{}: unknown communication type `{kind}` ({COMM_TYPES})",
                    FIELDS[i]
                )))
            }
        };
        if size == 0 {
            return Ok(None);
        }
        if phase == 0 && policy == Policy::HybridRecompute {
            size = size.max(MIN_FWD_COMM_BYTES);
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
    Ok(Layer {
        name: f[0].to_string(),
        compute: [time(2)?, time(5)?, time(8)?],
        comm: [comm(3, 0)?, comm(6, 1)?, comm(9, 2)?],
        update: time(11)?,
    })
}

/// Parses SimAI workload `text` for a fabric of `hosts` hosts; collectives
/// use `algorithm` where it implements them, their default otherwise.
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
    let header_err = |m: String| err(n1, m);
    let (policy, h) = parse_header(header, &header_err)?;
    let parallelism = header_parallelism(policy, &h, hosts, &header_err)?;
    let (n2, count) = lines
        .next()
        .ok_or_else(|| err(n1, "missing the layer count (line 2)".into()))?;
    let layers = layer_count(count).map_err(|m| err(n2, m))?;
    // Bound the count by the file before allocating for it.
    let rest: Vec<(usize, &str)> = lines.collect();
    if layers != rest.len() {
        let at = rest.get(layers).map_or(n2, |&(n, _)| n);
        return Err(err(
            at,
            format!(
                "layer count: line 2 says {layers} layers but the file has {} layer lines",
                rest.len()
            ),
        ));
    }
    let mut parsed = Vec::with_capacity(layers);
    for &(n, line) in &rest {
        parsed.push(parse_layer(line, policy, algorithm, &|m| err(n, m))?);
    }
    let note = beyond_simai_note(path, &parsed, &rest);
    let recompute = recompute_from(policy, &h, layers).map_err(&header_err)?;
    let phases = if h.pp == 1 {
        let program = Program {
            layers: &parsed,
            names: parsed.iter().map(|l| l.name.clone()).collect(),
            recompute: &recompute,
        };
        program.single()
    } else {
        pipeline_phases(&parsed, &recompute, &h, &parallelism).map_err(&header_err)?
    };
    let mut spec = WorkloadSpec::with_phases(Vec::new());
    spec.parallelism = Some(parallelism);
    spec.phases = phases;
    spec.notes.extend(note);
    Ok(spec)
}

/// A note, when the file has collectives SimAI would not have run
/// ([`BEYOND_SIMAI`]): which, how many and the first line of each.
fn beyond_simai_note(path: &str, layers: &[Layer], lines: &[(usize, &str)]) -> Option<String> {
    let mut found: Vec<String> = Vec::new();
    for (name, op) in BEYOND_SIMAI {
        let mut at = layers
            .iter()
            .zip(lines)
            .flat_map(|(layer, &(n, _))| layer.comm.iter().flatten().map(move |c| (c.op, n)))
            .filter(|&(o, _)| o == op)
            .map(|(_, n)| n);
        if let Some(first) = at.next() {
            found.push(match at.count() {
                0 => format!("{name} (line {first})"),
                more => format!("{name} ({} times, first at line {first})", more + 1),
            });
        }
    }
    if found.is_empty() {
        return None;
    }
    Some(format!(
        "note: {path}: {} run as the collectives they name, where SimAI reads them as no \
         communication",
        found.join(", ")
    ))
}

/// Line 2: the number of layer lines, positive.
fn layer_count(count: &str) -> Result<usize, String> {
    let count = count.trim();
    if count.starts_with('-') {
        return Err(format!("layer count: `{count}` is negative"));
    }
    let layers: usize = count
        .parse()
        .map_err(|_| format!("layer count: `{count}` is not a number"))?;
    if layers == 0 {
        return Err("layer count: must be positive".into());
    }
    Ok(layers)
}

/// The phases of a pipelined job: its layers split into `ga` micro-batches,
/// each from its `embedding_layer` line to the next one.
fn pipeline_phases(
    parsed: &[Layer],
    recompute: &[Option<usize>],
    h: &Header,
    parallelism: &Parallelism,
) -> Result<Vec<super::spec::Phase>, String> {
    let starts: Vec<usize> = (0..parsed.len())
        .filter(|&i| parsed[i].name == "embedding_layer")
        .collect();
    let mut names: Vec<String> = parsed.iter().map(|l| l.name.clone()).collect();
    for (m, &first) in starts.iter().enumerate() {
        let end = starts.get(m + 1).copied().unwrap_or(parsed.len());
        for name in &mut names[first..end] {
            *name = format!("mb{m}.{name}");
        }
    }
    let program = Program {
        layers: parsed,
        names,
        recompute,
    };
    if starts.len() != h.ga as usize {
        return Err(format!(
            "ga: {} micro-batches but the file has {} `embedding_layer` lines (AICB starts each micro-batch with one)",
            h.ga,
            starts.len()
        ));
    }
    Ok(program.pipeline(parallelism, &starts, h.pp_comm))
}

#[cfg(test)]
mod tests;
