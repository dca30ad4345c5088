//! Topology flags shared by `run`, `topo` and `partition`, and their mapping to a
//! `netsim_topo::TopoSpec`.
//!
//! Every flag is optional: an unset flag takes the kind's default (fat-tree k=8 3 tiers,
//! dragonfly p=h=4 a=8 g=33, star 16 hosts, all at 100 Gb/s and 1000 ns; SimAI templates
//! with SimAI's own defaults). A flag that does not apply to the chosen kind is an error
//! rather than being silently ignored.

use anyhow::bail;
use netsim_topo::units::{parse_gbps, parse_ns};
use netsim_topo::{build, Arrangement, LinkParams, Routing, TopoSpec, Topology};
use std::time::Instant;

/// Flags that choose and shape a topology. Bandwidths are in Gb/s and latencies in ns
/// (decimals allowed down to whole bits per second and picoseconds).
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "Topology")]
pub struct TopologyArgs {
    /// Fat-tree switch radix k (even).
    #[arg(long)]
    pub k: Option<u32>,
    /// Fat-tree tiers: 3 (edge-agg-core) or 2 (leaf-spine).
    #[arg(long)]
    pub tiers: Option<u32>,
    /// Fat-tree oversubscription at the leaf: hosts per edge switch = oversub * k/2.
    #[arg(long)]
    pub oversub: Option<u32>,
    /// Fat-tree planes (1..=8): the switch layers built N times, each host's NIC striped
    /// with one port into every plane.
    #[arg(long)]
    pub planes: Option<u32>,
    /// Star: number of hosts on the switch.
    #[arg(long)]
    pub hosts: Option<u32>,
    /// Dragonfly: hosts per router.
    #[arg(long)]
    pub p: Option<u32>,
    /// Dragonfly: routers per group.
    #[arg(long)]
    pub a: Option<u32>,
    /// Dragonfly: global links per router.
    #[arg(long)]
    pub h: Option<u32>,
    /// Dragonfly: number of groups (default and maximum a*h+1).
    #[arg(long)]
    pub groups: Option<u32>,
    /// Dragonfly global-link arrangement: absolute, relative or circulant.
    #[arg(long)]
    pub arrangement: Option<Arrangement>,
    /// SimAI templates: number of GPUs.
    #[arg(long)]
    pub gpus: Option<u32>,
    /// SimAI templates: GPUs per server.
    #[arg(long)]
    pub gpus_per_server: Option<u32>,
    /// SimAI templates: NVSwitches per server.
    #[arg(long)]
    pub nvswitches_per_server: Option<u32>,
    /// SimAI templates: GPU type written to the SimAI header.
    #[arg(long)]
    pub gpu_type: Option<String>,
    /// SimAI templates: NICs (GPUs) per ASW.
    #[arg(long)]
    pub gpus_per_asw: Option<u32>,
    /// SimAI templates: number of PSWs.
    #[arg(long)]
    pub psw: Option<u32>,
    /// SimAI templates: ASWs per PSW, the segments one pod holds; more GPUs
    /// build pods joined by a core tier.
    #[arg(long)]
    pub asw_per_psw: Option<u32>,
    /// SimAI templates with a core tier: PSW downlinks per core uplink
    /// (default 1; 15 for HPN, as its paper).
    #[arg(long)]
    pub core_oversub: Option<u32>,
    /// Bandwidth of every non-NVLink link tier, unless a per-tier flag is given (Gb/s).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub link_gbps: Option<u64>,
    /// Latency of every non-NVLink link tier, unless a per-tier flag is given (ns).
    #[arg(long, value_parser = parse_ns, value_name = "NS")]
    pub link_latency_ns: Option<u64>,
    /// Host to edge/leaf/router/switch links (Gb/s).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub host_link_gbps: Option<u64>,
    /// Host to edge/leaf/router/switch links (ns).
    #[arg(long, value_parser = parse_ns, value_name = "NS")]
    pub host_link_latency_ns: Option<u64>,
    /// Fat-tree edge to aggregation (2 tiers: leaf to spine) links (Gb/s).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub agg_link_gbps: Option<u64>,
    /// Fat-tree edge to aggregation (2 tiers: leaf to spine) links (ns).
    #[arg(long, value_parser = parse_ns, value_name = "NS")]
    pub agg_link_latency_ns: Option<u64>,
    /// Fat-tree aggregation to core links (Gb/s).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub core_link_gbps: Option<u64>,
    /// Fat-tree aggregation to core links (ns).
    #[arg(long, value_parser = parse_ns, value_name = "NS")]
    pub core_link_latency_ns: Option<u64>,
    /// Dragonfly router to router links inside a group (Gb/s).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub local_link_gbps: Option<u64>,
    /// Dragonfly router to router links inside a group (ns).
    #[arg(long, value_parser = parse_ns, value_name = "NS")]
    pub local_link_latency_ns: Option<u64>,
    /// Dragonfly links between groups (Gb/s).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub global_link_gbps: Option<u64>,
    /// Dragonfly links between groups (ns).
    #[arg(long, value_parser = parse_ns, value_name = "NS")]
    pub global_link_latency_ns: Option<u64>,
    /// SimAI templates: GPU to NVSwitch bandwidth (Gb/s; default 2880).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub nvlink_gbps: Option<u64>,
    /// SimAI templates: GPU to NVSwitch latency (ns; default 25).
    #[arg(long, value_parser = parse_ns, value_name = "NS")]
    pub nvlink_latency_ns: Option<u64>,
    /// SimAI templates: NIC to ASW bandwidth (Gb/s; default 400, 200 for HPN and DCN+ dual ToR).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub nic_gbps: Option<u64>,
    /// SimAI templates: ASW to PSW bandwidth (Gb/s; default 400).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub asw_psw_gbps: Option<u64>,
    /// SimAI templates with a core tier: PSW to core bandwidth (Gb/s; default
    /// the ASW to PSW bandwidth).
    #[arg(long, value_parser = parse_gbps, value_name = "GBPS")]
    pub psw_core_gbps: Option<u64>,
}

/// A generated topology with its routing tables, and what each step cost.
pub struct BuiltTopology {
    pub topo: Topology,
    pub routing: Routing,
    pub generate_s: f64,
    pub route_s: f64,
}

impl TopologyArgs {
    /// Generates the topology of `kind` with these flags, without routing it.
    pub fn generate(&self, kind: &str) -> anyhow::Result<Topology> {
        Ok(build(&self.spec(kind)?)?)
    }

    /// Generates the topology of `kind` with these flags and routes it.
    pub fn build(&self, kind: &str) -> anyhow::Result<BuiltTopology> {
        let started = Instant::now();
        let topo = self.generate(kind)?;
        let generated = Instant::now();
        let routing = Routing::build_within(&topo, None, netsim_process::memory_left_bytes())?;
        Ok(BuiltTopology {
            topo,
            routing,
            generate_s: (generated - started).as_secs_f64(),
            route_s: generated.elapsed().as_secs_f64(),
        })
    }

    /// The topology spec for `kind` (the `--topo` value or the positional KIND) with these
    /// flags applied. Errors name the flag that does not apply to `kind`.
    pub fn spec(&self, kind: &str) -> anyhow::Result<TopoSpec> {
        let mut spec = TopoSpec::default_for(kind)?;
        let allowed = flags_of(&spec);
        if let Some(flag) = self.given().into_iter().find(|f| !allowed.contains(f)) {
            bail!("{flag} does not apply to topology `{kind}`");
        }
        let tier = |base: LinkParams, bw: Option<u64>, lat: Option<u64>| LinkParams {
            bandwidth_bps: bw.or(self.link_gbps).unwrap_or(base.bandwidth_bps),
            latency_ps: lat.or(self.link_latency_ns).unwrap_or(base.latency_ps),
        };
        match &mut spec {
            TopoSpec::FatTree(p) => {
                set(&mut p.k, self.k);
                set(&mut p.tiers, self.tiers);
                set(&mut p.oversub, self.oversub);
                set(&mut p.planes, self.planes);
                p.host_link = tier(p.host_link, self.host_link_gbps, self.host_link_latency_ns);
                p.agg_link = tier(p.agg_link, self.agg_link_gbps, self.agg_link_latency_ns);
                p.core_link = tier(p.core_link, self.core_link_gbps, self.core_link_latency_ns);
            }
            TopoSpec::Dragonfly(p) => {
                set(&mut p.p, self.p);
                set(&mut p.a, self.a);
                set(&mut p.h, self.h);
                if self.groups.is_some() {
                    p.groups = self.groups;
                }
                set(&mut p.arrangement, self.arrangement);
                p.host_link = tier(p.host_link, self.host_link_gbps, self.host_link_latency_ns);
                p.local_link = tier(
                    p.local_link,
                    self.local_link_gbps,
                    self.local_link_latency_ns,
                );
                p.global_link = tier(
                    p.global_link,
                    self.global_link_gbps,
                    self.global_link_latency_ns,
                );
            }
            TopoSpec::Star(p) => {
                set(&mut p.hosts, self.hosts);
                p.host_link = tier(p.host_link, self.host_link_gbps, self.host_link_latency_ns);
            }
            TopoSpec::Simai(p) => {
                set(&mut p.gpus, self.gpus);
                set(&mut p.gpus_per_server, self.gpus_per_server);
                set(&mut p.nv_switch_per_server, self.nvswitches_per_server);
                set(&mut p.gpu_type, self.gpu_type.clone());
                set(&mut p.nics_per_asw, self.gpus_per_asw);
                set(&mut p.psw, self.psw);
                set(&mut p.asw_per_psw, self.asw_per_psw);
                set(&mut p.nvlink_bps, self.nvlink_gbps);
                set(&mut p.nvlink_latency_ps, self.nvlink_latency_ns);
                set(&mut p.nic_bps, self.nic_gbps.or(self.link_gbps));
                set(&mut p.asw_psw_bps, self.asw_psw_gbps.or(self.link_gbps));
                p.psw_core_bps = self.psw_core_gbps.unwrap_or(p.asw_psw_bps);
                set(&mut p.core_oversub, self.core_oversub);
                set(&mut p.latency_ps, self.link_latency_ns);
            }
            TopoSpec::SimaiFile(_) => {}
        }
        Ok(spec)
    }

    /// The flags that were given, by their long names.
    fn given(&self) -> Vec<&'static str> {
        let flags: [(&'static str, bool); 35] = [
            ("--k", self.k.is_some()),
            ("--tiers", self.tiers.is_some()),
            ("--oversub", self.oversub.is_some()),
            ("--planes", self.planes.is_some()),
            ("--hosts", self.hosts.is_some()),
            ("--p", self.p.is_some()),
            ("--a", self.a.is_some()),
            ("--h", self.h.is_some()),
            ("--groups", self.groups.is_some()),
            ("--arrangement", self.arrangement.is_some()),
            ("--gpus", self.gpus.is_some()),
            ("--gpus-per-server", self.gpus_per_server.is_some()),
            (
                "--nvswitches-per-server",
                self.nvswitches_per_server.is_some(),
            ),
            ("--gpu-type", self.gpu_type.is_some()),
            ("--gpus-per-asw", self.gpus_per_asw.is_some()),
            ("--psw", self.psw.is_some()),
            ("--asw-per-psw", self.asw_per_psw.is_some()),
            ("--core-oversub", self.core_oversub.is_some()),
            ("--link-gbps", self.link_gbps.is_some()),
            ("--link-latency-ns", self.link_latency_ns.is_some()),
            ("--host-link-gbps", self.host_link_gbps.is_some()),
            (
                "--host-link-latency-ns",
                self.host_link_latency_ns.is_some(),
            ),
            ("--agg-link-gbps", self.agg_link_gbps.is_some()),
            ("--agg-link-latency-ns", self.agg_link_latency_ns.is_some()),
            ("--core-link-gbps", self.core_link_gbps.is_some()),
            (
                "--core-link-latency-ns",
                self.core_link_latency_ns.is_some(),
            ),
            ("--local-link-gbps", self.local_link_gbps.is_some()),
            (
                "--local-link-latency-ns",
                self.local_link_latency_ns.is_some(),
            ),
            ("--global-link-gbps", self.global_link_gbps.is_some()),
            (
                "--global-link-latency-ns",
                self.global_link_latency_ns.is_some(),
            ),
            ("--nvlink-gbps", self.nvlink_gbps.is_some()),
            ("--nvlink-latency-ns", self.nvlink_latency_ns.is_some()),
            ("--nic-gbps", self.nic_gbps.is_some()),
            ("--asw-psw-gbps", self.asw_psw_gbps.is_some()),
            ("--psw-core-gbps", self.psw_core_gbps.is_some()),
        ];
        flags.iter().filter(|f| f.1).map(|f| f.0).collect()
    }
}

impl TopologyArgs {
    /// What a refusal of topology `kind`'s size names: the size flags that
    /// were given, with their values, before `--topo kind` (`--h 255
    /// (--topo dragonfly)`), so that the first flag named, the one a
    /// scenario's error is located at, is a size the user chose; `--topo
    /// kind` alone when its default size was taken.
    pub fn size_context(&self, kind: &str) -> String {
        let sizes = [
            ("--k", self.k),
            ("--tiers", self.tiers),
            ("--oversub", self.oversub),
            ("--planes", self.planes),
            ("--hosts", self.hosts),
            ("--p", self.p),
            ("--a", self.a),
            ("--h", self.h),
            ("--groups", self.groups),
            ("--gpus", self.gpus),
            ("--gpus-per-server", self.gpus_per_server),
            ("--nvswitches-per-server", self.nvswitches_per_server),
            ("--gpus-per-asw", self.gpus_per_asw),
            ("--psw", self.psw),
            ("--asw-per-psw", self.asw_per_psw),
        ];
        let given: Vec<String> = sizes
            .iter()
            .filter_map(|&(flag, v)| v.map(|v| format!("{flag} {v}")))
            .collect();
        if given.is_empty() {
            format!("--topo {kind}")
        } else {
            format!("{} (--topo {kind})", given.join(" "))
        }
    }
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// The flags that apply to topology `spec`.
fn flags_of(spec: &TopoSpec) -> &'static [&'static str] {
    match spec {
        TopoSpec::FatTree(_) => &[
            "--k",
            "--tiers",
            "--oversub",
            "--planes",
            "--link-gbps",
            "--link-latency-ns",
            "--host-link-gbps",
            "--host-link-latency-ns",
            "--agg-link-gbps",
            "--agg-link-latency-ns",
            "--core-link-gbps",
            "--core-link-latency-ns",
        ],
        TopoSpec::Dragonfly(_) => &[
            "--p",
            "--a",
            "--h",
            "--groups",
            "--arrangement",
            "--link-gbps",
            "--link-latency-ns",
            "--host-link-gbps",
            "--host-link-latency-ns",
            "--local-link-gbps",
            "--local-link-latency-ns",
            "--global-link-gbps",
            "--global-link-latency-ns",
        ],
        TopoSpec::Star(_) => &[
            "--hosts",
            "--link-gbps",
            "--link-latency-ns",
            "--host-link-gbps",
            "--host-link-latency-ns",
        ],
        TopoSpec::Simai(_) => &[
            "--gpus",
            "--gpus-per-server",
            "--nvswitches-per-server",
            "--gpu-type",
            "--gpus-per-asw",
            "--psw",
            "--asw-per-psw",
            "--core-oversub",
            "--link-gbps",
            "--link-latency-ns",
            "--nvlink-gbps",
            "--nvlink-latency-ns",
            "--nic-gbps",
            "--asw-psw-gbps",
            "--psw-core-gbps",
        ],
        TopoSpec::SimaiFile(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        kind: String,
        #[command(flatten)]
        topology: TopologyArgs,
    }

    fn spec(args: &[&str]) -> anyhow::Result<TopoSpec> {
        let cli = Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))?;
        cli.topology.spec(&cli.kind)
    }

    #[test]
    fn flags_map_onto_the_spec() {
        let TopoSpec::FatTree(p) = spec(&[
            "fat-tree",
            "--k",
            "16",
            "--link-gbps",
            "100",
            "--core-link-latency-ns",
            "2.5",
        ])
        .unwrap() else {
            panic!("not a fat-tree")
        };
        assert_eq!(p.k, 16);
        assert_eq!(p.core_link.latency_ps, 2_500);
        assert_eq!(p.host_link.latency_ps, 1_000_000);
        let TopoSpec::Simai(p) =
            spec(&["hpn", "--gpus", "2048", "--link-latency-ns", "600"]).unwrap()
        else {
            panic!("not a template")
        };
        assert_eq!(
            (p.gpus, p.latency_ps, p.nic_bps),
            (2048, 600_000, 200_000_000_000)
        );
    }

    #[test]
    fn errors_name_the_flag() {
        let e = spec(&["dragonfly", "--k", "4"]).unwrap_err().to_string();
        assert!(e.contains("--k"), "{e}");
        let e = spec(&["fat-tree", "--link-gbps", "fast"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--link-gbps"), "{e}");
        let e = spec(&["star", "--planes", "2"]).unwrap_err().to_string();
        assert!(e.contains("--planes"), "{e}");
        let e = spec(&["torus"]).unwrap_err().to_string();
        assert!(e.contains("unknown topology"), "{e}");
    }
}
