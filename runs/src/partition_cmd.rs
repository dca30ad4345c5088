//! `netsim partition`: generate a topology and its routing tables, estimate each node's work
//! under the run's traffic or workload, cut it into shards, and report edge cut, load
//! imbalance and lookahead. Also the partition step of `netsim run`.

use std::time::Instant;

use netsim_models::load::node_work;
use netsim_models::network::config::NetConfig;
use netsim_models::workload::Workload;
use netsim_partition::{partition_weighted, Partition, PartitionConfig, PartitionError, Strategy};
use netsim_topo::units::parse_ns;
use netsim_topo::{Routing, Topology};

use crate::network_args::NetworkArgs;
use crate::topology_args::{BuiltTopology, TopologyArgs};
use crate::traffic_args::TrafficArgs;
use crate::workload_args::WorkloadArgs;

/// `netsim partition KIND [topology flags] [traffic/workload flags] --shards N
/// [--partition structural|metis]`.
#[derive(clap::Args, Debug)]
pub struct PartitionCmd {
    /// fat-tree, dragonfly, spectrum-x, hpn, hpn-dual-plane, dcn, dcn-dual-tor, star or
    /// simai:FILE.
    pub kind: String,
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// The run's traffic: each node's estimated work weighs it.
    #[command(flatten)]
    pub traffic: TrafficArgs,
    /// The run's network flags (MTU and ACK interval set the packet counts).
    #[command(flatten)]
    pub network: NetworkArgs,
    /// The run's workload, instead of --traffic.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Root seed of the traffic, as in `netsim run`.
    #[arg(long, default_value_t = 1, help_heading = "Engine")]
    pub seed: u64,
    /// Number of shards; more than the topology can be cut into uses fewer, with a note.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Partition")]
    pub shards: u32,
    /// Strategy: structural (pods, groups, segments) or metis.
    #[arg(long, default_value = "structural", help_heading = "Partition")]
    pub partition: Strategy,
    /// Never cut links with latency below this (ns); NVLink and the links of hosts outside
    /// GPU servers are never cut regardless.
    #[arg(long, value_parser = parse_ns, value_name = "NS", help_heading = "Partition")]
    pub latency_floor_ns: Option<u64>,
}

impl PartitionCmd {
    /// Builds, routes, estimates and partitions the topology, then prints the report.
    pub fn run(&self) -> anyhow::Result<()> {
        let BuiltTopology {
            topo,
            routing,
            generate_s,
            route_s,
        } = self.topology.build(&self.kind)?;
        let (topo, routing) = if self.workload.dpu_workers.is_some() {
            let topo = self.workload.with_dpus(topo)?;
            let routing = Routing::build(&topo)?;
            (topo, routing)
        } else {
            (topo, routing)
        };
        let config = self.network.config()?;
        let (workload, note) =
            self.workload
                .with_traffic(&self.traffic, &topo, &config, self.seed)?;
        if let Some(note) = note {
            eprintln!("{note}");
        }
        let started = Instant::now();
        let cfg = PartitionConfig {
            shards: self.shards,
            strategy: self.partition,
            latency_floor_ps: self.latency_floor_ns.unwrap_or(0),
        };
        let (part, work) = balanced_partition(&topo, &routing, &workload, &config, cfg, 1, true)?;
        println!(
            "topology:       {} ({} nodes, {} links)",
            topo.kind(),
            topo.node_count(),
            topo.link_count()
        );
        let load = match &self.workload.workload {
            Some(w) => w.clone(),
            None if !self.workload.job.is_empty() => "jobs".to_string(),
            None => self.traffic.pattern().to_string(),
        };
        println!(
            "load estimate:  {load}: {} flows, {:.3} M packet events",
            workload.flows.len(),
            work.iter().sum::<u64>() as f64 / 1e6
        );
        println!("{}", part.report);
        println!(
            "time:           generate {:.3} s, route {:.3} s ({} classes), estimate and \
             partition {:.3} s",
            generate_s,
            route_s,
            routing.class_count(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// The partition of a run: each node weighted by its estimated work under `workload`
/// ([`node_work`]; `routing` must hold every switch's rows), cut as `cfg` asks. Asking for
/// more shards than the topology has pieces uses the most it has, rounded down to a multiple
/// of `ranks`, with a one-line note on stderr when `note`. Returns the node weights too.
pub(crate) fn balanced_partition(
    topo: &Topology,
    routing: &Routing,
    workload: &Workload,
    config: &NetConfig,
    mut cfg: PartitionConfig,
    ranks: u32,
    note: bool,
) -> Result<(Partition, Vec<u64>), PartitionError> {
    let work = node_work(topo, routing, workload, config);
    let part = match partition_weighted(topo, &cfg, &work) {
        Err(PartitionError::TooManyShards { shards, atoms }) if atoms >= ranks => {
            cfg.shards = atoms / ranks * ranks;
            if note {
                eprintln!(
                    "netsim: note: {shards} shards asked, but only {atoms} groups of nodes can \
                     be separated; using {}",
                    cfg.shards
                );
            }
            partition_weighted(topo, &cfg, &work)
        }
        other => other,
    }?;
    Ok((part, work))
}
