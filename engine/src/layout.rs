//! Which shard owns which node, and the lookahead between shards.

use crate::queue::MAX_NODES;
use crate::{NodeId, ShardId, SimTime};
use std::sync::Arc;

/// The node -> shard assignment of a run, shared read-only by all shards.
///
/// Cloning is cheap (reference counted).
#[derive(Clone, Debug)]
pub struct Layout {
    shard_of: Arc<[ShardId]>,
    /// Position of each node among its shard's nodes.
    local_index: Arc<[u32]>,
    nodes_of: Arc<[Vec<NodeId>]>,
    lookahead: SimTime,
}

/// A node -> shard assignment that cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("a run needs at least one shard")]
    NoShards,
    #[error("node {node} is assigned to shard {shard}, but there are only {shards} shards")]
    ShardOutOfRange { node: u32, shard: u32, shards: u32 },
    #[error("shard {0} owns no node")]
    EmptyShard(u32),
    #[error("the lookahead between shards must be at least 1 ps")]
    ZeroLookahead,
    #[error("{0} nodes is more than the engine's limit of {MAX_NODES}")]
    TooManyNodes(usize),
}

impl Layout {
    /// Builds the layout of `shards` shards from `shard_of[node]`.
    ///
    /// `lookahead` is the minimum latency of any link between nodes on
    /// different shards (`SimTime::MAX` when no link is cut); the engine
    /// checks every cross-shard event against it.
    pub fn new(
        shard_of: Vec<ShardId>,
        shards: u32,
        lookahead: SimTime,
    ) -> Result<Layout, LayoutError> {
        if shards == 0 {
            return Err(LayoutError::NoShards);
        }
        if shard_of.len() as u64 > MAX_NODES {
            return Err(LayoutError::TooManyNodes(shard_of.len()));
        }
        if shards > 1 && lookahead == SimTime::ZERO {
            return Err(LayoutError::ZeroLookahead);
        }
        let mut nodes_of = vec![Vec::new(); shards as usize];
        let mut local_index = Vec::with_capacity(shard_of.len());
        for (node, shard) in shard_of.iter().enumerate() {
            let owned = nodes_of
                .get_mut(shard.index())
                .ok_or(LayoutError::ShardOutOfRange {
                    node: node as u32,
                    shard: shard.0,
                    shards,
                })?;
            local_index.push(owned.len() as u32);
            owned.push(NodeId(node as u32));
        }
        if let Some(empty) = nodes_of.iter().position(Vec::is_empty) {
            return Err(LayoutError::EmptyShard(empty as u32));
        }
        Ok(Layout {
            shard_of: shard_of.into(),
            local_index: local_index.into(),
            nodes_of: nodes_of.into(),
            lookahead,
        })
    }

    /// Nodes `0..nodes` dealt to shards in contiguous blocks of nearly equal
    /// size; convenient for models without a topology (PHOLD).
    pub fn blocks(nodes: u32, shards: u32, lookahead: SimTime) -> Result<Layout, LayoutError> {
        if shards == 0 {
            return Err(LayoutError::NoShards);
        }
        let shard_of = (0..nodes)
            .map(|n| ShardId((u64::from(n) * u64::from(shards) / u64::from(nodes)) as u32))
            .collect();
        Layout::new(shard_of, shards, lookahead)
    }

    #[inline]
    pub fn shard_of(&self, node: NodeId) -> ShardId {
        self.shard_of[node.index()]
    }

    #[inline]
    pub fn local_index(&self, node: NodeId) -> usize {
        self.local_index[node.index()] as usize
    }

    /// The nodes `shard` owns, in increasing order.
    pub fn nodes(&self, shard: ShardId) -> &[NodeId] {
        &self.nodes_of[shard.index()]
    }

    pub fn shards(&self) -> usize {
        self.nodes_of.len()
    }

    pub fn node_count(&self) -> usize {
        self.shard_of.len()
    }

    pub fn lookahead(&self) -> SimTime {
        self.lookahead
    }
}
