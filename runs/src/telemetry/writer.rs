//! Streams one table's rows from one shard into a Parquet part file with bounded memory.

use std::collections::HashMap;
use std::fs::File;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::row::{Columns, TableRow};
use super::{create_dir, TelemetryError, TempFile};

/// Rows per row group unless [`PartConfig::row_group_rows`] says otherwise:
/// large enough for good compression and fast scans, small enough that the
/// buffered rows of every table of every shard stay about a MB each. The
/// buffers are per shard, so they do not shrink as ranks are added: at
/// 65,536 rows they held 30+ MB of each rank of a 16k-host dragonfly.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 16_384;

/// Row groups written before their size doubles. Parquet allows at most
/// 32,767 row groups in a file; doubling every 4,096 keeps a part within
/// that up to about 17 billion rows at the default size, while tables of
/// ordinary size keep their row groups (and their bytes) as configured.
const ROW_GROUPS_PER_SIZE: u64 = 4_096;

/// Where one shard's part files go and what they record about the run.
#[derive(Clone, Debug)]
pub struct PartConfig {
    /// The run's output directory; each table is a subdirectory of it.
    pub out_dir: PathBuf,
    /// Scenario name, recorded as `netsim.scenario`.
    pub scenario: String,
    /// Root seed, recorded as `netsim.seed`.
    pub seed: u64,
    /// MPI rank writing the part (0 without MPI).
    pub rank: u32,
    /// Shard writing the part.
    pub shard: u32,
    /// Rows buffered before they are written out as one row group; bounds memory.
    pub row_group_rows: usize,
}

/// Writes the rows of table `R` produced by one shard to
/// `<out>/<R::TABLE>/part-<rank>-<shard>.parquet`, or keeps them in memory
/// ([`TableWriter::in_memory`], the Python API's run).
///
/// Rows are buffered in Arrow builders and written as a row group every
/// [`PartConfig::row_group_rows`] rows. The file only gets its final name in
/// [`TableWriter::finish`]; dropped before that (an error or a panic), the
/// writer removes its temporary file.
pub struct TableWriter<R: TableRow> {
    dest: Dest,
    columns: Columns,
    row_group_rows: usize,
    rows_written: u64,
    row_groups_written: u64,
    // `fn(&R)`: the writer consumes `R`s but holds none, so it is `Send` for any `R`.
    _rows: PhantomData<fn(&R)>,
}

/// Where a [`TableWriter`]'s row groups go.
enum Dest {
    // Boxed: the writer's state is large, and a memory writer needs none.
    File(Box<PartFile>),
    /// The batches a file would hold as its row groups, one each.
    Memory(Vec<RecordBatch>),
}

/// A table's rows as a writer kept them: every row group as a batch, in
/// order (none when they went to a file).
pub struct Kept {
    /// Rows pushed.
    pub rows: u64,
    /// The table's schema, with the part's metadata (see [`PartFile::create`]).
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl<R: TableRow> TableWriter<R> {
    /// Creates the table directory if needed and opens the part file under
    /// its temporary name (see [`PartFile::create`]).
    ///
    /// # Panics
    /// If `config.row_group_rows` is 0.
    pub fn create(config: &PartConfig) -> Result<Self, TelemetryError> {
        let file = PartFile::create(config, R::TABLE, &R::schema())?;
        Ok(Self::with_dest(config, Dest::File(Box::new(file))))
    }

    /// A writer that keeps its row groups in memory ([`TableWriter::finish_kept`]
    /// returns them) instead of writing a file; `config.out_dir` is unused.
    ///
    /// # Panics
    /// If `config.row_group_rows` is 0.
    pub fn in_memory(config: &PartConfig) -> Self {
        Self::with_dest(config, Dest::Memory(Vec::new()))
    }

    fn with_dest(config: &PartConfig, dest: Dest) -> Self {
        assert!(config.row_group_rows > 0, "row_group_rows must be positive");
        let columns = Columns::new::<R>(
            part_schema(config, R::TABLE, &R::schema()),
            config.row_group_rows,
        );
        TableWriter {
            dest,
            columns,
            row_group_rows: config.row_group_rows,
            rows_written: 0,
            row_groups_written: 0,
            _rows: PhantomData,
        }
    }

    /// Buffers one row, writing a row group when the buffer is full.
    pub fn push(&mut self, record: &R) -> Result<(), TelemetryError> {
        self.columns.push(record);
        if self.columns.rows() == self.row_group_rows {
            self.write_row_group()?;
        }
        Ok(())
    }

    /// Rows pushed so far, written or buffered.
    pub fn rows(&self) -> u64 {
        self.rows_written + self.columns.rows() as u64
    }

    /// Writes the buffered rows and the footer, syncs the file and renames it
    /// to its final name. Returns the table's row count for `run.json`.
    ///
    /// A table without rows still becomes a valid file carrying the schema,
    /// so readers of an empty table work.
    pub fn finish(self) -> Result<u64, TelemetryError> {
        self.finish_kept().map(|kept| kept.rows)
    }

    /// [`TableWriter::finish`], returning the row groups an in-memory writer kept.
    pub fn finish_kept(mut self) -> Result<Kept, TelemetryError> {
        if self.columns.rows() > 0 {
            self.write_row_group()?;
        }
        let schema = self.columns.schema().clone();
        let batches = match self.dest {
            Dest::File(file) => {
                file.finish()?;
                Vec::new()
            }
            Dest::Memory(batches) => batches,
        };
        Ok(Kept {
            rows: self.rows_written,
            schema,
            batches,
        })
    }

    /// Writes the buffered rows as one row group.
    fn write_row_group(&mut self) -> Result<(), TelemetryError> {
        let batch = self.columns.take_batch();
        self.rows_written += batch.num_rows() as u64;
        self.row_groups_written += 1;
        if self.row_groups_written.is_multiple_of(ROW_GROUPS_PER_SIZE) {
            self.row_group_rows = self.row_group_rows.saturating_mul(2);
        }
        match &mut self.dest {
            Dest::File(file) => file.write(&batch),
            Dest::Memory(batches) => {
                batches.push(batch);
                Ok(())
            }
        }
    }
}

/// `schema` with the part's metadata, as every part file records it:
/// `netsim.version`, `netsim.scenario`, `netsim.seed`, `netsim.table`,
/// `netsim.rank` and `netsim.shard`.
fn part_metadata(config: &PartConfig, table: &str) -> [(&'static str, String); 6] {
    [
        ("netsim.version", env!("CARGO_PKG_VERSION").to_owned()),
        ("netsim.scenario", config.scenario.clone()),
        ("netsim.seed", config.seed.to_string()),
        ("netsim.table", table.to_owned()),
        ("netsim.rank", config.rank.to_string()),
        ("netsim.shard", config.shard.to_string()),
    ]
}

/// The Arrow schema of a part: `schema` with [`part_metadata`], which is
/// what `pyarrow.parquet.read_schema` shows (arrow-ipc sorts its keys when
/// embedding it).
fn part_schema(config: &PartConfig, table: &str, schema: &SchemaRef) -> SchemaRef {
    let metadata: HashMap<String, String> = part_metadata(config, table)
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    Arc::new(schema.as_ref().clone().with_metadata(metadata))
}

/// The file name of rank `rank`'s shard `shard`'s part of a table.
pub fn part_name(rank: u32, shard: u32) -> String {
    format!("part-{rank:05}-{shard:05}.parquet")
}

/// One part file being written: `<out>/<table>/part-<rank>-<shard>.parquet`,
/// under a temporary name until [`PartFile::finish`].
pub struct PartFile {
    // Declared before `temp` so the file is closed before the guard removes it.
    writer: ArrowWriter<File>,
    temp: TempFile,
    path: PathBuf,
}

impl PartFile {
    /// Creates the table directory if needed and opens the part file of
    /// `table` (columns `schema`) under its temporary name. Every file
    /// records [`part_metadata`] as Parquet key-value metadata.
    pub fn create(
        config: &PartConfig,
        table: &str,
        schema: &SchemaRef,
    ) -> Result<Self, TelemetryError> {
        let dir = config.out_dir.join(table);
        create_dir(&dir)?;
        let name = part_name(config.rank, config.shard);
        let path = dir.join(&name);
        // The leading dot and the `.tmp` suffix hide the file from dataset
        // readers (pyarrow skips dot files, `*.parquet` globs do not match).
        let (temp, file) = TempFile::create(dir.join(format!(".{name}.tmp")))?;
        let props = WriterProperties::builder()
            // Snappy: fast, pure Rust, read by every Parquet reader.
            .set_compression(Compression::SNAPPY)
            // Each batch is flushed as one row group (see `write`), and
            // batches grow past `row_group_rows` on huge tables.
            .set_max_row_group_row_count(None)
            // File-level key-value metadata is what DuckDB, polars and
            // `pyarrow.parquet.read_metadata` show. Built from the array, not
            // a map, so its order and the file's bytes are reproducible.
            .set_key_value_metadata(Some(
                part_metadata(config, table)
                    .iter()
                    .map(|(key, value)| KeyValue::new((*key).to_owned(), value.clone()))
                    .collect(),
            ))
            .build();
        let schema = part_schema(config, table, schema);
        let writer = ArrowWriter::try_new(file, schema, Some(props)).map_err(|source| {
            TelemetryError::Parquet {
                path: temp.path.clone(),
                source,
            }
        })?;
        Ok(PartFile { writer, temp, path })
    }

    /// Writes `batch` as one row group.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), TelemetryError> {
        self.writer
            .write(batch)
            // One batch is one row group: close it now, including the final
            // short batch, so no encoded pages linger in memory.
            .and_then(|()| self.writer.flush())
            .map_err(|source| TelemetryError::Parquet {
                path: self.temp.path.clone(),
                source,
            })
    }

    /// Writes the footer, syncs the file and renames it to its final name.
    pub fn finish(self) -> Result<(), TelemetryError> {
        let PartFile { writer, temp, path } = self;
        let file = writer
            .into_inner()
            .map_err(|source| TelemetryError::Parquet {
                path: temp.path.clone(),
                source,
            })?;
        // Durable before visible: after a crash the final name must not point
        // at a file whose tail never reached the disk.
        file.sync_all().map_err(|source| TelemetryError::Write {
            path: temp.path.clone(),
            source,
        })?;
        drop(file);
        temp.commit(&path)
    }
}
