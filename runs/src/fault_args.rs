//! Fault flags (`--fault`, `--faults`, `--reroute-us`) and their
//! translation into the network's fault plan.

use anyhow::{bail, Context as _};
use netsim_engine::SimTime;
use netsim_models::faults::{parse_fault, parse_faults_file, Fault, FaultKind};
use netsim_models::network::FaultPlan;
use netsim_models::telemetry::FaultRecord;
use netsim_process::memory_left_bytes;
use netsim_topo::{Routing, Topology};
use std::path::PathBuf;

/// Fault flags.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Faults")]
pub struct FaultArgs {
    /// A fault, KIND:TARGET@TIME[=VALUE] (repeatable): link-down:A-B@50us,
    /// link-up:A-B@2ms, node-down:N@1ms, node-up:N@3ms, link-rate:A-B@1ms=25
    /// (Gb/s); a link target `A->B` is the direction from A to B alone;
    /// node ids as `netsim topo --format json` numbers them.
    #[arg(long, value_name = "SPEC")]
    pub fault: Vec<String>,
    /// A faults file: one spec per line, or SimAI's `LINK_DOWN <time_us> <node> <node>`.
    #[arg(long, value_name = "FILE")]
    pub faults: Option<PathBuf>,
    /// Routing convergence delay in microseconds: the switches away from a
    /// failed or recovered link route by new tables this long after it
    /// (the switches at its ends stop using it at once).
    #[arg(long, default_value_t = 100.0)]
    pub reroute_us: f64,
}

/// The most faults a run takes: each change of the links that work adds a
/// set of routing tables.
const MAX_FAULTS: usize = 1024;

impl FaultArgs {
    /// The faults asked for, checked against `topo`: the flags' in order,
    /// then the file's. Errors name the flag, or the file and line.
    pub fn faults(&self, topo: &Topology) -> anyhow::Result<Vec<Fault>> {
        let mut faults = Vec::new();
        for spec in &self.fault {
            faults.push(
                parse_fault(spec, topo).map_err(|e| anyhow::anyhow!("--fault `{spec}`: {e}"))?,
            );
        }
        if let Some(path) = &self.faults {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--faults: cannot read {}", path.display()))?;
            let from_file = parse_faults_file(&text, topo)
                .map_err(|e| anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.error))?;
            faults.extend(from_file);
        }
        if faults.len() > MAX_FAULTS {
            bail!(
                "--fault: {} faults, more than the {MAX_FAULTS} a run takes",
                faults.len()
            );
        }
        Ok(faults)
    }

    /// The routing convergence delay.
    pub fn reroute(&self) -> anyhow::Result<SimTime> {
        let us = self.reroute_us;
        if !(us.is_finite() && (0.0..=1e6).contains(&us)) {
            bail!("--reroute-us: {us} is outside 0..=1000000 microseconds");
        }
        SimTime::try_from_f64(us, 1e6, "us").map_err(|e| anyhow::anyhow!("--reroute-us: {e}"))
    }

    /// The fault plan of `faults` on `topo`, its routing tables scoped like
    /// the run's (`owned`: the switches this rank simulates).
    pub fn plan(
        &self,
        topo: &Topology,
        faults: Vec<Fault>,
        owned: Option<&[bool]>,
    ) -> anyhow::Result<FaultPlan> {
        let reroute = self.reroute()?;
        FaultPlan::new(topo, faults, reroute, |dead| {
            Routing::build_avoiding(topo, owned, dead, memory_left_bytes())
        })
        .context("--fault: routing around the failed links")
    }
}

/// The `faults` table: one row per fault of the plan, in time order.
pub fn fault_records(plan: &FaultPlan) -> Vec<FaultRecord> {
    plan.faults
        .iter()
        .map(|f| FaultRecord {
            time_ns: f.time.as_ns(),
            kind: f.kind.name(),
            target: f.target(),
            value_gbps: (f.kind == FaultKind::LinkRate).then(|| f.rate_bps as f64 / 1e9),
        })
        .collect()
}
