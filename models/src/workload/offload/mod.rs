//! In-network computing: switch profiles, aggregation trees over the
//! switches, and the decision to offload an operation or fall back to a
//! host algorithm.
//!
//! A tree spans the group's leaf switches (the first network switch of each
//! member; NVSwitches are the server's NVLink domain, not the network) and
//! is rooted at the switch closest to all of them (smallest maximum hop
//! count, lowest id on ties); each leaf reaches the root along a shortest
//! path. Members send packet-sized chunks up; a switch aggregates a chunk
//! once every child's copy has arrived, forwards one partial aggregate to
//! its parent, and the root multicasts the result back down. Each member
//! keeps at most `slots` chunks outstanding and sends chunk `j + slots` when
//! result `j` arrives (SwitchML's self-clocking), so a switch never needs
//! more than `slots` aggregation slots for the operation.
//!
//! `profile.rs`: what a switch can aggregate; `tree.rs`: the aggregation
//! tree of a group; here: the offloaded operation and its admission.

mod profile;
mod tree;

pub use profile::{Dtype, ReduceOp, SwitchProfile};
pub use tree::{aggregation_tree, uplink, Members, TreeNode};

use netsim_engine::SimTime;
use netsim_topo::NodeIndex;

/// Reduction or barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InaKind {
    Reduce,
    Barrier,
}

/// Where an operation's chunks go, on a tree of one switch or more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InaPattern {
    /// Every member streams the whole buffer; each chunk's result goes to
    /// every member (all-reduce, barrier).
    AllReduce,
    /// Every member streams the whole buffer; chunk `j`'s result goes to
    /// its owner, member `j x members / chunks`, and the others get a
    /// header-only credit that frees the slot (NVLS reduce-scatter by
    /// `multimem.ld_reduce`: `S` up, `S/n` down). One switch only.
    ReduceScatter,
    /// Member `m` streams only its own shard (`size_bytes`); the switch
    /// passes each chunk on as it arrives, unreduced, to every member
    /// (NVLS all-gather by `multimem.st`: `S/n` up, `S` down). One switch
    /// only; a member's stream ends when it holds every member's shard.
    AllGather,
}

/// An offloaded operation: its tree, chunking and flow control.
#[derive(Clone, Debug, PartialEq)]
pub struct InaOp {
    pub collective: u32,
    pub kind: InaKind,
    /// In node order.
    pub tree: Vec<TreeNode>,
    /// Each member's contribution.
    pub size_bytes: u64,
    /// Payload bytes of a full chunk; the last may be shorter.
    pub chunk_bytes: u32,
    pub chunks: u32,
    /// Chunks a member may have outstanding (= aggregation slots per switch).
    pub slots: u32,
    pub processing: SimTime,
    /// Throughput of the switch's reduction and multicast engine behind
    /// each member's port, when it is below the port's rate (the NVSwitch's
    /// NVLink SHARP engine, see [`crate::workload::nccl::nvls`]): a chunk is
    /// reduced and multicast only after the engine has passed every chunk
    /// before it. `None`: the engine keeps up with the ports (Tofino, SHARP).
    pub engine_bps: Option<u64>,
    /// The root sends results down in groups of this many chunks (chunk
    /// `j` in group `j / release_chunks`; the last group holds the rest),
    /// each group once all of its chunks are reduced, its chunks one after
    /// another at the slowest child port's rate. MockNccl's NVLS takes
    /// `ceil(S/4 / chunk_bytes)`: SimAI's NVSwitch sends a chunk of `S/4`
    /// down only after every GPU's copy of it is in. 1: each chunk when it
    /// is reduced. Only all-reduce and reduce-scatter; switches below the
    /// root pass each chunk up when it is reduced.
    pub release_chunks: u32,
    pub pattern: InaPattern,
    pub members: Members,
}

impl InaOp {
    /// The tree node of switch `node`, if it is in the tree.
    pub fn tree_node(&self, node: NodeIndex) -> Option<&TreeNode> {
        let i = self.tree.binary_search_by_key(&node, |t| t.node).ok()?;
        Some(&self.tree[i])
    }

    /// Payload bytes of chunk `chunk`: `chunk_bytes`, less for the last.
    pub fn chunk_payload_bytes(&self, chunk: u32) -> u64 {
        (self.size_bytes - u64::from(chunk) * u64::from(self.chunk_bytes))
            .min(u64::from(self.chunk_bytes))
    }

    /// Wire bytes on a member's more loaded direction: its own stream, or
    /// for [`InaPattern::AllGather`] every member's shard coming down.
    pub fn loaded_wire_bytes(&self, header_bytes: u64) -> u64 {
        let one = self.stream_wire_bytes(header_bytes);
        match self.pattern {
            InaPattern::AllGather => one.saturating_mul(self.members.len() as u64),
            InaPattern::AllReduce | InaPattern::ReduceScatter => one,
        }
    }

    /// The member that owns chunk `chunk`'s result under
    /// [`InaPattern::ReduceScatter`]: the chunks split evenly, in member order.
    pub fn owner_of(&self, chunk: u32) -> NodeIndex {
        let n = self.members.len() as u64;
        let m = u64::from(chunk) * n / u64::from(self.chunks.max(1));
        self.members[m as usize].0
    }

    /// One member's stream on the wire: every chunk's payload and a header
    /// of `header_bytes` each (all chunks but the last are full).
    pub fn stream_wire_bytes(&self, header_bytes: u64) -> u64 {
        let Some(full) = self.chunks.checked_sub(1) else {
            return 0;
        };
        u64::from(full) * (u64::from(self.chunk_bytes) + header_bytes)
            + self.chunk_payload_bytes(full)
            + header_bytes
    }
}

/// The port `host` streams into `op` from: toward the NVSwitch when the
/// NVSwitch is the tree (NVLS), else its network uplink.
pub fn member_port(
    topo: &netsim_topo::Topology,
    op: &InaOp,
    host: NodeIndex,
) -> Option<netsim_topo::PortIndex> {
    let root = op.tree.first()?.node;
    if topo.role(root) == netsim_topo::Role::NvSwitch {
        let i = topo.ports(host).iter().position(|p| p.peer == root)?;
        return Some(i as netsim_topo::PortIndex);
    }
    uplink(topo, host).map(|(port, _)| port)
}

/// Why an operation cannot be offloaded, if it cannot. `groups_in_use` and
/// `slots_in_use` are per switch, updated when the operation is accepted.
pub struct Resources {
    pub reduce_groups: Vec<u32>,
    pub barrier_groups: Vec<u32>,
    pub slots: Vec<u32>,
}

impl Resources {
    pub fn new(nodes: u32) -> Resources {
        Resources {
            reduce_groups: vec![0; nodes as usize],
            barrier_groups: vec![0; nodes as usize],
            slots: vec![0; nodes as usize],
        }
    }
}

/// Decides whether `tree` can take the operation under `profile` and the
/// resources left; on success reserves them and returns the slots granted.
/// On failure returns the reason and the switch (or switches) to blame.
pub fn admit(
    profile: &SwitchProfile,
    kind: InaKind,
    dtype: Dtype,
    op: ReduceOp,
    tree: &[TreeNode],
    resources: &mut Resources,
) -> Result<u32, (String, Vec<NodeIndex>)> {
    let all: Vec<NodeIndex> = tree.iter().map(|t| t.node).collect();
    match kind {
        InaKind::Barrier => {
            if !profile.barriers {
                return Err(("switch barriers disabled".into(), all));
            }
            for t in tree {
                if t.child_ports.len() as u32 > profile.barrier_max_members {
                    return Err((
                        format!(
                            "switch {}: {} barrier members exceed the limit of {}",
                            t.node,
                            t.child_ports.len(),
                            profile.barrier_max_members
                        ),
                        vec![t.node],
                    ));
                }
                if resources.barrier_groups[t.node as usize] >= profile.barrier_max_groups {
                    return Err((
                        format!(
                            "switch {}: barrier group table full ({} groups)",
                            t.node, profile.barrier_max_groups
                        ),
                        vec![t.node],
                    ));
                }
            }
            for t in tree {
                resources.barrier_groups[t.node as usize] += 1;
            }
            Ok(1)
        }
        InaKind::Reduce => {
            if !profile.dtypes.contains(&dtype) {
                return Err((
                    format!(
                        "{} switches do not reduce {} (only {})",
                        profile.name,
                        dtype.name(),
                        names(profile.dtypes.iter().map(|d| d.name()))
                    ),
                    all,
                ));
            }
            if !profile.ops.contains(&op) {
                return Err((
                    format!(
                        "{} switches do not compute {} (only {})",
                        profile.name,
                        op.name(),
                        names(profile.ops.iter().map(|o| o.name()))
                    ),
                    all,
                ));
            }
            let mut slots = profile.slots_per_group;
            for t in tree {
                let n = t.node as usize;
                if t.child_ports.len() as u32 > profile.max_children {
                    return Err((
                        format!(
                            "switch {}: {} children exceed the limit of {}",
                            t.node,
                            t.child_ports.len(),
                            profile.max_children
                        ),
                        vec![t.node],
                    ));
                }
                if resources.reduce_groups[n] >= profile.max_groups {
                    return Err((
                        format!(
                            "switch {}: reduction group table full ({} groups)",
                            t.node, profile.max_groups
                        ),
                        vec![t.node],
                    ));
                }
                let free = profile.slots_total.saturating_sub(resources.slots[n]);
                if free == 0 {
                    return Err((
                        format!("switch {}: no aggregation slots left", t.node),
                        vec![t.node],
                    ));
                }
                slots = slots.min(free);
            }
            for t in tree {
                resources.reduce_groups[t.node as usize] += 1;
                resources.slots[t.node as usize] += slots;
            }
            Ok(slots)
        }
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tofino_rejects_floats() {
        let mut r = Resources::new(4);
        let tree = vec![TreeNode {
            node: 3,
            parent_port: None,
            child_ports: vec![0, 1, 2],
        }];
        let p = SwitchProfile::tofino();
        let e = admit(
            &p,
            InaKind::Reduce,
            Dtype::Float32,
            ReduceOp::Sum,
            &tree,
            &mut r,
        );
        assert!(e.unwrap_err().0.contains("float32"));
        assert_eq!(
            admit(
                &p,
                InaKind::Reduce,
                Dtype::Int32,
                ReduceOp::Sum,
                &tree,
                &mut r
            ),
            Ok(512)
        );
        assert_eq!(r.reduce_groups[3], 1);
    }
}
