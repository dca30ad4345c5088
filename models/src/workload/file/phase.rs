//! One `[[phase]]` table of the workload file: its group, its collective or
//! compute, and the phases it waits for.

use super::{parse_size, Locator, PhaseFile, WorkloadFileError};
use crate::workload::groups::GroupSpec;
use crate::workload::offload::{Dtype, ReduceOp};
use crate::workload::spec::{Algorithm, CollectiveOp, OpSpec, Phase, PhaseKind};
use netsim_engine::SimTime;
use toml::Spanned;

/// A [`Locator`] for the fields of one phase: errors name the phase and field.
pub(super) struct PhaseLocator<'a> {
    pub(super) at: &'a Locator<'a>,
    pub(super) name: &'a str,
}

impl PhaseLocator<'_> {
    fn error(
        &self,
        span: std::ops::Range<usize>,
        field: &str,
        message: String,
    ) -> WorkloadFileError {
        self.at
            .error(span, format!("phase `{}`: {field}: {message}", self.name))
    }
}

/// The `i`-th `[[phase]]` table; `names` are all the phases' names.
pub(super) fn phase(
    i: usize,
    p: &Spanned<PhaseFile>,
    names: &[&str],
    hosts: u32,
    at: &PhaseLocator<'_>,
) -> Result<Phase, WorkloadFileError> {
    let f = p.get_ref();
    let group = phase_group(f, hosts, at)?;
    let kind = match (&f.collective, &f.compute_ns, &f.compute_us) {
        (Some(c), None, None) => PhaseKind::Collective(collective(c, p, group, at)?),
        (None, Some(ns), None) => PhaseKind::Compute {
            duration: SimTime::try_from_ns(*ns.get_ref())
                .map_err(|e| at.error(ns.span(), "compute_ns", e.to_string()))?,
            group,
        },
        (None, None, Some(us)) => {
            let v = *us.get_ref();
            if !(v.is_finite() && v >= 0.0) {
                return Err(at.error(
                    us.span(),
                    "compute_us",
                    "must be a non-negative number".into(),
                ));
            }
            PhaseKind::Compute {
                duration: SimTime::try_from_f64(v, 1e6, "us")
                    .map_err(|e| at.error(us.span(), "compute_us", e.to_string()))?,
                group,
            }
        }
        _ => {
            return Err(at.error(
                p.span(),
                "phase",
                "needs exactly one of `collective`, `compute_ns`, `compute_us`".into(),
            ))
        }
    };
    Ok(Phase {
        name: f.name.get_ref().clone(),
        kind,
        after: phase_after(i, f, names, at)?,
        stage: None,
    })
}

/// The phase's `group`, all hosts by default; every listed rank must exist.
fn phase_group(
    f: &PhaseFile,
    hosts: u32,
    at: &PhaseLocator<'_>,
) -> Result<GroupSpec, WorkloadFileError> {
    let Some(g) = &f.group else {
        return Ok(GroupSpec::All);
    };
    let group =
        GroupSpec::parse(g.get_ref()).map_err(|e| at.error(g.span(), "group", e.to_string()))?;
    if let GroupSpec::Ranks(r) = &group {
        if let Some(h) = r.iter().find(|&&h| h >= hosts) {
            return Err(at.error(
                g.span(),
                "group",
                format!("host {h} does not exist (the topology has {hosts} hosts)"),
            ));
        }
    }
    Ok(group)
}

/// A collective phase: the operation `c` with the table's algorithm, size,
/// dtype and reduction.
fn collective(
    c: &Spanned<String>,
    p: &Spanned<PhaseFile>,
    group: GroupSpec,
    at: &PhaseLocator<'_>,
) -> Result<OpSpec, WorkloadFileError> {
    let f = p.get_ref();
    let op = CollectiveOp::parse(c.get_ref()).ok_or_else(|| {
        at.error(
            c.span(),
            "collective",
            format!(
                "unknown `{}` ({})",
                c.get_ref(),
                CollectiveOp::ALL.map(|o| o.name()).join(", ")
            ),
        )
    })?;
    let algorithm = match &f.algo {
        None => op.default_algorithm(),
        Some(a) => Algorithm::parse(a.get_ref())
            .filter(|x| op.algorithms().contains(x))
            .ok_or_else(|| {
                at.error(
                    a.span(),
                    "algo",
                    format!(
                        "`{}` does not implement {} (use {})",
                        a.get_ref(),
                        op.name(),
                        op.algorithm_names()
                    ),
                )
            })?,
    };
    let size_bytes = match &f.size {
        None if op == CollectiveOp::Barrier => 0,
        None => return Err(at.error(p.span(), "size", "missing (bytes)".into())),
        Some(s) => collective_size(s, at)?,
    };
    let dtype = match &f.dtype {
        None => Dtype::Float32,
        Some(d) => Dtype::parse(d.get_ref()).ok_or_else(|| {
            at.error(
                d.span(),
                "dtype",
                format!(
                    "unknown `{}` ({})",
                    d.get_ref(),
                    Dtype::ALL.map(|d| d.name()).join(", ")
                ),
            )
        })?,
    };
    let reduce_op = match &f.op {
        None => ReduceOp::Sum,
        Some(o) => ReduceOp::parse(o.get_ref()).ok_or_else(|| {
            at.error(
                o.span(),
                "op",
                format!("unknown `{}` (sum, min, max)", o.get_ref()),
            )
        })?,
    };
    Ok(OpSpec {
        op,
        algorithm,
        size_bytes,
        group,
        dtype,
        reduce_op,
    })
}

/// A collective's `size`: a positive integer of bytes or a size string.
fn collective_size(
    s: &Spanned<toml::Value>,
    at: &PhaseLocator<'_>,
) -> Result<u64, WorkloadFileError> {
    let v = match s.get_ref() {
        toml::Value::Integer(i) if *i > 0 => *i as u64,
        toml::Value::String(t) => parse_size(t).map_err(|m| at.error(s.span(), "size", m))?,
        _ => {
            return Err(at.error(
                s.span(),
                "size",
                "must be a positive number of bytes or a string such as \"64MiB\"".into(),
            ))
        }
    };
    if v == 0 {
        return Err(at.error(s.span(), "size", "must be positive".into()));
    }
    Ok(v)
}

/// The indices of the phases the `i`-th waits for: its `after` list, by
/// default the phase before it.
fn phase_after(
    i: usize,
    f: &PhaseFile,
    names: &[&str],
    at: &PhaseLocator<'_>,
) -> Result<Vec<usize>, WorkloadFileError> {
    let Some(list) = &f.after else {
        return Ok(if i == 0 { Vec::new() } else { vec![i - 1] });
    };
    let mut idx = Vec::new();
    for a in list.get_ref() {
        let j = names.iter().position(|n| n == a.get_ref()).ok_or_else(|| {
            at.error(
                a.span(),
                "after",
                format!("no phase named `{}`", a.get_ref()),
            )
        })?;
        if j == i {
            return Err(at.error(a.span(), "after", "a phase cannot wait for itself".into()));
        }
        idx.push(j);
    }
    Ok(idx)
}
