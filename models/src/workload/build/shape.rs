//! Shapes of collectives (issue 32): collectives that the builder builds
//! alike up to relabelling their members take as many task, flow and
//! collective ids, and have the same rows and exits, so that a plan-only
//! build builds each shape once and reserves the others' ids from it.

use super::super::algorithms::HostTasks;
use super::super::builder::IdBase;
use super::super::spec::{Algorithm, OpSpec, WorkloadSpec};
use super::super::Collective;
use hashbrown::HashMap;
use netsim_topo::{NodeIndex, Topology};

/// What the builder reads of a collective beyond its operation: who runs
/// it (spec and job), the group's size, and per member
/// in group order: its rank among the members' ids (exits are made in id
/// order), its server's rank among theirs (whole-server rings group by
/// server, in server order), and how many tasks its entry lists.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ShapeKey {
    spec: usize,
    job: u32,
    logical: u32,
    layout: Vec<(u32, u32, u32)>,
}

/// What every collective of a shape gets: its counts, rows, and each
/// member's exits (by position in the group) from its first task id.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    pub count: IdBase,
    pub rows: Vec<Collective>,
    exits: Vec<(u32, Vec<u32>)>,
}

/// Shapes seen so far; a key's operations beside it. The phase's name is
/// in no key: the builder reads it only into the rows, which take the
/// name of the collective they stand for, so the phases that repeat in
/// every micro-batch share their shapes.
#[derive(Debug, Default)]
pub(crate) struct Shapes {
    known: HashMap<ShapeKey, Vec<(OpSpec, Shape)>>,
}

/// The key of `op` on `group`, or `None` where the builder reads more of
/// the fabric or of the build than a key holds: NCCL's model (links and
/// rails), NVLS, DPU staging, offloads (switch resources in build order),
/// or a group naming a member twice.
pub(crate) fn key(
    topo: &Topology,
    spec: &WorkloadSpec,
    job: u32,
    op: &OpSpec,
    group: &[NodeIndex],
    logical: usize,
    entry_len: impl Fn(usize, NodeIndex) -> usize,
) -> Option<ShapeKey> {
    let plain = !matches!(
        op.algorithm,
        Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::Auto | Algorithm::Ina | Algorithm::Dpu
    );
    if spec.nccl.is_some() || !plain || spec.fallback == Algorithm::Dpu {
        return None;
    }
    let mut ids: Vec<NodeIndex> = group.to_vec();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    let mut servers: Vec<u32> = group
        .iter()
        .filter_map(|&h| topo.node(h).coords.server)
        .collect();
    servers.sort_unstable();
    servers.dedup();
    let layout = group
        .iter()
        .enumerate()
        .map(|(i, &h)| {
            let rank = ids.binary_search(&h).unwrap_or_default() as u32;
            let server = topo.node(h).coords.server.map_or(u32::MAX, |s| {
                servers.binary_search(&s).unwrap_or_default() as u32
            });
            (rank, server, entry_len(i, h) as u32)
        })
        .collect();
    Some(ShapeKey {
        spec: spec as *const WorkloadSpec as usize,
        job,
        logical: logical as u32,
        layout,
    })
}

impl Shapes {
    /// The shape of `key` with operation `op`, if built before.
    pub fn get(&self, key: &ShapeKey, op: &OpSpec) -> Option<&Shape> {
        let known = self.known.get(key)?;
        known.iter().find(|(o, _)| o == op).map(|(_, s)| s)
    }

    /// Records what a collective of `key` built from `base`: `None` (and
    /// nothing recorded) when an exit lies outside its own tasks.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        key: ShapeKey,
        op: &OpSpec,
        (base, count): (IdBase, IdBase),
        rows: Vec<Collective>,
        group: &[NodeIndex],
        exits: &HostTasks,
    ) -> Option<()> {
        let mut relative = Vec::with_capacity(exits.len());
        for (h, tasks) in exits {
            let at = group.iter().position(|g| g == h)? as u32;
            let inside = tasks
                .iter()
                .all(|&t| t >= base.task && t - base.task < count.task);
            if !inside {
                return None;
            }
            relative.push((at, tasks.iter().map(|&t| t - base.task).collect()));
        }
        let shape = Shape {
            count,
            rows,
            exits: relative,
        };
        let known = self.known.entry(key).or_default();
        known.push((op.clone(), shape));
        Some(())
    }
}

impl Shape {
    /// Its exits for the members `group`, from task `base`.
    pub fn exits(&self, group: &[NodeIndex], base: u32) -> HostTasks {
        let at = |(i, tasks): &(u32, Vec<u32>)| {
            let tasks = tasks.iter().map(|&t| base + t).collect();
            (group[*i as usize], tasks)
        };
        self.exits.iter().map(at).collect()
    }
}
