//! The memo's sandbox: a contention domain simulated alone, packet by
//! packet, on the same fabric with only its tasks (DESIGN.md §3c). Its
//! notes become the domain's record.

use super::{resources, Canon, FlowRecord, Memo, Record, Recording};
use crate::network::config::FastForward;
use crate::network::{Fabric, Network};
use crate::telemetry::{MemorySink, TelemetrySink};
use crate::workload::TaskKind;
use hashbrown::HashMap;
use netsim_engine::{Executor, Layout, SimTime, Threads};

impl<S: TelemetrySink> Network<'_, S> {
    /// Simulates `canon`'s domain alone from a quiet network, its labelled
    /// host ports' round-robin pointers at `round_robin` (+ 1, as agreed)
    /// and task `k` free to start once `ready[k]` (what it waits for
    /// outside the domain is met then), and returns its record; `None` when
    /// a flow did not finish.
    pub(super) fn memo_sandbox(
        &mut self,
        canon: &Canon,
        round_robin: &[u64],
        ready: &[SimTime],
    ) -> Option<Record> {
        let workload = &self.fabric.workload;
        let sandbox = self.memo_sandbox_fabric(canon, ready);
        let mut outstanding = 0;
        for &t in &canon.tasks {
            outstanding += match workload.kind(&workload.tasks[t as usize]) {
                TaskKind::Flow(_) => 2,
                TaskKind::Compute(_) => 1,
            };
        }
        let view = canon.renumbered();
        let layout = Layout::blocks(sandbox.topo.node_count(), 1, SimTime::MAX)
            .expect("one shard over the fabric");
        let mut reports = Threads.run(&layout, sandbox.seed, SimTime::MAX, None, |_, nodes| {
            let mut net = Network::new(&sandbox, nodes, MemorySink::default());
            for (label, &(node, port)) in canon.ports.iter().enumerate() {
                let gp = net.port_index(node as usize, port);
                net.hosts[gp].round_robin = (round_robin[label] - 1) as usize;
            }
            let mut memo = Memo::new(&sandbox, net.ports.len());
            memo.recording = Some(Box::new(Recording {
                canon: view.clone(),
                outstanding,
                done: vec![(0, 0); view.tasks.len()],
                flows: vec![FlowRecord::default(); view.flows.len()],
                last_pfc: SimTime::ZERO,
            }));
            net.ff.memo = Some(memo);
            net
        });
        let report = reports.pop().expect("one shard");
        let net = report.model;
        let memo = net.ff.memo.as_ref().expect("the sandbox's memo");
        let r = memo.recording.as_ref().expect("the sandbox's notes");
        // Only this shard runs it; a sandbox that makes no record handled
        // its events all the same.
        self.stats.memo_sandbox_events += report.handled_events;
        if r.outstanding != 0 {
            return None;
        }
        let at = |x: u64| SimTime(x - 1);
        let done: Vec<(SimTime, SimTime)> = r.done.iter().map(|&(a, b)| (at(a), at(b))).collect();
        let span = quiet_span(&net, &sandbox, &view, &done, r.last_pfc, canon.t0);
        let port_busy = busy_intervals(self.fabric, canon, &net, &r.flows);
        // The labelled ports in the sandbox, in label order.
        let labelled = canon
            .ports
            .iter()
            .map(|&(node, port)| net.port_index(node as usize, port));
        Some(Record {
            span,
            done,
            flows: r.flows.clone(),
            port_bytes: labelled.clone().map(|gp| net.tx_bytes(gp)).collect(),
            port_busy,
            round_robin_after: labelled.map(|gp| net.hosts[gp].round_robin).collect(),
            draws: memo.draws,
            identity: super::identity(self.fabric, canon),
            port_numbers: super::port_numbers(canon),
            events: report.handled_events,
            sent: net.stats.sent_payload_bytes,
            delivered: net.stats.delivered_payload_bytes,
            pfc_pauses: net.stats.pfc_pauses,
        })
    }

    /// The fabric a sandbox simulates `canon`'s domain on: the run's, with
    /// only the domain's tasks (task `k` free to start once `ready[k]`),
    /// jumps as the run's, no memo and no samples.
    fn memo_sandbox_fabric(&self, canon: &Canon, ready: &[SimTime]) -> Fabric {
        let workload = &self.fabric.workload;
        // Its workload has no collectives: the connections' source ports
        // are the run's, and so are the twin draws.
        let mut sandbox = self.fabric.sharing(workload.sandbox(&canon.tasks, ready));
        // Jumps as the run's: the sandbox keeps absolute time and period,
        // so its checks fall on the run's grid until either jumps, and a
        // steady stretch of the domain alone is jumped as
        // `--fast-forward on` would jump it (the DP ring steps'
        // middles: most of the sandboxes' events). No memo inside it.
        sandbox.config.fast_forward = self.fabric.config.fast_forward.map(|ff| FastForward {
            memo: false,
            domains: false,
            rails: false,
            ..ff
        });
        sandbox.config.sample_period = SimTime::ZERO;
        sandbox
    }
}

/// From the domain's first start (`t0`) until its network is quiet.
fn quiet_span(
    net: &Network<'_, MemorySink>,
    sandbox: &Fabric,
    view: &Canon,
    done: &[(SimTime, SimTime)],
    last_pfc: SimTime,
    t0: SimTime,
) -> SimTime {
    // Until the domain's network is quiet: its flows' last completions
    // and the last frame on any wire (a port's last bit arrives at
    // `busy_until + latency`; a PFC frame when `last_pfc` says). Its
    // compute tasks use no resource and run in a replay as usual, so
    // they do not hold the domain's resources.
    let wires = net
        .ports
        .iter()
        .filter(|p| p.egress.busy_until != SimTime::ZERO)
        .map(|p| p.egress.busy_until + p.link.latency)
        .max()
        .unwrap_or(SimTime::ZERO);
    let flows_done = view
        .tasks
        .iter()
        .zip(done)
        .filter(|&(&k, _)| {
            matches!(
                sandbox.workload.kind(&sandbox.workload.tasks[k as usize]),
                TaskKind::Flow(_)
            )
        })
        .map(|(_, d)| d.0.max(d.1))
        .max()
        .unwrap_or(SimTime::ZERO);
    let quiet = wires.max(last_pfc);
    flows_done.max(SimTime(quiet.as_ps().saturating_sub(t0.as_ps())))
}

/// Per labelled port of `canon`, when it was busy in the sandbox `net`
/// (whose flows started as `flows` say), from the domain's first start.
fn busy_intervals(
    fabric: &Fabric,
    canon: &Canon,
    net: &Network<'_, MemorySink>,
    flows: &[FlowRecord],
) -> Vec<(SimTime, SimTime)> {
    // Each labelled port was busy from the first start of a flow whose
    // packets or acknowledgements cross it (no byte leaves it before)
    // to its last bit.
    let mut first = vec![SimTime::MAX; canon.ports.len()];
    let label: HashMap<(u32, u16), usize> = canon
        .ports
        .iter()
        .enumerate()
        .map(|(l, &p)| (p, l))
        .collect();
    let mut path = Vec::new();
    for (k, &flow) in canon.flows.iter().enumerate() {
        path.clear();
        resources::flow_ports(fabric, flow, &mut path);
        for p in &path {
            let l = label[p];
            first[l] = first[l].min(flows[k].start);
        }
    }
    canon
        .ports
        .iter()
        .zip(first)
        .map(|(&(node, port), first)| {
            let p = &net.ports[net.port_index(node as usize, port)];
            let last = SimTime(p.egress.busy_until.as_ps().saturating_sub(canon.t0.as_ps()));
            (first.min(last), last)
        })
        .collect()
}
