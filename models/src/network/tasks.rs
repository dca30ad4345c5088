//! The workload's task driver: starts a host's tasks when their
//! dependencies have completed there (a flow after the host overhead, a
//! compute task for its duration) and tracks each collective's span.

use super::{NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::{TaskKind, NONE as NO_TASK};
use netsim_engine::{Context, SimTime};

impl<S: TelemetrySink> Network<'_, S> {
    /// Task `task` starts on the current host: a flow after the per-message
    /// host overhead, a compute task for its duration.
    pub(crate) fn start_task(&mut self, ctx: &mut Context<'_, NetEvent>, task: u32) {
        let workload = &self.fabric.workload;
        let t = workload.tasks[task as usize];
        debug_assert_eq!(t.host, ctx.node().0);
        match t.kind {
            TaskKind::Flow(flow) => {
                ctx.schedule_self(workload.host_overhead, NetEvent::FlowStart { flow })
            }
            TaskKind::Compute(duration) => {
                self.span_started(t.collective, ctx.now());
                ctx.schedule_self(duration, NetEvent::TaskDone { task });
            }
        }
    }

    /// The current host saw task `task` complete: at a flow's source
    /// (`at_source`, every byte acknowledged), at its destination (every
    /// byte delivered), or where a compute task ran. Starts the tasks on
    /// this host that were waiting only for it.
    pub(crate) fn task_seen_complete(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        task: u32,
        at_source: bool,
    ) {
        let workload = &self.fabric.workload;
        let host = ctx.node().0;
        let t = workload.tasks[task as usize];
        if t.collective != NO_TASK {
            let span = &mut self.spans[t.collective as usize];
            span.end = span.end.max(ctx.now());
            // Counted once, where the task started.
            span.tasks_done += u32::from(at_source);
        }
        for &d in workload.dependents(task) {
            if workload.tasks[d as usize].host != host {
                continue;
            }
            let left = &mut self.remaining[d as usize];
            *left -= 1;
            if *left == 0 {
                self.start_task(ctx, d);
            }
        }
    }

    pub(crate) fn span_started(&mut self, collective: u32, now: SimTime) {
        if collective != NO_TASK {
            let span = &mut self.spans[collective as usize];
            span.start = span.start.min(now);
        }
    }
}
