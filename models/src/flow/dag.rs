//! The flow level's view of the workload's DAG: the eager build's
//! [`DagProgress`] over `Workload::tasks` and `flows`, or under
//! `--lazy-expansion on` a [`LazyDag`] of every host, which expands a
//! collective when it becomes ready and frees it once its last completion
//! is seen (docs/design/lazy-expansion.md). Both release the same tasks in
//! the same order, so the run's events, and its tables, are the same.

use crate::network::Fabric;
use crate::traffic::FlowSpec;
use crate::workload::on_demand::{LazyDag, Source};
use crate::workload::progress::{CollectiveSpan, DagProgress, Start};
use crate::workload::spans::Spans;
use crate::workload::{FlowInfo, NONE};
use netsim_engine::SimTime;
use std::sync::Arc;

/// The tasks as the (single, sequential) flow-level run sees them.
pub(super) enum FlowDag {
    Eager(DagProgress),
    Lazy(LazyDag),
}

/// What a lazy DAG expands from.
fn source(fabric: &Fabric) -> Source<'_> {
    Source {
        workload: &fabric.workload,
        topo: &fabric.topo,
        config: &fabric.config,
    }
}

impl FlowDag {
    /// The DAG of `fabric`'s workload and its tasks without dependencies,
    /// ascending (the order the eager run starts them in). With `streamed`
    /// it holds the collectives' spans only until they are taken
    /// ([`FlowDag::take_final_spans`]), not the whole iteration's.
    pub(super) fn new(fabric: &Fabric, streamed: bool) -> (FlowDag, Vec<u32>) {
        let workload = &fabric.workload;
        let spans = match streamed {
            true => Spans::streamed(workload.collectives.iter().map(|c| c.tasks).collect()),
            false => Spans::whole(workload.collectives.len()),
        };
        match &workload.lazy {
            Some(plan) => {
                let hosts = (0..fabric.topo.node_count()).collect();
                let (dag, roots) = LazyDag::with_spans(source(fabric), plan.clone(), hosts, spans);
                let mut roots: Vec<u32> = roots.into_iter().map(|(_, t)| t).collect();
                roots.sort_unstable();
                (FlowDag::Lazy(dag), roots)
            }
            None => {
                let roots = (0..workload.tasks.len() as u32)
                    .filter(|&t| workload.tasks[t as usize].deps == 0)
                    .collect();
                (
                    FlowDag::Eager(DagProgress::with_spans(workload, spans)),
                    roots,
                )
            }
        }
    }

    /// Task `task` starts at `now` on its host: what to schedule.
    pub(super) fn start(&mut self, fabric: &Fabric, task: u32, now: SimTime) -> Start {
        match self {
            FlowDag::Eager(dag) => dag.start(&fabric.workload, task, now),
            FlowDag::Lazy(dag) => dag.start(source(fabric), task, now),
        }
    }

    /// Host `host` saw task `task` complete; appends the tasks it releases.
    pub(super) fn seen_complete(
        &mut self,
        fabric: &Fabric,
        (task, host, at_source): (u32, u32, bool),
        now: SimTime,
        ready: &mut Vec<u32>,
    ) {
        match self {
            FlowDag::Eager(dag) => {
                dag.seen_complete(&fabric.workload, task, host, at_source, now, ready)
            }
            FlowDag::Lazy(dag) => {
                dag.seen_complete(source(fabric), task, host, at_source, now, ready)
            }
        }
    }

    /// A task of `collective` (or [`NONE`]) started at `now`.
    pub(super) fn span_started(&mut self, collective: u32, now: SimTime) {
        match self {
            FlowDag::Eager(dag) => dag.span_started(collective, now),
            FlowDag::Lazy(dag) => dag.span_started(collective, now),
        }
    }

    /// The host of task `task`.
    pub(super) fn task_host(&self, fabric: &Fabric, task: u32) -> u32 {
        match self {
            FlowDag::Eager(_) => fabric.workload.tasks[task as usize].host,
            FlowDag::Lazy(dag) => dag.task_host(source(fabric), task),
        }
    }

    /// Flow `flow`'s spec and what it belongs to (`None` for plain
    /// traffic), in one look-up.
    pub(super) fn flow(&self, fabric: &Fabric, flow: u32) -> (FlowSpec, Option<FlowInfo>) {
        match self {
            FlowDag::Eager(_) => (
                fabric.workload.flows[flow as usize],
                fabric.workload.flow_info(flow),
            ),
            FlowDag::Lazy(dag) => {
                let (spec, info) = dag.flow_spec_info(source(fabric), flow);
                (spec, Some(info))
            }
        }
    }

    /// The collective of a flow that belongs to `info` and its job's
    /// name, if any.
    pub(super) fn flow_collective(
        &self,
        fabric: &Fabric,
        info: Option<FlowInfo>,
    ) -> (Option<u32>, Option<Arc<str>>) {
        let c = info.map(|i| i.collective).filter(|&c| c != NONE);
        let job = c.and_then(|c| fabric.workload.collective_job(c).cloned());
        (c, job)
    }

    /// The collectives' spans.
    pub(super) fn spans_mut(&mut self) -> &mut Spans {
        match self {
            FlowDag::Eager(dag) => dag.spans_mut(),
            FlowDag::Lazy(dag) => dag.spans_mut(),
        }
    }

    /// Per collective, what was seen of it (none once streamed out).
    pub(super) fn into_spans(self) -> Vec<CollectiveSpan> {
        match self {
            FlowDag::Eager(dag) => dag.into_spans(),
            FlowDag::Lazy(dag) => dag.into_spans(),
        }
    }
}
