//! `TopoSpec`: a clap-independent description of a topology, and `build` to generate it.

use std::path::PathBuf;
use std::str::FromStr;

use crate::error::TopoError;
use crate::graph::Topology;

/// Bandwidth and latency of one tier of links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkParams {
    /// Bandwidth of each direction, bits per second.
    pub bandwidth_bps: u64,
    /// Propagation latency, picoseconds.
    pub latency_ps: u64,
}

impl LinkParams {
    /// The default for generic fabrics (fat-tree, dragonfly, star): 100 Gb/s, 1000 ns,
    /// the htsim-style fabric many datacenter papers use.
    pub const DEFAULT: LinkParams = LinkParams {
        bandwidth_bps: 100_000_000_000,
        latency_ps: 1_000_000,
    };
}

/// A k-ary fat-tree (3 tiers) or leaf-spine (2 tiers).
///
/// 3 tiers: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores, each edge
/// switch with `oversub * k/2` hosts and k/2 uplinks. 2 tiers: k leaves with
/// `oversub * k/2` hosts each, k/2 spines, every leaf linked to every spine. With
/// `planes` > 1 the switches are built once per plane and every host has a port in each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FatTreeParams {
    /// Switch radix k (even, >= 2).
    pub k: u32,
    /// 2 (leaf-spine) or 3 (edge-aggregation-core).
    pub tiers: u32,
    /// Oversubscription at the leaf: hosts per edge switch = `oversub * k/2` (>= 1).
    pub oversub: u32,
    /// Host to edge/leaf links.
    pub host_link: LinkParams,
    /// Edge to aggregation links (3 tiers) or leaf to spine links (2 tiers).
    pub agg_link: LinkParams,
    /// Aggregation to core links (3 tiers only).
    pub core_link: LinkParams,
    /// Copies of the switch layers (1..=8); each host has one port into each plane.
    pub planes: u32,
}

impl Default for FatTreeParams {
    /// k = 8, 3 tiers, no oversubscription, 100 Gb/s and 1000 ns everywhere (128 hosts).
    fn default() -> Self {
        FatTreeParams {
            k: 8,
            tiers: 3,
            oversub: 1,
            host_link: LinkParams::DEFAULT,
            agg_link: LinkParams::DEFAULT,
            core_link: LinkParams::DEFAULT,
            planes: 1,
        }
    }
}

/// How a dragonfly's global links are laid out over the groups' global ports.
///
/// A group has `a*h` global ports numbered router-major (router r owns ports
/// `r*h..r*h+h`). With `g - 1` other groups, port `q` belongs to round `q / (g-1)` and
/// position `q % (g-1)` in that round; the arrangement maps the position to a target group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrangement {
    /// Consecutive ("absolute"): position i goes to the i-th other group in id order.
    Absolute,
    /// Relative: position i goes to group `(G + i + 1) mod g`.
    Relative,
    /// Circulant: positions alternate `G+1, G-1, G+2, G-2, ...` (mod g).
    Circulant,
}

impl FromStr for Arrangement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "absolute" | "consecutive" => Ok(Arrangement::Absolute),
            "relative" => Ok(Arrangement::Relative),
            "circulant" => Ok(Arrangement::Circulant),
            _ => Err(format!(
                "unknown arrangement `{s}`; expected absolute, relative or circulant"
            )),
        }
    }
}

/// A dragonfly: p hosts per router, a routers per group (all-to-all local links), h global
/// links per router, g groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DragonflyParams {
    /// Hosts per router.
    pub p: u32,
    /// Routers per group.
    pub a: u32,
    /// Global links per router.
    pub h: u32,
    /// Groups; `None` means the maximum `a*h + 1`.
    pub groups: Option<u32>,
    /// Global-link arrangement.
    pub arrangement: Arrangement,
    /// Host to router links.
    pub host_link: LinkParams,
    /// Router to router links inside a group.
    pub local_link: LinkParams,
    /// Router to router links between groups.
    pub global_link: LinkParams,
}

impl Default for DragonflyParams {
    /// The balanced p = h = 4, a = 8 dragonfly: 33 groups, 264 routers, 1,056 hosts.
    fn default() -> Self {
        DragonflyParams {
            p: 4,
            a: 8,
            h: 4,
            groups: None,
            arrangement: Arrangement::Absolute,
            host_link: LinkParams::DEFAULT,
            local_link: LinkParams::DEFAULT,
            global_link: LinkParams::DEFAULT,
        }
    }
}

/// N hosts on one switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StarParams {
    /// Number of hosts (1..=65535).
    pub hosts: u32,
    /// Host to switch links.
    pub host_link: LinkParams,
}

impl Default for StarParams {
    /// 16 hosts, 100 Gb/s, 1000 ns.
    fn default() -> Self {
        StarParams {
            hosts: 16,
            host_link: LinkParams::DEFAULT,
        }
    }
}

/// The rail-optimized and DCN templates of SimAI's `gen_Topo_Template.py`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimaiTemplate {
    /// `-topo Spectrum-X`: rail-optimized, single ToR.
    SpectrumX,
    /// `-topo AlibabaHPN`: rail-optimized, dual ToR, single plane.
    Hpn,
    /// `-topo AlibabaHPN --dp`: rail-optimized, dual ToR, dual plane.
    HpnDualPlane,
    /// `-topo DCN+`: single ToR, not rail-optimized.
    Dcn,
    /// `-topo DCN+ --dt`: dual ToR, not rail-optimized.
    DcnDualTor,
}

impl SimaiTemplate {
    /// The netsim kind name (`spectrum-x`, `hpn`, ...).
    pub fn kind(self) -> &'static str {
        match self {
            SimaiTemplate::SpectrumX => "spectrum-x",
            SimaiTemplate::Hpn => "hpn",
            SimaiTemplate::HpnDualPlane => "hpn-dual-plane",
            SimaiTemplate::Dcn => "dcn",
            SimaiTemplate::DcnDualTor => "dcn-dual-tor",
        }
    }
    /// True for the rail-optimized templates (one ASW per rail per segment).
    pub fn rail_optimized(self) -> bool {
        matches!(
            self,
            SimaiTemplate::SpectrumX | SimaiTemplate::Hpn | SimaiTemplate::HpnDualPlane
        )
    }
    /// True for the templates where each NIC has two ToR uplinks.
    pub fn dual_tor(self) -> bool {
        matches!(
            self,
            SimaiTemplate::Hpn | SimaiTemplate::HpnDualPlane | SimaiTemplate::DcnDualTor
        )
    }
}

/// Parameters of a SimAI template, named after `gen_Topo_Template.py`'s options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimaiParams {
    /// Which template.
    pub template: SimaiTemplate,
    /// `-g`: number of GPUs.
    pub gpus: u32,
    /// `-gps`: GPUs per server.
    pub gpus_per_server: u32,
    /// `-nsps`: NVSwitches per server.
    pub nv_switch_per_server: u32,
    /// `-gt`: GPU type written to the file header.
    pub gpu_type: String,
    /// `-nvbw`: GPU to NVSwitch bandwidth, bits per second.
    pub nvlink_bps: u64,
    /// `-nl`: GPU to NVSwitch latency, picoseconds.
    pub nvlink_latency_ps: u64,
    /// `-bw`: NIC to ASW bandwidth, bits per second.
    pub nic_bps: u64,
    /// `-l`: NIC to ASW and ASW to PSW latency, picoseconds.
    pub latency_ps: u64,
    /// `-npa`: NICs per ASW (segment size in servers for rail-optimized templates).
    pub nics_per_asw: u32,
    /// `-psn`: number of PSWs.
    pub psw: u32,
    /// `-apbw`: ASW to PSW bandwidth, bits per second.
    pub asw_psw_bps: u64,
    /// `-app`: ASWs per PSW: the segments one pod of PSWs can hold. Beyond
    /// that the template grows a third tier: pods of segments, each with its
    /// own `psw` PSWs, joined by core switches (no SimAI equivalent).
    pub asw_per_psw: u32,
    /// Downlink to uplink ratio of a PSW when pods are joined by a core tier:
    /// a PSW has `ceil(asw_per_psw / core_oversub)` core uplinks.
    pub core_oversub: u32,
    /// PSW to core bandwidth, bits per second (three tiers only).
    pub psw_core_bps: u64,
}

impl SimaiParams {
    /// The defaults SimAI's generator uses for `template`.
    pub fn defaults(template: SimaiTemplate) -> SimaiParams {
        let mut p = SimaiParams {
            template,
            gpus: 32,
            gpus_per_server: 8,
            nv_switch_per_server: 1,
            gpu_type: "H100".to_string(),
            nvlink_bps: 2_880_000_000_000,
            nvlink_latency_ps: 25_000,
            nic_bps: 400_000_000_000,
            latency_ps: 500_000,
            nics_per_asw: 64,
            psw: 64,
            asw_psw_bps: 400_000_000_000,
            asw_per_psw: 64,
            core_oversub: 1,
            psw_core_bps: 400_000_000_000,
        };
        match template {
            SimaiTemplate::SpectrumX => p.gpus = 4096,
            SimaiTemplate::Hpn | SimaiTemplate::HpnDualPlane => {
                p.gpus = 15360;
                p.nic_bps = 200_000_000_000;
                p.nics_per_asw = 128;
                p.psw = 120;
                p.asw_per_psw = if template == SimaiTemplate::Hpn {
                    240
                } else {
                    120
                };
                // The HPN paper (SIGCOMM '24) joins pods by a core tier at 15:1:
                // an aggregation switch has 8 core uplinks beside 120 downlinks.
                p.core_oversub = 15;
            }
            SimaiTemplate::Dcn | SimaiTemplate::DcnDualTor => {
                p.gpus = 512;
                p.asw_per_psw = 8;
                p.psw = 8;
                if template == SimaiTemplate::DcnDualTor {
                    p.nic_bps = 200_000_000_000;
                    p.nics_per_asw = 128;
                }
            }
        }
        p
    }
}

/// What to build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopoSpec {
    /// A fat-tree or leaf-spine.
    FatTree(FatTreeParams),
    /// A dragonfly.
    Dragonfly(DragonflyParams),
    /// A single switch with hosts.
    Star(StarParams),
    /// A SimAI template.
    Simai(SimaiParams),
    /// A SimAI-format topology file.
    SimaiFile(PathBuf),
}

impl TopoSpec {
    /// The spec for `kind` with every parameter at its default; `simai:FILE` reads FILE.
    pub fn default_for(kind: &str) -> Result<TopoSpec, TopoError> {
        Ok(match kind {
            "fat-tree" => TopoSpec::FatTree(FatTreeParams::default()),
            "dragonfly" => TopoSpec::Dragonfly(DragonflyParams::default()),
            "star" => TopoSpec::Star(StarParams::default()),
            "spectrum-x" => TopoSpec::Simai(SimaiParams::defaults(SimaiTemplate::SpectrumX)),
            "hpn" => TopoSpec::Simai(SimaiParams::defaults(SimaiTemplate::Hpn)),
            "hpn-dual-plane" => TopoSpec::Simai(SimaiParams::defaults(SimaiTemplate::HpnDualPlane)),
            "dcn" => TopoSpec::Simai(SimaiParams::defaults(SimaiTemplate::Dcn)),
            "dcn-dual-tor" => TopoSpec::Simai(SimaiParams::defaults(SimaiTemplate::DcnDualTor)),
            _ => match kind.strip_prefix("simai:") {
                Some(path) if !path.is_empty() => TopoSpec::SimaiFile(PathBuf::from(path)),
                _ => return Err(TopoError::UnknownKind(kind.to_string())),
            },
        })
    }
}

/// Generates (or reads) the topology `spec` describes.
pub fn build(spec: &TopoSpec) -> Result<Topology, TopoError> {
    match spec {
        TopoSpec::FatTree(p) => crate::fat_tree::build(p),
        TopoSpec::Dragonfly(p) => crate::dragonfly::build(p),
        TopoSpec::Star(p) => crate::star::build(p),
        TopoSpec::Simai(p) => crate::simai::template::build_template(p),
        TopoSpec::SimaiFile(path) => crate::simai::read_file(path),
    }
}

/// Checks that a link tier has bandwidth > 0 and latency >= 1 ps.
pub(crate) fn check_link(
    flag_bw: &'static str,
    flag_lat: &'static str,
    l: &LinkParams,
) -> Result<(), TopoError> {
    if l.bandwidth_bps == 0 {
        return Err(TopoError::param(flag_bw, "bandwidth must be > 0"));
    }
    if l.latency_ps == 0 {
        return Err(TopoError::param(
            flag_lat,
            "latency must be >= 1 ps (the parallel engine needs a positive lookahead)",
        ));
    }
    Ok(())
}
