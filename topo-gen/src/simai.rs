//! SimAI compatibility: the rail-optimized / DCN+ templates of SimAI's
//! `gen_Topo_Template.py`, and its topology text format (import and export).
//!
//! The format: line 1 is `node_num gpus_per_server nvswitch_num switch_num link_num
//! gpu_type`; line 2 lists the NVSwitch ids, then the other switch ids, each followed by a
//! space; then one `src dst <bw>Gbps <lat>ms <error_rate>` line per link. GPUs are the
//! nodes not listed on line 2, and SimAI numbers them `0..gpu_num` first.

use std::io::{self, Write};
use std::path::Path;

use crate::error::TopoError;
use crate::graph::{Coords, LinkIndex, NodeIndex, Role, Topology, TopologyBuilder};
use crate::spec::{SimaiParams, SimaiTemplate};
use crate::units::{format_decimal, parse_bandwidth_bps, parse_latency_ps};

/// Builds a SimAI template with SimAI's derivation of segment, ASW and PSW counts, its node
/// numbering (GPUs, NVSwitches, ASWs, PSWs) and its link order (per GPU: NVLink links then
/// ASW links; then every ASW-PSW link, ASW-major).
pub fn build_template(p: &SimaiParams) -> Result<Topology, TopoError> {
    let t = p.template;
    check_template_params(p)?;
    let gps = p.gpus_per_server;
    let nsps = p.nv_switch_per_server;
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
    if segments > max_segments {
        return Err(TopoError::param(
            "--gpus",
            format!(
                "{} GPUs need {segments} segments of {gpus_per_segment} GPUs, but {} holds at most \
                 {max_segments} segments (--asw-per-psw {} / {divisor}), i.e. at most {} GPUs",
                p.gpus,
                t.kind(),
                p.asw_per_psw,
                max_segments * gpus_per_segment
            ),
        ));
    }
    let side_asws = segments * asw_per_side as u64;
    let asws = side_asws * tors_per_nic as u64;
    let servers = (p.gpus / gps) as u64;
    let nvs = servers.saturating_mul(nsps as u64);
    let nodes = (p.gpus as u64 + asws + p.psw as u64).saturating_add(nvs);
    if nodes > crate::fat_tree::MAX_NODES {
        return Err(TopoError::param(
            "--gpus",
            format!("{nodes} nodes exceed the supported size"),
        ));
    }
    // Dual plane: SimAI fills plane 1 with ceil(psw/2) PSWs and plane 2 with the rest.
    let dual_plane = t == SimaiTemplate::HpnDualPlane;
    let psw_plane1 = if dual_plane { p.psw.div_ceil(2) } else { p.psw };

    let mut b = TopologyBuilder::new(t.kind()).gpu_info(&p.gpu_type, gps);
    let links = p.gpus as u64 * (nsps + tors_per_nic) as u64
        + if dual_plane {
            side_asws * p.psw as u64
        } else {
            asws * p.psw as u64
        };
    if links > crate::fat_tree::MAX_LINKS {
        return Err(TopoError::param(
            "--psw",
            format!(
                "{links} links exceed the supported {}",
                crate::fat_tree::MAX_LINKS
            ),
        ));
    }
    b.reserve(nodes as usize, links as usize)?;
    for i in 0..p.gpus {
        b.add_node(
            Role::Host,
            Coords {
                server: Some(i / gps),
                rail: Some(i % gps),
                segment: Some((i as u64 / gpus_per_segment) as u32),
                ..Coords::default()
            },
        );
    }
    let nv0 = b.node_count();
    for s in 0..nvs as u32 {
        let server = s / nsps;
        b.add_node(
            Role::NvSwitch,
            Coords {
                server: Some(server),
                segment: Some((server as u64 * gps as u64 / gpus_per_segment) as u32),
                ..Coords::default()
            },
        );
    }
    let asw0 = b.node_count();
    for side in 0..tors_per_nic {
        for x in 0..side_asws as u32 {
            b.add_node(
                Role::Tor,
                Coords {
                    segment: Some(x / asw_per_side),
                    rail: t.rail_optimized().then_some(x % asw_per_side),
                    plane: dual_plane.then_some(side),
                    ..Coords::default()
                },
            );
        }
    }
    let psw0 = b.node_count();
    for x in 0..p.psw {
        b.add_node(
            Role::Core,
            Coords {
                plane: dual_plane.then_some(u32::from(x >= psw_plane1)),
                ..Coords::default()
            },
        );
    }
    for i in 0..p.gpus {
        let server = i / gps;
        for j in 0..nsps {
            b.add_link(
                i,
                nv0 + server * nsps + j,
                p.nvlink_bps,
                p.nvlink_latency_ps,
            );
        }
        let segment = (i as u64 / gpus_per_segment) as u32;
        let within = if t.rail_optimized() { i % gps } else { 0 };
        for side in 0..tors_per_nic {
            let asw = asw0 + side * side_asws as u32 + segment * asw_per_side + within;
            b.add_link(i, asw, p.nic_bps, p.latency_ps);
        }
    }
    for side in 0..tors_per_nic {
        let (lo, hi) = match (dual_plane, side) {
            (false, _) => (0, p.psw),
            (true, 0) => (0, psw_plane1),
            (true, _) => (psw_plane1, p.psw),
        };
        for x in 0..side_asws as u32 {
            for y in lo..hi {
                b.add_link(
                    asw0 + side * side_asws as u32 + x,
                    psw0 + y,
                    p.asw_psw_bps,
                    p.latency_ps,
                );
            }
        }
    }
    b.finish()
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

/// Writes `topo` in SimAI's text format. NVSwitches are listed first on line 2, then the
/// other switches, each in id order; links keep their order and their error rates.
pub fn write_simai(topo: &Topology, w: &mut impl Write) -> io::Result<()> {
    let nv: Vec<NodeIndex> = (0..topo.node_count())
        .filter(|&n| topo.role(n) == Role::NvSwitch)
        .collect();
    let other: Vec<NodeIndex> = (topo.host_count()..topo.node_count())
        .filter(|&n| topo.role(n) != Role::NvSwitch)
        .collect();
    writeln!(
        w,
        "{} {} {} {} {} {}",
        topo.node_count(),
        topo.gpus_per_server(),
        nv.len(),
        other.len(),
        topo.link_count(),
        topo.gpu_type()
    )?;
    for n in nv.iter().chain(&other) {
        write!(w, "{n} ")?;
    }
    writeln!(w)?;
    for (i, l) in topo.links().iter().enumerate() {
        writeln!(
            w,
            "{} {} {}Gbps {}ms {}",
            l.a,
            l.b,
            format_decimal(l.bandwidth_bps, 9),
            format_decimal(l.latency_ps, 9),
            topo.link_error_rate(i as LinkIndex)
        )?;
    }
    Ok(())
}

/// `topo` in SimAI's text format, as a string.
pub fn to_simai_string(topo: &Topology) -> String {
    let mut v = Vec::new();
    write_simai(topo, &mut v).expect("writing to a Vec cannot fail");
    String::from_utf8(v).expect("the SimAI writer emits ASCII")
}

/// Reads a SimAI-format topology file (see [`parse_simai`]).
pub fn read_file(path: &Path) -> Result<Topology, TopoError> {
    let text = std::fs::read_to_string(path).map_err(|source| TopoError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_simai(&text, &path.display().to_string())
}

/// Parses SimAI's topology text format with strict validation; `origin` names the source
/// in error messages. NVSwitches are the first `nvswitch_num` ids of line 2; the other
/// switches become ToRs if they link to a GPU, and otherwise aggregation or core switches
/// by their distance from the GPUs (2 hops: core when nothing is further away).
pub fn parse_simai(text: &str, origin: &str) -> Result<Topology, TopoError> {
    let err = |line: usize, field: &'static str, message: String| TopoError::Parse {
        path: origin.to_string(),
        line,
        field,
        message,
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, header) = lines
        .next()
        .ok_or_else(|| err(1, "header", "empty file".into()))?;
    let h: Vec<&str> = header.split_whitespace().collect();
    if h.len() != 6 {
        return Err(err(
            1,
            "header",
            format!(
                "expected 6 fields `node_num gpus_per_server nvswitch_num switch_num link_num gpu_type`, found {}",
                h.len()
            ),
        ));
    }
    let num = |i: usize, field: &'static str| -> Result<u32, TopoError> {
        h[i].parse::<u32>().map_err(|_| {
            err(
                1,
                field,
                format!("`{}` is not a non-negative integer", h[i]),
            )
        })
    };
    let node_num = num(0, "node_num")?;
    let gps = num(1, "gpus_per_server")?;
    let nv_num = num(2, "nvswitch_num")?;
    let sw_num = num(3, "switch_num")?;
    let link_num = num(4, "link_num")?;
    let gpu_type = h[5];
    if gps == 0 {
        return Err(err(1, "gpus_per_server", "must be >= 1".into()));
    }
    if node_num as u64 > crate::fat_tree::MAX_NODES {
        return Err(err(
            1,
            "node_num",
            format!("{node_num} nodes exceed the supported size"),
        ));
    }
    let switches = nv_num as u64 + sw_num as u64;
    if switches >= node_num as u64 {
        return Err(err(
            1,
            "node_num",
            format!(
                "{node_num} nodes leave no GPU after {nv_num} NVSwitches and {sw_num} switches"
            ),
        ));
    }
    let gpus = node_num - switches as u32;

    let (ln, ids) = lines
        .next()
        .ok_or_else(|| err(2, "switch_id", "missing the line of switch ids".into()))?;
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if ids.len() as u64 != switches {
        return Err(err(
            ln,
            "switch_id",
            format!(
                "expected {switches} switch ids (nvswitch_num {nv_num} + switch_num {sw_num}), found {}",
                ids.len()
            ),
        ));
    }
    let mut role = vec![None; node_num as usize];
    for (i, tok) in ids.iter().enumerate() {
        let id: u32 = tok
            .parse()
            .map_err(|_| err(ln, "switch_id", format!("`{tok}` is not a node id")))?;
        if id >= node_num {
            return Err(err(
                ln,
                "switch_id",
                format!("node {id} does not exist (node_num = {node_num})"),
            ));
        }
        if id < gpus {
            return Err(err(
                ln,
                "switch_id",
                format!(
                    "switch {id} is below the GPU count {gpus}; SimAI numbers GPUs 0..{gpus} first"
                ),
            ));
        }
        if role[id as usize].is_some() {
            return Err(err(ln, "switch_id", format!("switch {id} is listed twice")));
        }
        role[id as usize] = Some(if (i as u32) < nv_num {
            Role::NvSwitch
        } else {
            Role::Tor
        });
    }

    // The header is untrusted: reserve at most a modest amount up front.
    let mut links = Vec::with_capacity((link_num as usize).min(1 << 20));
    let mut error_rates = Vec::with_capacity(links.capacity());
    for (ln, line) in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if links.len() as u64 == link_num as u64 {
            return Err(err(
                ln,
                "link_num",
                format!("more link lines than link_num = {link_num} on line 1"),
            ));
        }
        if f.len() != 5 {
            return Err(err(
                ln,
                "link",
                format!(
                    "expected 5 fields `src dst bandwidth latency error_rate`, found {}",
                    f.len()
                ),
            ));
        }
        let node = |tok: &str, field: &'static str| -> Result<u32, TopoError> {
            let id: u32 = tok
                .parse()
                .map_err(|_| err(ln, field, format!("`{tok}` is not a node id")))?;
            if id >= node_num {
                return Err(err(
                    ln,
                    field,
                    format!("node {id} does not exist (node_num = {node_num})"),
                ));
            }
            Ok(id)
        };
        let a = node(f[0], "src")?;
        let b = node(f[1], "dst")?;
        if a == b {
            return Err(err(ln, "dst", format!("link from node {a} to itself")));
        }
        if a < gpus && b < gpus {
            return Err(err(
                ln,
                "dst",
                format!("link between GPUs {a} and {b}; GPUs attach only to switches"),
            ));
        }
        let bw = parse_bandwidth_bps(f[2]).map_err(|m| err(ln, "bandwidth", m))?;
        let lat = parse_latency_ps(f[3]).map_err(|m| err(ln, "latency", m))?;
        let error_rate = match f[4].parse::<f64>() {
            Ok(r) if (0.0..1.0).contains(&r) => r,
            Ok(_) => {
                return Err(err(
                    ln,
                    "error_rate",
                    format!("`{}` is outside [0, 1)", f[4]),
                ))
            }
            Err(_) => return Err(err(ln, "error_rate", format!("`{}` is not a number", f[4]))),
        };
        error_rates.push(error_rate);
        links.push((a, b, bw, lat));
    }
    if links.len() as u64 != link_num as u64 {
        return Err(err(
            1,
            "link_num",
            format!("header says {link_num} links, the file has {}", links.len()),
        ));
    }

    classify_switches(&mut role, gpus, &links);
    let mut b = TopologyBuilder::new("simai").gpu_info(gpu_type, gps);
    b.reserve(node_num as usize, links.len())?;
    let mut nv_server = vec![None; node_num as usize];
    for &(a, x, _, _) in &links {
        for (s, g) in [(a, x), (x, a)] {
            if role[s as usize] == Some(Role::NvSwitch) && g < gpus {
                let server = g / gps;
                let slot = &mut nv_server[s as usize];
                *slot = Some(slot.map_or(server, |v: u32| v.min(server)));
            }
        }
    }
    for n in 0..node_num {
        let coords = if n < gpus {
            Coords {
                server: Some(n / gps),
                rail: Some(n % gps),
                ..Coords::default()
            }
        } else {
            Coords {
                server: nv_server[n as usize],
                ..Coords::default()
            }
        };
        b.add_node(role[n as usize].unwrap_or(Role::Host), coords);
    }
    for (a, x, bw, lat) in links {
        b.add_link(a, x, bw, lat);
    }
    let mut topo = b.finish()?;
    topo.set_link_error_rates(error_rates);
    Ok(topo)
}

/// Gives non-NVSwitch switches a tier by hop distance from the GPUs over such switches:
/// 1 is a ToR; with nothing beyond 2, tier 2 is core (SimAI's PSW); otherwise tier 2 is
/// aggregation and 3+ is core. Switches no GPU reaches become core.
fn classify_switches(role: &mut [Option<Role>], gpus: u32, links: &[(u32, u32, u64, u64)]) {
    let n = role.len();
    let mut adj_off = vec![0u32; n + 1];
    let fabric = |x: u32| matches!(role[x as usize], Some(Role::Tor));
    for &(a, b, _, _) in links {
        adj_off[a as usize + 1] += 1;
        adj_off[b as usize + 1] += 1;
    }
    for i in 0..n {
        adj_off[i + 1] += adj_off[i];
    }
    let mut fill = adj_off.clone();
    let mut adj = vec![0u32; adj_off[n] as usize];
    for &(a, b, _, _) in links {
        adj[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
        adj[fill[b as usize] as usize] = a;
        fill[b as usize] += 1;
    }
    let mut level = vec![u32::MAX; n];
    let mut frontier: Vec<u32> = Vec::new();
    for g in 0..gpus {
        for &x in &adj[adj_off[g as usize] as usize..adj_off[g as usize + 1] as usize] {
            if fabric(x) && level[x as usize] == u32::MAX {
                level[x as usize] = 1;
                frontier.push(x);
            }
        }
    }
    let mut depth = 1;
    let mut max_level = if frontier.is_empty() { 0 } else { 1 };
    while !frontier.is_empty() {
        depth += 1;
        let mut next = Vec::new();
        for &s in &frontier {
            for &x in &adj[adj_off[s as usize] as usize..adj_off[s as usize + 1] as usize] {
                if fabric(x) && level[x as usize] == u32::MAX {
                    level[x as usize] = depth;
                    next.push(x);
                }
            }
        }
        if !next.is_empty() {
            max_level = depth;
        }
        frontier = next;
    }
    for (i, r) in role.iter_mut().enumerate() {
        if *r == Some(Role::Tor) {
            *r = Some(match level[i] {
                1 => Role::Tor,
                2 if max_level == 2 => Role::Core,
                2 => Role::Agg,
                _ => Role::Core,
            });
        }
    }
}

/// The SimAI header line (`node_num gpus_per_server nvswitch_num switch_num link_num
/// gpu_type`) of `topo`, without the newline.
pub fn simai_header(topo: &Topology) -> String {
    let nv = topo.count_role(Role::NvSwitch);
    format!(
        "{} {} {} {} {} {}",
        topo.node_count(),
        topo.gpus_per_server(),
        nv,
        topo.node_count() - topo.host_count() - nv,
        topo.link_count(),
        topo.gpu_type()
    )
}
