//! Chakra execution traces (MLCommons' format, ASTRA-sim's input) read into
//! a [`Trace`]: one file per rank, `PREFIX.0.et`, `PREFIX.1.et`, ... Each
//! file is a `GlobalMetadata` record then `Node` records, each prefixed by
//! its varint length (`et_def.proto`, decoded by `wire.rs`).
//!
//! Nodes run as ASTRA-sim's `Workload::issue` runs them (`rank.rs`):
//!
//! - COMP_NODE: compute for `duration_micros` (ASTRA-sim's replay; its
//!   roofline from `num_ops` and `tensor_size` is not modelled, and a zero
//!   duration is zero, where ASTRA-sim waits 1 ns).
//! - COMM_COLL_NODE: collective `comm_type` of `comm_size` bytes on the
//!   group `pg_name` names (none, `""` or `"0"`: every rank; others are
//!   defined by the `process_group:init` METADATA node PyTorch records).
//!   `comm_size` is ASTRA-sim's: each rank's input for an all-gather (so
//!   netsim's output size is it times the group's ranks), the buffer for
//!   the others. ASTRA-sim runs all-reduce, all-gather, reduce-scatter and
//!   all-to-all; netsim also runs broadcast (ASTRA-sim waits its duration),
//!   reduce, barrier and REDUCE_SCATTER_BLOCK (as a reduce-scatter), which
//!   ASTRA-sim refuses, and says so once. GATHER and SCATTER are refused.
//! - COMM_SEND_NODE / COMM_RECV_NODE: `comm_size` bytes to `comm_dst` /
//!   from `comm_src` with `comm_tag` (default 0).
//! - A communication node with `is_cpu_op` set is the host call that
//!   launched a kernel (old converters wrote PyTorch's `c10d::` calls so;
//!   Chakra's converter now writes them as COMP_NODEs): compute for its
//!   duration. ASTRA-sim refuses it.
//! - METADATA_NODE and INVALID_NODE do nothing; MEM_LOAD_NODE,
//!   MEM_STORE_NODE and unknown types are refused.
//! - `data_deps` mean "after that node ends"; one on a node not in the
//!   file is an error. `ctrl_deps` are not an order: PyTorch's converter
//!   writes there the operator a node ran inside (Chakra's feeder reads
//!   `data_deps` only; ASTRA-sim's resolves both, and Chakra's own test
//!   trace then has cycles), so netsim ignores them and says so.
//!
//! Errors name the file, the record (1 is the `GlobalMetadata`, 2 the first
//! node: in place of a text file's line), the node id and the field.

mod groups;
mod rank;
mod wire;

use super::{Trace, TraceBuilder};
use crate::workload::file::WorkloadFileError;
use rank::{Rank, Record};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The per-rank files `path` names: a directory holding `PREFIX.N.et`
/// files of one prefix, or a prefix whose `PREFIX.0.et` exists. `Ok(None)`
/// when it names no Chakra trace. An error when rank files are missing
/// (ranks run 0 to the highest, without gaps), the directory holds
/// several traces, or `path` is one rank's file.
pub fn files(path: &Path) -> Result<Option<Vec<PathBuf>>, WorkloadFileError> {
    let err = |path: &Path, message: String| WorkloadFileError {
        path: path.display().to_string(),
        line: 0,
        message,
    };
    let (dir, prefix) = if path.is_dir() {
        let mut prefixes = BTreeSet::new();
        for name in names(path) {
            prefixes.extend(rank_file(&name).map(|(prefix, _)| prefix.to_string()));
        }
        match prefixes.len() {
            0 => return Ok(None),
            1 => (path.to_path_buf(), prefixes.pop_first().expect("one")),
            _ => {
                let list: Vec<String> = prefixes.iter().map(|p| format!("{p}.*.et")).collect();
                return Err(err(
                    path,
                    format!(
                        "holds several Chakra traces ({}); name one by its prefix",
                        list.join(", ")
                    ),
                ));
            }
        }
    } else {
        let Some(prefix) = path.file_name().and_then(|p| p.to_str()) else {
            return Ok(None);
        };
        if let Some((of, _)) = rank_file(prefix).filter(|_| path.is_file()) {
            let message = format!(
                "is one rank's file of a Chakra trace: name the trace by its directory or its prefix `{of}`"
            );
            return Err(err(path, message));
        }
        let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
        if !dir.join(format!("{prefix}.0.et")).is_file() {
            return Ok(None);
        }
        (dir, prefix.to_string())
    };
    let ranks: BTreeSet<u32> = names(&dir)
        .iter()
        .filter_map(|name| {
            rank_file(name)
                .filter(|(p, _)| *p == prefix)
                .map(|(_, r)| r)
        })
        .collect();
    let last = *ranks.last().expect("rank 0 exists");
    let mut out = Vec::with_capacity(ranks.len());
    for rank in 0..=last {
        let file = dir.join(format!("{prefix}.{rank}.et"));
        if !ranks.contains(&rank) {
            let message = format!("missing: the trace's files run to rank {last}");
            return Err(err(&file, message));
        }
        out.push(file);
    }
    Ok(Some(out))
}

/// The names of a directory's entries (`""` is the current directory).
fn names(dir: &Path) -> Vec<String> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

/// `PREFIX.N.et` split into its prefix and rank (N written plainly).
fn rank_file(name: &str) -> Option<(&str, u32)> {
    let (prefix, rank) = name.strip_suffix(".et")?.rsplit_once('.')?;
    let plain = !prefix.is_empty() && (rank == "0" || !rank.starts_with('0'));
    let rank = rank
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| rank.parse().ok())??;
    plain.then_some((prefix, rank))
}

/// Reads a trace whose rank `r` is `files[r]`.
pub fn read(files: &[PathBuf]) -> Result<Trace, WorkloadFileError> {
    read_noted(files).map(|(trace, _)| trace)
}

/// [`read`], with a line for the user for each way netsim runs the trace
/// differently from ASTRA-sim (`note: ...`), each said once.
pub fn read_noted(files: &[PathBuf]) -> Result<(Trace, Vec<String>), WorkloadFileError> {
    let ranks = u32::try_from(files.len()).expect("fewer than 2^32 files");
    let mut builder = TraceBuilder::new();
    let mut notes = Notes::default();
    let mut base = 0u32;
    for (rank, path) in files.iter().enumerate() {
        let err = |line: usize, message: String| WorkloadFileError {
            path: path.display().to_string(),
            line,
            message,
        };
        let bytes = std::fs::read(path)
            .map_err(|e| err(0, format!("cannot read rank {rank}'s Chakra trace: {e}")))?;
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(err(
                0,
                "is gzip-compressed; decompress it (gunzip) first".into(),
            ));
        }
        let records = wire::records(&bytes).map_err(|(n, e)| err(n, format!("record {n}: {e}")))?;
        let Some((metadata, nodes)) = records.split_first() else {
            return Err(err(
                0,
                "is empty: a Chakra trace starts with its GlobalMetadata".into(),
            ));
        };
        wire::message(metadata).map_err(|e| err(1, format!("GlobalMetadata: {e}")))?;
        let nodes = nodes
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let record = i + 2;
                let node =
                    wire::node(bytes).map_err(|e| err(record, format!("node record: {e}")))?;
                Ok(Record { record, node })
            })
            .collect::<Result<Vec<_>, WorkloadFileError>>()?;
        let at = Rank {
            rank: rank as u32,
            ranks,
            base,
        };
        let ops = rank::build(&mut builder, &nodes, &at, &mut notes).map_err(|(n, e)| err(n, e))?;
        base = base
            .checked_add(ops)
            .filter(|&b| b < u32::MAX)
            .ok_or_else(|| err(0, "the trace has more than 2^32 operations".into()))?;
        builder.end_rank(path.display().to_string());
    }
    Ok((builder.finish(), notes.lines()))
}

/// Counts of what netsim runs differently from ASTRA-sim, told once.
#[derive(Debug, Default)]
struct Notes {
    cpu_comm: u64,
    ctrl_deps: u64,
    broadcast: u64,
    astra_refuses: u64,
    roofline: u64,
    unreadable_metadata: u64,
}

impl Notes {
    fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut note = |count: u64, text: &str| {
            if count > 0 {
                out.push(format!("note: Chakra trace: {count} {text}"));
            }
        };
        note(self.cpu_comm, "communication nodes with is_cpu_op set (host calls that launched kernels) run as compute of their duration; ASTRA-sim refuses them");
        note(self.ctrl_deps, "ctrl_deps are ignored: they name the operator a node ran inside, not an order (data_deps are)");
        note(self.broadcast, "BROADCAST collectives run as broadcasts; ASTRA-sim waits their duration_micros instead");
        note(self.astra_refuses, "REDUCE, REDUCE_SCATTER_BLOCK or BARRIER collectives run (a reduce-scatter for REDUCE_SCATTER_BLOCK); ASTRA-sim refuses them");
        note(self.roofline, "compute nodes have num_ops but no duration_micros and take no time; ASTRA-sim's roofline model is not modelled");
        note(self.unreadable_metadata, "METADATA nodes hold inputs.values that are not process groups and are ignored, as ASTRA-sim does");
        out
    }
}
