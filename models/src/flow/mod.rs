//! Flow-level (fluid) mode: the same scenario as packet mode — topology,
//! routes, traffic or workload DAG — with flows instead of packets.
//!
//! ```text
//!  Start ──(route as packet mode would)──> FairShare: max-min rates over
//!    │                                       the channels of each component
//!    └─ drains its wire bytes at its rate ──> Drained
//!                 + forward tail (latencies, store-and-forward) ──> Delivered (dst)
//!                 + ACK return ──────────────────────────────────> Acked (src)
//! ```
//!
//! A flow's bytes (with headers) drain at its max-min fair share of every
//! channel (link direction) it crosses; shares are recomputed after each
//! instant at which flows start or drain, only for the flows those changes
//! can affect ([`fair_share`]). With `--cc none` nothing slows a sender, and [`fifo`] shares the
//! channels as FIFO queues instead (fluid backlogs served in arrival order).
//! Alone on its path a flow drains at the bottleneck rate, then pays
//! exactly the latencies and store-and-forward delays of [`PathTiming`], so it
//! completes at packet mode's `ideal_fct_ns`. Workload tasks start when their
//! host sees their dependencies complete, as in packet mode: a flow is
//! complete at its destination when delivered and at its source when acked.
//!
//! Not modelled: packet queues, ECN, PFC and congestion control (the
//! `queues` and `pfc` tables stay empty) and per-packet spraying (refused by
//! [`check`]). In-network aggregation is a fluid stream over its whole tree
//! ([`ina`]). The run is sequential, so it is identical for any
//! number of threads.

mod classes;
mod dag;
mod fair_share;
mod fifo;
mod ina;
mod meter;
mod paths;
mod queue;
mod slots;

pub use slots::{bytes_per_flow, BYTES_PER_FLOW_IN_FLIGHT};

use crate::network::config::EcmpMode;
use crate::network::{
    collective_record, five_tuple_hash, ideal_fct, CollectiveSpan, Fabric, NetRun, NetStats,
    PathTiming, ShardOutcome,
};
use crate::telemetry::{FlowRecord, TelemetrySink};
use crate::traffic::FlowSpec;
use crate::workload::progress::Start;
use crate::workload::FlowInfo;
use classes::Classes;
use dag::FlowDag;
use fair_share::{Active, FairShare, RateChange};
use fifo::Fifo;
use ina::InaTrees;
use meter::LinkMeter;
use netsim_engine::{Progress, SimTime};
use paths::{route, Channels};
use queue::EventQueue;
use slots::Slots;

/// A scenario that flow level cannot run faithfully.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowModeError {
    #[error("--fidelity flow: {0} is not modelled at flow level; use --fidelity packet")]
    Unsupported(&'static str),
    #[error("--fidelity flow: {0}")]
    Fold(String),
}

/// Refuses what the fluid model cannot represent.
pub fn check(fabric: &Fabric) -> Result<(), FlowModeError> {
    if fabric.config.ecmp == EcmpMode::Spray {
        return Err(FlowModeError::Unsupported(
            "--ecmp spray (per-packet spraying)",
        ));
    }
    if fabric.config.transport == crate::network::config::Transport::Uec {
        return Err(FlowModeError::Unsupported(
            "--transport uec (per-packet spraying, trimming)",
        ));
    }
    // An operation's stream crosses every edge of its tree both ways.
    let edges = |op: &crate::workload::InaOp| op.tree.iter().map(|t| t.child_ports.len()).sum();
    if fabric
        .workload
        .ina_ops
        .iter()
        .map(edges)
        .any(|e: usize| e > 32_767)
    {
        return Err(FlowModeError::Unsupported(
            "an in-network tree of more than 32,767 edges",
        ));
    }
    let fifo = fabric.config.cc == crate::network::config::CcKind::None;
    classes::check(fabric, fifo).map_err(FlowModeError::Fold)
}

/// What happens to a flow or task; ordered for the event queue's ties.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Start {
        flow: u32,
    },
    /// The flow's last byte leaves the bottleneck, if its rate has not
    /// changed since (`version`).
    Drained {
        flow: u32,
        version: u32,
    },
    Delivered {
        flow: u32,
    },
    Acked {
        flow: u32,
    },
    TaskDone {
        task: u32,
    },
    /// Something is due in the FIFO sharing model.
    Wake,
}

/// One flow's progress.
#[derive(Clone, Copy, Debug)]
struct FlowState {
    /// When it started.
    start: SimTime,
    /// Wire bits still to drain, times 10^12 (bit-picoseconds), as of `settled_at`.
    left: u128,
    settled_at: SimTime,
    version: u32,
    forward_tail: SimTime,
    ack_return: SimTime,
    ideal_fct: SimTime,
    end: Option<SimTime>,
    /// Its slot in the max-min solver while it drains there
    /// ([`FairShare::add`]'s).
    share_slot: u32,
    /// Its spec and what it belongs to, looked up once as it starts (a
    /// lazily expanded workload finds them through its plans).
    spec: FlowSpec,
    info: Option<FlowInfo>,
}

impl FlowState {
    /// A flow (or stream) that starts at `now`, its timing still to be set.
    fn started(now: SimTime) -> FlowState {
        FlowState {
            start: now,
            left: 0,
            settled_at: now,
            version: 0,
            forward_tail: SimTime::ZERO,
            ack_return: SimTime::ZERO,
            ideal_fct: SimTime::ZERO,
            end: None,
            share_slot: u32::MAX,
            spec: FlowSpec {
                src: 0,
                dst: 0,
                size_bytes: 0,
                start: SimTime::ZERO,
            },
            info: None,
        }
    }
}

/// Events handled between two progress reports.
const PROGRESS_EVERY: u64 = 4096;

struct Fluid<'f, S> {
    fabric: &'f Fabric,
    channels: Channels,
    share: FairShare,
    /// FIFO sharing instead of max-min (senders nothing slows: `--cc none`).
    fifo: Option<Fifo>,
    /// The earliest `Wake` pending (`SimTime::MAX`: none).
    wake_at: SimTime,
    meter: LinkMeter,
    /// In-network operations; their streams follow the flows in `flows`.
    ina: InaTrees,
    /// Folded jobs' flows as classes of members ([`classes`]).
    classes: Option<Classes>,
    /// Per running flow or in-network stream (a slot from its start to its
    /// acknowledgement, a stream's to its drain).
    flows: Slots<FlowState>,
    queue: EventQueue<Event>,
    next_seq: u64,
    dag: FlowDag,
    /// The sink takes the `collectives` rows as they become final.
    stream_collectives: bool,
    stats: NetStats,
    sink: S,
    now: SimTime,
    handled_events: u64,
    /// The next sampling instant (`SimTime::MAX`: no sampling).
    next_sample: SimTime,
    // Scratch, reused for every flow and instant.
    path: Vec<u32>,
    hops: Vec<(u64, u64)>,
    class_path: Vec<u32>,
    class_weights: Vec<u32>,
    changed: Vec<RateChange>,
    ready: Vec<u32>,
    drained: Vec<u32>,
}

/// Runs `fabric` at flow level until every flow has finished or `end` is
/// reached, on the calling thread. The outcome has the shape of a packet
/// run on one shard. Unwinds with [`netsim_engine::Stopped`] once
/// `progress` was asked to stop.
pub fn simulate<S: TelemetrySink>(
    fabric: &Fabric,
    end: SimTime,
    progress: Option<&Progress>,
    sink: S,
) -> NetRun<S> {
    let channels = Channels::new(fabric);
    let topo = &fabric.topo;
    let mut capacity_bps = (0..topo.node_count())
        .flat_map(|n| {
            topo.ports(n)
                .iter()
                .map(|p| topo.link(p.link).bandwidth_bps)
        })
        .collect::<Vec<u64>>();
    let workload = &fabric.workload;
    let flow_count = workload.flow_count();
    let stream_collectives = sink.takes_collectives();
    let (dag, roots) = FlowDag::new(fabric, stream_collectives);
    // A lazily expanded workload keeps nothing per flow id (issue 32).
    let sparse = workload.lazy.is_some();
    // Without congestion control nothing slows a sender: it injects at its
    // NIC's share and the switches' FIFO queues share the links.
    let fifo = (fabric.config.cc == crate::network::config::CcKind::None)
        .then(|| Fifo::new(capacity_bps.clone(), flow_count));
    let ina = InaTrees::new(fabric, &channels, &mut capacity_bps);
    let streams = ina.count();
    let period = fabric.config.sample_period;
    let classes = Classes::new(fabric);
    let mut meter = LinkMeter::new(
        channels.count() + streams as u32,
        fabric.config.keep_idle_rows,
    );
    if let Some(c) = &classes {
        meter.set_mirrors(c.mirrors(topo, &channels));
    }
    let mut fluid = Fluid {
        fabric,
        share: FairShare::new(capacity_bps),
        fifo,
        wake_at: SimTime::MAX,
        meter,
        ina,
        classes,
        channels,
        flows: Slots::new(flow_count + streams, sparse),
        queue: EventQueue::new(),
        next_seq: 0,
        dag,
        stream_collectives,
        stats: NetStats::default(),
        sink,
        now: SimTime::ZERO,
        handled_events: 0,
        next_sample: if period == SimTime::ZERO {
            SimTime::MAX
        } else {
            period
        },
        path: Vec::new(),
        hops: Vec::new(),
        class_path: Vec::new(),
        class_weights: Vec::new(),
        changed: Vec::new(),
        ready: Vec::new(),
        drained: Vec::new(),
    };
    fluid.start_roots(roots);
    let mut reported = 0;
    while let Some((at, _)) = fluid.queue.peek() {
        if at >= end {
            break;
        }
        fluid.sample_until(at);
        fluid.now = at;
        fluid.write_collectives(false);
        while let Some((t, event)) = fluid.queue.peek() {
            if t != at {
                break;
            }
            fluid.queue.pop();
            fluid.handle(event);
        }
        fluid.resolve();
        if let Some(p) = progress {
            if fluid.handled_events - reported >= PROGRESS_EVERY {
                p.window(at, fluid.handled_events - reported);
                reported = fluid.handled_events;
            }
            // At every instant, not every report: one instant of a large
            // fabric recomputes every flow's rate, and a relaxed load is
            // nothing beside that. Unwinds as the packet level's shards
            // stop (see `Progress::stop`).
            if p.stopping() {
                std::panic::resume_unwind(Box::new(netsim_engine::Stopped));
            }
            // A graceful stop: every instant before the next is handled.
            if p.interrupted() {
                break;
            }
        }
    }
    if let Some(p) = progress {
        p.window(fluid.now, fluid.handled_events - reported);
    }
    fluid.finish()
}

impl<S: TelemetrySink> Fluid<'_, S> {
    /// Starts the workload's tasks without dependencies (`roots`), or
    /// schedules every flow of plain traffic.
    fn start_roots(&mut self, roots: Vec<u32>) {
        let fabric = self.fabric;
        let workload = &fabric.workload;
        if workload.has_tasks() {
            for task in roots {
                self.start_task(task);
            }
        } else {
            for (flow, spec) in workload.flows.iter().enumerate() {
                self.push(spec.start, Event::Start { flow: flow as u32 });
            }
        }
    }

    fn push(&mut self, at: SimTime, event: Event) {
        self.queue.push(at, self.next_seq, event);
        self.next_seq += 1;
    }

    fn handle(&mut self, event: Event) {
        let fabric = self.fabric;
        match event {
            Event::Start { flow } => self.start_flow(flow),
            Event::Drained { flow, version } => {
                let Some(f) = self.flows.get_mut(flow).filter(|f| f.version == version) else {
                    return; // its rate changed since; a later event stands
                };
                let Active {
                    rate_bps: old_bps,
                    path,
                    weights,
                } = self.share.active(f.share_slot);
                let elapsed_ps = u128::from((self.now - f.settled_at).as_ps());
                let residue = f.left.saturating_sub(u128::from(old_bps) * elapsed_ps);
                f.left = 0;
                self.meter.change(path, weights, old_bps, 0, self.now);
                self.meter.credit(path, weights, residue);
                self.share.remove(f.share_slot);
                self.drained(flow);
            }
            Event::Wake => self.wake_at = SimTime::MAX,
            Event::Delivered { flow } => {
                let FlowState { spec, info, .. } = self.flows[flow as usize];
                self.stats.delivered_payload_bytes += spec.size_bytes;
                if let Some(info) = info {
                    self.seen_complete(info.task, spec.dst, false);
                }
            }
            Event::Acked { flow } => {
                let f = &mut self.flows[flow as usize];
                f.end = Some(self.now);
                let (spec, info) = (f.spec, f.info);
                self.stats.flows_finished += 1;
                self.record_flow(flow);
                self.flows.close(flow);
                if let Some(info) = info {
                    self.seen_complete(info.task, spec.src, true);
                }
            }
            Event::TaskDone { task } => {
                let host = self.dag.task_host(fabric, task);
                self.seen_complete(task, host, true);
            }
        }
        self.handled_events += 1;
    }

    /// Flow `flow` starts sending now: its path, timing and share.
    fn start_flow(&mut self, flow: u32) {
        let fabric = self.fabric;
        let (spec, info) = self.dag.flow(fabric, flow);
        if let Some(op) = self.ina.op_of(flow) {
            return self.ina_member_started(op, flow, (spec, info));
        }
        let (share, fifo) = (&self.share, &self.fifo);
        let load = |c| fifo.as_ref().map_or_else(|| share.load(c), |q| q.load(c));
        route(
            fabric,
            &self.channels,
            flow,
            &spec,
            None,
            load,
            &mut self.path,
            &mut self.hops,
        );
        let timing = PathTiming::new(&fabric.config, spec.size_bytes, &self.hops);
        let first_port = (self.path[0] - self.channels.of(spec.src, 0)) as u16;
        self.flows.open(flow, FlowState::started(self.now));
        let f = &mut self.flows[flow as usize];
        (f.spec, f.info) = (spec, info);
        f.left = u128::from(timing.wire_bytes) * 8_000_000_000_000;
        f.forward_tail = timing.forward_tail;
        f.ack_return = timing.ack_return;
        f.ideal_fct = ideal_fct(fabric, &spec, first_port).0;
        match (&mut self.fifo, &mut self.classes) {
            (Some(q), _) => q.add(flow, &self.path, f.left, self.now),
            (None, Some(classes)) if classes.replicas(&spec) > 1 => {
                let share = &self.share;
                classes.class(
                    fabric,
                    &self.channels,
                    flow,
                    &spec,
                    &self.path,
                    |c| share.load(c),
                    &mut self.class_path,
                    &mut self.class_weights,
                );
                f.share_slot = self
                    .share
                    .add_class(flow, &self.class_path, &self.class_weights);
            }
            (None, _) => f.share_slot = self.share.add(flow, &self.path),
        }
        if let Some(info) = info {
            self.dag.span_started(info.collective, self.now);
        }
    }

    /// New shares after the instant's starts and departures: every flow
    /// whose rate changed drains what it had at the old rate and reschedules.
    fn resolve(&mut self) {
        if let Some(q) = &mut self.fifo {
            let mut drained = std::mem::take(&mut self.drained);
            q.step(self.now, &mut self.meter, &mut drained);
            let next = q.next_event();
            for &flow in &drained {
                self.drained(flow);
            }
            drained.clear();
            self.drained = drained;
            if let Some(at) = next.filter(|&at| at < self.wake_at) {
                self.wake_at = at;
                self.push(at, Event::Wake);
            }
        }
        let mut changed = std::mem::take(&mut self.changed);
        self.share.resolve(&mut changed);
        for change in &changed {
            let RateChange { flow, old_bps, .. } = *change;
            let Active {
                rate_bps: new_bps,
                path,
                weights,
            } = self.share.changed(change);
            self.meter.change(path, weights, old_bps, new_bps, self.now);
            let f = &mut self.flows[flow as usize];
            let elapsed_ps = u128::from((self.now - f.settled_at).as_ps());
            f.left = f.left.saturating_sub(u128::from(old_bps) * elapsed_ps);
            f.settled_at = self.now;
            f.version = f.version.wrapping_add(1);
            let drain_ps = (f.left / u128::from(new_bps)).max(1);
            let at = u64::try_from(drain_ps)
                .map_or(SimTime::MAX, |ps| self.now.saturating_add(SimTime(ps)));
            let version = f.version;
            self.push(at, Event::Drained { flow, version });
        }
        changed.clear();
        self.changed = changed;
    }

    /// Flow `flow`'s last byte left its last link now: it is delivered
    /// after its forward tail, acknowledged after the ACK's way back.
    fn drained(&mut self, flow: u32) {
        if let Some(op) = self.ina.stream_op(flow) {
            self.flows.close(flow);
            return self.ina_drained(op);
        }
        let f = &self.flows[flow as usize];
        let delivered = self.now.saturating_add(f.forward_tail);
        let acked = delivered.saturating_add(f.ack_return);
        self.stats.sent_payload_bytes += f.spec.size_bytes;
        self.push(delivered, Event::Delivered { flow });
        self.push(acked, Event::Acked { flow });
    }

    /// Task `task` starts now on its host.
    fn start_task(&mut self, task: u32) {
        match self.dag.start(self.fabric, task, self.now) {
            Start::Flow { flow, after } => {
                self.push(self.now.saturating_add(after), Event::Start { flow })
            }
            Start::Compute { task, after } => {
                self.push(self.now.saturating_add(after), Event::TaskDone { task })
            }
        }
    }

    /// Host `host` saw task `task` complete; starts its tasks that waited
    /// only for it.
    fn seen_complete(&mut self, task: u32, host: u32, at_source: bool) {
        let mut ready = std::mem::take(&mut self.ready);
        let (fabric, now) = (self.fabric, self.now);
        self.dag
            .seen_complete(fabric, (task, host, at_source), now, &mut ready);
        for &t in &ready {
            self.start_task(t);
        }
        ready.clear();
        self.ready = ready;
    }

    /// Link rows for every sampling instant up to `now`.
    fn sample_until(&mut self, now: SimTime) {
        let period = self.fabric.config.sample_period;
        while self.next_sample <= now {
            let at = self.next_sample;
            self.meter
                .sample(&self.fabric.topo, at - period, at, &mut self.sink);
            self.next_sample = at.saturating_add(period);
        }
    }

    /// Hands the sink the `collectives` rows of the collectives that
    /// finished before `now`, by end then id (with `rest`, every row left:
    /// the run is over), when it takes them; their spans are no longer held.
    fn write_collectives(&mut self, rest: bool) {
        if !self.stream_collectives {
            return;
        }
        let (workload, now) = (&self.fabric.workload, self.now);
        let sink = &mut self.sink;
        let mut out = |c: u32, span: &CollectiveSpan| {
            sink.collective(collective_record(workload, c, span));
        };
        let spans = self.dag.spans_mut();
        match rest {
            true => {
                spans.take_final(SimTime::MAX, &mut out);
                spans.take_rest(out);
            }
            false => spans.take_final(now, out),
        }
    }

    fn record_flow(&mut self, flow: u32) {
        let f = self.flows[flow as usize];
        let spec = f.spec;
        let (collective_id, job) = self.dag.flow_collective(self.fabric, f.info);
        let fct_ns = f.end.map(|e| (e - f.start).as_ns());
        let ideal_fct_ns = f.ideal_fct.as_ns();
        self.sink.flow(FlowRecord {
            flow_id: flow,
            src: spec.src,
            dst: spec.dst,
            size_bytes: spec.size_bytes,
            start_ns: f.start.as_ns(),
            end_ns: f.end.map(SimTime::as_ns),
            fct_ns,
            ideal_fct_ns,
            slowdown: fct_ns
                .filter(|_| ideal_fct_ns > 0)
                .map(|fct| fct as f64 / ideal_fct_ns as f64),
            // In-network streams follow their tree, not a hash (0 as at packet level).
            ecmp_path: match self.ina.op_of(flow) {
                Some(_) => 0,
                None => five_tuple_hash(self.fabric.source_port(flow), spec.src, spec.dst),
            },
            ecn_marked_pkts: 0,
            cnps: 0,
            retransmitted_pkts: 0,
            skipped_bytes: 0,
            skipped_ns: 0,
            trimmed_pkts: 0,
            sacks: 0,
            paths_used: 1,
            finished: f.end.is_some(),
            collective_id,
            job,
            reason: f.end.is_none().then_some("time-limit"),
        });
    }

    /// The rows still due at the end of the run (`now`): the last samples,
    /// a last shorter interval, and the flows that started but did not finish.
    fn finish(mut self) -> NetRun<S> {
        let sim_end = self.now;
        self.sample_until(sim_end);
        let period = self.fabric.config.sample_period;
        if self.next_sample != SimTime::MAX {
            let sampled = self.next_sample - period;
            let last = SimTime::from_ns(sim_end.as_ps().div_ceil(1_000));
            if sampled < last {
                self.meter
                    .sample(&self.fabric.topo, sampled, last, &mut self.sink);
            }
        }
        self.ina.report(&mut self.sink);
        // Flows still running started and did not finish (streams are not flows).
        let flows = self.fabric.workload.flow_count() as u32;
        let mut running = self.flows.open_flows();
        running.retain(|&f| f < flows);
        for flow in running {
            self.record_flow(flow);
        }
        self.write_collectives(true);
        NetRun {
            shards: vec![ShardOutcome {
                skip: netsim_engine::SkipStats::default(),
                sink: self.sink,
                stats: self.stats,
                handled_events: self.handled_events,
                spans: self.dag.into_spans(),
            }],
            sim_end,
            windows: 0,
        }
    }
}
