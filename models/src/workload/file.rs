//! The workload file (TOML): phases of collectives and compute with their
//! dependencies, repeated for some iterations.
//!
//! ```toml
//! iterations = 2                  # optional, default 1
//! channels = 1                    # optional
//! host_overhead_ns = 1000         # optional, per message
//! switch_profile = "sharp"        # tofino | sharp
//! fallback = "ring"               # host all-reduce when offload is refused
//! [parallelism]                   # optional; dp fills the remaining hosts
//! tp = 8
//! pp = 1
//! ep = 1
//!
//! [[phase]]
//! name = "forward"
//! compute_us = 50                 # or compute_ns
//! [[phase]]
//! name = "gradients"
//! collective = "allreduce"        # allreduce allgather reducescatter alltoall broadcast reduce barrier
//! size = "64MiB"                  # bytes, or a string with B/KiB/MiB/GiB/KB/MB/GB
//! algo = "ina"                    # ring tree hd ina direct dissemination
//! group = "dp"                    # all tp dp pp ep dp_ep or a rank list "0-7,16"
//! dtype = "float32"               # int32 int64 float16 bfloat16 float32 float64
//! op = "sum"                      # sum min max
//! after = ["forward"]             # default: the phase before; [] for none
//! ```

mod phase;

use super::groups::Parallelism;
use super::offload::SwitchProfile;
use super::spec::{Algorithm, Phase, WorkloadSpec};
use netsim_engine::SimTime;
use phase::{phase, PhaseLocator};
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

/// Bad workload input: the file, line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct WorkloadFileError {
    pub path: String,
    pub line: usize,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    parallelism: Option<Spanned<ParallelismFile>>,
    iterations: Option<Spanned<u32>>,
    channels: Option<Spanned<u32>>,
    chunks: Option<Spanned<u32>>,
    host_overhead_ns: Option<u64>,
    switch_profile: Option<Spanned<String>>,
    fallback: Option<Spanned<String>>,
    #[serde(default)]
    phase: Vec<Spanned<PhaseFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParallelismFile {
    tp: Option<u32>,
    pp: Option<u32>,
    ep: Option<u32>,
    dp: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseFile {
    name: Spanned<String>,
    collective: Option<Spanned<String>>,
    compute_ns: Option<Spanned<u64>>,
    compute_us: Option<Spanned<f64>>,
    size: Option<Spanned<toml::Value>>,
    algo: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
    dtype: Option<Spanned<String>>,
    op: Option<Spanned<String>>,
    after: Option<Spanned<Vec<Spanned<String>>>>,
}

/// Reads and checks the workload file at `path` for a fabric of `hosts` hosts.
pub fn read(path: &Path, hosts: u32) -> Result<WorkloadSpec, WorkloadFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadFileError {
        path: path.display().to_string(),
        line: 0,
        message: format!("cannot read workload file: {e}"),
    })?;
    parse(&text, &path.display().to_string(), hosts)
}

/// Parses workload TOML `text`; `path` names it in errors.
pub fn parse(text: &str, path: &str, hosts: u32) -> Result<WorkloadSpec, WorkloadFileError> {
    let at = Locator { text, path };
    let file: FileSpec = toml::from_str(text).map_err(|e| {
        // The toml crate's message may go on with a hint on the next line.
        let first = e.message().lines().next().unwrap_or("invalid TOML").trim();
        at.error(e.span().unwrap_or(0..0), first.to_string())
    })?;
    let mut spec = WorkloadSpec::with_phases(Vec::new());
    spec.parallelism = match &file.parallelism {
        None => None,
        Some(p) => Some(parallelism(p, hosts, &at)?),
    };
    settings(&file, &mut spec, &at)?;
    if file.phase.is_empty() {
        return Err(at.error(
            0..0,
            "no [[phase]] tables: a workload needs at least one phase".into(),
        ));
    }
    // Names first, so `after` may name any phase.
    let names = phase_names(&file.phase, &at)?;
    let phases = file
        .phase
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let at = PhaseLocator {
                at: &at,
                name: p.get_ref().name.get_ref(),
            };
            Ok((phase(i, p, &names, hosts, &at)?, p.span()))
        })
        .collect::<Result<Vec<_>, WorkloadFileError>>()?;
    spec.phases = topological(phases)
        .map_err(|(cycle, span)| at.error(span, format!("dependency cycle: {cycle}")))?;
    Ok(spec)
}

/// Turns a byte span of the file into an error at its line.
struct Locator<'a> {
    text: &'a str,
    path: &'a str,
}

impl Locator<'_> {
    fn error(&self, span: std::ops::Range<usize>, message: String) -> WorkloadFileError {
        WorkloadFileError {
            path: self.path.to_string(),
            line: self.text[..span.start.min(self.text.len())]
                .matches('\n')
                .count()
                + 1,
            message,
        }
    }
}

/// The `[parallelism]` table as a layout of at most `hosts` ranks; `dp`
/// defaults to filling all the hosts.
fn parallelism(
    p: &Spanned<ParallelismFile>,
    hosts: u32,
    at: &Locator<'_>,
) -> Result<Parallelism, WorkloadFileError> {
    let span = p.span();
    let p = p.get_ref();
    let (tp, pp, ep) = (p.tp.unwrap_or(1), p.pp.unwrap_or(1), p.ep.unwrap_or(1));
    let ranks = match p.dp {
        Some(dp) => tp.saturating_mul(pp).saturating_mul(dp),
        None => hosts,
    };
    let layout = Parallelism::new(ranks, tp, pp, ep)
        .map_err(|e| at.error(span.clone(), format!("parallelism: {e}")))?;
    if layout.ranks() > hosts {
        return Err(at.error(
            span,
            format!(
                "parallelism: {} ranks but the topology has {hosts} hosts",
                layout.ranks()
            ),
        ));
    }
    Ok(layout)
}

/// The file's top-level settings (iterations, channels, chunks, overhead,
/// switch profile, fallback) into `spec`.
fn settings(
    file: &FileSpec,
    spec: &mut WorkloadSpec,
    at: &Locator<'_>,
) -> Result<(), WorkloadFileError> {
    let positive =
        |v: &Option<Spanned<u32>>, field: &str| -> Result<Option<u32>, WorkloadFileError> {
            match v {
                Some(s) if *s.get_ref() == 0 => {
                    Err(at.error(s.span(), format!("`{field}` must be positive")))
                }
                Some(s) => Ok(Some(*s.get_ref())),
                None => Ok(None),
            }
        };
    spec.iterations = positive(&file.iterations, "iterations")?.unwrap_or(1);
    spec.channels = positive(&file.channels, "channels")?.unwrap_or(1);
    spec.chunks = positive(&file.chunks, "chunks")?;
    spec.host_overhead = SimTime::from_ns(file.host_overhead_ns.unwrap_or(0));
    if let Some(p) = &file.switch_profile {
        spec.profile = SwitchProfile::by_name(p.get_ref()).ok_or_else(|| {
            at.error(
                p.span(),
                format!("switch_profile: unknown `{}` (tofino, sharp)", p.get_ref()),
            )
        })?;
    }
    if let Some(f) = &file.fallback {
        spec.fallback = Algorithm::parse(f.get_ref())
            .filter(|a| matches!(a, Algorithm::Ring | Algorithm::Tree | Algorithm::Hd))
            .ok_or_else(|| {
                at.error(
                    f.span(),
                    format!(
                        "fallback: `{}` is not a host all-reduce (ring, tree, hd)",
                        f.get_ref()
                    ),
                )
            })?;
    }
    Ok(())
}

/// The phases' names in file order; an error if one is defined twice.
fn phase_names<'f>(
    phases: &'f [Spanned<PhaseFile>],
    at: &Locator<'_>,
) -> Result<Vec<&'f str>, WorkloadFileError> {
    let mut names: Vec<&str> = Vec::new();
    for p in phases {
        let name = p.get_ref().name.get_ref().as_str();
        if names.contains(&name) {
            return Err(at.error(
                p.get_ref().name.span(),
                format!("phase `{name}` is defined twice"),
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// Phases reordered so each comes after those it waits for (stable), with
/// `after` renumbered; or the cycle and where it starts.
fn topological(
    phases: Vec<(Phase, std::ops::Range<usize>)>,
) -> Result<Vec<Phase>, (String, std::ops::Range<usize>)> {
    let n = phases.len();
    let mut placed = vec![usize::MAX; n];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let next = (0..n).find(|&i| {
            placed[i] == usize::MAX && phases[i].0.after.iter().all(|&j| placed[j] != usize::MAX)
        });
        match next {
            Some(i) => {
                placed[i] = order.len();
                order.push(i);
            }
            None => {
                // Follow unplaced dependencies from an unplaced phase until one repeats.
                let mut at = (0..n)
                    .find(|&i| placed[i] == usize::MAX)
                    .expect("some phase is unplaced");
                let mut path = vec![at];
                loop {
                    at = *phases[at]
                        .0
                        .after
                        .iter()
                        .find(|&&j| placed[j] == usize::MAX)
                        .expect("an unplaced phase waits for an unplaced one");
                    if let Some(k) = path.iter().position(|&p| p == at) {
                        let cycle: Vec<&str> = path[k..]
                            .iter()
                            .chain([&at])
                            .map(|&p| phases[p].0.name.as_str())
                            .collect();
                        return Err((cycle.join(" -> "), phases[at].1.clone()));
                    }
                    path.push(at);
                }
            }
        }
    }
    let mut out: Vec<Option<Phase>> = phases.into_iter().map(|(p, _)| Some(p)).collect();
    Ok(order
        .iter()
        .map(|&i| {
            let mut p = out[i].take().expect("each phase is placed once");
            p.after = p.after.iter().map(|&j| placed[j]).collect();
            p
        })
        .collect())
}

/// `65536`, `"64KiB"`, `"1.5MB"`, `"2GiB"` -> bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        u => {
            return Err(format!(
                "unknown unit `{u}` in `{s}` (B, KB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a size"))?;
    let bytes = (v * scale as f64).round();
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("`{s}` is not a positive size"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::groups::GroupSpec;
    use crate::workload::spec::PhaseKind;

    #[test]
    fn phases_default_to_sequential_and_sort_topologically() {
        let text = r#"
[[phase]]
name = "b"
collective = "allreduce"
size = "1MiB"
after = ["a"]
[[phase]]
name = "a"
compute_us = 2.5
after = []
"#;
        let spec = parse(text, "w.toml", 8).unwrap();
        assert_eq!(spec.phases[0].name, "a");
        assert_eq!(spec.phases[1].after, vec![0]);
        assert_eq!(
            spec.phases[0].kind,
            PhaseKind::Compute {
                duration: SimTime::from_ns(2500),
                group: GroupSpec::All
            }
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cycle = "[[phase]]\nname = \"a\"\ncompute_ns = 1\nafter = [\"b\"]\n[[phase]]\nname = \"b\"\ncompute_ns = 1\n";
        let e = parse(cycle, "w.toml", 8).unwrap_err();
        assert!(e.message.contains("cycle"), "{e}");
        assert_eq!(e.line, 1);
        let missing =
            "[[phase]]\nname = \"a\"\ncollective = \"allreduce\"\nsize = 8\ngroup = \"0,9\"\n";
        let e = parse(missing, "w.toml", 8).unwrap_err();
        assert_eq!((e.line, e.message.contains("host 9")), (5, true), "{e}");
        let zero = "[[phase]]\nname = \"a\"\ncollective = \"allreduce\"\nsize = 0\n";
        assert_eq!(parse(zero, "w.toml", 8).unwrap_err().line, 4);
        let unknown = "[[phase]]\nname = \"a\"\ncompute_ns = 1\ncolour = 3\n";
        let e = parse(unknown, "w.toml", 8).unwrap_err();
        assert!(e.message.contains("colour"), "{e}");
        let bad_algo =
            "[[phase]]\nname = \"a\"\ncollective = \"alltoall\"\nsize = 8\nalgo = \"ina\"\n";
        assert_eq!(parse(bad_algo, "w.toml", 8).unwrap_err().line, 5);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1.5KB"), Ok(1500));
        assert_eq!(parse_size("12"), Ok(12));
        assert!(parse_size("3 parsecs").is_err());
        assert!(parse_size("0").is_err());
    }
}
