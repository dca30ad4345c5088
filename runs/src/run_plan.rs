//! What a run will do: the topology, workload, routing, partition and
//! faults built from the flags, and every check that can refuse the run
//! before it starts (most before the build, which can take minutes).

use crate::memory_check::RunBytes;
use crate::partition_cmd::balanced_partition;
use crate::run_cmd::{Fidelity, RunArgs};
use anyhow::{bail, Context as _};
use netsim_engine::{rank_shards, Layout};
use netsim_models::network::config::NetConfig;
use netsim_models::network::{host_classes, Fabric, MAX_FABRIC_WINDOW_WALKS};
use netsim_models::workload::Workload;
use netsim_partition::{partition, Partition, PartitionConfig, Strategy};
use netsim_process::memory_left_bytes;
use netsim_topo::{Routing, Topology};

/// Everything a run needs, built and checked from the flags.
pub struct Plan {
    pub fabric: Fabric,
    pub partition: Partition,
    pub layout: Layout,
    pub scenario: String,
    /// Said before the run starts (a workload on fewer hosts than the fabric).
    pub note: Option<String>,
    /// What the run adds beside the workload, as checked before it starts.
    pub run_bytes: RunBytes,
    /// What this process held when the run's memory was checked.
    pub held_bytes: u64,
}

impl RunArgs {
    /// Fails when a flow has more packets than a sender counts (2^32): the
    /// error names where its size came from.
    fn check_packets(&self, workload: &Workload, mtu_bytes: u32) -> anyhow::Result<()> {
        let max_bytes = u64::from(u32::MAX) * u64::from(mtu_bytes);
        let Some((i, flow)) = workload
            .flows
            .iter()
            .enumerate()
            .find(|(_, f)| f.size_bytes > max_bytes)
        else {
            return Ok(());
        };
        // A flow of a collective came from the workload (or a job), any
        // other from the traffic.
        let origin = if workload.flow_collective(i as u32).is_some() {
            match &self.workload.workload {
                Some(w) if std::path::Path::new(w).exists() => format!("--workload {w}"),
                Some(_) => "--size".to_string(),
                None => "--job".to_string(),
            }
        } else {
            match self.traffic.pattern().strip_prefix("tm:") {
                Some(file) => format!("--traffic tm:{file}"),
                None => "--flow-size".to_string(),
            }
        };
        bail!(
            "{origin}: flow {i} ({} -> {}) carries {} bytes, more than 2^32 packets of \
             --mtu {mtu_bytes} bytes ({max_bytes} bytes at most)",
            flow.src,
            flow.dst,
            flow.size_bytes
        )
    }

    /// Builds and checks everything a run needs, without running it.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        self.plan_for(0, 1)
    }

    /// [`RunArgs::plan_for_unlocated`], its errors located in the scenario file.
    pub(crate) fn plan_for(&self, rank: usize, ranks: usize) -> anyhow::Result<Plan> {
        self.plan_for_unlocated(rank, ranks)
            .map_err(|e| self.origins.locate(e))
    }

    /// The plan of rank `rank` out of `ranks`: every rank computes the same
    /// partition of `ranks` x [`RunArgs::shards`] shards, and routing tables
    /// for the switches it owns.
    fn plan_for_unlocated(&self, rank: usize, ranks: usize) -> anyhow::Result<Plan> {
        self.end()?;
        // Flags alone decide these: before the build, which can take minutes.
        self.check_fold_classes()?;
        let topo = self
            .topology
            .generate(&self.topo)
            .with_context(|| self.topology.size_context(&self.topo))?;
        let topo = self.workload.with_dpus(topo)?;
        let config = self.network.config()?;
        if config.recv_complete_at_ack && self.shards() * ranks as u32 > 1 {
            // The sender tells the receiver 1 ps after its last ACK: below
            // any lookahead between shards.
            bail!("--recv-complete acked: runs on one shard; add --threads 1");
        }
        crate::lazy_args::check(self, &config)?;
        let faults = self.faults.faults(&topo)?;
        let (workload, note) =
            self.workload
                .with_traffic(&self.traffic, &topo, &config, self.seed)?;
        self.check_packets(&workload, config.mtu_bytes)?;
        crate::limits::check_samples(&workload, &config, &topo)?;
        let strategy: Strategy = self
            .partition
            .parse()
            .map_err(|e| anyhow::anyhow!("--partition: {e}"))?;
        let partition_config = PartitionConfig {
            shards: self.shards() * ranks as u32,
            strategy,
            latency_floor_ps: 0,
        };
        // The work estimate follows ECMP at every switch, so it needs every switch's rows;
        // one process keeps them for the run, ranks then keep only their own (all of them
        // with --ff-memo on).
        let full = Routing::build_within(&topo, None, memory_left_bytes())
            .with_context(|| self.topology.size_context(&self.topo))?;
        let config = self.network.for_topology(config, &topo)?;
        // Beside the routing tables, before the estimate and the partition walk every flow.
        let run_bytes = RunBytes::of(
            self.fidelity,
            &config,
            &topo,
            full.memory_bytes() as u64,
            &workload,
            (ranks, self.shards()),
            self.end()?,
        );
        let held_bytes = crate::memory_check::check_run_memory(&run_bytes, workload.flow_count())
            .with_context(|| self.topology.size_context(&self.topo))?;
        // One shard has nothing to balance: no need to walk every flow.
        let partitioned = if partition_config.shards == 1 {
            partition(&topo, &partition_config)
        } else {
            balanced_partition(
                &topo,
                &full,
                &workload,
                &config,
                partition_config,
                ranks as u32,
                self.shards.is_some() && rank == 0,
            )
            .map(|(partition, _)| partition)
        };
        let partition = partitioned.map_err(|e| match ranks {
            1 => anyhow::Error::from(e),
            _ => {
                anyhow::Error::from(e).context(format!("{ranks} ranks x {} shards", self.shards()))
            }
        })?;
        let layout = Layout::new(
            partition.shard_of.clone(),
            partition.shards,
            partition.lookahead,
        )?;
        let owned = owned_nodes(&layout, &partition, rank, ranks);
        // Per-domain jumps trace every flow's path too.
        let memo = config.fast_forward.is_some_and(|f| f.memo || f.domains);
        let routing = self.rank_routing(&topo, full, memo, owned.as_deref())?;
        let fault_plan = self.faults.plan(&topo, faults, owned.as_deref())?;
        check_fabric_window(&topo, &config)?;
        let mut fabric = Fabric::with_workload(topo, routing, workload, config, self.seed);
        fabric.faults = fault_plan;
        crate::fast_forward_args::check(&fabric)?;
        if self.fidelity == Fidelity::Flow {
            check_flow_level(&fabric, ranks)?;
        }
        // Last: peers are waiting once connected.
        fabric.external = self.simbricks.attach(&fabric, self.fidelity, ranks)?;
        Ok(Plan {
            run_bytes,
            held_bytes,
            fabric,
            partition,
            layout,
            scenario: self.scenario_name(),
            note,
        })
    }

    /// `--fold-classes` needs the flow level and a fold.
    fn check_fold_classes(&self) -> anyhow::Result<()> {
        if self.workload.fold_classes {
            if self.fidelity != Fidelity::Flow {
                anyhow::bail!(
                    "--fold-classes: classes are a flow-level model; add --fidelity flow"
                );
            }
            if self.workload.fold_dp == 1 {
                anyhow::bail!("--fold-classes: there is nothing folded; add --fold-dp N");
            }
        }
        Ok(())
    }

    /// The routing tables a rank keeps: `full`, or with several ranks
    /// and no memo (`memo`), the rows of the switches it owns (`owned`).
    fn rank_routing(
        &self,
        topo: &Topology,
        full: Routing,
        memo: bool,
        owned: Option<&[bool]>,
    ) -> anyhow::Result<Routing> {
        // Memoization's keys and sandboxes walk any flow's path, through
        // switches of every rank: each rank keeps every row (counted by
        // the memory check, which ran while they were held).
        let Some(owned) = owned.filter(|_| !memo) else {
            return Ok(full);
        };
        drop(full);
        // Routing rows for the switches this rank owns: they dominate the memory
        // of a large fabric.
        Routing::build_within(topo, Some(owned), memory_left_bytes())
            .with_context(|| self.topology.size_context(&self.topo))
    }

    /// The run's name in `run.json`: the scenario file, or the topology and
    /// what runs on it.
    fn scenario_name(&self) -> String {
        match (&self.config, &self.workload.workload) {
            (Some(path), _) => path.display().to_string(),
            (None, Some(w)) => format!("{} {w}", self.topo),
            (None, None) if !self.workload.job.is_empty() => {
                format!("{} {} jobs", self.topo, self.workload.job.len())
            }
            (None, None) => format!("{} {}", self.topo, self.traffic.pattern()),
        }
    }
}

/// What the flow level cannot model: faults, losses, several processes.
fn check_flow_level(fabric: &Fabric, ranks: usize) -> anyhow::Result<()> {
    if !fabric.faults.is_empty() {
        anyhow::bail!("--fault: the flow level has no faults; use --fidelity packet");
    }
    if fabric.config.link_error_rate > 0.0 {
        anyhow::bail!("--link-error-rate: the flow level loses nothing; use --fidelity packet");
    }
    if fabric.topo.has_lossy_links() {
        anyhow::bail!(
            "--topo: the topology file's links lose packets (error_rate), the flow \
             level loses nothing; use --fidelity packet"
        );
    }
    netsim_models::flow::check(fabric)?;
    if ranks > 1 {
        anyhow::bail!("--fidelity flow: runs in one process; start it without mpirun");
    }
    Ok(())
}

/// Which nodes rank `rank` of `ranks` owns; `None` in one process.
fn owned_nodes(
    layout: &Layout,
    partition: &Partition,
    rank: usize,
    ranks: usize,
) -> Option<Vec<bool>> {
    if ranks == 1 {
        return None;
    }
    let local = rank_shards(layout.shards(), rank, ranks);
    Some(
        partition
            .shard_of
            .iter()
            .map(|s| local.contains(&s.index()))
            .collect(),
    )
}

/// `--window-scope fabric` walks a path per pair of host classes at setup
/// (`host_classes`): refused where that is past [`MAX_FABRIC_WINDOW_WALKS`],
/// so a large rail-optimized file is one line, not a setup that never ends.
fn check_fabric_window(topo: &Topology, config: &NetConfig) -> anyhow::Result<()> {
    if !config.window_fabric_max {
        return Ok(());
    }
    let classes = host_classes(topo).len() as u64;
    let walks = classes.saturating_mul(classes);
    if walks > MAX_FABRIC_WINDOW_WALKS {
        bail!(
            "--window-scope fabric: {classes} host classes (hosts attached alike) need \
             {walks} path walks, past {MAX_FABRIC_WINDOW_WALKS}; use --window-scope path"
        );
    }
    Ok(())
}
