//! Reading a run's Parquet tables back: every part of a table, a column by
//! name and type, a cell rendered exactly.

use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrowPrimitiveType, PrimitiveArray, RecordBatch, StringArray};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Every row of the table in `dir`: the batches of its part files, in
/// file-name order (anything else in `dir` is passed over).
pub fn batches(dir: &Path) -> Vec<RecordBatch> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "parquet"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        out.extend(reader.map(Result::unwrap));
    }
    out
}

/// Column `name` of `batch`, of primitive type `T`; panics if it is missing
/// or of another type.
pub fn column<'a, T: ArrowPrimitiveType>(
    batch: &'a RecordBatch,
    name: &str,
) -> &'a PrimitiveArray<T> {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_primitive::<T>()
}

/// Text column `name` of `batch`; panics if it is missing or not text.
pub fn strings<'a>(batch: &'a RecordBatch, name: &str) -> &'a StringArray {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_string::<i32>()
}

/// One cell, exactly: floats by their bit pattern, nulls as `null`.
pub fn cell(column: &dyn Array, row: usize) -> String {
    if column.is_null(row) {
        return "null".to_owned();
    }
    match column.data_type() {
        DataType::UInt8 => column.as_primitive::<UInt8Type>().value(row).to_string(),
        DataType::UInt32 => column.as_primitive::<UInt32Type>().value(row).to_string(),
        DataType::UInt64 => column.as_primitive::<UInt64Type>().value(row).to_string(),
        DataType::Float64 => format!(
            "f{:016x}",
            column.as_primitive::<Float64Type>().value(row).to_bits()
        ),
        DataType::Boolean => column.as_boolean().value(row).to_string(),
        DataType::Utf8 => column.as_string::<i32>().value(row).to_owned(),
        other => panic!("no rendering for column type {other}"),
    }
}

/// One row of a table: column -> cell (as [`cell`] renders it).
pub type Row = std::collections::BTreeMap<String, String>;

/// Every row of the table in `dir`, sorted: its content whatever the
/// shards that wrote its parts.
pub fn rows(dir: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    for b in &batches(dir) {
        let schema = b.schema();
        for i in 0..b.num_rows() {
            rows.push(
                schema
                    .fields()
                    .iter()
                    .zip(b.columns())
                    .map(|(f, c)| (f.name().clone(), cell(c.as_ref(), i)))
                    .collect::<Row>(),
            );
        }
    }
    rows.sort();
    rows
}

/// The flows table of the run in `out`, by flow id: what simulating each
/// flow gives (times, path, marks, counters), without the columns saying
/// how much of it was skipped; equal for a replayed flow and a simulated one.
pub fn flow_outcomes(out: &Path) -> Vec<Vec<String>> {
    const COLUMNS: [&str; 14] = [
        "flow_id",
        "src",
        "dst",
        "size_bytes",
        "start_ns",
        "end_ns",
        "fct_ns",
        "ideal_fct_ns",
        "ecmp_path",
        "ecn_marked_pkts",
        "cnps",
        "retransmitted_pkts",
        "finished",
        "collective_id",
    ];
    let mut table: Vec<Vec<String>> = rows(&out.join("flows"))
        .iter()
        .map(|r| COLUMNS.iter().map(|c| r[*c].clone()).collect())
        .collect();
    table.sort_by_key(|r| r[0].parse::<u64>().unwrap());
    table
}
