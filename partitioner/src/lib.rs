//! netsim-partition: assigns every node of a topology to a shard, computes the lookahead
//! (minimum latency over cut links) and reports the partition's quality.
//!
//! Some links are never cut: every link that touches a host or an NVSwitch (NIC and NVLink
//! links: cutting them would shrink the lookahead to tens of nanoseconds and split a
//! server), and every link with latency below the configured floor. The nodes joined by
//! such links form *atoms*; both strategies place whole atoms.
//!
//! Node weights model expected traffic: a node's weight is the sum of its ports' line
//! rates (in Mb/s), since packet events at a node scale with the bytes through its ports
//! at full load. A shard's load is the sum of its nodes' weights.
//!
//! Strategies:
//! - **structural**: atoms grouped by pod (fat-tree), group (dragonfly) or segment (SimAI
//!   templates); whole groups, and the atoms with no such coordinate (cores, PSWs), are
//!   placed heaviest first on the least-loaded shard (LPT). A group heavier than one shard's
//!   share is split into its atoms.
//! - **metis**: METIS k-way on the graph of atoms (vertex weight = atom weight, edge weight
//!   = number of links between two atoms), 3% imbalance tolerance, fixed seed.

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
    /// Load of each shard (sum of node weights, Mb/s of port capacity).
    pub shard_weights: Vec<u64>,
}

/// Why a topology could not be partitioned as asked.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Zero shards requested.
    #[error("--shards: need at least 1 shard")]
    NoShards,
    /// Fewer separable atoms than shards, so some shard would be empty.
    #[error("--shards: cannot cut into {shards} shards: only {atoms} groups of nodes can be separated (links touching hosts or NVSwitches, and links under --latency-floor-ns, are never cut)")]
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

/// Partitions `topo` as `cfg` asks.
pub fn partition(topo: &Topology, cfg: &PartitionConfig) -> Result<Partition, PartitionError> {
    if cfg.shards == 0 {
        return Err(PartitionError::NoShards);
    }
    let weights = node_weights(topo);
    let atoms = Atoms::new(topo, cfg.latency_floor_ps, &weights);
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
            Strategy::Structural => structural(topo, &atoms, cfg.shards),
            Strategy::Metis => metis_parts(topo, &atoms, cfg.shards)?,
        }
    };
    let shard_of: Vec<ShardId> = atoms
        .atom_of
        .iter()
        .map(|&a| ShardId(atom_shard[a as usize]))
        .collect();
    let report = evaluate(topo, &shard_of, cfg.shards, cfg.strategy);
    Ok(Partition {
        shard_of,
        shards: cfg.shards,
        lookahead: report.lookahead,
        report,
    })
}

/// Each node's weight: the sum of its links' bandwidths in Mb/s (at least 1).
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

/// True if the partitioner may never cut `link` under `latency_floor_ps`.
pub fn is_uncuttable(topo: &Topology, link: u32, latency_floor_ps: u64) -> bool {
    let l = topo.link(link);
    let pinned = |n: NodeIndex| matches!(topo.role(n), Role::Host | Role::NvSwitch);
    pinned(l.a) || pinned(l.b) || l.latency_ps < latency_floor_ps
}

/// Computes the quality report of any node -> shard map.
///
/// Panics if `shard_of` does not have one entry per node.
pub fn evaluate(topo: &Topology, shard_of: &[ShardId], shards: u32, strategy: Strategy) -> Report {
    assert_eq!(shard_of.len(), topo.node_count() as usize);
    let weights = node_weights(topo);
    let mut shard_weights = vec![0u64; shards as usize];
    for (n, s) in shard_of.iter().enumerate() {
        shard_weights[s.index()] += weights[n];
    }
    let (mut edge_cut, mut cut_bandwidth_bps, mut lookahead) = (0, 0, SimTime::MAX);
    for l in topo.links() {
        if shard_of[l.a as usize] != shard_of[l.b as usize] {
            edge_cut += 1;
            cut_bandwidth_bps += l.bandwidth_bps;
            lookahead = lookahead.min(SimTime(l.latency_ps));
        }
    }
    let total: u64 = shard_weights.iter().sum();
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

/// Connected components of the never-cut links.
struct Atoms {
    /// Atom of each node; atoms are numbered by their lowest node id.
    atom_of: Vec<u32>,
    /// Weight of each atom.
    weight: Vec<u64>,
    /// Lowest node id of each atom.
    first: Vec<NodeIndex>,
}

impl Atoms {
    fn new(topo: &Topology, latency_floor_ps: u64, weights: &[u64]) -> Atoms {
        let n = topo.node_count() as usize;
        let mut parent: Vec<u32> = (0..n as u32).collect();
        fn find(parent: &mut [u32], mut x: u32) -> u32 {
            while parent[x as usize] != x {
                parent[x as usize] = parent[parent[x as usize] as usize];
                x = parent[x as usize];
            }
            x
        }
        for l in 0..topo.link_count() {
            if is_uncuttable(topo, l, latency_floor_ps) {
                let link = topo.link(l);
                let (ra, rb) = (find(&mut parent, link.a), find(&mut parent, link.b));
                if ra != rb {
                    // The lower root wins so atom numbering follows node ids.
                    let (lo, hi) = (ra.min(rb), ra.max(rb));
                    parent[hi as usize] = lo;
                }
            }
        }
        let mut atom_of = vec![u32::MAX; n];
        let mut weight = Vec::new();
        let mut first = Vec::new();
        for x in 0..n as u32 {
            let r = find(&mut parent, x);
            if atom_of[r as usize] == u32::MAX {
                atom_of[r as usize] = weight.len() as u32;
                weight.push(0);
                first.push(x);
            }
            let a = atom_of[r as usize];
            atom_of[x as usize] = a;
            weight[a as usize] += weights[x as usize];
        }
        Atoms {
            atom_of,
            weight,
            first,
        }
    }

    fn count(&self) -> u32 {
        self.weight.len() as u32
    }
}

/// Structural coordinate of a node: pod, else group, else segment.
fn block_of(topo: &Topology, n: NodeIndex) -> Option<u32> {
    let c = topo.node(n).coords;
    c.pod.or(c.group).or(c.segment)
}

/// Places blocks of atoms (by pod/group/segment) and free atoms heaviest first on the
/// least-loaded shard.
fn structural(topo: &Topology, atoms: &Atoms, shards: u32) -> Vec<u32> {
    let total: u64 = atoms.weight.iter().sum();
    let share = total.div_ceil(shards as u64);
    // Units: (weight, first node, atoms). An atom belongs to the block of its first node.
    let mut blocks: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    let mut units: Vec<(u64, NodeIndex, Vec<u32>)> = Vec::new();
    for a in 0..atoms.count() {
        match block_of(topo, atoms.first[a as usize]) {
            Some(b) => blocks.entry(b).or_default().push(a),
            None => units.push((atoms.weight[a as usize], atoms.first[a as usize], vec![a])),
        }
    }
    let whole = blocks.len() as u64 >= shards as u64;
    for (_, members) in blocks {
        let w: u64 = members.iter().map(|&a| atoms.weight[a as usize]).sum();
        if whole && w <= share {
            units.push((w, atoms.first[members[0] as usize], members));
        } else {
            units.extend(
                members
                    .into_iter()
                    .map(|a| (atoms.weight[a as usize], atoms.first[a as usize], vec![a])),
            );
        }
    }
    units.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let mut load = vec![0u64; shards as usize];
    let mut atom_shard = vec![0u32; atoms.count() as usize];
    for (w, _, members) in units {
        let s = (0..shards as usize)
            .min_by_key(|&s| (load[s], s))
            .expect("at least one shard");
        load[s] += w;
        for a in members {
            atom_shard[a as usize] = s as u32;
        }
    }
    atom_shard
}

/// METIS k-way over the atom graph; empty parts are then given one light atom each.
fn metis_parts(topo: &Topology, atoms: &Atoms, shards: u32) -> Result<Vec<u32>, PartitionError> {
    let na = atoms.count() as usize;
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for l in topo.links() {
        let (a, b) = (atoms.atom_of[l.a as usize], atoms.atom_of[l.b as usize]);
        if a != b {
            edges.push((a, b));
            edges.push((b, a));
        }
    }
    edges.sort_unstable();
    let mut xadj: Vec<metis::Idx> = vec![0; na + 1];
    let mut adjncy: Vec<metis::Idx> = Vec::new();
    let mut adjwgt: Vec<metis::Idx> = Vec::new();
    let mut i = 0;
    while i < edges.len() {
        let mut j = i;
        while j < edges.len() && edges[j] == edges[i] {
            j += 1;
        }
        let (a, b) = edges[i];
        xadj[a as usize + 1] += 1;
        adjncy.push(b as metis::Idx);
        adjwgt.push((j - i).min(metis::Idx::MAX as usize) as metis::Idx);
        i = j;
    }
    for a in 0..na {
        xadj[a + 1] += xadj[a];
    }
    // METIS weights are i32 whose sum must not overflow: scale the total under 2^30.
    let total: u64 = atoms.weight.iter().sum();
    let scale = (total >> 30) + 1;
    let vwgt: Vec<metis::Idx> = atoms
        .weight
        .iter()
        .map(|&w| (w / scale).max(1) as metis::Idx)
        .collect();
    let mut part = vec![0 as metis::Idx; na];
    metis::Graph::new(1, shards as metis::Idx, &xadj, &adjncy)
        .map_err(|e| PartitionError::Metis(e.to_string()))?
        .set_vwgt(&vwgt)
        .set_adjwgt(&adjwgt)
        .set_option(metis::option::UFactor(30))
        .set_option(metis::option::Seed(1))
        .part_kway(&mut part)
        .map_err(|e| PartitionError::Metis(e.to_string()))?;
    let mut atom_shard: Vec<u32> = part.into_iter().map(|p| p as u32).collect();
    fill_empty_shards(&mut atom_shard, &atoms.weight, shards);
    Ok(atom_shard)
}

/// Gives every empty shard the lightest atom of the shard that holds the most atoms.
fn fill_empty_shards(atom_shard: &mut [u32], weight: &[u64], shards: u32) {
    loop {
        let mut count = vec![0usize; shards as usize];
        for &s in atom_shard.iter() {
            count[s as usize] += 1;
        }
        let Some(empty) = count.iter().position(|&c| c == 0) else {
            return;
        };
        let donor = (0..shards as usize)
            .max_by_key(|&s| (count[s], std::cmp::Reverse(s)))
            .expect("at least one shard") as u32;
        let atom = (0..atom_shard.len())
            .filter(|&a| atom_shard[a] == donor)
            .min_by_key(|&a| (weight[a], a))
            .expect("the donor holds atoms");
        atom_shard[atom] = empty as u32;
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
