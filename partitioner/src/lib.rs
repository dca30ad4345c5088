//! netsim-partition: assigns every node of a topology to a shard, computes the lookahead
//! (minimum latency over cut links) and reports the partition's quality.
//!
//! Some links are never cut: NVLink (every link touching an NVSwitch), the link of a host
//! that is not a GPU of a server (a fat-tree or dragonfly NIC: cutting it buys nothing and
//! would split a host from its only switch), and every link with latency below the
//! configured floor. The nodes joined by such links form *atoms*: a GPU server (its GPUs and
//! NVSwitches), a ToR with its hosts, a lone switch. Both strategies place whole atoms. A
//! GPU's links to its rail or ToR switches may be cut: their latency then bounds the
//! lookahead like any switch-to-switch link.
//!
//! Node weights are the work each node will do. The caller passes them (the network model
//! estimates packets sent, received and forwarded per node from the run's flows and routes;
//! this crate knows nothing of models); [`partition`] alone weighs a node by its ports' line
//! rates. A shard's load is the sum of its nodes' weights.
//!
//! Strategies:
//! - **structural**: atoms grouped by pod (fat-tree), group (dragonfly) or segment (SimAI
//!   templates); whole groups no heavier than a shard's share, and single atoms otherwise,
//!   are placed heaviest first on the least-loaded shard (LPT). When whole groups leave a
//!   shard more than 5% over the mean, every atom is placed on its own instead.
//! - **metis**: METIS k-way on the graph of atoms (vertex weights: the atom's weight and its
//!   hosts' part of it; edge weight = number of links between two atoms), 3% imbalance
//!   tolerance, fixed seed, its console output silenced; parts METIS leaves empty get one
//!   atom each, then atoms move from the heaviest to the lightest shard while the largest is
//!   more than 3% over the mean.

mod atoms;
mod metis_parts;
mod structural;

use std::fmt;
use std::str::FromStr;

use netsim_engine::{ShardId, SimTime};
use netsim_topo::{NodeIndex, Role, Topology};

/// How to cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// By pod / dragonfly group / segment, remaining switches spread to balance.
    Structural,
    /// METIS k-way on the atom graph.
    Metis,
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "structural" => Ok(Strategy::Structural),
            "metis" => Ok(Strategy::Metis),
            _ => Err(format!(
                "unknown partition strategy `{s}`; expected structural or metis"
            )),
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::Structural => "structural",
            Strategy::Metis => "metis",
        })
    }
}

/// What to produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionConfig {
    /// Number of shards (>= 1); every shard gets at least one node.
    pub shards: u32,
    /// How to cut.
    pub strategy: Strategy,
    /// Links with latency below this (ps) are never cut, in addition to host and NVSwitch
    /// links. 0 adds nothing.
    pub latency_floor_ps: u64,
}

impl Default for PartitionConfig {
    /// One shard, structural, no extra latency floor.
    fn default() -> Self {
        PartitionConfig {
            shards: 1,
            strategy: Strategy::Structural,
            latency_floor_ps: 0,
        }
    }
}

/// A node -> shard assignment with its lookahead and quality report.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// The shard of each node, indexed by node id.
    pub shard_of: Vec<ShardId>,
    /// Number of shards.
    pub shards: u32,
    /// Minimum latency over cut links; `SimTime::MAX` when no link is cut.
    pub lookahead: SimTime,
    /// Quality figures.
    pub report: Report,
}

/// Quality of a partition.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Strategy that produced it.
    pub strategy: Strategy,
    /// Number of links whose ends are on different shards.
    pub edge_cut: u64,
    /// Total bandwidth of those links, bits per second.
    pub cut_bandwidth_bps: u64,
    /// Largest shard load over the mean load, minus 1 (0 is perfect balance).
    pub load_imbalance: f64,
    /// Minimum latency over cut links; `SimTime::MAX` when no link is cut.
    pub lookahead: SimTime,
    /// Load of each shard (sum of its nodes' weights).
    pub shard_weights: Vec<u64>,
}

/// Why a topology could not be partitioned as asked.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Zero shards requested.
    #[error("--shards: need at least 1 shard")]
    NoShards,
    /// Fewer separable atoms than shards, so some shard would be empty.
    #[error("--shards: cannot cut into {shards} shards: only {atoms} groups of nodes can be separated (NVLink, the links of hosts outside GPU servers, and links under --latency-floor-ns are never cut)")]
    TooManyShards {
        /// Shards requested.
        shards: u32,
        /// Atoms available.
        atoms: u32,
    },
    /// METIS failed.
    #[error("--partition metis: METIS failed: {0}")]
    Metis(String),
}

/// Partitions `topo` as `cfg` asks, weighing each node by its ports' line rates
/// ([`node_weights`]).
pub fn partition(topo: &Topology, cfg: &PartitionConfig) -> Result<Partition, PartitionError> {
    partition_weighted(topo, cfg, &node_weights(topo))
}

/// Partitions `topo` as `cfg` asks, balancing `weights` (one per node, the work each node
/// will do; a weight of 0 counts as 1 so every atom weighs something).
///
/// # Panics
/// If `weights` does not have one entry per node.
pub fn partition_weighted(
    topo: &Topology,
    cfg: &PartitionConfig,
    weights: &[u64],
) -> Result<Partition, PartitionError> {
    assert_eq!(
        weights.len(),
        topo.node_count() as usize,
        "one weight per node"
    );
    if cfg.shards == 0 {
        return Err(PartitionError::NoShards);
    }
    let weights: Vec<u64> = weights.iter().map(|&w| w.max(1)).collect();
    let atoms = atoms::Atoms::new(topo, cfg.latency_floor_ps, &weights);
    if atoms.count() < cfg.shards {
        return Err(PartitionError::TooManyShards {
            shards: cfg.shards,
            atoms: atoms.count(),
        });
    }
    let atom_shard = if cfg.shards == 1 {
        vec![0; atoms.count() as usize]
    } else {
        match cfg.strategy {
            Strategy::Structural => structural::structural(topo, &atoms, cfg.shards),
            Strategy::Metis => metis_parts::metis_parts(topo, &atoms, cfg.shards)?,
        }
    };
    let shard_of: Vec<ShardId> = atoms
        .atom_of
        .iter()
        .map(|&a| ShardId(atom_shard[a as usize]))
        .collect();
    let report = evaluate(topo, &shard_of, cfg.shards, cfg.strategy, &weights);
    Ok(Partition {
        shard_of,
        shards: cfg.shards,
        lookahead: report.lookahead,
        report,
    })
}

/// Number of atoms (pieces that are never split) of `topo` under `latency_floor_ps`: the
/// most shards it can be cut into.
pub fn max_shards(topo: &Topology, latency_floor_ps: u64) -> u32 {
    let ones = vec![1; topo.node_count() as usize];
    atoms::Atoms::new(topo, latency_floor_ps, &ones).count()
}

/// Each node's weight by capacity: the sum of its links' bandwidths in Mb/s (at least 1).
pub fn node_weights(topo: &Topology) -> Vec<u64> {
    (0..topo.node_count())
        .map(|n| {
            let bps: u64 = topo
                .ports(n)
                .iter()
                .map(|p| topo.link(p.link).bandwidth_bps)
                .sum();
            (bps / 1_000_000).max(1)
        })
        .collect()
}

/// True if the partitioner may never cut `link` under `latency_floor_ps`: it touches an
/// NVSwitch (NVLink), or a host that is not a GPU of a server, or is faster than the floor.
pub fn is_uncuttable(topo: &Topology, link: u32, latency_floor_ps: u64) -> bool {
    let l = topo.link(link);
    let pinned = |n: NodeIndex| match topo.role(n) {
        Role::NvSwitch => true,
        Role::Host => topo.node(n).coords.server.is_none(),
        _ => false,
    };
    pinned(l.a) || pinned(l.b) || l.latency_ps < latency_floor_ps
}

/// Computes the quality report of any node -> shard map under node weights `weights`.
///
/// Panics if `shard_of` or `weights` does not have one entry per node.
pub fn evaluate(
    topo: &Topology,
    shard_of: &[ShardId],
    shards: u32,
    strategy: Strategy,
    weights: &[u64],
) -> Report {
    assert_eq!(shard_of.len(), topo.node_count() as usize);
    assert_eq!(weights.len(), topo.node_count() as usize);
    let mut shard_weights = vec![0u64; shards as usize];
    for (n, s) in shard_of.iter().enumerate() {
        shard_weights[s.index()] = shard_weights[s.index()].saturating_add(weights[n]);
    }
    let (mut edge_cut, mut cut_bandwidth_bps, mut lookahead) = (0, 0u64, SimTime::MAX);
    for l in topo.links() {
        if shard_of[l.a as usize] != shard_of[l.b as usize] {
            edge_cut += 1;
            cut_bandwidth_bps = cut_bandwidth_bps.saturating_add(l.bandwidth_bps);
            lookahead = lookahead.min(SimTime(l.latency_ps));
        }
    }
    let total: u64 = shard_weights.iter().fold(0u64, |a, &w| a.saturating_add(w));
    let max = shard_weights.iter().copied().max().unwrap_or(0);
    let load_imbalance = if total == 0 {
        0.0
    } else {
        max as f64 * shards as f64 / total as f64 - 1.0
    };
    Report {
        strategy,
        edge_cut,
        cut_bandwidth_bps,
        load_imbalance,
        lookahead,
        shard_weights,
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "shards:         {} ({})",
            self.shard_weights.len(),
            self.strategy
        )?;
        writeln!(
            f,
            "edge cut:       {} links ({} Gb/s)",
            self.edge_cut,
            self.cut_bandwidth_bps / 1_000_000_000
        )?;
        writeln!(
            f,
            "load imbalance: {:.2}% (largest shard load / mean - 1)",
            self.load_imbalance * 100.0
        )?;
        if self.lookahead == SimTime::MAX {
            write!(f, "lookahead:      unbounded (no link cut)")
        } else {
            write!(
                f,
                "lookahead:      {} ns",
                netsim_topo::units::format_decimal(self.lookahead.as_ps(), 3)
            )
        }
    }
}
