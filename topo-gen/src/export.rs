//! Writing topologies to files (SimAI text, JSON) without ever leaving a partial file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

use crate::error::TopoError;
use crate::graph::Topology;

/// An export format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// SimAI's topology text format.
    Simai,
    /// `{"nodes":[{"id","role",...coordinates}],"links":[{"a","b","bandwidth_bps","latency_ps"}]}`.
    Json,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "simai" => Ok(Format::Simai),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown format `{s}`; expected simai or json")),
        }
    }
}

#[derive(Serialize)]
struct JsonNode {
    id: u32,
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pod: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    segment: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rail: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plane: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<u32>,
}

#[derive(Serialize)]
struct JsonLink {
    a: u32,
    b: u32,
    bandwidth_bps: u64,
    latency_ps: u64,
}

#[derive(Serialize)]
struct JsonTopology<'a> {
    kind: &'a str,
    gpu_type: &'a str,
    gpus_per_server: u32,
    nodes: Vec<JsonNode>,
    links: Vec<JsonLink>,
}

/// Writes `topo` as JSON (nodes with their role and the coordinates they have, then links).
pub fn write_json(topo: &Topology, w: &mut impl Write) -> io::Result<()> {
    let doc = JsonTopology {
        kind: topo.kind(),
        gpu_type: topo.gpu_type(),
        gpus_per_server: topo.gpus_per_server(),
        nodes: topo
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, n)| JsonNode {
                id: i as u32,
                role: n.role.name(),
                pod: n.coords.pod,
                group: n.coords.group,
                segment: n.coords.segment,
                rail: n.coords.rail,
                plane: n.coords.plane,
                server: n.coords.server,
            })
            .collect(),
        links: topo
            .links()
            .iter()
            .map(|l| JsonLink {
                a: l.a,
                b: l.b,
                bandwidth_bps: l.bandwidth_bps,
                latency_ps: l.latency_ps,
            })
            .collect(),
    };
    serde_json::to_writer(&mut *w, &doc).map_err(io::Error::from)?;
    writeln!(w)
}

/// Writes `topo` to `path` in `format`: first to a temporary file beside it, then renamed
/// into place, so a failure never leaves a partial file under `path`.
pub fn export(topo: &Topology, format: Format, path: &Path) -> Result<(), TopoError> {
    write_atomically(path, |w| match format {
        Format::Simai => crate::simai::write_simai(topo, w),
        Format::Json => write_json(topo, w),
    })
}

/// Runs `body` on a buffered temporary file next to `path` and renames it to `path` on
/// success; on failure the temporary file is removed.
pub fn write_atomically(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), TopoError> {
    let io_err = |p: &Path, source| TopoError::Io {
        path: p.to_path_buf(),
        source,
    };
    let tmp = temp_path(path);
    let result = (|| {
        let f = File::create(&tmp)?;
        let mut w = BufWriter::new(f);
        body(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()
    })();
    match result {
        Ok(()) => std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io_err(path, e)
        }),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(io_err(&tmp, e))
        }
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}
