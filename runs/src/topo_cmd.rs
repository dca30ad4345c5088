//! `netsim topo`: generate a topology, print a summary, export it (placeholder until issue 3 lands).

#[derive(clap::Args, Debug)]
pub struct TopoCmd {
    /// Topology kind.
    pub kind: String,
}

impl TopoCmd {
    pub fn run(&self) -> anyhow::Result<()> {
        anyhow::bail!("`netsim topo` is not available yet (issue 3)")
    }
}
