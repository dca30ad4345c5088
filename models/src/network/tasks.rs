//! The workload's task driver: starts a host's tasks when their
//! dependencies have completed there (a flow after the host overhead, a
//! compute task for its duration), as the workload's `DagProgress` says.

use super::{Fabric, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::progress::{DagProgress, Start};
use netsim_engine::{Context, NodeId};

/// The workload's tasks as one shard's hosts see them.
#[derive(Debug)]
pub(crate) struct Tasks {
    /// The DAG as this shard's hosts saw it (dependencies not yet
    /// complete, only this shard's hosts' entries used; collective spans).
    pub dag: DagProgress,
    /// Scratch for the tasks a completion releases.
    pub ready: Vec<u32>,
    /// Workload tasks without dependencies, per local node: `(local, task)`, sorted.
    pub root_tasks: Vec<(u32, u32)>,
}

impl Tasks {
    /// The tasks of `fabric`'s workload on hosts among `nodes` (increasing ids).
    pub(crate) fn new(fabric: &Fabric, nodes: &[NodeId]) -> Tasks {
        let workload = &fabric.workload;
        let mut root_tasks = Vec::new();
        for (t, task) in workload.tasks.iter().enumerate() {
            if task.deps == 0 {
                if let Ok(local) = nodes.binary_search(&NodeId(task.host)) {
                    root_tasks.push((local as u32, t as u32));
                }
            }
        }
        root_tasks.sort_unstable();
        Tasks {
            dag: DagProgress::new(workload),
            ready: Vec::new(),
            root_tasks,
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// Task `task` starts on the current host.
    pub(crate) fn start_task(&mut self, ctx: &mut Context<'_, NetEvent>, task: u32) {
        let workload = &self.fabric.workload;
        debug_assert_eq!(workload.tasks[task as usize].host, ctx.node().0);
        let (after, event) = match self.tasks.dag.start(workload, task, ctx.now()) {
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
        self.tasks.dag.seen_complete(
            &self.fabric.workload,
            task,
            host,
            at_source,
            ctx.now(),
            &mut ready,
        );
        for &t in &ready {
            self.start_task(ctx, t);
        }
        ready.clear();
        self.tasks.ready = ready;
    }
}
