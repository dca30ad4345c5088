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
use netsim_engine::SimTime;
use program::Program;
use std::path::Path;

mod program;

/// The policies of line 1 that netsim runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// `DATA`, `MICRO`, `MODEL`: every collective on all ranks.
    AllRanks,
    /// `HYBRID_TRANSFORMER`: forward and input-gradient on TP, weight-gradient on DP.
    Hybrid,
    /// `HYBRID_TRANSFORMER_FWD_IN_BCKWD`: Hybrid, with activation
    /// recomputation at `checkpoint_initiates` layers.
    HybridRecompute,
}

/// Line 1's settings, with SimAI's defaults for those left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// `model_parallel_NPU_group`: the TP size.
    pub tp: u32,
    pub ep: u32,
    pub pp: u32,
    /// Virtual stages per rank: SimAI uses it only in its bubble estimate.
    pub vpp: u32,
    /// Micro-batches per iteration (gradient accumulation).
    pub ga: u32,
    /// GPUs of the job; `None`: every host.
    pub all_gpus: Option<u32>,
    /// Layers whose activations are kept (recomputation restarts there).
    pub checkpoints: Vec<u32>,
    /// Layers whose backward first recomputes the forward from the checkpoint below.
    pub checkpoint_initiates: Vec<u32>,
    /// Bytes of activations (and gradients) between adjacent stages per micro-batch.
    pub pp_comm: u64,
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

const KEYS: [&str; 9] = [
    "model_parallel_NPU_group",
    "ep",
    "pp",
    "vpp",
    "ga",
    "all_gpus",
    "checkpoints",
    "checkpoint_initiates",
    "pp_comm",
];

const POLICIES: &str = "DATA, MICRO, MODEL, HYBRID_TRANSFORMER, HYBRID_TRANSFORMER_FWD_IN_BCKWD";

/// Parses line 1 (`n` is its line number).
fn parse_header(
    line: &str,
    err: &dyn Fn(String) -> WorkloadFileError,
) -> Result<(Policy, Header), WorkloadFileError> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let policy = parse_policy(tokens[0], err)?;
    let mut h = Header {
        tp: 1,
        ep: 1,
        pp: 1,
        vpp: 1,
        ga: 1,
        ..Header::default()
    };
    let mut i = 1;
    let value = |i: usize, key: &str| -> Result<u64, WorkloadFileError> {
        let v = tokens
            .get(i)
            .ok_or_else(|| err(format!("{key}: missing its value")))?;
        if v.starts_with('-') {
            return Err(err(format!("{key}: `{v}` is negative")));
        }
        v.parse()
            .map_err(|_| err(format!("{key}: `{v}` is not a non-negative integer")))
    };
    let small = |v: u64, key: &str| -> Result<u32, WorkloadFileError> {
        u32::try_from(v).map_err(|_| err(format!("{key}: {v} is too large")))
    };
    while i < tokens.len() {
        let key = tokens[i].trim_end_matches(':');
        // SimAI requires the colon except after `pp_comm`.
        if !tokens[i].ends_with(':') && key != "pp_comm" && KEYS.contains(&key) {
            return Err(err(format!("{key}: write it `{key}:`")));
        }
        match key {
            "model_parallel_NPU_group" => h.tp = small(value(i + 1, key)?, key)?,
            "ep" => h.ep = small(value(i + 1, key)?, key)?,
            "pp" => h.pp = small(value(i + 1, key)?, key)?,
            "vpp" => h.vpp = small(value(i + 1, key)?, key)?,
            "ga" => h.ga = small(value(i + 1, key)?, key)?,
            "all_gpus" => h.all_gpus = Some(small(value(i + 1, key)?, key)?),
            "pp_comm" => h.pp_comm = value(i + 1, key)?,
            "checkpoints" | "checkpoint_initiates" => {
                let count = value(i + 1, key)?;
                // Bounded by the tokens present before anything is kept.
                if count > (tokens.len() - i - 2) as u64 {
                    return Err(err(format!(
                        "{key}: {count} layers announced but fewer follow"
                    )));
                }
                let mut layers = Vec::with_capacity(count as usize);
                for k in 0..count as usize {
                    layers.push(small(value(i + 2 + k, key)?, key)?);
                }
                i += count as usize;
                if key == "checkpoints" {
                    h.checkpoints = layers;
                } else {
                    h.checkpoint_initiates = layers;
                }
            }
            other => {
                return Err(err(format!(
                    "unknown setting `{other}` ({})",
                    KEYS.join(", ")
                )))
            }
        }
        i += 2;
    }
    check_header(&h, err)?;
    Ok((policy, h))
}

/// Line 1's parallelism policy, `policy`.
fn parse_policy(
    policy: &str,
    err: &dyn Fn(String) -> WorkloadFileError,
) -> Result<Policy, WorkloadFileError> {
    Ok(match policy {
        "DATA" | "MICRO" | "MODEL" => Policy::AllRanks,
        "HYBRID_TRANSFORMER" => Policy::Hybrid,
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD" => Policy::HybridRecompute,
        p @ ("HYBRID_DLRM"
        | "HYBRID_DLRM_ENHANCED"
        | "HYBRID_DATA_MODEL"
        | "HYBRID_MODEL_DATA"
        | "HYBRID_CUSTOMIZED"
        | "DISTRIBUTED_INFERENCE") => {
            return Err(err(format!(
                "parallelism policy: `{p}` is not supported by netsim ({POLICIES})"
            )))
        }
        other => {
            return Err(err(format!(
                "parallelism policy: unknown `{other}` ({POLICIES})"
            )))
        }
    })
}

/// Line 1's settings are positive where they must be; a pipeline says
/// what its stages send.
fn check_header(
    h: &Header,
    err: &dyn Fn(String) -> WorkloadFileError,
) -> Result<(), WorkloadFileError> {
    for (name, v) in [
        ("model_parallel_NPU_group", h.tp),
        ("ep", h.ep),
        ("pp", h.pp),
        ("vpp", h.vpp),
        ("ga", h.ga),
    ] {
        if v == 0 {
            return Err(err(format!("{name}: must be positive")));
        }
    }
    if h.all_gpus == Some(0) {
        return Err(err("all_gpus: must be positive".into()));
    }
    if h.pp > 1 && h.pp_comm == 0 {
        return Err(err(format!(
            "pp_comm: pp {} needs the bytes sent between stages per micro-batch",
            h.pp
        )));
    }
    Ok(())
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

/// The job's layout on `all_gpus` of the `hosts` hosts: all data-parallel,
/// or line 1's TP, PP and EP for the hybrid policies.
fn header_parallelism(
    policy: Policy,
    h: &Header,
    hosts: u32,
    err: &dyn Fn(String) -> WorkloadFileError,
) -> Result<Parallelism, WorkloadFileError> {
    let world = h.all_gpus.unwrap_or(hosts);
    if world > hosts {
        return Err(err(format!(
            "all_gpus: {world} GPUs but the topology has {hosts} hosts"
        )));
    }
    Ok(match policy {
        Policy::AllRanks => Parallelism::data_parallel(world),
        Policy::Hybrid | Policy::HybridRecompute => Parallelism::new(world, h.tp, h.pp, h.ep)
            .map_err(|e| {
                err(format!(
                    "all_gpus: {world} GPUs do not fit model_parallel_NPU_group {} x pp {} x ep {}: {e}",
                    h.tp, h.pp, h.ep
                ))
            })?,
    })
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

/// For each of the `layers` layers, the checkpoint its backward recomputes
/// the forward from (only under `HybridRecompute`); line 1's layers must exist.
fn recompute_from(policy: Policy, h: &Header, layers: usize) -> Result<Vec<Option<usize>>, String> {
    for (key, list) in [
        ("checkpoints", &h.checkpoints),
        ("checkpoint_initiates", &h.checkpoint_initiates),
    ] {
        if let Some(l) = list.iter().find(|&&l| l as usize >= layers) {
            return Err(format!(
                "{key}: layer {l} but the file has {layers} layers (0..{})",
                layers - 1
            ));
        }
    }
    let mut recompute = vec![None; layers];
    if policy == Policy::HybridRecompute {
        for &l in &h.checkpoint_initiates {
            let from = h
                .checkpoints
                .iter()
                .filter(|&&c| c <= l)
                .max()
                .ok_or_else(|| {
                    format!("checkpoint_initiates: layer {l} has no checkpoint at or below it")
                })?;
            recompute[l as usize] = Some(*from as usize);
        }
    }
    Ok(recompute)
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
