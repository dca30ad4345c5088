//! Traffic flags (`--traffic`, `--flow-size`, ...) and the flows they
//! generate, each pattern's flow count checked before it is drawn.

use anyhow::{bail, Context as _};
use netsim_models::traffic::{self, FlowSpec, TrafficPattern};
use std::path::Path;

/// Traffic flags.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Traffic")]
pub struct TrafficArgs {
    /// permutation (default), uniform, incast, alltoall, or tm:FILE (htsim
    /// connection matrix); with --workload or --job, background flows on top.
    #[arg(long)]
    pub traffic: Option<String>,
    /// Bytes per flow for the generated patterns.
    #[arg(long, default_value_t = 1 << 20)]
    pub flow_size: u64,
    /// Flows per host for `uniform`.
    #[arg(long, default_value_t = 1)]
    pub flows_per_host: u32,
    /// Senders for `incast` (hosts 1..=N send to host 0).
    #[arg(long, default_value_t = 16)]
    pub incast_degree: u32,
}

/// Fails when `flows` flows (and the sender state of each during the run)
/// would not fit in the memory this process may use, or in `u32` ids.
pub fn check_flow_count(flag: &str, flows: u64) -> anyhow::Result<()> {
    use netsim_models::workload::BYTES_PER_TASK;
    use netsim_process::{human_bytes, memory_limit_bytes};
    let bytes = flows.saturating_mul(BYTES_PER_TASK);
    let limit = memory_limit_bytes();
    if bytes > limit || flows >= u64::from(u32::MAX) {
        bail!(
            "{flag}: {flows} flows need ~{} at {BYTES_PER_TASK} B each; this process may use {} \
             (and at most {} flows are supported)",
            human_bytes(bytes),
            human_bytes(limit),
            u32::MAX - 1
        );
    }
    Ok(())
}

impl TrafficArgs {
    /// The pattern asked for, `permutation` by default.
    pub fn pattern(&self) -> &str {
        self.traffic.as_deref().unwrap_or("permutation")
    }

    /// The flows to simulate over `hosts` hosts.
    pub fn flows(&self, hosts: u32, seed: u64) -> anyhow::Result<Vec<FlowSpec>> {
        if let Some(path) = self.pattern().strip_prefix("tm:") {
            return traffic::read_connection_matrix(Path::new(path), hosts)
                .with_context(|| "--traffic".to_string());
        }
        let pattern = match self.pattern() {
            "permutation" => TrafficPattern::Permutation,
            "uniform" => TrafficPattern::Uniform {
                flows_per_host: self.flows_per_host,
            },
            "incast" => TrafficPattern::Incast {
                degree: self.incast_degree.min(hosts.saturating_sub(1)),
            },
            "alltoall" => TrafficPattern::AllToAll,
            other => bail!(
                "--traffic: unknown pattern `{other}` (permutation, uniform, incast, alltoall, tm:FILE)"
            ),
        };
        // Counted before the flows are drawn, so that too many is an error
        // rather than an abort.
        let (flag, flows) = match &pattern {
            TrafficPattern::Uniform { flows_per_host } => (
                "--flows-per-host",
                u64::from(hosts) * u64::from(*flows_per_host),
            ),
            TrafficPattern::AllToAll => ("--traffic alltoall", u64::from(hosts) * u64::from(hosts)),
            _ => ("--traffic", u64::from(hosts)),
        };
        check_flow_count(flag, flows)?;
        Ok(traffic::generate(&pattern, hosts, self.flow_size, seed)?)
    }
}
