//! The workload's task driver: starts a host's tasks when their
//! dependencies have completed there (a flow after the host overhead, a
//! compute task for its duration), as the workload's `DagProgress` says,
//! or under `--lazy-expansion on` its `LazyDag`, which expands each
//! collective when it becomes ready and frees it after.

use super::{Fabric, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::traffic::FlowSpec;
use crate::workload::on_demand::{LazyDag, Source};
use crate::workload::progress::{CollectiveSpan, DagProgress, Start};
use crate::workload::{FlowInfo, Workload};
use netsim_engine::{Context, NodeId, SimTime};
use std::sync::Arc;

/// The workload's tasks as one shard's hosts see them.
#[derive(Debug)]
pub(crate) struct Tasks {
    /// The DAG as this shard's hosts saw it (dependencies not yet
    /// complete, only this shard's hosts' entries used; collective spans).
    pub dag: DagProgress,
    /// Under `--lazy-expansion on`, the DAG instead (`dag` is then empty).
    pub lazy: Option<LazyDag>,
    /// Scratch for the tasks a completion releases.
    pub ready: Vec<u32>,
    /// Workload tasks without dependencies, per local node: `(local, task)`, sorted.
    pub root_tasks: Vec<(u32, u32)>,
}

/// What a lazy DAG expands from.
fn source(fabric: &Fabric) -> Source<'_> {
    Source {
        workload: &fabric.workload,
        topo: &fabric.topo,
        config: &fabric.config,
    }
}

impl Tasks {
    /// The tasks of `fabric`'s workload on hosts among `nodes` (increasing ids).
    pub(crate) fn new(fabric: &Fabric, nodes: &[NodeId]) -> Tasks {
        let workload = &fabric.workload;
        let mut root_tasks = Vec::new();
        let mut lazy = None;
        if let Some(plan) = &workload.lazy {
            let local = nodes.iter().map(|n| n.0).collect();
            let (dag, roots) = LazyDag::new(source(fabric), plan.clone(), local);
            lazy = Some(dag);
            for (host, t) in roots {
                let local = nodes.binary_search(&NodeId(host)).expect("a local root");
                root_tasks.push((local as u32, t));
            }
        }
        for (t, task) in workload.tasks.iter().enumerate() {
            if task.deps == 0 {
                if let Ok(local) = nodes.binary_search(&NodeId(task.host)) {
                    root_tasks.push((local as u32, t as u32));
                }
            }
        }
        root_tasks.sort_unstable();
        Tasks {
            dag: match lazy {
                Some(_) => DagProgress::new(&Workload::default()),
                None => DagProgress::new(workload),
            },
            lazy,
            ready: Vec::new(),
            root_tasks,
        }
    }

    /// Per collective, what this shard's hosts saw.
    pub(crate) fn into_spans(self) -> Vec<CollectiveSpan> {
        match self.lazy {
            Some(lazy) => lazy.into_spans(),
            None => self.dag.into_spans(),
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Task `task` starts on the current host.
    pub(crate) fn start_task(&mut self, ctx: &mut Context<'_, NetEvent>, task: u32) {
        let fabric = self.fabric;
        let start = match &mut self.tasks.lazy {
            Some(lazy) => lazy.start(source(fabric), task, ctx.now()),
            None => {
                let workload = &fabric.workload;
                debug_assert_eq!(workload.tasks[task as usize].host, ctx.node().0);
                self.tasks.dag.start(workload, task, ctx.now())
            }
        };
        let (after, event) = match start {
            Start::Flow { flow, after } => (after, NetEvent::FlowStart { flow }),
            Start::Compute { task, after } => (after, NetEvent::TaskDone { task }),
        };
        self.memo_scheduled(&event, ctx.now() + after);
        ctx.schedule_self(after, event);
    }

    /// The current host saw task `task` complete (at a flow's source when
    /// `at_source`); starts the tasks on this host that waited only for it.
    pub(crate) fn task_seen_complete(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        task: u32,
        at_source: bool,
    ) {
        self.memo_seen(task, at_source, ctx.now());
        let mut ready = std::mem::take(&mut self.tasks.ready);
        let host = ctx.node().0;
        let fabric = self.fabric;
        match &mut self.tasks.lazy {
            Some(lazy) => {
                lazy.seen_complete(source(fabric), task, host, at_source, ctx.now(), &mut ready)
            }
            None => self.tasks.dag.seen_complete(
                &fabric.workload,
                task,
                host,
                at_source,
                ctx.now(),
                &mut ready,
            ),
        }
        for &t in &ready {
            self.start_task(ctx, t);
        }
        ready.clear();
        self.tasks.ready = ready;
    }

    /// A task of `collective` (or none) started at `now`.
    pub(crate) fn span_started(&mut self, collective: u32, now: SimTime) {
        match &mut self.tasks.lazy {
            Some(lazy) => lazy.span_started(collective, now),
            None => self.tasks.dag.span_started(collective, now),
        }
    }

    /// What flow `flow` belongs to; `None` for plain traffic.
    pub(crate) fn flow_info(&self, flow: u32) -> Option<FlowInfo> {
        match &self.tasks.lazy {
            Some(lazy) => Some(lazy.flow_info(source(self.fabric), flow)),
            None => self.fabric.workload.flow_info(flow),
        }
    }

    /// Whether a flow is queued behind flow `flow` on its queue pair.
    pub(crate) fn flow_has_queued_behind(&self, flow: u32) -> bool {
        match &self.tasks.lazy {
            Some(lazy) => lazy.flow_has_queued_behind(source(self.fabric), flow),
            None => self.fabric.workload.flow_has_queued_behind(flow),
        }
    }

    /// Flow `flow`'s spec.
    pub(crate) fn flow_spec(&self, flow: u32) -> FlowSpec {
        match &self.tasks.lazy {
            Some(lazy) => lazy.flow_spec(source(self.fabric), flow),
            None => self.fabric.workload.flows[flow as usize],
        }
    }

    /// The collective of flow `flow`, if it belongs to one.
    pub(crate) fn flow_collective(&self, flow: u32) -> Option<u32> {
        let c = self.flow_info(flow)?.collective;
        (c != crate::workload::NONE).then_some(c)
    }

    /// The name of the job flow `flow` belongs to, if any.
    pub(crate) fn flow_job(&self, flow: u32) -> Option<Arc<str>> {
        let c = self.flow_collective(flow)?;
        self.fabric.workload.collective_job(c).cloned()
    }
}
