//! SimAI compatibility: its topology text format (import and export); the
//! rail-optimized / DCN+ templates of SimAI's `gen_Topo_Template.py` are in
//! [`template`].
//!
//! The format: line 1 is `node_num gpus_per_server nvswitch_num switch_num link_num
//! gpu_type`; line 2 lists the NVSwitch ids, then the other switch ids, each followed by a
//! space; then one `src dst <bw>Gbps <lat>ms <error_rate>` line per link. GPUs are the
//! nodes not listed on line 2, and SimAI numbers them `0..gpu_num` first.

pub mod template;

use std::io::{self, Write};
use std::path::Path;

use crate::error::TopoError;
use crate::graph::{Coords, LinkIndex, NodeIndex, Role, Topology, TopologyBuilder};
use crate::units::{format_decimal, parse_bandwidth_bps, parse_latency_ps};

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
    let at = Origin(origin);
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, header) = lines
        .next()
        .ok_or_else(|| at.err(1, "header", "empty file".into()))?;
    let h = FileHeader::parse(header, &at)?;
    let (ln, ids) = lines
        .next()
        .ok_or_else(|| at.err(2, "switch_id", "missing the line of switch ids".into()))?;
    let mut role = switch_roles(ln, ids, &h, &at)?;
    // The header is untrusted: reserve at most a modest amount up front.
    let mut links = Vec::with_capacity((h.link_num as usize).min(1 << 20));
    let mut error_rates = Vec::with_capacity(links.capacity());
    for (ln, line) in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if links.len() as u64 == h.link_num as u64 {
            return Err(at.err(
                ln,
                "link_num",
                format!("more link lines than link_num = {} on line 1", h.link_num),
            ));
        }
        let (link, error_rate) = parse_link(ln, &f, &h, &at)?;
        error_rates.push(error_rate);
        links.push(link);
    }
    if links.len() as u64 != h.link_num as u64 {
        return Err(at.err(
            1,
            "link_num",
            format!(
                "header says {} links, the file has {}",
                h.link_num,
                links.len()
            ),
        ));
    }
    classify_switches(&mut role, h.gpus, &links);
    let mut topo = assemble(&h, &role, links)?;
    topo.set_link_error_rates(error_rates);
    Ok(topo)
}

/// A link line's `(src, dst, bandwidth_bps, latency_ps)`.
type LinkLine = (u32, u32, u64, u64);

/// Names the file in parse errors.
struct Origin<'a>(&'a str);

impl Origin<'_> {
    fn err(&self, line: usize, field: &'static str, message: String) -> TopoError {
        TopoError::Parse {
            path: self.0.to_string(),
            line,
            field,
            message,
        }
    }
}

/// Line 1 of a SimAI topology file.
struct FileHeader<'t> {
    node_num: u32,
    /// GPUs per server, at least 1.
    gps: u32,
    nv_num: u32,
    sw_num: u32,
    link_num: u32,
    gpu_type: &'t str,
    /// The nodes that are not switches: `0..gpus`.
    gpus: u32,
}

impl<'t> FileHeader<'t> {
    /// `node_num gpus_per_server nvswitch_num switch_num link_num gpu_type`.
    fn parse(header: &'t str, at: &Origin<'_>) -> Result<FileHeader<'t>, TopoError> {
        let h: Vec<&str> = header.split_whitespace().collect();
        if h.len() != 6 {
            return Err(at.err(
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
                at.err(
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
        if gps == 0 {
            return Err(at.err(1, "gpus_per_server", "must be >= 1".into()));
        }
        if node_num as u64 > crate::fat_tree::MAX_NODES {
            return Err(at.err(
                1,
                "node_num",
                format!("{node_num} nodes exceed the supported size"),
            ));
        }
        let switches = nv_num as u64 + sw_num as u64;
        if switches >= node_num as u64 {
            return Err(at.err(
                1,
                "node_num",
                format!(
                    "{node_num} nodes leave no GPU after {nv_num} NVSwitches and {sw_num} switches"
                ),
            ));
        }
        Ok(FileHeader {
            node_num,
            gps,
            nv_num,
            sw_num,
            link_num,
            gpu_type: h[5],
            gpus: node_num - switches as u32,
        })
    }
}

/// Line 2 (number `ln`): each node's role, NVSwitch or switch (a ToR until
/// [`classify_switches`]) for the ids listed, `None` for the GPUs.
fn switch_roles(
    ln: usize,
    ids: &str,
    h: &FileHeader<'_>,
    at: &Origin<'_>,
) -> Result<Vec<Option<Role>>, TopoError> {
    let (node_num, gpus) = (h.node_num, h.gpus);
    let switches = h.nv_num as u64 + h.sw_num as u64;
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if ids.len() as u64 != switches {
        return Err(at.err(
            ln,
            "switch_id",
            format!(
                "expected {switches} switch ids (nvswitch_num {} + switch_num {}), found {}",
                h.nv_num,
                h.sw_num,
                ids.len()
            ),
        ));
    }
    let mut role = vec![None; node_num as usize];
    for (i, tok) in ids.iter().enumerate() {
        let id: u32 = tok
            .parse()
            .map_err(|_| at.err(ln, "switch_id", format!("`{tok}` is not a node id")))?;
        if id >= node_num {
            return Err(at.err(
                ln,
                "switch_id",
                format!("node {id} does not exist (node_num = {node_num})"),
            ));
        }
        if id < gpus {
            return Err(at.err(
                ln,
                "switch_id",
                format!(
                    "switch {id} is below the GPU count {gpus}; SimAI numbers GPUs 0..{gpus} first"
                ),
            ));
        }
        if role[id as usize].is_some() {
            return Err(at.err(ln, "switch_id", format!("switch {id} is listed twice")));
        }
        role[id as usize] = Some(if (i as u32) < h.nv_num {
            Role::NvSwitch
        } else {
            Role::Tor
        });
    }
    Ok(role)
}

/// A link line (number `ln`, fields `f`): `(src, dst, bandwidth_bps,
/// latency_ps)` and its error rate.
fn parse_link(
    ln: usize,
    f: &[&str],
    h: &FileHeader<'_>,
    at: &Origin<'_>,
) -> Result<(LinkLine, f64), TopoError> {
    if f.len() != 5 {
        return Err(at.err(
            ln,
            "link",
            format!(
                "expected 5 fields `src dst bandwidth latency error_rate`, found {}",
                f.len()
            ),
        ));
    }
    let node_num = h.node_num;
    let node = |tok: &str, field: &'static str| -> Result<u32, TopoError> {
        let id: u32 = tok
            .parse()
            .map_err(|_| at.err(ln, field, format!("`{tok}` is not a node id")))?;
        if id >= node_num {
            return Err(at.err(
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
        return Err(at.err(ln, "dst", format!("link from node {a} to itself")));
    }
    if a < h.gpus && b < h.gpus {
        return Err(at.err(
            ln,
            "dst",
            format!("link between GPUs {a} and {b}; GPUs attach only to switches"),
        ));
    }
    let bw = parse_bandwidth_bps(f[2]).map_err(|m| at.err(ln, "bandwidth", m))?;
    let lat = parse_latency_ps(f[3]).map_err(|m| at.err(ln, "latency", m))?;
    let error_rate = match f[4].parse::<f64>() {
        Ok(r) if (0.0..1.0).contains(&r) => r,
        Ok(_) => return Err(at.err(ln, "error_rate", format!("`{}` is outside [0, 1)", f[4]))),
        Err(_) => return Err(at.err(ln, "error_rate", format!("`{}` is not a number", f[4]))),
    };
    Ok(((a, b, bw, lat), error_rate))
}

/// The topology of the file's nodes (`role`; GPUs by server and rail,
/// each NVSwitch on the lowest server it links to) and `links`, in order.
fn assemble(
    h: &FileHeader<'_>,
    role: &[Option<Role>],
    links: Vec<LinkLine>,
) -> Result<Topology, TopoError> {
    let (node_num, gpus, gps) = (h.node_num, h.gpus, h.gps);
    let mut b = TopologyBuilder::new("simai").gpu_info(h.gpu_type, gps);
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
    b.finish()
}

/// Gives non-NVSwitch switches a tier by hop distance from the GPUs over such switches:
/// 1 is a ToR; with nothing beyond 2, tier 2 is core (SimAI's PSW); otherwise tier 2 is
/// aggregation and 3+ is core. Switches no GPU reaches become core.
fn classify_switches(role: &mut [Option<Role>], gpus: u32, links: &[LinkLine]) {
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
