//! Traffic: flows `(src, dst, size, start)`, generators, and htsim's
//! connection-matrix files.
//!
//! Hosts are numbered `0..hosts` as the topology numbers them (fat-tree:
//! left to right, consecutive hosts under the same ToR).

use netsim_engine::{NodeId, NodeRng, SimTime};
use std::path::Path;

/// One flow to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub start: SimTime,
}

/// A traffic pattern.
#[derive(Clone, Debug, PartialEq)]
pub enum TrafficPattern {
    /// Every host sends one flow to a distinct host, none to itself.
    Permutation,
    /// Every host sends `flows_per_host` flows to uniformly random other hosts.
    Uniform { flows_per_host: u32 },
    /// `degree` hosts (1..=degree) send to host 0.
    Incast { degree: u32 },
    /// Every host sends to every other host.
    AllToAll,
}

/// Bad traffic input: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrafficError {
    /// A connection matrix is malformed at `line` (0: the file as a whole).
    #[error("{path}{}: {message}", at_line(*line))]
    File {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// `:N` for line N, nothing for the file as a whole.
fn at_line(line: usize) -> String {
    match line {
        0 => String::new(),
        n => format!(":{n}"),
    }
}

/// Flows of `pattern` over `hosts` hosts, each of `size_bytes`, all starting
/// at time zero. Random choices come from a stream derived from `seed`.
pub fn generate(
    pattern: &TrafficPattern,
    hosts: u32,
    size_bytes: u64,
    seed: u64,
) -> Result<Vec<FlowSpec>, TrafficError> {
    if size_bytes == 0 {
        return Err(TrafficError::Invalid(
            "--flow-size: must be positive".into(),
        ));
    }
    if hosts < 2 {
        return Err(TrafficError::Invalid(format!(
            "--traffic: needs at least two hosts, the topology has {hosts}"
        )));
    }
    // A stream no node uses: traffic is drawn before the run, not by a node.
    let mut rng = NodeRng::new(seed ^ 0x7472_6166_6669_6300, NodeId(u32::MAX));
    let flow = |src, dst| FlowSpec {
        src,
        dst,
        size_bytes,
        start: SimTime::ZERO,
    };
    let flows = match *pattern {
        TrafficPattern::Permutation => {
            // Sattolo's algorithm: a uniformly random cyclic permutation, so
            // no host is mapped to itself.
            let mut dst: Vec<u32> = (0..hosts).collect();
            for i in (1..hosts as usize).rev() {
                let j = rng.below(i as u64) as usize;
                dst.swap(i, j);
            }
            (0..hosts).map(|s| flow(s, dst[s as usize])).collect()
        }
        TrafficPattern::Uniform { flows_per_host } => {
            let mut flows = Vec::with_capacity((hosts * flows_per_host) as usize);
            for s in 0..hosts {
                for _ in 0..flows_per_host {
                    let d = (s + 1 + rng.below(u64::from(hosts - 1)) as u32) % hosts;
                    flows.push(flow(s, d));
                }
            }
            flows
        }
        TrafficPattern::Incast { degree } => {
            if degree == 0 || degree >= hosts {
                return Err(TrafficError::Invalid(format!(
                    "--incast-degree: {degree} senders need 1..={} with {hosts} hosts",
                    hosts - 1
                )));
            }
            (1..=degree).map(|s| flow(s, 0)).collect()
        }
        TrafficPattern::AllToAll => (0..hosts)
            .flat_map(|s| (0..hosts).filter(move |&d| d != s).map(move |d| (s, d)))
            .map(|(s, d)| flow(s, d))
            .collect(),
    };
    Ok(flows)
}

/// Reads an htsim connection matrix:
///
/// ```text
/// Nodes 16
/// Connections 2
/// # comment
/// 0->5 id 1 start 0 size 2000000
/// 3->5 start 12.5 size 1000000
/// ```
///
/// `start` is in microseconds (fractions allowed), `size` in bytes. Tokens
/// htsim knows but netsim does not model (triggers, priorities, ...) are
/// rejected by name rather than ignored.
pub fn read_connection_matrix(path: &Path, hosts: u32) -> Result<Vec<FlowSpec>, TrafficError> {
    let display = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| TrafficError::File {
        path: display.clone(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse_connection_matrix(&text, &display, hosts)
}

/// Parses connection-matrix text; `path` only names it in errors.
pub fn parse_connection_matrix(
    text: &str,
    path: &str,
    hosts: u32,
) -> Result<Vec<FlowSpec>, TrafficError> {
    let err = |line: usize, message: String| TrafficError::File {
        path: path.to_string(),
        line,
        message,
    };
    let mut nodes: Option<u32> = None;
    let mut connections: Option<(u64, usize)> = None;
    let mut flows = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let tokens: Vec<&str> = content.split_whitespace().collect();
        match tokens[0] {
            "Nodes" | "Connections" => {
                let value = tokens
                    .get(1)
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|_| tokens.len() == 2)
                    .ok_or_else(|| err(line, format!("`{}` needs one integer", tokens[0])))?;
                if tokens[0] == "Nodes" {
                    if value > u64::from(hosts) {
                        return Err(err(
                            line,
                            format!("Nodes {value} exceeds the topology's {hosts} hosts"),
                        ));
                    }
                    nodes = Some(value as u32);
                } else {
                    connections = Some((value, line));
                }
            }
            "Triggers" | "Failures" => {
                return Err(err(
                    line,
                    format!("`{}` is not modelled by netsim", tokens[0]),
                ))
            }
            _ => flows.push(connection(&tokens, nodes.unwrap_or(hosts)).map_err(|m| err(line, m))?),
        }
    }
    if let Some((expected, line)) = connections {
        if expected != flows.len() as u64 {
            return Err(err(
                line,
                format!(
                    "header says Connections {expected}, the file lists {}",
                    flows.len()
                ),
            ));
        }
    }
    if flows.is_empty() {
        return Err(err(0, "no connections".into()));
    }
    Ok(flows)
}

/// One `src->dst [id N] [start US] size BYTES` line of a connection
/// matrix, split into `tokens`, between hosts below `limit`.
fn connection(tokens: &[&str], limit: u32) -> Result<FlowSpec, String> {
    let first = tokens[0];
    let Some((src, dst)) = first.split_once("->") else {
        return Err(format!("expected `src->dst`, found `{first}`"));
    };
    let host = |field: &str, s: &str| -> Result<u32, String> {
        let h: u32 = s
            .parse()
            .map_err(|_| format!("{field} `{s}` is not a host number"))?;
        if h >= limit {
            return Err(format!("{field} {h} is not a host (0..{limit})"));
        }
        Ok(h)
    };
    let (src, dst) = (host("src", src)?, host("dst", dst)?);
    if src == dst {
        return Err(format!("flow from host {src} to itself"));
    }
    let mut start = None;
    let mut size = None;
    let mut rest = tokens[1..].iter();
    while let Some(&key) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("`{key}` has no value"))?;
        match key {
            "id" => {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("id `{value}` is not an integer"))?;
            }
            "start" => start = Some(connection_start(value)?),
            "size" => {
                let bytes: u64 =
                    value.parse().ok().filter(|&b| b > 0).ok_or_else(|| {
                        format!("size `{value}` is not a positive number of bytes")
                    })?;
                size = Some(bytes);
            }
            other => return Err(format!("token `{other}` is not modelled by netsim")),
        }
    }
    Ok(FlowSpec {
        src,
        dst,
        size_bytes: size.ok_or("missing `size`")?,
        start: start.unwrap_or(SimTime::ZERO),
    })
}

/// A connection's `start`: non-negative microseconds.
fn connection_start(value: &str) -> Result<SimTime, String> {
    let us: f64 = value
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("start `{value}` is not a non-negative number of microseconds"))?;
    SimTime::try_from_f64(us, 1e6, "us").map_err(|e| format!("start: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_derangement() {
        let flows = generate(&TrafficPattern::Permutation, 64, 1000, 3).unwrap();
        let mut seen = [false; 64];
        for f in &flows {
            assert_ne!(f.src, f.dst);
            assert!(!seen[f.dst as usize]);
            seen[f.dst as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn connection_matrix_parses_and_rejects() {
        let text =
            "Nodes 8\nConnections 2\n# c\n0->5 id 1 start 0 size 2000\n3->5 start 12.5 size 10\n";
        let flows = parse_connection_matrix(text, "cm", 8).unwrap();
        assert_eq!(flows[1].start, SimTime(12_500_000));
        assert_eq!(flows[0].size_bytes, 2000);
        let bad = |t: &str| parse_connection_matrix(t, "cm", 8).unwrap_err().to_string();
        assert!(bad("0->9 size 1\n").contains("cm:1: dst 9"));
        assert!(bad("0->1 size 0\n").contains("size `0`"));
        assert!(bad("0->1 size 5 priority 3\n").contains("`priority` is not modelled"));
        assert!(bad("Connections 3\n0->1 size 5\n").contains("Connections 3"));
        assert!(bad("0-1 size 5\n").contains("cm:1: expected `src->dst`"));
    }
}
