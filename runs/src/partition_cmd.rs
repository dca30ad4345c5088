//! `netsim partition`: generate a topology and its routing tables, cut it into shards, and
//! report edge cut, load imbalance and lookahead.

use std::time::Instant;

use netsim_partition::{partition, PartitionConfig, Strategy};
use netsim_topo::units::parse_ns;

use crate::topology_args::{BuiltTopology, TopologyArgs};

/// `netsim partition KIND [topology flags] --shards N [--partition structural|metis]`.
#[derive(clap::Args, Debug)]
pub struct PartitionCmd {
    /// fat-tree, dragonfly, spectrum-x, hpn, hpn-dual-plane, dcn, dcn-dual-tor, star or
    /// simai:FILE.
    pub kind: String,
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Number of shards.
    #[arg(long, help_heading = "Partition")]
    pub shards: u32,
    /// Strategy: structural (pods, groups, segments) or metis.
    #[arg(long, default_value = "structural", help_heading = "Partition")]
    pub partition: Strategy,
    /// Never cut links with latency below this (ns); links touching hosts or NVSwitches
    /// are never cut regardless.
    #[arg(long, value_parser = parse_ns, value_name = "NS", help_heading = "Partition")]
    pub latency_floor_ns: Option<u64>,
}

impl PartitionCmd {
    /// Builds, routes and partitions the topology, then prints the report.
    pub fn run(&self) -> anyhow::Result<()> {
        let BuiltTopology {
            topo,
            routing,
            generate_s,
            route_s,
        } = self.topology.build(&self.kind)?;
        let started = Instant::now();
        let part = partition(
            &topo,
            &PartitionConfig {
                shards: self.shards,
                strategy: self.partition,
                latency_floor_ps: self.latency_floor_ns.unwrap_or(0),
            },
        )?;
        println!(
            "topology:       {} ({} nodes, {} links)",
            topo.kind(),
            topo.node_count(),
            topo.link_count()
        );
        println!("{}", part.report);
        println!(
            "time:           generate {:.3} s, route {:.3} s ({} classes), partition {:.3} s",
            generate_s,
            route_s,
            routing.class_count(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}
