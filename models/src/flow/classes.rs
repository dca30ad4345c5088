//! A folded job's flows as classes with a multiplicity (`--fold-dp N
//! --fold-classes` at flow level).
//!
//! A folded job builds only its first data-parallel replicas; each flow of
//! them stands for `N` flows, itself and the corresponding flow of each
//! replica copy left out (member `k`: both hosts `k * kept` further on,
//! DP being the layout's outermost dimension). The class runs at one rate
//! for all its members (the symmetric-replica assumption) and counts each
//! member where it loads the fabric:
//!
//! - Channels adjacent to a host (NIC up and down, NVLink to and from the
//!   NVSwitch) of a replica copy carry exactly the members `k` of the
//!   classes whose representatives cross the kept host's same channel,
//!   when copying hosts maps servers onto servers (checked). So the
//!   representative's own host channels, with one member each, are the
//!   constraints there, and a copy's are the same constraint again: not
//!   counted, and reported in the `links` table as their kept host's.
//!   Members leave their hosts through the representative's port, so that
//!   this holds with multi-homed NICs too.
//! - Channels between switches are shared across replicas: each member is
//!   routed from its first switch with its own ECMP hashes (of its own
//!   hosts and a member flow id), and the class counts on each such channel
//!   the members crossing it: its weight in the max-min solver.

use super::paths::{route, Channels};
use crate::network::Fabric;
use crate::traffic::FlowSpec;
use crate::workload::{Fold, NONE};
use netsim_topo::Topology;
use std::collections::HashMap;

/// Whether the folds of `fabric`'s workload can run as classes; why not.
pub fn check(fabric: &Fabric, fifo: bool) -> Result<(), String> {
    let workload = &fabric.workload;
    if workload.folds.is_empty() {
        return Ok(());
    }
    if fifo {
        return Err(
            "--fold-classes with --cc none: FIFO sharing does not run folded replicas as \
             classes; use congestion control or leave --fold-classes out"
                .into(),
        );
    }
    if !workload.ina_ops.is_empty() {
        return Err(
            "--fold-classes with in-network aggregation is not modelled; \
             leave --fold-classes out"
                .into(),
        );
    }
    let topo = &fabric.topo;
    for fold in &workload.folds {
        if !fold.contiguous {
            return Err(format!(
                "--fold-classes (--fold-dp {}): a folded job runs as classes only on consecutive hosts for its whole layout",
                fold.replicas
            ));
        }
        mirrors_servers(topo, fold)?;
    }
    // Only the folded job's own flows may use the hosts its copies stand on.
    let owner = |host: u32| {
        workload
            .folds
            .iter()
            .position(|f| host >= f.first && host - f.first < f.kept * f.replicas)
    };
    for (i, spec) in workload.flows.iter().enumerate() {
        let background = workload.flow_collective(i as u32).is_none();
        for host in [spec.src, spec.dst] {
            let Some(f) = owner(host) else { continue };
            let fold = &workload.folds[f];
            if background || host - fold.first >= fold.kept || owner(spec.src) != owner(spec.dst) {
                return Err(format!(
                    "--fold-classes (--fold-dp {}): host {host}, which a folded replica stands for, carries other traffic",
                    fold.replicas
                ));
            }
        }
    }
    Ok(())
}

/// Whether copying the kept hosts `k * kept` further on maps each server
/// onto one server, GPU position onto the same position, and each port
/// onto a port to the same kind of node.
fn mirrors_servers(topo: &Topology, fold: &Fold) -> Result<(), String> {
    let bad = |what: &str| {
        Err(format!(
            "--fold-classes (--fold-dp {}): the replicas left out do not sit on the fabric as the kept ones do ({what}); \
             use another fold or leave --fold-classes out",
            fold.replicas
        ))
    };
    for k in 1..fold.replicas {
        let mut servers: HashMap<Option<u32>, Option<u32>> = HashMap::new();
        let mut back: HashMap<Option<u32>, Option<u32>> = HashMap::new();
        for h in fold.first..fold.first + fold.kept {
            let m = h + k * fold.kept;
            let (a, b) = (topo.node(h).coords, topo.node(m).coords);
            if a.rail != b.rail || topo.ports(h).len() != topo.ports(m).len() {
                return bad("GPU positions differ");
            }
            let kinds = |n: u32| topo.ports(n).iter().map(|p| topo.role(p.peer));
            if !kinds(h).eq(kinds(m)) {
                return bad("ports differ");
            }
            if *servers.entry(a.server).or_insert(b.server) != b.server
                || *back.entry(b.server).or_insert(a.server) != a.server
            {
                return bad("servers are split");
            }
        }
    }
    Ok(())
}

/// The classes of a run: which flows have members, and the links table's
/// view of the copies' host channels.
#[derive(Debug)]
pub struct Classes {
    folds: Vec<Fold>,
    /// Per host: the fold whose kept hosts it is one of ([`NONE`]: none).
    fold_of: Vec<u32>,
    flow_count: u32,
    // Scratch, reused for every class.
    member: Vec<u32>,
    hops: Vec<(u64, u64)>,
    shared: Vec<u32>,
}

impl Classes {
    /// The classes of `fabric`'s folds ([`check`]ed), if any.
    pub fn new(fabric: &Fabric) -> Option<Classes> {
        let workload = &fabric.workload;
        if workload.folds.is_empty() {
            return None;
        }
        let mut fold_of = vec![NONE; fabric.topo.host_count() as usize];
        for (i, f) in workload.folds.iter().enumerate() {
            fold_of[f.first as usize..(f.first + f.kept) as usize].fill(i as u32);
        }
        Some(Classes {
            folds: workload.folds.clone(),
            fold_of,
            flow_count: u32::try_from(workload.flows.len()).expect("flow ids are u32"),
            member: Vec::new(),
            hops: Vec::new(),
            shared: Vec::new(),
        })
    }

    /// Per channel: the channel whose bytes the `links` table reports for
    /// it: a copy's host channel its kept host's, any other itself.
    pub fn mirrors(&self, topo: &Topology, index: &Channels) -> Vec<u32> {
        let mut mirror: Vec<u32> = (0..index.count()).collect();
        for fold in &self.folds {
            for k in 1..fold.replicas {
                for h in fold.first..fold.first + fold.kept {
                    let m = h + k * fold.kept;
                    for (port, (p, q)) in topo.ports(h).iter().zip(topo.ports(m)).enumerate() {
                        mirror[index.of(m, port as u16) as usize] = index.of(h, port as u16);
                        mirror[index.of(q.peer, q.peer_port) as usize] =
                            index.of(p.peer, p.peer_port);
                    }
                }
            }
        }
        mirror
    }

    /// The members of the class of flow `spec` (1: not a folded job's flow).
    pub fn replicas(&self, spec: &FlowSpec) -> u32 {
        match self.fold_of[spec.src as usize] {
            NONE => 1,
            f => self.folds[f as usize].replicas,
        }
    }

    /// Flow `flow`'s class over the representative's route `path`: writes
    /// the class's channels and members on each into `channels` and
    /// `weights` (the representative's path first, one member each, plus
    /// the other members' switch-to-switch channels).
    #[allow(clippy::too_many_arguments)]
    pub fn class(
        &mut self,
        fabric: &Fabric,
        index: &Channels,
        flow: u32,
        spec: &FlowSpec,
        path: &[u32],
        load: impl Fn(u32) -> usize,
        channels: &mut Vec<u32>,
        weights: &mut Vec<u32>,
    ) {
        channels.clear();
        weights.clear();
        channels.extend_from_slice(path);
        weights.resize(path.len(), 1);
        let fold = match self.fold_of[spec.src as usize] {
            NONE => return,
            f => self.folds[f as usize],
        };
        let first_port = (path[0] - index.of(spec.src, 0)) as u16;
        self.shared.clear();
        for k in 1..fold.replicas {
            let member = FlowSpec {
                src: spec.src + k * fold.kept,
                dst: spec.dst + k * fold.kept,
                ..*spec
            };
            // Only a hash input: the member's "source port", distinct from
            // every built flow's id up to 2^32 flows in all.
            let id = (u64::from(flow) + u64::from(k) * u64::from(self.flow_count)) as u32;
            route(
                fabric,
                index,
                id,
                &member,
                Some(first_port),
                &load,
                &mut self.member,
                &mut self.hops,
            );
            // Its first and last channels leave and enter hosts.
            if self.member.len() > 2 {
                self.shared
                    .extend_from_slice(&self.member[1..self.member.len() - 1]);
            }
        }
        self.shared.sort_unstable();
        for run in self.shared.chunk_by(|a, b| a == b) {
            let n = run.len() as u32;
            match channels[..path.len()].iter().position(|&c| c == run[0]) {
                Some(i) => weights[i] += n,
                None => {
                    channels.push(run[0]);
                    weights.push(n);
                }
            }
        }
    }
}
