//! Line 1 of a SimAI/AICB workload: the parallelism policy and its
//! `key: value` settings, checked against each other and against the
//! topology, and the layers whose backward recomputes the forward.

use crate::workload::file::WorkloadFileError;
use crate::workload::groups::Parallelism;

/// The policies of line 1 that netsim runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Policy {
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
pub(super) fn parse_header(
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

/// The job's layout on `all_gpus` of the `hosts` hosts: all data-parallel,
/// or line 1's TP, PP and EP for the hybrid policies.
pub(super) fn header_parallelism(
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

/// For each of the `layers` layers, the checkpoint its backward recomputes
/// the forward from (only under `HybridRecompute`); line 1's layers must exist.
pub(super) fn recompute_from(
    policy: Policy,
    h: &Header,
    layers: usize,
) -> Result<Vec<Option<usize>>, String> {
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
