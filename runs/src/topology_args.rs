//! Topology flags shared by `run`, `topo` and `partition` (placeholder until issue 3 lands).

/// Flags that choose and shape a topology.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TopologyArgs {}
