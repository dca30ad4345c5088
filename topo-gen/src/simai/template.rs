//! The rail-optimized / DCN+ templates of SimAI's `gen_Topo_Template.py`:
//! its derivation of segment, ASW and PSW counts, node numbering and link
//! order; and, past what one set of PSWs holds, pods of segments joined by a
//! core tier (HPN's pods and core; a Spectrum-X super-spine).

use crate::error::TopoError;
use crate::graph::{Coords, Role, Topology, TopologyBuilder};
use crate::spec::{SimaiParams, SimaiTemplate};

/// Builds a SimAI template with SimAI's derivation of segment, ASW and PSW counts, its node
/// numbering (GPUs, NVSwitches, ASWs, PSWs) and its link order (per GPU: NVLink links then
/// ASW links; then every ASW-PSW link, ASW-major).
pub fn build_template(p: &SimaiParams) -> Result<Topology, TopoError> {
    check_template_params(p)?;
    let l = Layout::of(p)?;
    let mut b = TopologyBuilder::new(p.template.kind()).gpu_info(&p.gpu_type, p.gpus_per_server);
    b.reserve(l.nodes as usize, l.links as usize)?;
    let first = add_nodes(&mut b, p, &l);
    add_links(&mut b, p, &l, &first);
    b.finish()
}

/// A template's sizes as SimAI derives them from its parameters, and the
/// pods of a third tier where one set of PSWs cannot hold every segment.
struct Layout {
    /// ASWs each NIC connects to: 2 for the dual-ToR templates.
    tors_per_nic: u32,
    /// ASWs per segment on one ToR side.
    asw_per_side: u32,
    gpus_per_segment: u64,
    /// ASWs on one ToR side, all segments.
    side_asws: u64,
    /// NVSwitches.
    nvs: u64,
    nodes: u64,
    links: u64,
    dual_plane: bool,
    /// PSWs of plane 1 in each pod (all of a pod's PSWs with one plane).
    psw_plane1: u32,
    /// Pods: 1 for SimAI's two tiers; more when a core tier joins them.
    pods: u32,
    segments_per_pod: u32,
    /// Core switches per PSW index: core `j * cores_per_group + c` joins PSW
    /// `j` of every pod (0 with one pod).
    cores_per_group: u32,
}

impl Layout {
    /// The sizes of `p`'s template; an error if the fabric is larger than
    /// supported.
    fn of(p: &SimaiParams) -> Result<Layout, TopoError> {
        let t = p.template;
        let gps = p.gpus_per_server;
        let tors_per_nic: u32 = if t.dual_tor() { 2 } else { 1 };
        // ASWs per segment on one ToR side, and GPUs per segment, as in the Python script.
        let (asw_per_side, gpus_per_segment) = if t.rail_optimized() {
            (gps, p.nics_per_asw as u64 * gps as u64)
        } else {
            (1, p.nics_per_asw as u64)
        };
        let segments = (p.gpus as u64).div_ceil(gpus_per_segment);
        // SimAI's capacity check: rail-optimized templates divide asw_per_psw by the ASWs of one
        // ToR side of a segment; DCN+ divides by all ASWs of a segment (1 or 2).
        let divisor = if t.rail_optimized() {
            asw_per_side
        } else {
            tors_per_nic
        };
        let max_segments = (p.asw_per_psw / divisor) as u64;
        if max_segments == 0 {
            return Err(TopoError::param(
                "--asw-per-psw",
                format!(
                    "{} ASWs per PSW cannot hold one segment of {divisor} ASWs",
                    p.asw_per_psw
                ),
            ));
        }
        // More segments than one set of PSWs holds: pods of equal size (the last may be
        // smaller), joined by a core tier.
        let pods = segments.div_ceil(max_segments);
        let segments_per_pod = segments.div_ceil(pods);
        let cores_per_group = if pods > 1 {
            p.asw_per_psw.div_ceil(p.core_oversub)
        } else {
            0
        };
        let side_asws = segments * asw_per_side as u64;
        let asws = side_asws * tors_per_nic as u64;
        let servers = (p.gpus / gps) as u64;
        let nvs = servers.saturating_mul(p.nv_switch_per_server as u64);
        let psws = pods * p.psw as u64;
        let cores = p.psw as u64 * cores_per_group as u64;
        let nodes = (p.gpus as u64 + asws + psws + cores).saturating_add(nvs);
        if nodes > crate::fat_tree::MAX_NODES {
            return Err(TopoError::param(
                "--gpus",
                format!("{nodes} nodes exceed the supported size"),
            ));
        }
        // Dual plane: SimAI fills plane 1 with ceil(psw/2) PSWs and plane 2 with the rest.
        let dual_plane = t == SimaiTemplate::HpnDualPlane;
        let psw_plane1 = if dual_plane { p.psw.div_ceil(2) } else { p.psw };
        let asw_psw_links = if dual_plane {
            side_asws * p.psw as u64
        } else {
            asws * p.psw as u64
        };
        let links = (p.gpus as u64 * (p.nv_switch_per_server + tors_per_nic) as u64)
            .saturating_add(asw_psw_links)
            .saturating_add(psws * cores_per_group as u64);
        if links > crate::fat_tree::MAX_LINKS {
            return Err(TopoError::param(
                "--psw",
                format!(
                    "{links} links exceed the supported {}",
                    crate::fat_tree::MAX_LINKS
                ),
            ));
        }
        Ok(Layout {
            tors_per_nic,
            asw_per_side,
            gpus_per_segment,
            side_asws,
            nvs,
            nodes,
            links,
            dual_plane,
            psw_plane1,
            pods: pods as u32,
            segments_per_pod: segments_per_pod as u32,
            cores_per_group,
        })
    }

    /// The pod of segment `segment`, as a coordinate: none with two tiers.
    fn pod_of(&self, segment: u32) -> Option<u32> {
        (self.pods > 1).then_some(segment / self.segments_per_pod)
    }

    /// The plane of PSW index `j` within its pod (dual plane only).
    fn psw_plane(&self, j: u32) -> Option<u32> {
        self.dual_plane.then_some(u32::from(j >= self.psw_plane1))
    }
}

/// The first node id of each kind after the GPUs (`0..gpus`).
struct FirstIds {
    nvswitch: u32,
    asw: u32,
    psw: u32,
    core: u32,
}

/// Adds the nodes in SimAI's numbering: GPUs, NVSwitches, ASWs (side by
/// side), PSWs (pod by pod); then the core tier's switches, if any.
fn add_nodes(b: &mut TopologyBuilder, p: &SimaiParams, l: &Layout) -> FirstIds {
    let (gps, nsps) = (p.gpus_per_server, p.nv_switch_per_server);
    for i in 0..p.gpus {
        let segment = (i as u64 / l.gpus_per_segment) as u32;
        b.add_node(
            Role::Host,
            Coords {
                pod: l.pod_of(segment),
                server: Some(i / gps),
                rail: Some(i % gps),
                segment: Some(segment),
                ..Coords::default()
            },
        );
    }
    let nvswitch = b.node_count();
    for s in 0..l.nvs as u32 {
        let server = s / nsps;
        let segment = (server as u64 * gps as u64 / l.gpus_per_segment) as u32;
        b.add_node(
            Role::NvSwitch,
            Coords {
                pod: l.pod_of(segment),
                server: Some(server),
                segment: Some(segment),
                ..Coords::default()
            },
        );
    }
    let asw = b.node_count();
    for side in 0..l.tors_per_nic {
        for x in 0..l.side_asws as u32 {
            let segment = x / l.asw_per_side;
            b.add_node(
                Role::Tor,
                Coords {
                    pod: l.pod_of(segment),
                    segment: Some(segment),
                    rail: p.template.rail_optimized().then_some(x % l.asw_per_side),
                    plane: l.dual_plane.then_some(side),
                    ..Coords::default()
                },
            );
        }
    }
    // With a core tier above them, PSWs are the middle tier, as a SimAI file
    // of the fabric reads back.
    let psw_role = if l.pods > 1 { Role::Agg } else { Role::Core };
    let psw = b.node_count();
    for pod in 0..l.pods {
        for j in 0..p.psw {
            b.add_node(
                psw_role,
                Coords {
                    pod: (l.pods > 1).then_some(pod),
                    plane: l.psw_plane(j),
                    ..Coords::default()
                },
            );
        }
    }
    let core = b.node_count();
    for j in 0..p.psw {
        for _ in 0..l.cores_per_group {
            b.add_node(
                Role::Core,
                Coords {
                    plane: l.psw_plane(j),
                    ..Coords::default()
                },
            );
        }
    }
    FirstIds {
        nvswitch,
        asw,
        psw,
        core,
    }
}

/// Adds the links in SimAI's order: per GPU its NVLinks then its ASW links;
/// then every ASW-PSW link, ASW-major (each ASW to its pod's PSWs of its
/// plane); then the core tier's, PSW-major.
fn add_links(b: &mut TopologyBuilder, p: &SimaiParams, l: &Layout, first: &FirstIds) {
    let (gps, nsps) = (p.gpus_per_server, p.nv_switch_per_server);
    for i in 0..p.gpus {
        let server = i / gps;
        for j in 0..nsps {
            b.add_link(
                i,
                first.nvswitch + server * nsps + j,
                p.nvlink_bps,
                p.nvlink_latency_ps,
            );
        }
        let segment = (i as u64 / l.gpus_per_segment) as u32;
        let within = if p.template.rail_optimized() {
            i % gps
        } else {
            0
        };
        for side in 0..l.tors_per_nic {
            let asw = first.asw + side * l.side_asws as u32 + segment * l.asw_per_side + within;
            b.add_link(i, asw, p.nic_bps, p.latency_ps);
        }
    }
    for side in 0..l.tors_per_nic {
        let (lo, hi) = match (l.dual_plane, side) {
            (false, _) => (0, p.psw),
            (true, 0) => (0, l.psw_plane1),
            (true, _) => (l.psw_plane1, p.psw),
        };
        for x in 0..l.side_asws as u32 {
            let pod_psw = first.psw + l.pod_of(x / l.asw_per_side).unwrap_or(0) * p.psw;
            for y in lo..hi {
                b.add_link(
                    first.asw + side * l.side_asws as u32 + x,
                    pod_psw + y,
                    p.asw_psw_bps,
                    p.latency_ps,
                );
            }
        }
    }
    for pod in 0..l.pods {
        for j in 0..p.psw {
            for c in 0..l.cores_per_group {
                b.add_link(
                    first.psw + pod * p.psw + j,
                    first.core + j * l.cores_per_group + c,
                    p.psw_core_bps,
                    p.latency_ps,
                );
            }
        }
    }
}

fn check_template_params(p: &SimaiParams) -> Result<(), TopoError> {
    let nonzero = [
        ("--gpus", p.gpus as u64),
        ("--gpus-per-server", p.gpus_per_server as u64),
        ("--gpus-per-asw", p.nics_per_asw as u64),
        ("--psw", p.psw as u64),
        ("--asw-per-psw", p.asw_per_psw as u64),
        ("--nvlink-gbps", p.nvlink_bps),
        ("--nvlink-latency-ns", p.nvlink_latency_ps),
        ("--nic-gbps", p.nic_bps),
        ("--link-latency-ns", p.latency_ps),
        ("--asw-psw-gbps", p.asw_psw_bps),
        ("--core-oversub", p.core_oversub as u64),
        ("--psw-core-gbps", p.psw_core_bps),
    ];
    for (flag, v) in nonzero {
        if v == 0 {
            return Err(TopoError::param(flag, "must be > 0"));
        }
    }
    // Every ASW has a port per PSW.
    if p.psw > u16::MAX as u32 {
        return Err(TopoError::param(
            "--psw",
            format!("at most {} PSWs are supported", u16::MAX),
        ));
    }
    if !p.gpus.is_multiple_of(p.gpus_per_server) {
        return Err(TopoError::param(
            "--gpus",
            format!(
                "{} GPUs is not a multiple of --gpus-per-server {}",
                p.gpus, p.gpus_per_server
            ),
        ));
    }
    if p.gpu_type.is_empty() || p.gpu_type.contains(char::is_whitespace) {
        return Err(TopoError::param(
            "--gpu-type",
            "must be one word (it is a field of the SimAI header)",
        ));
    }
    Ok(())
}
