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
//! bytes; a size of 0 is no communication, as `NONE` is.
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
use super::spec::{Algorithm, CollectiveOp, OpSpec, Phase, PhaseKind, WorkloadSpec};
use netsim_engine::SimTime;
use std::path::Path;

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
    let policy = match tokens[0] {
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
    };
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
    Ok((policy, h))
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

const COMM_TYPES: &str = "NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, ALLREDUCEALLTOALL, each with an optional _EP or _DP_EP";

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
    let (policy, h) = parse_header(header, &|m| err(n1, m))?;
    let world = h.all_gpus.unwrap_or(hosts);
    if world > hosts {
        return Err(err(
            n1,
            format!("all_gpus: {world} GPUs but the topology has {hosts} hosts"),
        ));
    }
    let parallelism = match policy {
        Policy::AllRanks => Parallelism::data_parallel(world),
        Policy::Hybrid | Policy::HybridRecompute => Parallelism::new(world, h.tp, h.pp, h.ep)
            .map_err(|e| {
                err(
                    n1,
                    format!(
                        "all_gpus: {world} GPUs do not fit model_parallel_NPU_group {} x pp {} x ep {}: {e}",
                        h.tp, h.pp, h.ep
                    ),
                )
            })?,
    };
    let (n2, count) = lines
        .next()
        .ok_or_else(|| err(n1, "missing the layer count (line 2)".into()))?;
    let count = count.trim();
    if count.starts_with('-') {
        return Err(err(n2, format!("layer count: `{count}` is negative")));
    }
    let layers: usize = count
        .parse()
        .map_err(|_| err(n2, format!("layer count: `{count}` is not a number")))?;
    if layers == 0 {
        return Err(err(n2, "layer count: must be positive".into()));
    }
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
    for (key, list) in [
        ("checkpoints", &h.checkpoints),
        ("checkpoint_initiates", &h.checkpoint_initiates),
    ] {
        if let Some(l) = list.iter().find(|&&l| l as usize >= layers) {
            return Err(err(
                n1,
                format!(
                    "{key}: layer {l} but the file has {layers} layers (0..{})",
                    layers - 1
                ),
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
                    err(
                        n1,
                        format!("checkpoint_initiates: layer {l} has no checkpoint at or below it"),
                    )
                })?;
            recompute[l as usize] = Some(*from as usize);
        }
    }
    let phases = if h.pp == 1 {
        let program = Program {
            layers: &parsed,
            names: parsed.iter().map(|l| l.name.clone()).collect(),
            recompute: &recompute,
        };
        let (mut phases, mut last) = (Vec::new(), None);
        program.forward(None, &mut phases, &mut last, None, &mut |_, _, _| {});
        program.backward(None, &mut phases, &mut last, None, &mut |_, _, _| {});
        phases
    } else {
        // Micro-batch m: from its `embedding_layer` line to the next one.
        let starts: Vec<usize> = (0..layers)
            .filter(|&i| parsed[i].name == "embedding_layer")
            .collect();
        let mut names: Vec<String> = parsed.iter().map(|l| l.name.clone()).collect();
        for (m, &first) in starts.iter().enumerate() {
            let end = starts.get(m + 1).copied().unwrap_or(layers);
            for name in &mut names[first..end] {
                *name = format!("mb{m}.{name}");
            }
        }
        let program = Program {
            layers: &parsed,
            names,
            recompute: &recompute,
        };
        if starts.len() != h.ga as usize {
            return Err(err(
                n1,
                format!(
                    "ga: {} micro-batches but the file has {} `embedding_layer` lines (AICB starts each micro-batch with one)",
                    h.ga,
                    starts.len()
                ),
            ));
        }
        program.pipeline(&parallelism, &starts, h.pp_comm)
    };
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

/// The layer lines and where the backward recomputes forwards.
struct Program<'a> {
    layers: &'a [Layer],
    /// Per line, the name its phases carry (micro-batch prefixed in a pipeline).
    names: Vec<String>,
    /// Per layer: recompute the forwards of layers `from..layer` before its backward.
    recompute: &'a [Option<usize>],
}

/// Where a stage waits for, or sends to, a neighbouring stage.
struct Pipe {
    /// Per micro-batch: the phase (a `send`) the stage waits for before it.
    recv: Vec<Option<usize>>,
    /// Per line: `Some(m)` if micro-batch `m` ends there (forward: its last
    /// line; backward: its first line).
    send_after: Vec<Option<usize>>,
    /// Per line: `Some(m)` if micro-batch `m` starts there.
    recv_before: Vec<Option<usize>>,
}

impl Program<'_> {
    /// Forward of every line on `stage`, after `last`.
    fn forward(
        &self,
        stage: Option<u32>,
        phases: &mut Vec<Phase>,
        last: &mut Option<usize>,
        pipe: Option<&Pipe>,
        on_boundary: &mut dyn FnMut(&mut Vec<Phase>, usize, usize),
    ) {
        for i in 0..self.layers.len() {
            let wait = pipe.and_then(|p| p.recv[p.recv_before[i]?]);
            self.forward_line(stage, phases, last, i, wait);
            if let Some(m) = pipe.and_then(|p| p.send_after[i]) {
                on_boundary(phases, m, last.expect("a line adds phases"));
            }
        }
    }

    fn forward_line(
        &self,
        stage: Option<u32>,
        phases: &mut Vec<Phase>,
        last: &mut Option<usize>,
        i: usize,
        wait: Option<usize>,
    ) {
        let (l, name) = (&self.layers[i], &self.names[i]);
        let after: Vec<usize> = last.iter().copied().chain(wait).collect();
        *last = Some(push(
            phases,
            format!("{name}.fwd"),
            compute(l.compute[0]),
            after,
            stage,
        ));
        if let Some(op) = &l.comm[0] {
            *last = Some(push(
                phases,
                format!("{name}.fwd.{}", op.op.name()),
                PhaseKind::Collective(op.clone()),
                vec![last.unwrap()],
                stage,
            ));
        }
    }

    /// Backward of every line, last first, on `stage`.
    fn backward(
        &self,
        stage: Option<u32>,
        phases: &mut Vec<Phase>,
        last: &mut Option<usize>,
        pipe: Option<&Pipe>,
        on_boundary: &mut dyn FnMut(&mut Vec<Phase>, usize, usize),
    ) {
        for i in (0..self.layers.len()).rev() {
            let (l, name) = (&self.layers[i], &self.names[i]);
            let mut wait = pipe.and_then(|p| p.recv[p.recv_before[i]?]);
            if let Some(from) = self.recompute[i] {
                for j in from..i {
                    self.forward_line(stage, phases, last, j, wait.take());
                }
            }
            let after: Vec<usize> = last.iter().copied().chain(wait).collect();
            *last = Some(push(
                phases,
                format!("{name}.ig"),
                compute(l.compute[1]),
                after,
                stage,
            ));
            if let Some(op) = &l.comm[1] {
                *last = Some(push(
                    phases,
                    format!("{name}.ig.{}", op.op.name()),
                    PhaseKind::Collective(op.clone()),
                    vec![last.unwrap()],
                    stage,
                ));
            }
            *last = Some(push(
                phases,
                format!("{name}.wg"),
                compute(l.compute[2]),
                vec![last.unwrap()],
                stage,
            ));
            let mut update_after = vec![last.unwrap()];
            if let Some(op) = &l.comm[2] {
                // Overlaps the rest of the backward pass.
                update_after = vec![push(
                    phases,
                    format!("{name}.wg.{}", op.op.name()),
                    PhaseKind::Collective(op.clone()),
                    vec![last.unwrap()],
                    stage,
                )];
            }
            push(
                phases,
                format!("{name}.update"),
                compute(l.update),
                update_after,
                stage,
            );
            if let Some(m) = pipe.and_then(|p| p.send_after[i]) {
                on_boundary(phases, m, last.expect("a line adds phases"));
            }
        }
    }

    /// Every stage's program with the transfers between them: forwards
    /// stage 0 first (each waits for the activations of the stage before),
    /// then backwards from the last stage (each waits for the gradients of
    /// the stage after).
    fn pipeline(&self, p: &Parallelism, starts: &[usize], pp_comm: u64) -> Vec<Phase> {
        let n = self.layers.len();
        let ga = starts.len();
        let mut first_of = vec![None; n];
        let mut last_of = vec![None; n];
        for (m, &s) in starts.iter().enumerate() {
            let end = starts.get(m + 1).copied().unwrap_or(n) - 1;
            first_of[s] = Some(m);
            last_of[end] = Some(m);
        }
        let mut phases = Vec::new();
        let mut last: Vec<Option<usize>> = vec![None; p.pp as usize];
        // sent[m]: the send phase into the next stage to consume.
        let mut sent: Vec<Option<usize>> = vec![None; ga];
        for s in 0..p.pp {
            let start = push(
                &mut phases,
                "start".into(),
                compute(SimTime::ZERO),
                Vec::new(),
                Some(s),
            );
            last[s as usize] = Some(start);
            let pipe = Pipe {
                recv: std::mem::replace(&mut sent, vec![None; ga]),
                send_after: if s + 1 < p.pp {
                    last_of.clone()
                } else {
                    vec![None; n]
                },
                recv_before: first_of.clone(),
            };
            let mut out = vec![None; ga];
            self.forward(
                Some(s),
                &mut phases,
                &mut last[s as usize],
                Some(&pipe),
                &mut |phases, m, after| {
                    out[m] = Some(push(
                        phases,
                        format!("mb{m}.activations"),
                        PhaseKind::Send {
                            size_bytes: pp_comm,
                            from: s,
                            to: s + 1,
                        },
                        vec![after],
                        Some(s),
                    ));
                },
            );
            sent = out;
        }
        sent = vec![None; ga];
        for s in (0..p.pp).rev() {
            let pipe = Pipe {
                recv: std::mem::replace(&mut sent, vec![None; ga]),
                send_after: if s > 0 {
                    first_of.clone()
                } else {
                    vec![None; n]
                },
                recv_before: last_of.clone(),
            };
            let mut out = vec![None; ga];
            self.backward(
                Some(s),
                &mut phases,
                &mut last[s as usize],
                Some(&pipe),
                &mut |phases, m, after| {
                    out[m] = Some(push(
                        phases,
                        format!("mb{m}.gradients"),
                        PhaseKind::Send {
                            size_bytes: pp_comm,
                            from: s,
                            to: s - 1,
                        },
                        vec![after],
                        Some(s),
                    ));
                },
            );
            sent = out;
        }
        phases
    }
}

fn compute(d: SimTime) -> PhaseKind {
    PhaseKind::Compute {
        duration: d,
        group: GroupSpec::All,
    }
}

fn push(
    phases: &mut Vec<Phase>,
    name: String,
    kind: PhaseKind,
    after: Vec<usize>,
    stage: Option<u32>,
) -> usize {
    phases.push(Phase {
        // In a pipeline, every phase name starts with its stage.
        name: match stage {
            Some(s) => format!("s{s}.{name}"),
            None => name,
        },
        kind,
        after,
        stage,
    });
    phases.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let micro = include_str!("../../../runs/scenarios/workloads/simai-microAllReduce.txt");
        let spec = parse_ok(micro, 8);
        assert_eq!(collective(&spec, 1).size_bytes, 16 << 20);
        let ep = include_str!("../../../runs/scenarios/workloads/simai-ep-test-32.txt");
        assert_eq!(
            parse_ok(ep, 32).parallelism,
            Some(Parallelism::new(32, 4, 1, 4).unwrap())
        );
        let moe = include_str!("../../../runs/scenarios/workloads/simai-moe-9216.txt");
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
}
