//! The hooks the rest of the network calls (`fast_forward/mod.rs` lists
//! them): scheduled starts and ends, flow starts that a replay takes over,
//! replayed flows' ends, completions seen, PFC frames.

use super::{resources, some};
use crate::network::common::five_tuple_hash;
use crate::network::{ideal_fct, NetEvent, Network};
use crate::telemetry::TelemetrySink;
use crate::workload::TaskKind;
use netsim_engine::{Context, SimTime};

impl<S: TelemetrySink> Network<'_, S> {
    /// A flow start or compute task end was scheduled at `at`.
    pub(crate) fn memo_scheduled(&mut self, event: &NetEvent, at: SimTime) {
        let Some(m) = self.ff.memo.as_mut() else {
            return;
        };
        match *event {
            NetEvent::FlowStart { flow } => {
                m.pending_flows.insert(flow, at);
            }
            NetEvent::TaskDone { task } => {
                m.pending_computes.insert(task, at);
            }
            _ => {}
        }
    }

    /// Flow `flow` starts at the current host (sender `i`): counts the
    /// collective's hit or miss at its first flow, and replays the flow
    /// when its domain is replayed (true: nothing more to do).
    pub(crate) fn memo_flow_start(
        &mut self,
        ctx: &mut Context<'_, NetEvent>,
        i: usize,
        flow: u32,
    ) -> bool {
        let Some(m) = self.ff.memo.as_mut() else {
            return false;
        };
        m.pending_flows.remove(&flow);
        let replay = m.replay.remove(&flow);
        if replay.is_some() {
            m.replaying.insert(flow);
        } else {
            m.sending.push(flow);
        }
        if let Some(c) = self.fabric.workload.flow_collective(flow) {
            if m.plan.first_flow(c) == flow {
                if let Some(r) = replay.filter(|r| !r.fresh) {
                    self.stats.memo_hits += 1;
                    self.stats.memo_path_hits += u64::from(r.across_paths);
                } else {
                    self.stats.memo_misses += 1;
                }
            }
        }
        if let Some(r) = &mut m.recording {
            if let Some(k) = r.canon.flow_index(flow) {
                r.flows[k].start = ctx.now() - r.canon.t0;
            }
        }
        let Some(r) = replay else { return false };
        let s = &mut self.transport.senders[i];
        s.retransmitted_pkts = r.record.retransmitted;
        s.ecn_marked_pkts = r.record.ecn_marked;
        s.cnps = r.record.cnps;
        s.skipped_bytes = s.spec.size_bytes;
        s.skipped = r.source_after;
        let (src, dst) = (s.spec.src, s.spec.dst);
        // What the flows table reports of a simulated start.
        let port = resources::first_port(self.fabric, flow, src, dst);
        let gport = self.port_index(ctx.local_index(), port);
        let s = &mut self.transport.senders[i];
        s.port = port;
        s.line_rate_bps = self.ports[gport].link.rate_bps;
        s.ideal_fct = ideal_fct(self.fabric, &s.spec, port).0;
        s.path_hash = five_tuple_hash(self.fabric.source_port(flow), src, dst);
        ctx.schedule_self(
            r.source_after,
            NetEvent::MemoEnd {
                flow,
                at_source: true,
            },
        );
        // At least the path's latency, so at least the lookahead when the
        // destination is on another shard.
        ctx.send(
            netsim_engine::NodeId(dst),
            r.destination_after,
            NetEvent::MemoEnd {
                flow,
                at_source: false,
            },
        );
        true
    }

    /// A replayed flow ends at its source or destination.
    pub(crate) fn memo_end(&mut self, ctx: &mut Context<'_, NetEvent>, flow: u32, at_source: bool) {
        let task = self.fabric.workload.flow_task(flow);
        if at_source {
            if let Some(m) = self.ff.memo.as_mut() {
                m.replaying.remove(&flow);
            }
            let i = self.transport.sender_of[&flow] as usize;
            self.transport.senders[i].end = Some(ctx.now());
            self.stats.flows_finished += 1;
            self.record_flow(i);
            self.flow_ahead_ended(i, ctx.now());
            // `memo_seen` reads the sender's counters: freed after.
            self.task_seen_complete(ctx, task, at_source);
            self.release_sender(i);
            return;
        }
        self.task_seen_complete(ctx, task, at_source);
    }

    /// A PFC frame arrived (hook of `pfc_frame`): a sandbox's network is
    /// not quiet before.
    pub(crate) fn memo_pfc(&mut self, now: SimTime) {
        if let Some(r) = self.ff.memo.as_mut().and_then(|m| m.recording.as_mut()) {
            r.last_pfc = now;
        }
    }

    /// Replayed flows in flight on this shard: no jump then (a jump
    /// extrapolates the flows it sees; the replayed ones it does not see
    /// would have vetoed it, their packets being anything but steady).
    pub(crate) fn memo_replaying(&self) -> bool {
        self.ff
            .memo
            .as_ref()
            .is_some_and(|m| !m.replaying.is_empty())
    }

    /// Host `host` saw task `task` complete (hook of `task_seen_complete`).
    pub(crate) fn memo_seen(&mut self, task: u32, at_source: bool, now: SimTime) {
        if let Some(d) = self.ff.domains.as_mut().filter(|_| !at_source) {
            d.delivered(task);
        }
        let Some(m) = self.ff.memo.as_mut() else {
            return;
        };
        match self
            .fabric
            .workload
            .kind(&self.fabric.workload.tasks[task as usize])
        {
            TaskKind::Compute(_) => {
                m.pending_computes.remove(&task);
            }
            TaskKind::Flow(_) if !at_source => m.delivered[task as usize] = true,
            TaskKind::Flow(_) => {}
        }
        let Some(r) = &mut m.recording else {
            return;
        };
        let Some(k) = r.canon.task_index(task) else {
            return;
        };
        let at = some(now - r.canon.t0);
        let slot = &mut r.done[k];
        let compute = matches!(
            self.fabric
                .workload
                .kind(&self.fabric.workload.tasks[task as usize]),
            TaskKind::Compute(_)
        );
        if at_source {
            slot.0 = at;
            if compute {
                slot.1 = at;
            }
        } else {
            slot.1 = at;
        }
        r.outstanding -= 1;
        if at_source && !compute {
            // The flows-table counters, final at the source's completion.
            let flow = match self
                .fabric
                .workload
                .kind(&self.fabric.workload.tasks[task as usize])
            {
                TaskKind::Flow(f) => f,
                TaskKind::Compute(_) => unreachable!(),
            };
            let s = &self.transport.senders[self.transport.sender_of[&flow] as usize];
            let fk = r.canon.flow_index(flow).expect("a wave flow");
            let f = &mut r.flows[fk];
            f.retransmitted = s.retransmitted_pkts;
            f.ecn_marked = s.ecn_marked_pkts;
            f.cnps = s.cnps;
        }
    }
}
