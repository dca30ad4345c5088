//! Scenario files: TOML whose keys are the long names of `netsim run` flags.
//!
//! ```toml
//! topo = "fat-tree"
//! [topology]          # sections only group keys; any key may sit at the top
//! k = 16
//! link-gbps = 100
//! [engine]
//! threads = 2
//! ```
//!
//! A scenario expands into flags placed before the ones typed on the command
//! line, so typed flags override the file. Each key and value is checked on
//! its own first, so an error names the file, the line and the field.

use anyhow::{bail, Context as _};
use clap::CommandFactory;
use std::ffi::OsString;
use std::path::Path;

/// Section names that may group keys; they carry no meaning of their own.
const SECTIONS: &[&str] = &[
    "topology", "traffic", "network", "workload", "engine", "output", "run",
];

/// Reads `path` and returns the flags it stands for, after checking every key
/// against the flags of `subcommand` of the CLI type `C`.
pub fn expand<C: CommandFactory>(path: &Path, subcommand: &str) -> anyhow::Result<Vec<OsString>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read scenario file {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(&text, s.start));
        let message = e.message().lines().next().unwrap_or("invalid TOML").trim();
        anyhow::anyhow!("{}:{line}: {message}", path.display())
    })?;
    let mut fields = Vec::new();
    collect_fields(&text, &table, None, &mut fields, path)?;

    let command = C::command();
    let run = command
        .find_subcommand(subcommand)
        .expect("the CLI has the subcommand it expands scenarios for");
    let mut flags = Vec::new();
    for field in fields {
        let where_ = format!("{}:{}", path.display(), field.line);
        let arg = run
            .get_arguments()
            .find(|a| a.get_long() == Some(field.key.as_str()))
            .filter(|a| a.get_id() != "config");
        let Some(arg) = arg else {
            bail!("{where_}: unknown field `{}` (fields are the long names of `netsim {subcommand}` flags)", field.key);
        };
        let takes_value = arg.get_action().takes_values();
        let flag = OsString::from(format!("--{}", field.key));
        let mut one = Vec::new();
        match (&field.value, takes_value) {
            (toml::Value::Boolean(true), false) => one.push(flag),
            (toml::Value::Boolean(false), false) => {}
            (_, false) => bail!("{where_}: field `{}` must be true or false", field.key),
            (toml::Value::String(s), true) => {
                one.extend([flag, relative_to(path, &field.key, s).into()])
            }
            (toml::Value::Integer(i), true) => one.extend([flag, i.to_string().into()]),
            (toml::Value::Float(f), true) => one.extend([flag, f.to_string().into()]),
            (toml::Value::Boolean(b), true) => one.extend([flag, b.to_string().into()]),
            (_, true) => bail!(
                "{where_}: field `{}` must be a string or a number",
                field.key
            ),
        }
        // Parse the flag alone so that a bad value is reported at its line.
        let mut probe = vec![OsString::from("netsim"), subcommand.into()];
        probe.extend(one.iter().cloned());
        if let Err(e) = C::command().try_get_matches_from(probe) {
            let message = e.to_string();
            let first = message.lines().next().unwrap_or("invalid value");
            bail!(
                "{where_}: field `{}`: {}",
                field.key,
                first.trim_start_matches("error: ")
            );
        }
        flags.extend(one);
    }
    Ok(flags)
}

/// Files a scenario names (`workload`, `traffic = "tm:..."`, `topo =
/// "simai:..."`) are found next to the scenario file when they exist there,
/// so a scenario runs from any directory.
fn relative_to(scenario: &Path, key: &str, value: &str) -> String {
    let (prefix, file) = match (key, value) {
        ("workload", v) => ("", v),
        ("traffic", v) if v.starts_with("tm:") => v.split_at(3),
        ("topo", v) if v.starts_with("simai:") => v.split_at(6),
        _ => return value.to_string(),
    };
    let beside = scenario.parent().map(|dir| dir.join(file));
    match beside {
        Some(p) if Path::new(file).is_relative() && p.is_file() => {
            format!("{prefix}{}", p.display())
        }
        _ => value.to_string(),
    }
}

struct Field {
    key: String,
    value: toml::Value,
    line: usize,
}

fn collect_fields(
    text: &str,
    table: &toml::Table,
    section: Option<&str>,
    out: &mut Vec<Field>,
    path: &Path,
) -> anyhow::Result<()> {
    for (key, value) in table {
        let line = find_key_line(text, section, key);
        match value {
            toml::Value::Table(inner) if section.is_none() && SECTIONS.contains(&key.as_str()) => {
                collect_fields(text, inner, Some(key), out, path)?;
            }
            // `[[job]]` tables: one `--job` each, its workload found beside the scenario.
            toml::Value::Array(tables) if section.is_none() && key == "job" => {
                for table in tables {
                    let toml::Value::Table(table) = table else {
                        bail!("{}:{line}: `job` must be [[job]] tables", path.display());
                    };
                    let mut table = table.clone();
                    if let Some(toml::Value::String(w)) = table.get("workload") {
                        let resolved = relative_to(path, "workload", w);
                        table.insert("workload".into(), toml::Value::String(resolved));
                    }
                    out.push(Field {
                        key: key.clone(),
                        value: toml::Value::String(toml::Value::Table(table).to_string()),
                        line,
                    });
                }
            }
            // `[[fault]]` tables: one `--fault KIND:TARGET@TIME[=VALUE]` each.
            toml::Value::Array(tables) if section.is_none() && key == "fault" => {
                let headers = fault_header_lines(text);
                for (i, table) in tables.iter().enumerate() {
                    let line = headers.get(i).copied().unwrap_or(line);
                    let spec = fault_spec(table)
                        .map_err(|e| anyhow::anyhow!("{}:{line}: fault: {e}", path.display()))?;
                    out.push(Field {
                        key: key.clone(),
                        value: toml::Value::String(spec),
                        line,
                    });
                }
            }
            // `[[simbricks]]` tables: one `--simbricks HOST=URL` each.
            toml::Value::Array(tables) if section.is_none() && key == "simbricks" => {
                for table in tables {
                    let spec = crate::simbricks_args::table_spec(table).map_err(|e| {
                        anyhow::anyhow!("{}:{line}: simbricks: {e}", path.display())
                    })?;
                    let value = toml::Value::String(spec);
                    out.push(Field {
                        key: key.clone(),
                        value,
                        line,
                    });
                }
            }
            toml::Value::Table(_) => bail!(
                "{}:{line}: unknown section `{key}` (sections: {})",
                path.display(),
                SECTIONS.join(", ")
            ),
            _ => out.push(Field {
                key: key.clone(),
                value: value.clone(),
                line,
            }),
        }
    }
    Ok(())
}

/// The lines of a scenario's `[[fault]]` headers, in order.
fn fault_header_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim().replace(' ', "") == "[[fault]]")
        .map(|(n, _)| n + 1)
        .collect()
}

/// A `[[fault]]` table (`kind`, `target`, `time`, and `value` for
/// `link-rate`) as the `--fault` spec `KIND:TARGET@TIME[=VALUE]`.
fn fault_spec(table: &toml::Value) -> anyhow::Result<String> {
    let toml::Value::Table(table) = table else {
        bail!("must be [[fault]] tables");
    };
    let text = |key: &str| -> anyhow::Result<Option<String>> {
        Ok(match table.get(key) {
            None => None,
            Some(toml::Value::String(s)) => Some(s.clone()),
            Some(toml::Value::Integer(i)) => Some(i.to_string()),
            Some(toml::Value::Float(f)) => Some(f.to_string()),
            Some(_) => bail!("`{key}` must be a string or a number"),
        })
    };
    if let Some(other) = table
        .keys()
        .find(|k| !matches!(k.as_str(), "kind" | "target" | "time" | "value"))
    {
        bail!("unknown key `{other}` (kind, target, time, value)");
    }
    let need = |key: &str| text(key)?.ok_or_else(|| anyhow::anyhow!("missing `{key}`"));
    let mut spec = format!("{}:{}@{}", need("kind")?, need("target")?, need("time")?);
    if let Some(v) = text("value")? {
        spec.push('=');
        spec.push_str(&v);
    }
    Ok(spec)
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// Line on which `key` is assigned, inside `[section]` when given. The toml
/// crate keeps no spans for keys of a table read as a whole, so look for the
/// assignment in the text: `key = `, `section.key = `, or else the line that
/// opens the section (an inline table); 0 when none is found.
fn find_key_line(text: &str, section: Option<&str>, key: &str) -> usize {
    let mut current: Option<String> = None;
    let dotted = section.map(|s| format!("{s}.{key}"));
    let mut section_line = 0;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            current = Some(name.trim().to_string());
            continue;
        }
        let Some((lhs, _)) = line.split_once('=') else {
            continue;
        };
        let lhs: String = lhs
            .trim()
            .chars()
            .filter(|c| !matches!(c, '"' | ' '))
            .collect();
        if lhs == key && current.as_deref() == section {
            return n + 1;
        }
        if current.is_none() && dotted.as_deref() == Some(lhs.as_str()) {
            return n + 1;
        }
        if current.is_none() && section == Some(lhs.as_str()) && section_line == 0 {
            section_line = n + 1;
        }
    }
    section_line
}

/// The fields of scenario file `path` with the lines they are set on, for
/// errors found after expansion (a value that parses but is out of range).
pub fn field_lines(path: &Path) -> anyhow::Result<Vec<(String, usize)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read scenario file {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text)?;
    let mut fields = Vec::new();
    collect_fields(&text, &table, None, &mut fields, path)?;
    Ok(fields.into_iter().map(|f| (f.key, f.line)).collect())
}
