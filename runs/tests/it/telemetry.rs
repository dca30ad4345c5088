//! Telemetry writers: Parquet round trips, temporary-file discipline, output-directory preparation.

use std::collections::HashMap;
use std::fs::{self, File};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use netsim::telemetry::{
    prepare_output_dir, write_run_json, PartConfig, RowBuilder, TableRow, TableWriter,
    DEFAULT_ROW_GROUP_ROWS, TABLES,
};
use netsim_models::telemetry::{FlowRecord, PfcEvent, PfcRecord, QueueSample};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;

fn config(out_dir: &Path, rank: u32, shard: u32, row_group_rows: usize) -> PartConfig {
    PartConfig {
        out_dir: out_dir.to_owned(),
        scenario: "unit-test scenario".to_owned(),
        seed: 0xDEAD_BEEF_0000_0042,
        rank,
        shard,
        row_group_rows,
    }
}

/// Deterministic flows; every seventh is unfinished, so nulls sit in every row group.
fn flows(count: u32) -> Vec<FlowRecord> {
    (0..count)
        .map(|i| {
            let finished = i % 7 != 3;
            let start_ns = u64::from(i) * 1_000;
            let fct_ns = 5_000 + u64::from(i % 97) * 311;
            FlowRecord {
                flow_id: i,
                src: i % 128,
                dst: (i * 31 + 7) % 128,
                size_bytes: 1 << (10 + i % 11),
                start_ns,
                end_ns: finished.then_some(start_ns + fct_ns),
                fct_ns: finished.then_some(fct_ns),
                ideal_fct_ns: 4_000 + u64::from(i % 13),
                slowdown: finished.then(|| fct_ns as f64 / (4_000 + u64::from(i % 13)) as f64),
                ecmp_path: u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ecn_marked_pkts: u64::from(i % 5),
                cnps: u64::from(i % 3),
                retransmitted_pkts: u64::from(i % 2),
                skipped_bytes: u64::from(i % 3) << 20,
                skipped_ns: u64::from(i % 3) * 1_000,
                trimmed_pkts: u64::from(i % 6),
                sacks: u64::from(i) * 3,
                paths_used: i % 257,
                finished,
                collective_id: (i % 4 == 0).then_some(i / 4),
                job: (i % 4 == 0).then(|| format!("job{}", i % 3).into()),
                reason: (!finished).then_some(if i % 2 == 0 {
                    "retry-limit"
                } else {
                    "time-limit"
                }),
            }
        })
        .collect()
}

fn write_all<R: TableRow>(config: &PartConfig, rows: &[R]) -> u64 {
    let mut writer = TableWriter::<R>::create(config).unwrap();
    for row in rows {
        writer.push(row).unwrap();
    }
    assert_eq!(writer.rows(), rows.len() as u64);
    writer.finish().unwrap()
}

/// Names of the entries in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Reads a part file back with the parquet crate's Arrow reader.
fn read(path: &Path) -> (SchemaRef, Arc<ParquetMetaData>, Vec<RecordBatch>) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let schema = builder.schema().clone();
    let metadata = builder.metadata().clone();
    let batches = builder
        .build()
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (schema, metadata, batches)
}

fn key_values(metadata: &ParquetMetaData) -> HashMap<String, String> {
    metadata
        .file_metadata()
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect()
}

/// Column names, types and nullability match; schema metadata is not compared.
fn assert_same_columns(read: &Schema, expected: &Schema) {
    let columns = |s: &Schema| -> Vec<(String, DataType, bool)> {
        s.fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
            .collect()
    };
    assert_eq!(columns(read), columns(expected));
}

fn flows_from(batches: &[RecordBatch]) -> Vec<FlowRecord> {
    let mut out = Vec::new();
    for b in batches {
        let u32s = |name| b.column_by_name(name).unwrap().as_primitive::<UInt32Type>();
        let u64s = |name| b.column_by_name(name).unwrap().as_primitive::<UInt64Type>();
        let slowdown = b
            .column_by_name("slowdown")
            .unwrap()
            .as_primitive::<Float64Type>();
        let finished = b.column_by_name("finished").unwrap().as_boolean();
        let opt = |name, i| {
            let a = u64s(name);
            a.is_valid(i).then(|| a.value(i))
        };
        for i in 0..b.num_rows() {
            out.push(FlowRecord {
                flow_id: u32s("flow_id").value(i),
                src: u32s("src").value(i),
                dst: u32s("dst").value(i),
                size_bytes: u64s("size_bytes").value(i),
                start_ns: u64s("start_ns").value(i),
                end_ns: opt("end_ns", i),
                fct_ns: opt("fct_ns", i),
                ideal_fct_ns: u64s("ideal_fct_ns").value(i),
                slowdown: slowdown.is_valid(i).then(|| slowdown.value(i)),
                ecmp_path: u64s("ecmp_path").value(i),
                ecn_marked_pkts: u64s("ecn_marked_pkts").value(i),
                cnps: u64s("cnps").value(i),
                retransmitted_pkts: u64s("retransmitted_pkts").value(i),
                skipped_bytes: u64s("skipped_bytes").value(i),
                skipped_ns: u64s("skipped_ns").value(i),
                trimmed_pkts: u64s("trimmed_pkts").value(i),
                sacks: u64s("sacks").value(i),
                paths_used: u32s("paths_used").value(i),
                finished: finished.value(i),
                collective_id: {
                    let c = u32s("collective_id");
                    c.is_valid(i).then(|| c.value(i))
                },
                job: {
                    let j = b.column_by_name("job").unwrap().as_string::<i32>();
                    j.is_valid(i).then(|| j.value(i).into())
                },
                reason: {
                    let r = b.column_by_name("reason").unwrap().as_string::<i32>();
                    r.is_valid(i).then(|| match r.value(i) {
                        "retry-limit" => "retry-limit",
                        "time-limit" => "time-limit",
                        other => panic!("unknown reason {other}"),
                    })
                },
            });
        }
    }
    out
}

/// Parquet caps a file at 32,767 row groups: past 4,096 groups a writer
/// doubles their size, so a huge table still fits one part, row for row.
#[test]
fn row_groups_grow_before_a_part_holds_too_many() {
    let out = tempfile::tempdir().unwrap();
    let rows = flows(4_096 + 10);
    let cfg = config(out.path(), 0, 0, 1);
    assert_eq!(write_all(&cfg, &rows), rows.len() as u64);
    let (_, metadata, batches) = read(&out.path().join("flows/part-00000-00000.parquet"));
    let group_rows: Vec<i64> = metadata.row_groups().iter().map(|g| g.num_rows()).collect();
    assert_eq!(group_rows.len(), 4_096 + 5);
    assert!(group_rows[..4_096].iter().all(|&n| n == 1));
    assert!(group_rows[4_096..].iter().all(|&n| n == 2));
    assert_eq!(flows_from(&batches), rows);
}

#[test]
fn flows_round_trip_across_row_groups() {
    let out = tempfile::tempdir().unwrap();
    let rows = flows(3_000);
    let cfg = config(out.path(), 2, 7, 512);
    assert_eq!(write_all(&cfg, &rows), 3_000);

    // Only the final file remains: the temporary one was renamed.
    let dir = out.path().join("flows");
    assert_eq!(listing(&dir), ["part-00002-00007.parquet"]);

    let (schema, metadata, batches) = read(&dir.join("part-00002-00007.parquet"));
    assert_same_columns(&schema, &FlowRecord::schema());
    let group_rows: Vec<i64> = metadata.row_groups().iter().map(|g| g.num_rows()).collect();
    assert_eq!(group_rows, [512, 512, 512, 512, 512, 440]);
    for group in metadata.row_groups() {
        for column in group.columns() {
            assert_eq!(column.compression(), Compression::SNAPPY);
        }
    }
    let read_rows = flows_from(&batches);
    assert_eq!(read_rows.len(), rows.len());
    assert_eq!(read_rows, rows);
    assert!(read_rows
        .iter()
        .any(|f| f.end_ns.is_none() && f.slowdown.is_none()));

    // A fixed key order keeps the footer, and so the file, reproducible.
    let keys: Vec<&str> = metadata
        .file_metadata()
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|kv| kv.key.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "netsim.version",
            "netsim.scenario",
            "netsim.seed",
            "netsim.table",
            "netsim.rank",
            "netsim.shard",
            "ARROW:schema"
        ]
    );
    let kv = key_values(&metadata);
    for (key, value) in &kv {
        if key.starts_with("netsim.") {
            assert_eq!(
                schema.metadata().get(key),
                Some(value),
                "schema metadata {key}"
            );
        }
    }
    assert_eq!(kv["netsim.version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(kv["netsim.scenario"], "unit-test scenario");
    assert_eq!(kv["netsim.seed"], 0xDEAD_BEEF_0000_0042_u64.to_string());
    assert_eq!(kv["netsim.table"], "flows");
    assert_eq!(kv["netsim.rank"], "2");
    assert_eq!(kv["netsim.shard"], "7");
}

#[test]
fn queues_and_pfc_round_trip() {
    let out = tempfile::tempdir().unwrap();
    let cfg = config(out.path(), 0, 1, 100);

    let samples: Vec<QueueSample> = (0..250u32)
        .map(|i| QueueSample {
            time_ns: u64::from(i) * 100,
            node: 1_000 + i % 9,
            port: i % 16,
            priority: (i % 8) as u8,
            qlen_bytes: u64::from(i) * 1_500,
            tx_bytes: u64::from(i) << 20,
            ecn_marked_pkts: u64::from(i / 3),
            dropped_pkts: u64::from(i / 50),
            trimmed_pkts: u64::from(i / 7),
            paused: i % 4 == 0,
        })
        .collect();
    assert_eq!(write_all(&cfg, &samples), 250);
    let (schema, metadata, batches) = read(&out.path().join("queues/part-00000-00001.parquet"));
    assert_same_columns(&schema, &QueueSample::schema());
    assert_eq!(key_values(&metadata)["netsim.table"], "queues");
    let mut got = Vec::new();
    for b in &batches {
        let col = |name| b.column_by_name(name).unwrap();
        for i in 0..b.num_rows() {
            got.push(QueueSample {
                time_ns: col("time_ns").as_primitive::<UInt64Type>().value(i),
                node: col("node").as_primitive::<UInt32Type>().value(i),
                port: col("port").as_primitive::<UInt32Type>().value(i),
                priority: col("priority").as_primitive::<UInt8Type>().value(i),
                qlen_bytes: col("qlen_bytes").as_primitive::<UInt64Type>().value(i),
                tx_bytes: col("tx_bytes").as_primitive::<UInt64Type>().value(i),
                ecn_marked_pkts: col("ecn_marked_pkts").as_primitive::<UInt64Type>().value(i),
                dropped_pkts: col("dropped_pkts").as_primitive::<UInt64Type>().value(i),
                trimmed_pkts: col("trimmed_pkts").as_primitive::<UInt64Type>().value(i),
                paused: col("paused").as_boolean().value(i),
            });
        }
    }
    assert_eq!(got, samples);

    let events: Vec<PfcRecord> = (0..101u32)
        .map(|i| {
            let resume = i % 2 == 1;
            PfcRecord {
                time_ns: u64::from(i) * 700,
                node: i % 5,
                port: i % 3,
                priority: 3,
                event: if resume {
                    PfcEvent::Resume
                } else {
                    PfcEvent::Pause
                },
                duration_ns: resume.then_some(700),
            }
        })
        .collect();
    assert_eq!(write_all(&cfg, &events), 101);
    let (schema, _, batches) = read(&out.path().join("pfc/part-00000-00001.parquet"));
    assert_same_columns(&schema, &PfcRecord::schema());
    let mut got = Vec::new();
    for b in &batches {
        let col = |name| b.column_by_name(name).unwrap();
        let duration = col("duration_ns").as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            got.push(PfcRecord {
                time_ns: col("time_ns").as_primitive::<UInt64Type>().value(i),
                node: col("node").as_primitive::<UInt32Type>().value(i),
                port: col("port").as_primitive::<UInt32Type>().value(i),
                priority: col("priority").as_primitive::<UInt8Type>().value(i),
                event: match col("event").as_string::<i32>().value(i) {
                    "pause" => PfcEvent::Pause,
                    "resume" => PfcEvent::Resume,
                    other => panic!("unexpected PFC event {other:?}"),
                },
                duration_ns: duration.is_valid(i).then(|| duration.value(i)),
            });
        }
    }
    assert_eq!(got, events);
}

#[test]
fn empty_table_is_a_valid_file_with_the_schema() {
    let out = tempfile::tempdir().unwrap();
    let cfg = config(out.path(), 0, 0, DEFAULT_ROW_GROUP_ROWS);
    let writer = TableWriter::<PfcRecord>::create(&cfg).unwrap();
    assert_eq!(writer.finish().unwrap(), 0);

    let dir = out.path().join("pfc");
    assert_eq!(listing(&dir), ["part-00000-00000.parquet"]);
    let (schema, metadata, batches) = read(&dir.join("part-00000-00000.parquet"));
    assert_same_columns(&schema, &PfcRecord::schema());
    assert_eq!(metadata.file_metadata().num_rows(), 0);
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 0);
    assert_eq!(key_values(&metadata)["netsim.table"], "pfc");
}

#[test]
fn dropping_an_unfinished_writer_leaves_no_file() {
    let out = tempfile::tempdir().unwrap();
    let cfg = config(out.path(), 0, 3, 256);
    let mut writer = TableWriter::<FlowRecord>::create(&cfg).unwrap();
    // Past one row group, so bytes have reached the temporary file.
    for row in &flows(1_000) {
        writer.push(row).unwrap();
    }
    let dir = out.path().join("flows");
    assert_eq!(listing(&dir), [".part-00000-00003.parquet.tmp"]);
    drop(writer);
    assert!(listing(&dir).is_empty());
}

/// A table whose `append` disagrees with its schema: a bug the writer must catch.
struct Mismatched;

impl TableRow for Mismatched {
    const TABLE: &'static str = "mismatched";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new(
            "size_bytes",
            DataType::UInt64,
            false,
        )]))
    }

    fn append(&self, row: &mut RowBuilder<'_>) {
        row.push(7u32);
    }
}

#[test]
fn a_panicking_writer_leaves_no_file() {
    let out = tempfile::tempdir().unwrap();
    let cfg = config(out.path(), 0, 0, 16);
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut writer = TableWriter::<Mismatched>::create(&cfg).unwrap();
        writer.push(&Mismatched).unwrap();
    }));
    let message = result.unwrap_err();
    let message = message.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("column `size_bytes` has Arrow type UInt64, but append pushed a u32"),
        "{message}"
    );
    assert!(listing(&out.path().join("mismatched")).is_empty());
}

#[test]
fn prepare_removes_stale_parts_and_nothing_else() {
    let out = tempfile::tempdir().unwrap();
    let root = out.path().join("run");

    // A previous run with more shards than the next one.
    for shard in 0..3 {
        write_all(&config(&root, 0, shard, 64), &flows(10));
    }
    let flows_dir = root.join("flows");
    fs::write(flows_dir.join("notes.txt"), "keep").unwrap();
    fs::write(flows_dir.join("summary.parquet"), "keep").unwrap();
    fs::create_dir(flows_dir.join("part-99999-99999.parquet")).unwrap();
    fs::write(root.join("run.json"), "{}").unwrap();
    fs::create_dir(root.join("figures")).unwrap();
    fs::write(root.join("figures/fct.png"), "keep").unwrap();

    prepare_output_dir(&root, TABLES).unwrap();

    assert_eq!(
        listing(&flows_dir),
        ["notes.txt", "part-99999-99999.parquet", "summary.parquet"]
    );
    assert_eq!(
        listing(&root),
        [
            "collectives",
            "faults",
            "figures",
            "flows",
            "links",
            "pfc",
            "queues",
            "switch_offload"
        ]
    );
    // The previous run's run.json goes first: until the new one is written
    // last, the directory is visibly incomplete.
    assert!(!root.join("run.json").exists());
    assert_eq!(listing(&root.join("figures")), ["fct.png"]);
    assert!(listing(&root.join("queues")).is_empty());

    // The next run's parts land beside the kept files, and only they are read as parts.
    assert_eq!(write_all(&config(&root, 0, 0, 64), &flows(5)), 5);
    assert!(flows_dir.join("part-00000-00000.parquet").is_file());
}

#[test]
fn run_json_is_written_atomically_and_replaced() {
    let out = tempfile::tempdir().unwrap();
    let first = serde_json::json!({ "scenario": "a", "seed": 1, "rows": { "flows": 3 } });
    write_run_json(out.path(), &first).unwrap();
    let second = serde_json::json!({ "scenario": "b", "seed": 2, "rows": { "flows": 4 } });
    write_run_json(out.path(), &second).unwrap();

    assert_eq!(listing(out.path()), ["run.json"]);
    let text = fs::read_to_string(out.path().join("run.json")).unwrap();
    assert!(text.ends_with('\n'));
    let read: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(read, second);
}

#[test]
fn errors_name_the_path_that_failed() {
    let out = tempfile::tempdir().unwrap();
    // A file where the table directory should be.
    fs::write(out.path().join("flows"), "not a directory").unwrap();
    let err = prepare_output_dir(out.path(), TABLES).unwrap_err();
    let flows_path = out.path().join("flows");
    assert!(
        err.to_string().contains(&flows_path.display().to_string()),
        "{err}"
    );

    let missing = out.path().join("missing");
    let err = write_run_json(&missing, &serde_json::json!({})).unwrap_err();
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );
}

#[test]
fn writers_can_move_to_shard_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<TableWriter<FlowRecord>>();
    assert_send::<TableWriter<QueueSample>>();
    assert_send::<TableWriter<PfcRecord>>();
}

#[test]
fn same_rows_give_byte_identical_files() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let rows = flows(700);
    write_all(&config(a.path(), 1, 4, 256), &rows);
    write_all(&config(b.path(), 1, 4, 256), &rows);
    let bytes = |dir: &Path| fs::read(dir.join("flows/part-00001-00004.parquet")).unwrap();
    assert!(bytes(a.path()) == bytes(b.path()));
}
