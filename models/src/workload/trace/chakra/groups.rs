//! Process groups of a Chakra trace: the `pg_name` of a collective, and the
//! groups PyTorch records in a METADATA node (`## process_group:init ##`),
//! read as ASTRA-sim's `Workload::issue_pytorch_pg_metadata` reads them.

use super::wire::Node;
use crate::workload::trace::TraceBuilder;
use serde::Deserialize;
use std::collections::HashMap;

/// One group as PyTorch writes it; other keys (`pg_desc`, `backend_config`,
/// `pg_size`) are not used.
#[derive(Deserialize)]
struct PgDef {
    pg_name: String,
    ranks: Vec<i64>,
}

/// The process groups a rank's METADATA nodes define, by name: ranks
/// ascending and distinct.
#[derive(Debug, Default)]
pub struct Groups {
    by_name: HashMap<String, Vec<u32>>,
    /// Per `pg_name` a collective used: its trace group and member count,
    /// so that a trace of many collectives looks each group up once.
    used: HashMap<String, (u32, u32)>,
}

/// What a METADATA node's `inputs.values` held.
pub enum Metadata {
    /// No process groups (another kind of metadata).
    None,
    /// Text ASTRA-sim would fail to parse and skip with a message.
    Unreadable,
    /// Process groups, now defined.
    Groups,
}

impl Groups {
    /// Adds the groups of a METADATA node: `inputs.values` is Python's
    /// `str()` of a one-string list, `['<json>']`, the JSON a list of
    /// `{"pg_name": "1", "ranks": [0, 1]}`; empty `ranks` is every rank. A
    /// later definition of a name replaces an earlier one, as in ASTRA-sim.
    pub fn add(&mut self, node: &Node, ranks: u32) -> Result<Metadata, String> {
        if node.inputs_values.is_empty() {
            return Ok(Metadata::None);
        }
        let Some(json) = std::str::from_utf8(node.inputs_values)
            .ok()
            .and_then(|s| s.strip_prefix("['")?.strip_suffix("']"))
        else {
            return Ok(Metadata::Unreadable);
        };
        let Ok(defs) = serde_json::from_str::<Vec<PgDef>>(json) else {
            return Ok(Metadata::Unreadable);
        };
        for def in &defs {
            let mut members = Vec::with_capacity(def.ranks.len().min(ranks as usize));
            for &r in &def.ranks {
                match u32::try_from(r) {
                    Ok(r) if r < ranks => members.push(r),
                    _ => {
                        return Err(format!(
                            "inputs.values: process group {:?} names rank {r}, but the trace has ranks 0-{}",
                            def.pg_name,
                            ranks - 1
                        ))
                    }
                }
            }
            if members.is_empty() {
                members = (0..ranks).collect();
            }
            members.sort_unstable();
            members.dedup();
            self.by_name.insert(def.pg_name.clone(), members);
        }
        Ok(Metadata::Groups)
    }

    /// The trace group a collective's `pg_name` names and its member count:
    /// none, `""` and `"0"` are every rank (ASTRA-sim's default
    /// communicator). `rank` must be a member.
    pub fn group(
        &mut self,
        pg_name: Option<&str>,
        rank: u32,
        ranks: u32,
        builder: &mut TraceBuilder,
    ) -> Result<(u32, u32), String> {
        let name = match pg_name {
            None | Some("") => "0",
            Some(name) => name,
        };
        if let Some(&used) = self.used.get(name) {
            return Ok(used);
        }
        let members = match self.by_name.get(name) {
            _ if name == "0" => (0..ranks).collect(),
            Some(members) => members.clone(),
            None => {
                return Err(format!(
                    "attribute pg_name: process group {name:?} is not defined by a METADATA node \
                     of this file"
                ))
            }
        };
        if members.binary_search(&rank).is_err() {
            return Err(format!("rank {rank} is not in its process group {name:?}"));
        }
        let count = members.len() as u32;
        let used = (builder.group(members), count);
        self.used.insert(name.to_string(), used);
        Ok(used)
    }
}
