//! The memory a run checks before it allocates: what the network model
//! adds beside what the process holds already (the workload among it),
//! item by item, and what `run.json` reports of it and of the workload's
//! structures.

use crate::run_cmd::Fidelity;
use anyhow::bail;
use netsim_engine::SimTime;
use netsim_models::flow;
use netsim_models::network;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::traffic::FlowSpec;
use netsim_models::workload::Workload;
use netsim_models::workload::{on_demand, progress, spans};
use netsim_process::{human_bytes, memory_in_use_bytes, memory_limit_bytes};

/// What the network model holds per port (queues, counters, pause state),
/// a generous estimate for the memory check.
const BYTES_PER_PORT: u64 = 192;

/// What a rank of several keeps per finished flow for `run.json`'s
/// percentiles (a completion time under 4.3 s, read back from its `flows`
/// table after the run, see [`crate::fcts`]). A run of one rank keeps none:
/// it reads the percentiles back from the table in two passes.
const BYTES_PER_FCT: u64 = 4;

/// Flows a workload's flow-level run is allowed to have in flight at once,
/// per host: a generous allowance rather than a bound (SimAI's 9,216-GPU
/// example at `--fold-dp 12` has at most 6,972 flows in flight, under one
/// per host; plain traffic is allowed all its flows).
const FLOWS_IN_FLIGHT_PER_HOST: u64 = 64;

/// The same allowance at packet level, where a flow in flight costs a
/// sender and a receiver: measured peaks (`run.json`'s `sender_slots`)
/// are 1.75 per host on the 128-GPU MoE (`moe-pp4-ep2-tp8-128.txt`) and
/// 1.25 per simulated host on SimAI's 9,216-GPU example folded by 12.
const PACKET_FLOWS_IN_FLIGHT_PER_HOST: u64 = 16;

/// What a packet-level run adds beside the structures counted: its event
/// queues, the packets queued at ports and the table writers' buffers
/// (27 MB measured on the 128-GPU MoE; they grow with the traffic, not
/// with the workload's length).
const PACKET_RUNTIME_BYTES: u64 = 32 << 20;

/// What a run adds beside the workload it holds, as the check predicts it
/// (this rank's share).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunBytes {
    /// Its ports' queues and counters.
    pub ports: u64,
    /// Its state per flow of the workload (flow level's slot indices, the
    /// completion times kept; packet level's bits of flows received whole).
    pub flows: u64,
    /// Per task the count of dependencies left, per collective its span
    /// (once per shard).
    pub dag: u64,
    /// The state of the flows in flight, an allowance (packet level: their
    /// senders and receivers).
    pub in_flight: u64,
    /// Memoization's (`--ff-memo on`, see [`memo_bytes`]).
    pub memo: u64,
    /// Per-domain jumps' (`--ff-scope domain`, see [`domain_bytes`]).
    pub domains: u64,
    /// Packet level: event queues, queued packets, writers' buffers
    /// ([`PACKET_RUNTIME_BYTES`]).
    pub runtime: u64,
    /// Flows whose completion a run may keep: all of them, or under
    /// `--lazy-expansion on` those that can start before the run's end
    /// ([`netsim_models::workload::on_demand::LazyPlan::reach_by`]).
    pub finishing_flows: u64,
}

impl RunBytes {
    /// What a run of `workload` on `topo` (with routing tables of
    /// `routing_bytes`) at `fidelity` until `end` adds, on one of `ranks`
    /// ranks of `shards` shards each.
    pub fn of(
        fidelity: Fidelity,
        config: &NetConfig,
        topo: &netsim_topo::Topology,
        routing_bytes: u64,
        workload: &Workload,
        (ranks, shards): (usize, u32),
        end: SimTime,
    ) -> RunBytes {
        let ranks = ranks as u64;
        let flows = workload.flow_count() as u64 / ranks;
        let fct = if ranks == 1 { 0 } else { BYTES_PER_FCT };
        // Under --lazy-expansion on, counts are kept for the tasks outside
        // collectives only, and the collectives in flight are expanded:
        // no more than can start by `end`, whose flows are the only ones
        // that can finish.
        let (tasks, live) = match &workload.lazy {
            Some(lazy) => (lazy.kept_tasks(), lazy.live_bytes(topo)),
            None => (workload.tasks.len() as u64, 0),
        };
        let all_shards = (ranks as u32).saturating_mul(shards);
        let reach = workload.lazy.as_ref().map(|l| l.reach_by(end, all_shards));
        let finishing = reach.map_or(flows, |r| r.flows.min(flows * ranks) / ranks);
        // Every shard's allowance, or every task that can be expanded.
        let live_all = reach.map_or(live.saturating_mul(u64::from(shards)), |r| {
            let tasks = r.tasks / ranks;
            live.saturating_mul(u64::from(shards))
                .min(tasks.saturating_mul(on_demand::BYTES_PER_LIVE_TASK))
        });
        let state_per_shard = (tasks * progress::BYTES_PER_TASK)
            .saturating_add(workload.collectives.len() as u64 * progress::BYTES_PER_COLLECTIVE);
        // A flow-level run streams its `collectives` rows: no span per
        // collective, its task count and a bit (`workload/spans.rs`).
        let streamed = (tasks * progress::BYTES_PER_TASK).saturating_add(
            workload.collectives.len() as u64 * spans::BYTES_PER_STREAMED_COLLECTIVE,
        );
        let flow_dag = streamed.saturating_add(live);
        let all_ports = 2 * u64::from(topo.link_count());
        let ports = all_ports / ranks;
        // Plain traffic may have every flow in flight at once.
        let in_flight = |per_host: u64| match workload.has_tasks() {
            true => flows.min(u64::from(topo.host_count()) * per_host),
            false => flows,
        };
        // Fast-forward's sample rings, a slot per period of the window.
        let (ff_port, ff_sender) =
            network::fast_forward_bytes_per_port_and_sender(config.fast_forward);
        match fidelity {
            Fidelity::Flow => RunBytes {
                ports: ports.saturating_mul(BYTES_PER_PORT),
                flows: flows.saturating_mul(
                    flow::bytes_per_flow(config.cc == CcKind::None, workload.lazy.is_some()) + fct,
                ),
                dag: flow_dag,
                in_flight: in_flight(FLOWS_IN_FLIGHT_PER_HOST)
                    .saturating_mul(flow::BYTES_PER_FLOW_IN_FLIGHT),
                memo: 0,
                domains: 0,
                runtime: 0,
                finishing_flows: flows,
            },
            // A packet-level run makes a flow's sender when it starts and
            // its receiver when its first packet arrives, and frees them
            // when it ends (a RoCE receiver leaves a bit per workload flow
            // on each shard); a rank of several reads its completion times
            // back into a vector (three times, as it grows).
            Fidelity::Packet => RunBytes {
                ports: ports.saturating_mul(BYTES_PER_PORT.saturating_add(ff_port)),
                flows: finishing.saturating_mul(3 * fct).saturating_add(
                    (workload.flow_count() as u64)
                        .div_ceil(8)
                        .saturating_mul(u64::from(shards)),
                ),
                dag: state_per_shard
                    .saturating_mul(u64::from(shards))
                    .saturating_add(live_all),
                in_flight: in_flight(PACKET_FLOWS_IN_FLIGHT_PER_HOST)
                    .min(finishing)
                    .saturating_mul(
                        network::bytes_per_sender(config.transport)
                            + network::BYTES_PER_RECEIVER
                            + ff_sender,
                    ),
                finishing_flows: finishing,
                runtime: PACKET_RUNTIME_BYTES,
                // A sandbox holds the whole fabric on every rank.
                memo: memo_bytes(config, topo, routing_bytes, workload, all_ports)
                    .saturating_mul(u64::from(shards)),
                domains: domain_bytes(config, workload, all_ports)
                    .saturating_mul(u64::from(shards)),
            },
        }
    }

    pub fn total(&self) -> u64 {
        self.ports
            .saturating_add(self.flows)
            .saturating_add(self.dag)
            .saturating_add(self.in_flight)
            .saturating_add(self.memo)
            .saturating_add(self.domains)
            .saturating_add(self.runtime)
    }

    /// `run.json`'s `run_bytes_predicted`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "ports": self.ports,
            "flows": self.flows,
            "dag": self.dag,
            "in_flight": self.in_flight,
            "memo": self.memo,
            "domains": self.domains,
            "runtime": self.runtime,
            "total": self.total(),
            "finishing_flows": self.finishing_flows,
        })
    }
}

/// What memoization's decisions hold per task, at most, kept between
/// checks (`memo/guard.rs`, `memo/predict.rs`, `memo/key.rs`,
/// `memo/mod.rs`). Vectors of one entry per task: the guard's agreed view
/// of the DAG (three 8-byte values), the plan (a collective's task list
/// and its count of dependencies inside it, 8 B), the guard's walk slot
/// (64 B, one cache line) and its replayed flag (1 B), the prediction's
/// chain entry (24 B) and host (4 B), a replayed task's completions
/// (`done_at`, 16 B), its `completing`, `settled` and `delivered` flags
/// (3 B). Lists at their longest, each bounded by the tasks: the guard's
/// round's starting tasks and its walk's heap (16 B each, a task at most
/// once in each), the prediction's work list (16 B, a task at most
/// twice: a flow at its two ends, a compute task running and replayed),
/// the replayed tasks' `completions` by time (16 B, a task once: it is
/// replayed once), their `exits`, the guard's sorted copy of the exits,
/// its view's tasks and the slots it set (4 B each). A list's capacity
/// can reach twice its longest length: not counted.
const MEMO_BYTES_PER_TASK: u64 =
    24 + 8 + 64 + 1 + 24 + 4 + 16 + 3 + (16 + 16 + 2 * 16 + 16) + (4 + 4 + 4 + 4);
/// Per flow of the workload: the prediction's foreseen start (16 B), the
/// plan's entry flows (4 B at most), and the guard's traced path (16 B
/// and at most 8 resources of 8 B: `memo/guard.rs`, `PATH_RESOURCES`).
const MEMO_BYTES_PER_FLOW: u64 = 16 + 4 + 16 + 8 * 8;

/// What memoization adds per shard, 0 when it is off: its decisions'
/// vectors ([`MEMO_BYTES_PER_TASK`], [`MEMO_BYTES_PER_FLOW`]) and a
/// sandbox at a time, which holds a copy of the workload's flows with a
/// sender each, of the topology and its routing tables (every switch's,
/// `routing_bytes`), and its fabric's `ports` (all of them, on any rank).
fn memo_bytes(
    config: &NetConfig,
    topo: &netsim_topo::Topology,
    routing_bytes: u64,
    workload: &Workload,
    ports: u64,
) -> u64 {
    if !config.fast_forward.is_some_and(|ff| ff.memo) {
        return 0;
    }
    let tasks = workload.tasks.len() as u64;
    let flows = workload.flows.len() as u64;
    let flow_bytes = std::mem::size_of::<FlowSpec>() as u64;
    tasks
        .saturating_mul(MEMO_BYTES_PER_TASK)
        .saturating_add(flows.saturating_mul(
            MEMO_BYTES_PER_FLOW + flow_bytes + network::bytes_per_sender(config.transport),
        ))
        .saturating_add(topology_bytes(topo))
        .saturating_add(routing_bytes)
        .saturating_add(ports.saturating_mul(BYTES_PER_PORT))
}

/// What per-domain jumps hold per task (`fast_forward/domains.rs`,
/// `domain_wait.rs`): the downstream walk's mark (4 B), the delivered and
/// "none replayed" flags (2 B), the agreed DAG view (three 8-byte values)
/// and the guard's walk slot (64 B, one cache line), replayed flag (1 B),
/// starting tasks and heap (16 B each) and view lists (4 + 4 B).
const DOMAIN_BYTES_PER_TASK: u64 = 4 + 2 + 24 + 64 + 1 + 2 * 16 + 4 + 4;
/// Per flow of the workload: its traced resources' span (8 B), shift and
/// vote (16 B), agreed start flag (1 B), at most 8 resources of 8 B and
/// its place in the per-resource index (4 B each), and the guard's traced
/// path (16 B and at most 8 resources of 8 B).
const DOMAIN_BYTES_PER_FLOW: u64 = 8 + 16 + 1 + 8 * (8 + 4) + 16 + 8 * 8;

/// What per-domain jumps add per shard, 0 unless `--ff-scope domain`:
/// [`DOMAIN_BYTES_PER_TASK`], [`DOMAIN_BYTES_PER_FLOW`] and a drop count
/// per port (all `ports`, a bound for any rank's).
fn domain_bytes(config: &NetConfig, workload: &Workload, ports: u64) -> u64 {
    if !config.fast_forward.is_some_and(|ff| ff.domains) {
        return 0;
    }
    (workload.tasks.len() as u64)
        .saturating_mul(DOMAIN_BYTES_PER_TASK)
        .saturating_add((workload.flows.len() as u64).saturating_mul(DOMAIN_BYTES_PER_FLOW))
        .saturating_add(ports.saturating_mul(8))
}

/// A topology's nodes, links and ports (two per link), as it holds them.
fn topology_bytes(topo: &netsim_topo::Topology) -> u64 {
    use netsim_topo::{Link, Node, Port};
    let node_bytes = std::mem::size_of::<Node>() as u64 + 8;
    let link_bytes = (std::mem::size_of::<Link>() + 2 * std::mem::size_of::<Port>()) as u64;
    u64::from(topo.node_count())
        .saturating_mul(node_bytes)
        .saturating_add(u64::from(topo.link_count()).saturating_mul(link_bytes))
}

/// Fails when what the run adds ([`RunBytes`]) would not fit beside what
/// this process already holds (the workload among it); returns what it
/// holds, which with `need` predicts the run's peak (`run.json`'s
/// `peak_rss_predicted_bytes` beside the measured `peak_rss_bytes`).
pub fn check_run_memory(need: &RunBytes, flows: usize) -> anyhow::Result<u64> {
    let (limit, held) = (memory_limit_bytes(), memory_in_use_bytes());
    if need.total() > limit.saturating_sub(held) {
        bail!(
            "the network model needs ~{} beside its workload ({} for ports, {} for {flows} flows, {} for \
             the DAG's progress, {} for flows in flight); this process may use {} and holds {} \
             already (a smaller topology, fewer flows or --fold-dp fit)",
            human_bytes(need.total()),
            human_bytes(need.ports),
            human_bytes(need.flows),
            human_bytes(need.dag),
            human_bytes(need.in_flight),
            human_bytes(limit),
            human_bytes(held)
        );
    }
    Ok(held)
}

/// `run.json`'s `workload_bytes`: what the workload's structures hold.
pub fn workload_bytes_json(workload: &Workload) -> serde_json::Value {
    let bytes = workload.bytes();
    serde_json::json!({
        "tasks": bytes.tasks,
        "flows": bytes.flows,
        "dependents": bytes.dependents,
        "collectives": bytes.collectives,
        "total": bytes.total(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_engine::SimTime;
    use netsim_models::network::config::FastForward;
    use netsim_models::workload::{Builder, NONE};
    use netsim_topo::{FatTreeParams, TopoSpec};

    /// [`RunBytes::of`] a run to its end.
    fn whole(
        fidelity: Fidelity,
        config: &NetConfig,
        topo: &netsim_topo::Topology,
        routing_bytes: u64,
        w: &Workload,
        ranks_shards: (usize, u32),
    ) -> RunBytes {
        RunBytes::of(
            fidelity,
            config,
            topo,
            routing_bytes,
            w,
            ranks_shards,
            SimTime::MAX,
        )
    }

    /// A k=4 two-tier fat-tree and a chain of two flows and a compute.
    fn fixture() -> (netsim_topo::Topology, Workload) {
        let topo = netsim_topo::build(&TopoSpec::FatTree(FatTreeParams {
            k: 4,
            tiers: 2,
            ..FatTreeParams::default()
        }))
        .unwrap();
        let mut b = Builder::new(SimTime::ZERO);
        let a = b.flow(0, 1, 10, NONE, &[]);
        let c = b.flow(1, 2, 10, NONE, &[a]);
        b.compute(2, SimTime(5), NONE, &[c]);
        (topo, b.finish())
    }

    #[test]
    fn flow_level_counts_slots_tasks_and_flows_in_flight() {
        let (topo, w) = fixture();
        let config = NetConfig::default();
        let ports = 2 * u64::from(topo.link_count()) * 192;
        let flow = whole(Fidelity::Flow, &config, &topo, 0, &w, (1, 1));
        // Two flows: a 4 B slot index each (one rank keeps no completion
        // times), both allowed in flight; three tasks at a byte each, no
        // collective.
        assert_eq!(
            flow,
            RunBytes {
                ports,
                flows: 2 * 4,
                dag: 3,
                in_flight: 2 * flow::BYTES_PER_FLOW_IN_FLIGHT,
                memo: 0,
                domains: 0,
                runtime: 0,
                finishing_flows: 2,
            }
        );
        assert_eq!(flow.total(), ports + 8 + 3 + 1024);
        // Plain traffic: every flow may be in flight, no DAG.
        let traffic = Workload::from_flows(w.flows.clone());
        let traffic = whole(Fidelity::Flow, &config, &topo, 0, &traffic, (1, 1));
        assert_eq!(
            (traffic.flows, traffic.dag, traffic.in_flight),
            (2 * 4, 0, 2 * flow::BYTES_PER_FLOW_IN_FLIGHT)
        );
    }

    #[test]
    fn packet_level_counts_senders_receivers_and_progress_per_shard() {
        let (topo, w) = fixture();
        let config = NetConfig::default();
        // Packet level: per flow a bit per shard (and its completion time
        // on a rank of several),
        // a sender and a receiver per flow in flight (both may be), the
        // DAG's progress per shard.
        let packet = whole(Fidelity::Packet, &config, &topo, 0, &w, (1, 4));
        let sender = network::bytes_per_sender(config.transport);
        let in_flight = sender + network::BYTES_PER_RECEIVER;
        assert_eq!(
            (packet.flows, packet.in_flight, packet.dag),
            (4, 2 * in_flight, 4 * 3)
        );
        // Under mpirun a process holds its own shards' progress: 4 of them
        // on each of 2 ranks, and half the flows.
        let rank = whole(Fidelity::Packet, &config, &topo, 0, &w, (2, 4));
        assert_eq!(
            (rank.flows, rank.in_flight, rank.dag),
            (12 + 4, in_flight, 4 * 3)
        );
        assert_eq!(rank.memo, 0);
    }

    #[test]
    fn memo_counts_decisions_and_a_sandbox_per_shard() {
        let (topo, w) = fixture();
        let config = NetConfig::default();
        let ports = 2 * u64::from(topo.link_count()) * 192;
        let sender = network::bytes_per_sender(config.transport);
        // Memoization, per shard: 240 B per task and 100 B per flow for its
        // decisions, a sandbox's flows with a sender each and its ports.
        let mut memo = config.clone();
        memo.fast_forward = Some(FastForward {
            memo: true,
            ..FastForward::default()
        });
        let packet = whole(Fidelity::Packet, &memo, &topo, 1000, &w, (1, 4));
        let flow_bytes = std::mem::size_of_val(&w.flows[0]) as u64;
        assert_eq!(
            packet.memo,
            4 * (3 * 240 + 2 * (100 + flow_bytes + sender) + topology_bytes(&topo) + 1000 + ports)
        );
        assert_eq!(
            packet.total(),
            RunBytes { memo: 0, ..packet }.total() + packet.memo
        );
        assert_eq!(
            RunBytes {
                runtime: 0,
                ..packet
            }
            .total(),
            packet.total() - (32 << 20)
        );
        // Under mpirun each rank's shards hold as much: a sandbox is the
        // whole fabric, whatever the rank owns.
        let rank = whole(Fidelity::Packet, &memo, &topo, 1000, &w, (2, 4));
        assert_eq!(rank.memo, packet.memo);
        assert_eq!(rank.domains, 0);
    }

    #[test]
    fn domain_jumps_and_steady_windows_count_per_port_and_sender() {
        let (topo, w) = fixture();
        let config = NetConfig::default();
        // Per-domain jumps, per shard: 135 B per task, 201 B per flow and
        // a drop count per port.
        let mut domains = config.clone();
        domains.fast_forward = Some(FastForward {
            domains: true,
            ..FastForward::default()
        });
        let packet = whole(Fidelity::Packet, &domains, &topo, 1000, &w, (1, 4));
        let all_ports = 2 * u64::from(topo.link_count());
        assert_eq!(packet.domains, 4 * (3 * 135 + 2 * 201 + 8 * all_ports));
        assert_eq!(
            packet.total(),
            RunBytes {
                domains: 0,
                ..packet
            }
            .total()
                + packet.domains
        );
        // Fast-forward's rings keep a sample per check period of the
        // window and one: 32 B a port and 36 B a sender per slot. A 400 us
        // window of 10 us periods has 41 slots where the default has 5.
        let mut window = config.clone();
        window.fast_forward = Some(FastForward {
            window: Some(SimTime::from_us(400)),
            ..FastForward::default()
        });
        let long = whole(Fidelity::Packet, &window, &topo, 1000, &w, (1, 4));
        let short = whole(
            Fidelity::Packet,
            &default_window(&window),
            &topo,
            1000,
            &w,
            (1, 4),
        );
        assert_eq!(long.ports - short.ports, all_ports * 32 * 36);
        assert_eq!(long.in_flight - short.in_flight, 2 * 36 * 36);
    }

    /// `config` with fast-forward on at its default window.
    fn default_window(config: &NetConfig) -> NetConfig {
        let mut config = config.clone();
        config.fast_forward = Some(FastForward::default());
        config
    }
}
