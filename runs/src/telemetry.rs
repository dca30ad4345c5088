//! Telemetry output: Parquet tables streamed per shard, `run.json`, and the output directory.
//!
//! A run writes one Hive-style dataset per table (DESIGN §6):
//!
//! ```text
//! <out>/run.json
//! <out>/flows/part-<rank>-<shard>.parquet     one file per (rank, shard), e.g. part-00000-00003.parquet
//! <out>/queues/part-<rank>-<shard>.parquet
//! <out>/pfc/part-<rank>-<shard>.parquet
//! <out>/links/part-<rank>-<shard>.parquet
//! ```
//!
//! Every file is written under a hidden temporary name (`.part-….parquet.tmp`,
//! which neither `*.parquet` globs nor pyarrow's dataset discovery pick up) and
//! renamed only when complete, so a failed or crashed run never leaves a file
//! that looks finished. A run calls [`prepare_output_dir`] once, opens one
//! [`TableWriter`] per table in each shard, and ends with [`write_run_json`].
//!
//! Adding a table: declare its columns once with `table_row!` in
//! `telemetry/tables.rs` (name, value type, and how to read it from the
//! record; the schema and the append are generated from that list) and list
//! it in [`TABLES`].

mod row;
mod tables;
mod writer;

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use parquet::errors::ParquetError;
use serde::Serialize;
use thiserror::Error;

pub(crate) use row::table_row;
pub use row::{column, CellValue, RowBuilder, TableRow};
pub use tables::TABLES;
pub use writer::{part_name, Kept, PartConfig, PartFile, TableWriter, DEFAULT_ROW_GROUP_ROWS};

/// Writing telemetry failed; each variant names the path that failed.
#[derive(Debug, Error)]
pub enum TelemetryError {
    /// The output directory or a table directory could not be created.
    #[error("cannot create directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A table directory could not be listed while looking for stale part files.
    #[error("cannot list directory {path}: {source}")]
    ListDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A part file or `run.json` left by a previous run could not be removed.
    #[error("cannot remove the previous run's {path}: {source}")]
    RemoveStale {
        /// The part file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Creating, writing or syncing a (temporary) file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A finished temporary file could not be renamed to its final name.
    #[error("cannot rename {from} to {to}: {source}")]
    Rename {
        /// The temporary file.
        from: PathBuf,
        /// The final name.
        to: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The Parquet encoder failed (usually an I/O error underneath).
    #[error("cannot write Parquet file {path}: {source}")]
    Parquet {
        /// The temporary part file being written.
        path: PathBuf,
        /// The encoder's error.
        source: ParquetError,
    },
    /// The run summary could not be serialized to JSON.
    #[error("cannot serialize {path}: {source}")]
    Json {
        /// The `run.json` that was to be written.
        path: PathBuf,
        /// The serializer's error.
        source: serde_json::Error,
    },
}

/// Creates `out_dir` and one directory per table, and removes the part files a
/// previous run left in them, so a re-run into the same directory never mixes
/// old parts into the new dataset.
///
/// The previous run's `run.json` goes first: from then on the directory is
/// visibly incomplete until [`write_run_json`] writes the new one last, so it
/// never looks like a finished run it is not (a run that fails midway leaves
/// no `run.json`). Otherwise only files named `part-*.parquet` directly
/// inside the listed table directories are removed; everything else
/// (figures, notes, other directories) stays. Call it once per run before any
/// [`TableWriter`] is created; under MPI, on one rank before the others start
/// writing.
pub fn prepare_output_dir(out_dir: &Path, tables: &[&str]) -> Result<(), TelemetryError> {
    create_dir(out_dir)?;
    let summary = out_dir.join("run.json");
    match fs::remove_file(&summary) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(TelemetryError::RemoveStale {
                path: summary,
                source: e,
            })
        }
        _ => {}
    }
    for table in tables {
        let dir = out_dir.join(table);
        create_dir(&dir)?;
        let list_err = |source| TelemetryError::ListDir {
            path: dir.clone(),
            source,
        };
        for entry in fs::read_dir(&dir).map_err(list_err)? {
            let entry = entry.map_err(list_err)?;
            let name = entry.file_name();
            let is_part = name
                .to_str()
                .is_some_and(|n| n.starts_with("part-") && n.ends_with(".parquet"));
            if is_part && !entry.file_type().map_err(list_err)?.is_dir() {
                let path = entry.path();
                fs::remove_file(&path)
                    .map_err(|source| TelemetryError::RemoveStale { path, source })?;
            }
        }
    }
    Ok(())
}

/// Writes `run` as pretty-printed JSON to `<out_dir>/run.json`, atomically:
/// readers see the previous file or the complete new one, never a torn one.
///
/// Accepts a `serde_json::Value` or any serializable summary struct. Under
/// MPI, one rank writes it.
pub fn write_run_json<T: Serialize + ?Sized>(
    out_dir: &Path,
    run: &T,
) -> Result<(), TelemetryError> {
    let path = out_dir.join("run.json");
    let mut text = match serde_json::to_vec_pretty(run) {
        Ok(text) => text,
        Err(source) => return Err(TelemetryError::Json { path, source }),
    };
    text.push(b'\n');
    let (temp, mut file) = TempFile::create(out_dir.join(".run.json.tmp"))?;
    file.write_all(&text)
        .and_then(|()| file.sync_all())
        .map_err(|source| TelemetryError::Write {
            path: temp.path.clone(),
            source,
        })?;
    drop(file);
    temp.commit(&path)
}

fn create_dir(path: &Path) -> Result<(), TelemetryError> {
    fs::create_dir_all(path).map_err(|source| TelemetryError::CreateDir {
        path: path.to_owned(),
        source,
    })
}

/// A file written under a temporary name and renamed into place when complete.
///
/// Dropping it uncommitted (an error was returned, or a panic unwinds) removes
/// the temporary file, so nothing half-written outlives the failure.
struct TempFile {
    path: PathBuf,
    committed: bool,
}

impl TempFile {
    /// Creates (or truncates) the temporary file.
    fn create(path: PathBuf) -> Result<(Self, File), TelemetryError> {
        match File::create(&path) {
            Ok(file) => Ok((
                TempFile {
                    path,
                    committed: false,
                },
                file,
            )),
            Err(source) => Err(TelemetryError::Write { path, source }),
        }
    }

    /// Renames the temporary file to `final_path`, replacing any file there.
    /// The caller must have closed and synced it.
    fn commit(mut self, final_path: &Path) -> Result<(), TelemetryError> {
        fs::rename(&self.path, final_path).map_err(|source| TelemetryError::Rename {
            from: self.path.clone(),
            to: final_path.to_owned(),
            source,
        })?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the run is already failing with a better error than
            // this one could give, and drop cannot report it anyway.
            let _ = fs::remove_file(&self.path);
        }
    }
}
