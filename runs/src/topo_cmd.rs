//! `netsim topo`: generate a topology, build its routing tables, print a summary, and
//! optionally export it (SimAI text or JSON).

use std::path::PathBuf;

use anyhow::bail;
use netsim_topo::{export, summarize, Format};

use crate::topology_args::{BuiltTopology, TopologyArgs};

/// `netsim topo KIND [topology flags] [--format simai|json] [-o FILE]`.
#[derive(clap::Args, Debug)]
pub struct TopoCmd {
    /// fat-tree, dragonfly, spectrum-x, hpn, hpn-dual-plane, dcn, dcn-dual-tor, star or
    /// simai:FILE.
    pub kind: String,
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Export format (with -o): simai or json; default json for a `.json` file, else simai.
    #[arg(long, help_heading = "Output")]
    pub format: Option<Format>,
    /// Write the topology to FILE (written to a temporary name, then renamed).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        help_heading = "Output"
    )]
    pub output: Option<PathBuf>,
}

impl TopoCmd {
    /// Builds the topology and its routing tables, prints the summary, writes the file.
    pub fn run(&self) -> anyhow::Result<()> {
        if self.format.is_some() && self.output.is_none() {
            bail!("--format needs -o FILE");
        }
        let BuiltTopology {
            topo,
            routing,
            generate_s,
            route_s,
        } = self.topology.build(&self.kind)?;
        println!("{}", summarize(&topo, &routing));
        println!(
            "routing:    {} destination classes, {} entries, {} next-hop sets, {:.1} MiB",
            routing.class_count(),
            routing.entry_count(),
            routing.set_count(),
            routing.memory_bytes() as f64 / (1 << 20) as f64
        );
        println!("time:       generate {generate_s:.3} s, route {route_s:.3} s");
        if let Some(path) = &self.output {
            let by_extension = if path.extension().is_some_and(|e| e == "json") {
                Format::Json
            } else {
                Format::Simai
            };
            export(&topo, self.format.unwrap_or(by_extension), path)?;
            println!("wrote:      {}", path.display());
        }
        Ok(())
    }
}
