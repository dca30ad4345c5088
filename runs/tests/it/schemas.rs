//! The documented schema tables (docs/guide/output.md) and the files a run
//! writes agree, both ways:
//! every table, column (name, Arrow type, nullability, order), part-file
//! metadata key and `run.json` key (with its JSON type) that a run writes is
//! documented, and everything documented is written.

use crate::common::{netsim, scratch};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The `### Schemas` section of docs/guide/output.md: heading (backticks removed) -> rows
/// of its table, each row's cells with backticks removed.
fn documented() -> BTreeMap<String, Vec<Vec<String>>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/output.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme
        .find("\n### Schemas\n")
        .expect("docs/guide/output.md has a `### Schemas` section");
    let section = &readme[start + 1..];
    let end = section.find("\n## ").unwrap_or(section.len());
    let mut sections = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in section[..end].lines() {
        if let Some(heading) = line.strip_prefix("#### ") {
            let name = heading.replace('`', "");
            assert!(
                sections.insert(name.clone(), Vec::new()).is_none(),
                "docs/guide/output.md documents {name} twice"
            );
            current = Some(name);
        } else if let (Some(name), Some(row)) = (&current, line.strip_prefix('|')) {
            let cells: Vec<String> = row
                .trim_end_matches('|')
                .split('|')
                .map(|c| c.trim().replace('`', ""))
                .collect();
            // Skip the header and the separator row.
            if !(cells[0] == "column" || cells[0] == "key" || cells[0].starts_with("---")) {
                sections.get_mut(name).unwrap().push(cells);
            }
        }
    }
    sections
}

/// A small run with two shards and every table non-empty: a lossless
/// incast pauses (pfc), switches are sampled (queues, links).
fn small_run() -> PathBuf {
    let out = scratch("run").join("out");
    let o = netsim(format!(
        "--topo fat-tree --k 4 --traffic incast --flow-size 500000 --sample-ns 10000 \
         --threads 2 --quiet --out {}",
        out.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The tables a run wrote: directory name -> its part files.
fn written_tables(out: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut tables = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let parts: Vec<PathBuf> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect();
        if !parts.is_empty() {
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            tables.insert(name, parts);
        }
    }
    tables
}

/// `name`, `Type` or `Type, nullable` per column, in order.
fn parquet_columns(part: &Path) -> Vec<(String, String)> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(part).unwrap()).unwrap();
    builder
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let nullable = if f.is_nullable() { ", nullable" } else { "" };
            (f.name().clone(), format!("{}{nullable}", f.data_type()))
        })
        .collect()
}

fn parquet_metadata_keys(part: &Path) -> Vec<String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(part).unwrap()).unwrap();
    let mut keys: Vec<String> = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .expect("part files carry key-value metadata")
        .iter()
        .map(|kv| kv.key.clone())
        // The Arrow schema pyarrow embeds itself; not ours to document.
        .filter(|k| k != "ARROW:schema")
        .collect();
    keys.sort();
    keys
}

/// `run.json` flattened: `key` or `object.key` -> the value's JSON type as
/// output.md writes it.
fn run_json_types(out: &Path) -> BTreeMap<String, String> {
    fn kind(value: &serde_json::Value) -> String {
        use serde_json::Value;
        match value {
            Value::Null => "null".into(),
            Value::Bool(_) => "boolean".into(),
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer".into(),
            Value::Number(_) => "number".into(),
            Value::String(_) => "string".into(),
            Value::Array(items) => {
                let mut kinds: Vec<String> = items.iter().map(kind).collect();
                kinds.dedup();
                assert!(kinds.len() <= 1, "mixed array {value}");
                format!("array of {}", kinds.first().map_or("integer", |k| k))
            }
            Value::Object(_) => "object".into(),
        }
    }
    let text = std::fs::read_to_string(out.join("run.json")).unwrap();
    let run: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut keys = BTreeMap::new();
    for (key, value) in run.as_object().unwrap() {
        match value.as_object() {
            Some(inner) => {
                for (sub, v) in inner {
                    keys.insert(format!("{key}.{sub}"), kind(v));
                }
            }
            None => {
                keys.insert(key.clone(), kind(value));
            }
        }
    }
    keys
}

/// Whether a value of JSON type `actual` fits the documented type (`integer
/// or null` admits both; a `number` may print as an integer).
fn fits(documented: &str, actual: &str) -> bool {
    documented
        .split(" or ")
        .any(|d| d == actual || (d == "number" && actual == "integer"))
}

#[test]
fn readme_schemas_match_what_a_run_writes() {
    let out = small_run();
    let mut docs = documented();
    let tables = written_tables(&out);

    for (table, parts) in &tables {
        let rows = docs
            .remove(table)
            .unwrap_or_else(|| panic!("docs/guide/output.md documents no table `{table}`"));
        let documented: Vec<(String, String)> =
            rows.iter().map(|r| (r[0].clone(), r[1].clone())).collect();
        for part in parts {
            assert_eq!(
                parquet_columns(part),
                documented,
                "docs/guide/output.md columns of `{table}` (name, type) differ from {}",
                part.display()
            );
        }
    }

    let metadata = docs
        .remove("Part file metadata")
        .expect("docs/guide/output.md documents the part file metadata");
    let mut documented_keys: Vec<String> = metadata.iter().map(|r| r[0].clone()).collect();
    documented_keys.sort();
    for part in tables.values().flatten() {
        assert_eq!(
            parquet_metadata_keys(part),
            documented_keys,
            "metadata of {}",
            part.display()
        );
    }

    let run_json = docs
        .remove("run.json")
        .expect("docs/guide/output.md documents run.json");
    let documented: BTreeMap<String, String> = run_json
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    let written = run_json_types(&out);
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&written),
        names(&documented),
        "run.json keys written vs documented"
    );
    for (key, actual) in &written {
        assert!(
            fits(&documented[key], actual),
            "run.json `{key}` is {actual}, output.md says {}",
            documented[key]
        );
    }

    assert!(
        docs.is_empty(),
        "docs/guide/output.md documents tables a run does not write: {:?}",
        docs.keys().collect::<Vec<_>>()
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn every_documented_row_has_a_type_unit_and_meaning() {
    for (section, rows) in documented() {
        assert!(
            !rows.is_empty(),
            "docs/guide/output.md section {section} has no rows"
        );
        for row in rows {
            let width = if section == "Part file metadata" {
                2
            } else {
                4
            };
            assert_eq!(row.len(), width, "{section}: {row:?}");
            let meaning = row.last().unwrap();
            assert!(!meaning.is_empty(), "{section}: {} has no meaning", row[0]);
        }
    }
}
