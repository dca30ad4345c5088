//! The workload's task driver: starts a host's tasks when their
//! dependencies have completed there (a flow after the host overhead, a
//! compute task for its duration), as the workload's `DagProgress` says.

use super::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::progress::Start;
use netsim_engine::Context;

impl<S: TelemetrySink> Network<'_, S> {
    /// Task `task` starts on the current host.
    pub(crate) fn start_task(&mut self, ctx: &mut Context<'_, NetEvent>, task: u32) {
        let workload = &self.fabric.workload;
        debug_assert_eq!(workload.tasks[task as usize].host, ctx.node().0);
        let (after, event) = match self.dag.start(workload, task, ctx.now()) {
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
        let mut ready = std::mem::take(&mut self.ready);
        let host = ctx.node().0;
        self.dag.seen_complete(
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
        self.ready = ready;
    }
}
