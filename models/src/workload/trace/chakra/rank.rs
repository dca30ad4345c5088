//! One rank's Chakra nodes turned into operations, as ASTRA-sim's
//! `Workload::issue` runs them: what each node type does, which attributes
//! it needs, and its dependencies within the rank.

use super::groups::{Groups, Metadata};
use super::wire::{schema::*, Node, Value};
use super::Notes;
use crate::workload::spec::CollectiveOp;
use crate::workload::trace::{Dep, Op, OpKind, TraceBuilder};
use netsim_engine::SimTime;
use std::collections::HashMap;

/// One node and the 1-based record it came from (for errors).
pub struct Record<'a> {
    pub record: usize,
    pub node: Node<'a>,
}

/// Where a rank is in the trace.
pub struct Rank {
    pub rank: u32,
    pub ranks: u32,
    /// The trace index of the rank's first operation.
    pub base: u32,
}

/// A failure: the record it is in and what is wrong.
pub type Failure = (usize, String);

fn type_name(node_type: u64) -> &'static str {
    match node_type {
        INVALID_NODE => "INVALID_NODE",
        METADATA_NODE => "METADATA_NODE",
        MEM_LOAD_NODE => "MEM_LOAD_NODE",
        MEM_STORE_NODE => "MEM_STORE_NODE",
        COMP_NODE => "COMP_NODE",
        COMM_SEND_NODE => "COMM_SEND_NODE",
        COMM_RECV_NODE => "COMM_RECV_NODE",
        COMM_COLL_NODE => "COMM_COLL_NODE",
        _ => "unknown type",
    }
}

/// Adds the rank's operations to `builder`; returns how many. Nodes keep
/// the file's order. METADATA and INVALID nodes do nothing (ASTRA-sim
/// finishes them at once): one without dependencies is dropped with the
/// dependencies on it, one with dependencies becomes a zero compute so that
/// what waits on it still waits on them.
pub fn build(
    builder: &mut TraceBuilder,
    records: &[Record],
    at: &Rank,
    notes: &mut Notes,
) -> Result<u32, Failure> {
    let fail = |r: &Record, message: String| {
        (
            r.record,
            format!(
                "node {} ({}): {message}",
                r.node.id,
                type_name(r.node.node_type)
            ),
        )
    };
    let mut position = HashMap::with_capacity(records.len());
    let mut groups = Groups::default();
    for (i, r) in records.iter().enumerate() {
        if let Some(first) = position.insert(r.node.id, i) {
            let first = records[first].record;
            return Err(fail(
                r,
                format!("the id is also that of the node in record {first}"),
            ));
        }
        if r.node.node_type == METADATA_NODE {
            match groups.add(&r.node, at.ranks).map_err(|e| fail(r, e))? {
                Metadata::Unreadable => notes.unreadable_metadata += 1,
                Metadata::None | Metadata::Groups => {}
            }
        }
    }
    // Per node: its operation's index within the rank, if it has one.
    let mut kinds = Vec::with_capacity(records.len());
    let mut local = Vec::with_capacity(records.len());
    let mut deps: Vec<Vec<u32>> = Vec::with_capacity(records.len());
    for r in records {
        let kind = kind(&r.node, at, &mut groups, builder, notes).map_err(|e| fail(r, e))?;
        let has_deps = !r.node.data_deps.is_empty();
        let kind = kind.or(has_deps.then_some(OpKind::Compute {
            duration: SimTime::ZERO,
        }));
        local.push(kind.map(|_| kinds.len() as u32));
        if let Some(kind) = kind {
            kinds.push((kind, r.node.id));
        }
    }
    for r in records {
        // Counted, not compared with data_deps: that would be quadratic.
        notes.ctrl_deps += r.node.ctrl_deps.len() as u64;
        if local[position[&r.node.id]].is_none() {
            continue;
        }
        let mut on = Vec::with_capacity(r.node.data_deps.len());
        for id in &r.node.data_deps {
            let Some(&p) = position.get(id) else {
                return Err(fail(r, format!("data_deps: node {id} is not in the file")));
            };
            on.extend(local[p]);
        }
        on.sort_unstable();
        on.dedup();
        deps.push(on);
    }
    if let Some(op) = cycle(&deps) {
        let r = &records[position[&kinds[op as usize].1]];
        return Err(fail(r, "its dependencies lead back to it (a cycle)".into()));
    }
    for ((kind, id), on) in kinds.iter().zip(&deps) {
        let on: Vec<Dep> = on
            .iter()
            .map(|&op| Dep {
                op: at.base + op,
                on_start: false,
            })
            .collect();
        builder.op(
            Op {
                kind: *kind,
                label: *id,
            },
            &on,
        );
    }
    Ok(kinds.len() as u32)
}

/// An operation on a cycle of `deps` (Kahn's algorithm), if there is one.
fn cycle(deps: &[Vec<u32>]) -> Option<u32> {
    let mut waiting: Vec<u32> = deps.iter().map(|d| d.len() as u32).collect();
    let mut children = vec![Vec::new(); deps.len()];
    for (op, on) in deps.iter().enumerate() {
        for &d in on {
            children[d as usize].push(op as u32);
        }
    }
    let mut ready: Vec<u32> = (0..deps.len() as u32)
        .filter(|&op| waiting[op as usize] == 0)
        .collect();
    while let Some(op) = ready.pop() {
        for &c in &children[op as usize] {
            waiting[c as usize] -= 1;
            if waiting[c as usize] == 0 {
                ready.push(c);
            }
        }
    }
    // A stuck operation waits on a stuck one; following those from any
    // stuck operation ends on the cycle within `deps.len()` steps.
    let mut op = waiting.iter().position(|&w| w > 0)?;
    for _ in 0..deps.len() {
        let stuck = deps[op].iter().find(|&&d| waiting[d as usize] > 0);
        op = *stuck.expect("a stuck operation waits on a stuck one") as usize;
    }
    Some(op as u32)
}

/// An integer attribute in `0..=max`, if present.
fn int(node: &Node, name: &str, max: u64) -> Result<Option<u64>, String> {
    let Some(attr) = node.attr(name) else {
        return Ok(None);
    };
    match attr.value {
        Value::Unset => Ok(None),
        Value::Int(v) => u64::try_from(v)
            .ok()
            .filter(|&v| v <= max)
            .map(Some)
            .ok_or_else(|| format!("attribute {name} is {v}, outside 0..={max}")),
        Value::Str(_) | Value::Other(_) => Err(format!("attribute {name} is not an integer")),
    }
}

fn required(node: &Node, name: &str, max: u64) -> Result<u64, String> {
    int(node, name, max)?.ok_or_else(|| format!("attribute {name} is missing"))
}

/// A peer rank: in the trace and not this one.
fn peer(node: &Node, name: &str, at: &Rank) -> Result<u32, String> {
    let r = required(node, name, u64::from(u32::MAX))? as u32;
    if r >= at.ranks || r == at.rank {
        return Err(format!(
            "attribute {name} is {r}: the peer must be another of ranks 0-{}",
            at.ranks - 1
        ));
    }
    Ok(r)
}

/// This rank, where given (ASTRA-sim refuses a send not from its own rank).
fn own(node: &Node, name: &str, at: &Rank) -> Result<(), String> {
    match int(node, name, u64::from(u32::MAX))? {
        Some(r) if r != u64::from(at.rank) => Err(format!(
            "attribute {name} is {r}, but this is rank {}'s file",
            at.rank
        )),
        _ => Ok(()),
    }
}

/// What a node does; `None` for one that does nothing.
fn kind(
    node: &Node,
    at: &Rank,
    groups: &mut Groups,
    builder: &mut TraceBuilder,
    notes: &mut Notes,
) -> Result<Option<OpKind>, String> {
    let compute = || {
        SimTime::try_from_us(node.duration_micros)
            .map(|duration| Some(OpKind::Compute { duration }))
            .map_err(|_| {
                format!(
                    "duration_micros {} is past netsim's clock",
                    node.duration_micros
                )
            })
    };
    let tag = || int(node, "comm_tag", u64::from(u32::MAX)).map(Option::unwrap_or_default);
    match node.node_type {
        INVALID_NODE | METADATA_NODE => Ok(None),
        MEM_LOAD_NODE | MEM_STORE_NODE => {
            Err("memory loads and stores are not modelled by netsim".into())
        }
        COMP_NODE => {
            if node.duration_micros == 0 && int(node, "num_ops", u64::MAX)?.unwrap_or(0) > 0 {
                notes.roofline += 1;
            }
            compute()
        }
        // A host-side call that launches a communication kernel (old
        // converters wrote `c10d::` calls so): Chakra's converter now
        // writes it as the COMP_NODE it is; ASTRA-sim refuses it.
        COMM_SEND_NODE | COMM_RECV_NODE | COMM_COLL_NODE
            if int(node, "is_cpu_op", 1)? == Some(1) =>
        {
            notes.cpu_comm += 1;
            compute()
        }
        COMM_SEND_NODE => {
            own(node, "comm_src", at)?;
            let to = peer(node, "comm_dst", at)?;
            let bytes = required(node, "comm_size", u64::MAX)?;
            Ok(Some(OpKind::Send {
                to,
                bytes,
                tag: tag()?,
            }))
        }
        COMM_RECV_NODE => {
            own(node, "comm_dst", at)?;
            let from = Some(peer(node, "comm_src", at)?);
            let bytes = required(node, "comm_size", u64::MAX)?;
            Ok(Some(OpKind::Recv {
                from,
                bytes,
                tag: Some(tag()?),
            }))
        }
        COMM_COLL_NODE => collective(node, at, groups, builder, notes).map(Some),
        t => Err(format!("type {t} is not a Chakra node type (0-7)")),
    }
}

fn collective(
    node: &Node,
    at: &Rank,
    groups: &mut Groups,
    builder: &mut TraceBuilder,
    notes: &mut Notes,
) -> Result<OpKind, String> {
    let comm_type = required(node, "comm_type", u64::MAX)?;
    let op = match comm_type {
        ALL_REDUCE => CollectiveOp::AllReduce,
        ALL_GATHER => CollectiveOp::AllGather,
        REDUCE_SCATTER => CollectiveOp::ReduceScatter,
        ALL_TO_ALL => CollectiveOp::AllToAll,
        BROADCAST => CollectiveOp::Broadcast,
        REDUCE => CollectiveOp::Reduce,
        REDUCE_SCATTER_BLOCK => CollectiveOp::ReduceScatter,
        BARRIER => CollectiveOp::Barrier,
        GATHER => return Err("comm_type 3 (GATHER) is not modelled by netsim".into()),
        SCATTER => return Err("comm_type 4 (SCATTER) is not modelled by netsim".into()),
        t => return Err(format!("comm_type {t} is not a Chakra collective (0-9)")),
    };
    match comm_type {
        BROADCAST => notes.broadcast += 1,
        REDUCE | REDUCE_SCATTER_BLOCK | BARRIER => notes.astra_refuses += 1,
        _ => {}
    }
    let pg_name = match node.attr("pg_name").map(|a| a.value) {
        None | Some(Value::Unset) => None,
        Some(Value::Str(s)) => {
            Some(std::str::from_utf8(s).map_err(|_| "attribute pg_name is not UTF-8".to_string())?)
        }
        Some(_) => return Err("attribute pg_name is not a string".into()),
    };
    let (group, members) = groups.group(pg_name, at.rank, at.ranks, builder)?;
    let size = if comm_type == BARRIER {
        int(node, "comm_size", u64::MAX)?.unwrap_or(0)
    } else {
        required(node, "comm_size", u64::MAX)?
    };
    // ASTRA-sim's (and PyTorch's) all-gather size is each rank's input;
    // netsim's is the gathered output.
    let bytes = if op == CollectiveOp::AllGather {
        let overflow = || format!("attribute comm_size {size} times {members} ranks overflows");
        size.checked_mul(u64::from(members)).ok_or_else(overflow)?
    } else {
        size
    };
    Ok(OpKind::Collective { op, bytes, group })
}
