//! `netsim partition`: cut a topology into shards and report quality (placeholder until issue 3 lands).

#[derive(clap::Args, Debug)]
pub struct PartitionCmd {
    /// Topology kind.
    pub kind: String,
}

impl PartitionCmd {
    pub fn run(&self) -> anyhow::Result<()> {
        anyhow::bail!("`netsim partition` is not available yet (issue 3)")
    }
}
