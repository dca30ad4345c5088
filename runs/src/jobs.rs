//! Several jobs on one fabric: `--job` tables (a scenario's `[[job]]`),
//! each a workload placed on its own hosts with a start time.
//!
//! ```toml
//! [[job]]
//! name = "train"                      # the `job` column of flows and collectives
//! workload = "workloads/moe.txt"      # a collective, a workload TOML or a SimAI file
//! hosts = "consecutive"               # or "pods", "servers", or ranks such as "0-31,64-95"
//! ranks = 32                          # with a keyword; default: the file's all_gpus
//! start_us = 0                        # optional
//! size = "16MiB"                      # a collective's size, algo, group, tp, pp, ep,
//! algo = "ring"                       # iterations: as the flags take them
//! ```
//!
//! Jobs are placed in order on hosts no earlier job holds: `consecutive`
//! takes the lowest free hosts, `pods` deals ranks round-robin over pods
//! (fat-tree pods, dragonfly groups, SimAI segments), `servers` over GPU
//! servers (consecutive ranks on different servers, the same rail).

use crate::workload_args::WorkloadArgs;
use anyhow::{bail, Context as _};
use netsim_engine::SimTime;
use netsim_models::workload::groups::parse_rank_list;
use netsim_models::workload::{CollectiveOp, Job};
use netsim_topo::{NodeIndex, Topology};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One `--job` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobTable {
    name: String,
    workload: String,
    hosts: Option<String>,
    ranks: Option<u32>,
    start_us: Option<f64>,
    size: Option<String>,
    algo: Option<String>,
    group: Option<String>,
    tp: Option<u32>,
    pp: Option<u32>,
    ep: Option<u32>,
    iterations: Option<u32>,
}

/// A `--job` value parsed as `job = <value>`.
#[derive(Deserialize)]
struct JobValue {
    job: JobTable,
}

/// Where a job's ranks go.
enum Placement {
    Consecutive,
    Pods,
    Servers,
    List(Vec<NodeIndex>),
}

/// The jobs of `args.job`, placed on `topo`'s hosts.
pub fn place(args: &WorkloadArgs, topo: &Topology) -> anyhow::Result<Vec<Job>> {
    let hosts = netsim_models::dpu::compute_hosts(topo);
    let mut owner: Vec<Option<usize>> = vec![None; hosts as usize];
    let mut names: Vec<String> = Vec::new();
    let mut jobs = Vec::with_capacity(args.job.len());
    for (i, text) in args.job.iter().enumerate() {
        let t = toml::from_str::<JobValue>(&format!("job = {text}"))
            .map_err(|e| anyhow::anyhow!("--job {}: `{text}`: {}", i + 1, e.message()))?
            .job;
        let at = format!("--job `{}`", t.name);
        if names.contains(&t.name) {
            bail!("{at}: a job of that name already exists");
        }
        names.push(t.name.clone());
        let placement = match t.hosts.as_deref().unwrap_or("consecutive") {
            "consecutive" => Placement::Consecutive,
            "pods" => Placement::Pods,
            "servers" => Placement::Servers,
            list => Placement::List(parse_rank_list(list).map_err(|e| {
                anyhow::anyhow!("{at}: hosts: {e} (or consecutive, pods, servers)")
            })?),
        };
        let mut job_args = args.clone();
        job_args.job.clear();
        job_args.workload = Some(t.workload.clone());
        if let Some(v) = &t.size {
            job_args.size = v.clone();
        }
        if let Some(v) = &t.algo {
            job_args.algo = Some(v.clone());
        }
        if let Some(v) = &t.group {
            job_args.group = v.clone();
        }
        job_args.tp = t.tp.unwrap_or(args.tp);
        job_args.pp = t.pp.unwrap_or(args.pp);
        job_args.ep = t.ep.unwrap_or(args.ep);
        job_args.iterations = t.iterations.unwrap_or(args.iterations);
        let free = owner.iter().filter(|o| o.is_none()).count() as u32;
        let ranks = match (&placement, t.ranks) {
            (Placement::List(l), None) => l.len() as u32,
            (Placement::List(l), Some(r)) if r as usize != l.len() => {
                bail!("{at}: ranks: {r} but hosts lists {} hosts", l.len())
            }
            (_, Some(0)) => bail!("{at}: ranks: must be positive"),
            (_, Some(r)) => r,
            (_, None) if CollectiveOp::parse(&t.workload).is_some() => {
                bail!("{at}: ranks: needed with hosts = \"consecutive\", \"pods\" or \"servers\"")
            }
            // A workload file says how many ranks it has (SimAI's all_gpus).
            (_, None) => {
                let spec = job_args
                    .spec(&t.workload, free)
                    .with_context(|| at.clone())?;
                spec.parallelism.map_or(free, |p| p.ranks())
            }
        };
        if ranks > free {
            bail!("{at}: {ranks} ranks but only {free} of the {hosts} hosts are free");
        }
        let spec = job_args
            .spec(&t.workload, ranks)
            .with_context(|| at.clone())?;
        let placed = match placement {
            Placement::List(list) => {
                if let Some(&h) = list.iter().find(|&&h| h >= hosts) {
                    bail!(
                        "{at}: hosts: host {h} but the topology has {hosts} hosts (0..{})",
                        hosts - 1
                    );
                }
                if let Some(&h) = list.iter().find(|&&h| owner[h as usize].is_some()) {
                    let other = &names[owner[h as usize].expect("owned")];
                    bail!("{at}: hosts: host {h} already runs job `{other}`");
                }
                list
            }
            Placement::Consecutive => free_hosts(&owner).take(ranks as usize).collect(),
            Placement::Pods => strided(topo, &owner, ranks, |c| c.pod.or(c.group).or(c.segment)),
            Placement::Servers => strided(topo, &owner, ranks, |c| c.server),
        };
        for &h in &placed {
            owner[h as usize] = Some(i);
        }
        let start = match t.start_us {
            None => SimTime::ZERO,
            Some(us) if (0.0..1e12).contains(&us) => SimTime((us * 1e6).round() as u64),
            Some(us) => bail!("{at}: start_us: {us} is not a non-negative number of microseconds"),
        };
        jobs.push(Job {
            name: Some(t.name),
            spec,
            hosts: placed,
            start,
        });
    }
    Ok(jobs)
}

fn free_hosts(owner: &[Option<usize>]) -> impl Iterator<Item = NodeIndex> + '_ {
    owner
        .iter()
        .enumerate()
        .filter(|(_, o)| o.is_none())
        .map(|(h, _)| h as NodeIndex)
}

/// `ranks` free hosts dealt round-robin over the domains `domain` gives
/// (hosts without one are each their own).
fn strided(
    topo: &Topology,
    owner: &[Option<usize>],
    ranks: u32,
    domain: impl Fn(&netsim_topo::Coords) -> Option<u32>,
) -> Vec<NodeIndex> {
    let mut by_domain: BTreeMap<(u32, u32), std::collections::VecDeque<NodeIndex>> =
        BTreeMap::new();
    for h in free_hosts(owner) {
        let key = match domain(&topo.node(h).coords) {
            Some(d) => (0, d),
            None => (1, h),
        };
        by_domain.entry(key).or_default().push_back(h);
    }
    let mut placed = Vec::with_capacity(ranks as usize);
    while placed.len() < ranks as usize {
        for hosts in by_domain.values_mut() {
            if let Some(h) = hosts.pop_front() {
                placed.push(h);
                if placed.len() == ranks as usize {
                    break;
                }
            }
        }
    }
    placed
}
