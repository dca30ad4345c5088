//! Lazy expansion's run side (issue 32): what a run keeps of a workload
//! whose collectives are expanded only when they become ready, and how a
//! task or flow id finds what it belongs to.
//!
//! ```text
//! LazyPlan (shared, read-only)          LazyDag (one per shard, dag.rs)
//!   plans      one per collective  -->    live collectives, expanded at
//!   kept       tasks outside them         their reserved ids when a local
//!   kept_rev   their dependents           member's entry is first met,
//!   entry_rev  who waits on a task        freed once every local
//! ```                                     completion of theirs is seen
//!
//! The ids are those the eager build hands out, so the rows are the same.

mod counts;
mod dag;
mod template;
mod walk;

pub use dag::LazyDag;

use super::build::lazy::{expand_with, has_nvswitch, Expanded, Plans};
use super::build::shape::{self, ShapeKey};
use super::builder::IdBase;
use super::gaps::Kept;
use super::{Job, Task, TaskKind, Workload};
use crate::network::config::NetConfig;
use crate::traffic::FlowSpec;
use netsim_engine::SimTime;
use netsim_topo::Topology;

/// What a run needs to expand any collective of a planned workload: the
/// plans, the tasks outside collectives, and who depends on what.
#[derive(Debug)]
pub struct LazyPlan {
    jobs: Vec<Job>,
    plans: Plans,
    kept: Kept,
    /// Per task (global id): the kept tasks that depend on it, ascending.
    kept_rev: Csr<u32>,
    /// Per task (global id): `(plan, member)` whose entry lists it.
    entry_rev: Csr<(u32, u32)>,
    /// Plans of which a member waits for nothing: expanded as a run starts.
    root_plans: Vec<u32>,
    /// Where task and flow ids lie among the plans, by bucket of ids.
    task_index: PlanIndex,
    flow_index: PlanIndex,
    /// Whether the topology has an NVSwitch (read by the build's choices).
    nvswitch: bool,
}

/// Tasks of expanded collectives a host has at once, for the memory
/// check, at the least: a collective is expanded whole when its first
/// member is ready, so a host holds at least a member's share of the
/// largest ([`LazyPlan::live_tasks_per_host`]).
pub const LIVE_TASKS_PER_HOST: u64 = 64;
/// What a task of a template holds: itself and what it does (32 B), its
/// flow (28 B), its count and dependents' lists (~20 B), and the
/// expansion's transient per-task dependency lists.
pub const BYTES_PER_LIVE_TASK: u64 = 128;
/// What a live collective holds a task beside a shared template: its
/// count (a byte), with room for the pooled vectors' slack.
pub const BYTES_PER_LIVE_COUNT: u64 = 2;
/// Templates of the largest collective's size a run may hold at once
/// when collectives of a shape share one: a shape per phase under way
/// (measured: 3 on a generated GPT of 2,048 GPUs).
pub const LIVE_TEMPLATES: u64 = 4;

/// What can be under way by a time ([`LazyPlan::reach_by`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    pub flows: u64,
    pub tasks: u64,
}

/// Values grouped by a sparse key: the `(key, value)` pairs sorted, a
/// key's values found through a bucket index (millions of keys, asked for
/// at every completion: a binary search of them all misses the cache at
/// each of its last steps). The pairs are the structure: sorted in place,
/// never copied into separate key, offset and value arrays, so that
/// building it holds them once (issue 32: the whole 9,216-GPU example's
/// reverse indices held twice at the plan build's peak).
#[derive(Debug, Default)]
struct Csr<V> {
    pairs: Vec<(u32, V)>,
    index: PlanIndex,
}

impl<V: Copy + Ord> Csr<V> {
    /// From `(key, value)` pairs in any order; values of a key ascending.
    fn from_pairs(mut pairs: Vec<(u32, V)>) -> Csr<V> {
        pairs.sort_unstable();
        pairs.dedup();
        pairs.shrink_to_fit();
        let index = PlanIndex::new(pairs.iter().map(|p| p.0), pairs.len());
        Csr { pairs, index }
    }

    /// The pairs of `key`, values ascending.
    fn get(&self, key: u32) -> &[(u32, V)] {
        let end = self.index.at_or_before(&self.pairs, |p| p.0, key);
        let start = match key.checked_sub(1) {
            Some(before) => self.index.at_or_before(&self.pairs, |p| p.0, before),
            None => 0,
        };
        &self.pairs[start..end]
    }

    fn bytes(&self) -> u64 {
        (self.pairs.len() * std::mem::size_of::<(u32, V)>()) as u64 + self.index.bytes()
    }
}

/// Ids per bucket of a [`PlanIndex`] (2^8: a bucket's plans are a few).
const BUCKET_BITS: u32 = 8;

/// For each bucket of 2^[`BUCKET_BITS`] ids, how many plans start at or
/// before its first id: the plan of an id is searched among the few
/// plans that start inside its bucket, not among all of them (12.6 M on
/// SimAI's 9,216-GPU example, looked up several times per event).
#[derive(Debug, Default)]
struct PlanIndex {
    before: Vec<u32>,
}

impl PlanIndex {
    /// Over plans whose first ids are `bases` (nondecreasing).
    fn new(bases: impl Iterator<Item = u32> + Clone, plans: usize) -> PlanIndex {
        let last = bases.clone().last().unwrap_or(0);
        let buckets = (last >> BUCKET_BITS) as usize + 2;
        let mut before = Vec::with_capacity(buckets + 1);
        let mut bases = bases.peekable();
        let mut seen = 0u32;
        for b in 0..buckets as u64 {
            let first = b << BUCKET_BITS;
            while bases.next_if(|&base| u64::from(base) <= first).is_some() {
                seen += 1;
            }
            before.push(seen);
        }
        before.push(plans as u32);
        PlanIndex { before }
    }

    /// The last plan (of `plans`, its first ids `base`) that starts at or
    /// before `id`: `plans.partition_point(|p| base(p) <= id) - 1`.
    fn find<P>(&self, plans: &[P], base: impl Fn(&P) -> u32, id: u32) -> usize {
        self.at_or_before(plans, base, id) - 1
    }

    /// How many plans start at or before `id`:
    /// `plans.partition_point(|p| base(p) <= id)`.
    fn at_or_before<P>(&self, plans: &[P], base: impl Fn(&P) -> u32, id: u32) -> usize {
        let b = ((id >> BUCKET_BITS) as usize).min(self.before.len() - 2);
        let (lo, hi) = (self.before[b] as usize, self.before[b + 1] as usize);
        lo + plans[lo..hi].partition_point(|p| base(p) <= id)
    }

    fn bytes(&self) -> u64 {
        self.before.len() as u64 * 4
    }
}

/// Where a task or flow id lives: kept (its index) or in a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    Kept(u32),
    Plan(u32),
}

/// What a run expands with: the workload (its rows), the fabric and the
/// configuration the plans were built for.
#[derive(Clone, Copy)]
pub struct Source<'a> {
    pub workload: &'a Workload,
    pub topo: &'a Topology,
    pub config: &'a NetConfig,
}

impl LazyPlan {
    pub(crate) fn new(jobs: Vec<Job>, plans: Plans, mut kept: Kept, topo: &Topology) -> LazyPlan {
        let mut pairs = Vec::with_capacity(kept.deps.len());
        let ids = kept.task_gaps.ids(kept.tasks.len() as u32);
        // The dependencies live on as their dependents' lists only: each
        // block is freed once read, so the two are never held whole at once.
        let mut deps = std::mem::take(&mut kept.deps).into_blocks().flatten();
        for (t, id) in kept.tasks.iter().zip(ids) {
            pairs.extend(deps.by_ref().take(t.deps as usize).map(|d| (d, id)));
        }
        debug_assert!(deps.next().is_none(), "every kept dependency is read");
        let kept_rev = Csr::from_pairs(pairs);
        // Sized at once: grown by doubling, the largest would peak at twice.
        let mut pairs = Vec::with_capacity(plans.entry_tasks());
        let mut root_plans = Vec::new();
        for p in 0..plans.list.len() {
            let mut root = false;
            plans.each_entry(p, |member, deps| {
                root |= deps.is_empty();
                pairs.extend(deps.iter().map(|&d| (d, (p as u32, member))));
            });
            if root {
                root_plans.push(p as u32);
            }
        }
        let n = plans.list.len();
        let task_index = PlanIndex::new(plans.list.iter().map(|p| p.base.task), n);
        let flow_index = PlanIndex::new(plans.list.iter().map(|p| p.base.flow), n);
        LazyPlan {
            jobs,
            plans,
            kept,
            kept_rev,
            entry_rev: Csr::from_pairs(pairs),
            root_plans,
            task_index,
            flow_index,
            nvswitch: has_nvswitch(topo),
        }
    }

    /// The ids the whole workload hands out.
    pub fn ids(&self) -> IdBase {
        self.kept.ids
    }

    /// How many collectives are planned.
    pub fn plans(&self) -> usize {
        self.plans.list.len()
    }

    /// Tasks kept outside collectives (a run counts their dependencies).
    pub fn kept_tasks(&self) -> u64 {
        self.kept.tasks.len() as u64
    }

    /// What a shard's expanded collectives may hold at once on `topo`'s
    /// hosts: [`LazyPlan::live_tasks_per_host`] tasks a host, at most
    /// every task of the workload. The live tasks are split as the
    /// planned ones are: those of collectives with a shape hold
    /// [`BYTES_PER_LIVE_COUNT`] beside [`LIVE_TEMPLATES`] templates of the
    /// largest shaped one at [`BYTES_PER_LIVE_TASK`] a task; those of
    /// collectives that keep a template of their own (NCCL's model, NVLS,
    /// DPU staging) hold [`BYTES_PER_LIVE_TASK`] each.
    pub fn live_bytes(&self, topo: &Topology) -> u64 {
        let tasks = u64::from(self.kept.ids.task - self.kept.tasks.len() as u32);
        let per_host = self.live_tasks_per_host();
        let live = tasks.min(u64::from(topo.host_count()).saturating_mul(per_host));
        let (mut planned, mut unshared, mut largest_shared) = (0u64, 0u64, 0u64);
        for (i, plan) in self.plans.list.iter().enumerate() {
            let count = u64::from(plan.count.task);
            planned += count;
            if self.shares_template(topo, i as u32) {
                largest_shared = largest_shared.max(count);
            } else {
                unshared += count;
            }
        }
        // `live * unshared` can pass u64 on a large workload: in u128.
        let live_unshared =
            (u128::from(live) * u128::from(unshared)).div_ceil(u128::from(planned.max(1))) as u64;
        let live_shared = live - live_unshared.min(live);
        let templates = live_shared.min(LIVE_TEMPLATES.saturating_mul(largest_shared));
        live_unshared.saturating_mul(BYTES_PER_LIVE_TASK)
            + live_shared.saturating_mul(BYTES_PER_LIVE_COUNT)
            + templates.saturating_mul(BYTES_PER_LIVE_TASK)
    }

    /// Whether plan `p` has a shape, whose live collectives share a
    /// template (unless its flows leave its group: not known unexpanded).
    fn shares_template(&self, topo: &Topology, p: u32) -> bool {
        let mut entry_lens = Vec::new();
        self.plans
            .each_entry(p as usize, |_, deps| entry_lens.push(deps.len()));
        self.shape_key(topo, p, |at| entry_lens[at]).is_some()
    }

    /// Tasks of expanded collectives a host may hold at once: a member's
    /// share of the largest collective (its tasks over its simulated
    /// members, rounded up), and never fewer than [`LIVE_TASKS_PER_HOST`].
    /// An expanded collective is held whole until its last member ends,
    /// and its members become ready over a long stretch (issue 32: the
    /// 32,768-GPU GPT's data-parallel all-reduces over 512 ranks hold
    /// ~1,074 tasks a member, and 48 of them 802 a host).
    pub fn live_tasks_per_host(&self) -> u64 {
        let share = |i: usize| {
            let members = self.plans.group(i).len().max(1) as u64;
            u64::from(self.plans.list[i].count.task).div_ceil(members)
        };
        (0..self.plans.list.len())
            .map(share)
            .fold(LIVE_TASKS_PER_HOST, u64::max)
    }

    /// Of what can be under way by `end` on `shards` shards: the flows
    /// (every kept one, and each plan's whose earliest start is not past
    /// `end`) and the tasks of those plans, counted once per shard that
    /// may expand them (at most one per member). A run cut at `end`
    /// finishes no more flows and expands no more tasks.
    pub fn reach_by(&self, end: SimTime, shards: u32) -> Reach {
        let mut reach = Reach {
            flows: self.kept.flows.len() as u64,
            tasks: 0,
        };
        for (i, p) in self.plans.list.iter().enumerate() {
            if self.plans.earliest(i) <= end {
                let copies = self.plans.group(i).len().min(shards as usize) as u64;
                reach.flows += u64::from(p.count.flow);
                reach.tasks += u64::from(p.count.task) * copies;
            }
        }
        reach
    }

    /// What it holds (plans, kept tasks and flows, the reverse indices).
    pub fn bytes(&self) -> u64 {
        let k = &self.kept;
        self.plans.bytes()
            + (k.tasks.len() * std::mem::size_of::<Task>()
                + k.flows.len() * std::mem::size_of::<FlowSpec>()
                + (k.flow_task.len() + k.deps.len() + self.root_plans.len()) * 4)
                as u64
            + k.task_gaps.bytes()
            + k.flow_gaps.bytes()
            + self.kept_rev.bytes()
            + self.entry_rev.bytes()
            + self.task_index.bytes()
            + self.flow_index.bytes()
    }

    /// Where task `task` lives.
    pub(crate) fn task_place(&self, task: u32) -> Place {
        match self.kept.task_gaps.index(task) {
            Some(i) => Place::Kept(i),
            None => {
                let p = self
                    .task_index
                    .find(&self.plans.list, |p| p.base.task, task);
                Place::Plan(p as u32)
            }
        }
    }

    /// Where flow `flow` lives.
    pub(crate) fn flow_place(&self, flow: u32) -> Place {
        match self.kept.flow_gaps.index(flow) {
            Some(i) => Place::Kept(i),
            None => {
                let p = self
                    .flow_index
                    .find(&self.plans.list, |p| p.base.flow, flow);
                Place::Plan(p as u32)
            }
        }
    }

    /// Kept task `i`, and what it does.
    pub(crate) fn kept_task(&self, workload: &Workload, i: u32) -> (Task, TaskKind) {
        let t = self.kept.tasks[i as usize];
        (t, workload.kind(&t))
    }

    /// Kept flow `i` and its task.
    pub(crate) fn kept_flow(&self, i: u32) -> (FlowSpec, u32) {
        (self.kept.flows[i as usize], self.kept.flow_task[i as usize])
    }

    /// The kept tasks that depend on task `task`, ascending.
    pub(crate) fn kept_dependents(&self, task: u32) -> impl Iterator<Item = u32> + '_ {
        self.kept_rev.get(task).iter().map(|&(_, d)| d)
    }

    /// The `(plan, member)` pairs whose entry lists task `task`.
    pub(crate) fn entry_waiters(&self, task: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.entry_rev.get(task).iter().map(|&(_, w)| w)
    }

    /// Plans expanded as a run starts (a member waits for nothing).
    pub(crate) fn root_plans(&self) -> &[u32] {
        &self.root_plans
    }

    /// The first task, flow and collective ids of plan `p`.
    pub(crate) fn base(&self, p: u32) -> IdBase {
        self.plans.list[p as usize].base
    }

    /// Whether plan `p` has a member among `local` (sorted).
    pub(crate) fn has_member_in(&self, p: u32, local: &[u32]) -> bool {
        let group = self.plans.group(p as usize);
        group.iter().any(|h| local.binary_search(h).is_ok())
    }

    /// Plan `p`'s entries, member by member, into `entries`.
    fn entries_into(&self, p: u32, entries: &mut template::Entries) {
        entries.tasks.clear();
        entries.starts.clear();
        self.plans.each_entry(p as usize, |_, deps| {
            entries.starts.push(entries.tasks.len() as u32);
            entries.tasks.extend_from_slice(deps);
        });
        entries.starts.push(entries.tasks.len() as u32);
    }

    /// Plan `p`'s shape (`build::shape`), its members' entries
    /// `entry_len(position)` long; `None` where the builder reads more.
    pub(crate) fn shape_key(
        &self,
        topo: &Topology,
        p: u32,
        entry_len: impl Fn(usize) -> usize,
    ) -> Option<ShapeKey> {
        let i = p as usize;
        let (job, _, spec) = self.plans.op(i);
        let group = self.plans.group(i);
        let logical = self.plans.list[i].logical as usize;
        let job_spec = &self.jobs[*job].spec;
        shape::key(
            topo,
            job_spec,
            *job as u32,
            spec,
            group,
            logical,
            |at, _| entry_len(at),
        )
    }

    /// Plan `p` expanded at its reserved ids.
    pub(crate) fn expand(&self, src: Source<'_>, p: u32) -> Expanded {
        let row = &src.workload.collectives[self.base(p).collective as usize];
        let topo = (src.topo, self.nvswitch);
        expand_with(&self.jobs, topo, src.config, &self.plans, p as usize, row)
            .expect("a lazy workload has no offloaded collective")
    }
}

#[cfg(test)]
mod tests {
    use super::{Csr, PlanIndex};

    /// A key's values through the bucket index are those a search of every
    /// pair finds, once each, for keys in one bucket, far apart, zero, past
    /// the last and absent.
    #[test]
    fn an_indexed_key_finds_its_values() {
        let keys = [0u32, 3, 4, 4, 9, 255, 256, 700, 70_000, 70_001];
        let pairs: Vec<(u32, u32)> = keys
            .iter()
            .enumerate()
            .map(|(i, &k)| (k, i as u32))
            .collect();
        // Given twice and out of order: kept once, in order.
        let mut given = pairs.clone();
        given.extend(pairs.iter().rev());
        let csr = Csr::from_pairs(given);
        assert_eq!(csr.pairs.len(), pairs.len());
        for key in (0..71_000).chain([u32::MAX]) {
            let want: Vec<(u32, u32)> = pairs.iter().filter(|p| p.0 == key).copied().collect();
            assert_eq!(csr.get(key), want.as_slice(), "key {key}");
        }
        assert_eq!(Csr::<u32>::from_pairs(Vec::new()).get(5), &[]);
    }

    /// The bucketed search finds the plan a search of every plan finds,
    /// for plans that start in the same bucket, far apart, or at the same
    /// id (a plan of no tasks), and for ids past the last plan.
    #[test]
    fn an_indexed_plan_is_the_searched_one() {
        let bases: Vec<u32> = vec![0, 3, 3, 7, 255, 256, 257, 900, 900, 5000, 70_000];
        let index = PlanIndex::new(bases.iter().copied(), bases.len());
        for id in (0..72_000).chain([u32::MAX - 1]) {
            let searched = bases.partition_point(|&b| b <= id) - 1;
            assert_eq!(index.find(&bases, |&b| b, id), searched, "id {id}");
        }
    }
}
