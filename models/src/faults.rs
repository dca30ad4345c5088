//! Faults a run injects at given times: links and nodes that fail and
//! recover, links that slow down. Read from `KIND:TARGET@TIME[=VALUE]` specs
//! (`--fault`, a scenario's `[[fault]]`) and from faults files (netsim specs
//! and SimAI's `LINK_DOWN <time_us> <node> <node>` lines), and checked
//! against the topology. What the network does with them is
//! `network::faults`.

use netsim_engine::SimTime;
use netsim_topo::units::{parse_decimal, parse_gbps};
use netsim_topo::Topology;

/// No second node: the fault concerns one node.
pub const NO_PEER: u32 = u32::MAX;

/// What happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// Every link between two nodes fails: what is on it or queued for it is lost.
    LinkDown,
    /// Those links work again.
    LinkUp,
    /// A switch or host fails: every link of it fails.
    NodeDown,
    /// The node works again.
    NodeUp,
    /// The links between two nodes run at a new rate (degraded optics).
    LinkRate,
}

impl FaultKind {
    /// The name used in specs and in the `faults` table.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::LinkDown => "link-down",
            FaultKind::LinkUp => "link-up",
            FaultKind::NodeDown => "node-down",
            FaultKind::NodeUp => "node-up",
            FaultKind::LinkRate => "link-rate",
        }
    }

    /// Whether the fault concerns the links between two nodes.
    pub fn is_link(self) -> bool {
        matches!(
            self,
            FaultKind::LinkDown | FaultKind::LinkUp | FaultKind::LinkRate
        )
    }

    /// Whether the fault changes which links work (and so the routes).
    pub fn changes_routes(self) -> bool {
        self != FaultKind::LinkRate
    }

    fn parse(s: &str) -> Option<FaultKind> {
        [
            FaultKind::LinkDown,
            FaultKind::LinkUp,
            FaultKind::NodeDown,
            FaultKind::NodeUp,
            FaultKind::LinkRate,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// One fault: at `time`, `kind` happens to node `a` or to the links between
/// `a` and `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub time: SimTime,
    pub kind: FaultKind,
    /// The node, or one end of the links.
    pub a: u32,
    /// The other end of the links; [`NO_PEER`] for a node fault.
    pub b: u32,
    /// `link-rate`: the new rate; 0 otherwise.
    pub rate_bps: u64,
    /// A link fault of the direction from `a` to `b` alone (`A->B`): a
    /// degraded or dead transmitter, with the way back intact.
    pub one_way: bool,
}

impl Fault {
    /// `A-B` (`A->B` one way) for a link fault, `N` for a node fault.
    pub fn target(&self) -> String {
        if self.one_way {
            format!("{}->{}", self.a, self.b)
        } else if self.kind.is_link() {
            format!("{}-{}", self.a, self.b)
        } else {
            self.a.to_string()
        }
    }

    /// Whether the fault concerns the link direction (or port) from `node`
    /// to `peer`: a link fault between them (in that direction, for a
    /// one-way fault), or a node fault of either.
    #[inline]
    pub fn touches(&self, node: u32, peer: u32) -> bool {
        if self.one_way {
            node == self.a && peer == self.b
        } else if self.kind.is_link() {
            (node == self.a && peer == self.b) || (node == self.b && peer == self.a)
        } else {
            node == self.a || peer == self.a
        }
    }
}

/// A fault that does not parse or names what the topology lacks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FaultError {
    /// The part of the spec or line at fault: `kind`, `target`, `node`, `time`, `value`.
    pub field: &'static str,
    pub problem: String,
}

/// A faults file's line that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct FaultFileError {
    pub line: usize,
    pub error: FaultError,
}

fn bad(field: &'static str, problem: impl Into<String>) -> FaultError {
    FaultError {
        field,
        problem: problem.into(),
    }
}

/// Parses `KIND:TARGET@TIME[=VALUE]`: `link-down:4-17@50us`,
/// `node-down:20@1ms`, `link-rate:4-17@1ms=25` (Gb/s), and a link fault of
/// one direction, `link-rate:4->17@1ms=25`. Times take `ns`, `us` or `ms`.
/// The nodes must exist and, for a link fault, be linked.
pub fn parse_fault(spec: &str, topo: &Topology) -> Result<Fault, FaultError> {
    let spec = spec.trim();
    let (kind, rest) = spec
        .split_once(':')
        .ok_or_else(|| bad("kind", "expected KIND:TARGET@TIME[=VALUE]"))?;
    let kind = FaultKind::parse(kind).ok_or_else(|| {
        bad(
            "kind",
            format!("`{kind}` is not one of link-down, link-up, node-down, node-up, link-rate"),
        )
    })?;
    let (target, rest) = rest
        .split_once('@')
        .ok_or_else(|| bad("time", "missing `@TIME`"))?;
    let (time, value) = match rest.split_once('=') {
        Some((t, v)) => (t, Some(v)),
        None => (rest, None),
    };
    let time = parse_time(time)?;
    let one_way = kind.is_link() && target.contains("->");
    let (a, b) = if kind.is_link() {
        let (a, b) = target
            .split_once("->")
            .or_else(|| target.split_once('-'))
            .ok_or_else(|| {
                bad(
                    "target",
                    format!("`{target}` is not a link `A-B` or a direction `A->B`"),
                )
            })?;
        (parse_node(a, topo)?, parse_node(b, topo)?)
    } else {
        (parse_node(target, topo)?, NO_PEER)
    };
    let rate_bps = match (kind, value) {
        (FaultKind::LinkRate, Some(v)) => parse_gbps(v).map_err(|e| bad("value", e))?,
        (FaultKind::LinkRate, None) => {
            return Err(bad(
                "value",
                "link-rate needs `=GBPS` (the new rate in Gb/s)",
            ))
        }
        (_, Some(v)) => {
            return Err(bad(
                "value",
                format!("{} takes no value `={v}`", kind.name()),
            ))
        }
        (_, None) => 0,
    };
    let fault = Fault {
        time,
        kind,
        a,
        b,
        rate_bps,
        one_way,
    };
    check_link(&fault, topo)?;
    Ok(fault)
}

/// Parses a faults file: one fault per line, either a netsim spec
/// (`link-down:4-17@50us`) or SimAI's `LINK_DOWN <time_us> <node> <node>`
/// (`LINK_DOWN 0 0 0` means none, as in SimAI). Blank lines, `#` comments and
/// other `SimAI.conf` keys (upper-case words) are skipped, so a SimAI
/// configuration file can be given as it is.
pub fn parse_faults_file(text: &str, topo: &Topology) -> Result<Vec<Fault>, FaultFileError> {
    let mut faults = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let at = |error| FaultFileError { line: i + 1, error };
        let line = raw.split('#').next().unwrap_or("").trim();
        let Some(first) = line.split_whitespace().next() else {
            continue;
        };
        if first == "LINK_DOWN" {
            if let Some(f) = parse_simai_link_down(line, topo).map_err(at)? {
                faults.push(f);
            }
        } else if first
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
        {
            continue;
        } else {
            faults.push(parse_fault(line, topo).map_err(at)?);
        }
    }
    Ok(faults)
}

/// `LINK_DOWN <time_us> <a> <b>`; `None` for SimAI's "no failure" (time 0).
fn parse_simai_link_down(line: &str, topo: &Topology) -> Result<Option<Fault>, FaultError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 4 {
        return Err(bad(
            "LINK_DOWN",
            format!(
                "expected `LINK_DOWN <time_us> <node> <node>`, found {} fields",
                f.len()
            ),
        ));
    }
    let time_ps = parse_decimal(f[1], 6).ok_or_else(|| {
        bad(
            "time",
            format!("`{}` is not a number of microseconds", f[1]),
        )
    })?;
    if time_ps == 0 {
        return Ok(None);
    }
    let fault = Fault {
        time: SimTime(time_ps),
        kind: FaultKind::LinkDown,
        a: parse_node(f[2], topo)?,
        b: parse_node(f[3], topo)?,
        rate_bps: 0,
        one_way: false,
    };
    check_link(&fault, topo)?;
    Ok(Some(fault))
}

/// A time with its unit: `50us`, `2ms`, `1500ns`, `0.5us` (whole picoseconds).
fn parse_time(s: &str) -> Result<SimTime, FaultError> {
    let (number, exp) = if let Some(n) = s.strip_suffix("ns") {
        (n, 3)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 6)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 9)
    } else {
        return Err(bad("time", format!("`{s}` needs a unit: ns, us or ms")));
    };
    match parse_decimal(number, exp) {
        Some(ps) if ps < SimTime::MAX.as_ps() => Ok(SimTime(ps)),
        _ => Err(bad(
            "time",
            format!("`{s}` is not a time in whole picoseconds that fits the simulation"),
        )),
    }
}

fn parse_node(s: &str, topo: &Topology) -> Result<u32, FaultError> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| bad("node", format!("`{s}` is not a node id")))?;
    if n >= topo.node_count() {
        return Err(bad(
            "node",
            format!(
                "{n} is not a node (the topology has nodes 0..{})",
                topo.node_count()
            ),
        ));
    }
    Ok(n)
}

fn check_link(fault: &Fault, topo: &Topology) -> Result<(), FaultError> {
    if fault.kind.is_link() && !topo.ports(fault.a).iter().any(|p| p.peer == fault.b) {
        return Err(bad(
            "target",
            format!("there is no link between nodes {} and {}", fault.a, fault.b),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_topo::{FatTreeParams, TopoSpec};

    fn fat_tree() -> Topology {
        netsim_topo::build(&TopoSpec::FatTree(FatTreeParams {
            k: 4,
            ..FatTreeParams::default()
        }))
        .unwrap()
    }

    #[test]
    fn specs_parse_with_units_and_values() {
        let t = fat_tree();
        // k=4: hosts 0..16, edges 16..24, aggs 24..32, cores 32..36.
        let host = 0;
        let edge = t.port(host, 0).peer;
        let f = parse_fault(&format!("link-down:{host}-{edge}@50us"), &t).unwrap();
        assert_eq!(
            (f.time, f.kind, f.a, f.b),
            (SimTime::from_us(50), FaultKind::LinkDown, host, edge)
        );
        assert_eq!(f.target(), format!("{host}-{edge}"));
        let f = parse_fault(&format!("link-rate:{edge}-{host}@1.5ms=25"), &t).unwrap();
        assert_eq!(
            (f.time, f.rate_bps),
            (SimTime::from_us(1500), 25_000_000_000)
        );
        assert!(!f.one_way && f.touches(host, edge) && f.touches(edge, host));
        // One direction: the transmitter from `edge` toward `host` alone.
        let f = parse_fault(&format!("link-rate:{edge}->{host}@1us=25"), &t).unwrap();
        assert!(f.one_way && f.touches(edge, host) && !f.touches(host, edge));
        assert_eq!(f.target(), format!("{edge}->{host}"));
        let f = parse_fault("node-up:20@700ns", &t).unwrap();
        assert_eq!(
            (f.time, f.a, f.b, f.target()),
            (SimTime::from_ns(700), 20, NO_PEER, "20".to_string())
        );
    }

    #[test]
    fn bad_specs_name_the_field() {
        let t = fat_tree();
        let field = |s: &str| parse_fault(s, &t).unwrap_err().field;
        assert_eq!(field("link-dwn:0-16@1us"), "kind");
        assert_eq!(field("node-down:999@1us"), "node");
        assert_eq!(field("link-down:0-1@1us"), "target");
        assert_eq!(field("node-down:3@5"), "time");
        assert_eq!(field("node-down:3@-5us"), "time");
        assert_eq!(field("node-down:3"), "time");
        assert_eq!(field("link-rate:0-16@1us"), "value");
        assert_eq!(field("node-down:3@1us=4"), "value");
        assert_eq!(field("link-rate:0-16@1us=0"), "value");
    }

    #[test]
    fn simai_lines_and_specs_mix_in_a_file() {
        let t = fat_tree();
        let edge = t.port(0, 0).peer;
        let text = format!(
            "# faults\nENABLE_QCN 1\nLINK_DOWN 0 0 0\nLINK_DOWN 50 0 {edge}\n\nnode-down:20@1ms\n"
        );
        let faults = parse_faults_file(&text, &t).unwrap();
        assert_eq!(faults.len(), 2);
        assert_eq!(faults[0].time, SimTime::from_us(50));
        assert_eq!(faults[1].kind, FaultKind::NodeDown);
        let e = parse_faults_file("\nLINK_DOWN 5 0\n", &t).unwrap_err();
        assert_eq!((e.line, e.error.field), (2, "LINK_DOWN"));
        let e = parse_faults_file("LINK_DOWN 5 0 1\n", &t).unwrap_err();
        assert_eq!((e.line, e.error.field), (1, "target"));
    }
}
