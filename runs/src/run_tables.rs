//! A run's tables and summary kept in memory instead of written (the Python
//! API's run), and saving them later as the very dataset the CLI writes.

use crate::telemetry::{
    prepare_output_dir, write_run_json, Kept, PartConfig, PartFile, TableRow, TableWriter,
    TelemetryError, DEFAULT_ROW_GROUP_ROWS, TABLES,
};
use std::path::Path;

/// Where a run's tables and `run.json` go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Parquet part files under `--out`, and `run.json` (the CLI).
    Files,
    /// Kept in memory and returned as [`RunTables`] (the Python API).
    Memory,
}

impl Output {
    /// A writer of table `R` for the part `part`.
    pub(crate) fn writer<R: TableRow>(
        self,
        part: &PartConfig,
    ) -> Result<TableWriter<R>, TelemetryError> {
        match self {
            Output::Files => TableWriter::create(part),
            Output::Memory => Ok(TableWriter::in_memory(part)),
        }
    }
}

/// One part of a table as a writer kept it: what would have been
/// `part-<rank>-<shard>.parquet`.
pub struct KeptPart {
    pub rank: u32,
    pub shard: u32,
    pub kept: Kept,
}

/// One table of a run: its parts in the order of their file names, which is
/// the order a dataset reader concatenates them in.
pub struct KeptTable {
    pub name: &'static str,
    /// Never empty: an empty table still has a part carrying its schema.
    pub parts: Vec<KeptPart>,
}

/// Everything a run writes, in memory.
pub struct RunTables {
    /// Every table of [`TABLES`], in that order.
    pub tables: Vec<KeptTable>,
    /// What `run.json` holds.
    pub summary: serde_json::Value,
    /// Recorded in every part file (see [`PartFile::create`]).
    pub(crate) scenario: String,
    pub(crate) seed: u64,
}

impl RunTables {
    /// Writes the run under `out_dir` as the CLI would have: one Parquet
    /// file per part, the same row groups and metadata (so the same bytes),
    /// and `run.json` last.
    pub fn save(&self, out_dir: &Path) -> Result<(), TelemetryError> {
        prepare_output_dir(out_dir, TABLES)?;
        for table in &self.tables {
            for part in &table.parts {
                let config = PartConfig {
                    out_dir: out_dir.to_owned(),
                    scenario: self.scenario.clone(),
                    seed: self.seed,
                    rank: part.rank,
                    shard: part.shard,
                    row_group_rows: DEFAULT_ROW_GROUP_ROWS,
                };
                let mut file = PartFile::create(&config, table.name, &part.kept.schema)?;
                for batch in &part.kept.batches {
                    file.write(batch)?;
                }
                file.finish()?;
            }
        }
        write_run_json(out_dir, &self.summary)
    }

    /// The table named `name`, if a run writes one.
    pub fn table(&self, name: &str) -> Option<&KeptTable> {
        self.tables.iter().find(|t| t.name == name)
    }
}
