//! `netsim._netsim`: the Rust side of the Python API. A run is parsed by the
//! CLI's own clap definitions (the Python side turns keyword arguments into
//! `netsim run` flags), simulated on a worker thread with the GIL released,
//! and its tables handed to pyarrow through the Arrow C data interface,
//! without a copy.

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::{Schema, SchemaRef};
use clap::Parser;
use netsim::cli::{expand_args, Cli, Command, Origins};
use netsim::ranks::one_line;
use netsim::run_tables::{KeptTable, RunTables};
use netsim_engine::{Progress, Stopped};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::ffi::OsString;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

mod fabric;

/// How often the calling thread looks for Ctrl-C and reports progress.
const POLL: Duration = Duration::from_millis(100);

/// A finished run: its tables and summary, in memory.
#[pyclass(frozen, module = "netsim._netsim")]
struct RunResult {
    tables: RunTables,
}

#[pymethods]
impl RunResult {
    /// What `run.json` holds, as JSON text.
    fn summary_json(&self) -> String {
        self.tables.summary.to_string()
    }

    /// The names of the run's tables, in the order the CLI lists them.
    fn table_names(&self) -> Vec<&'static str> {
        self.tables.tables.iter().map(|t| t.name).collect()
    }

    /// Table `name` as a `pyarrow.Table`, its buffers shared with Rust: one
    /// chunk per row group, parts in the order of their file names.
    fn table(&self, py: Python<'_>, name: &str) -> PyResult<PyObject> {
        let table = self.kept(name)?;
        let pyarrow = py.import("pyarrow")?;
        let batches = PyList::empty(py);
        for batch in table.parts.iter().flat_map(|p| &p.kept.batches) {
            batches.append(export_batch(&pyarrow, batch)?)?;
        }
        let schema = export_schema(&pyarrow, &run_schema(table))?;
        Ok(pyarrow
            .getattr("Table")?
            .call_method1("from_batches", (batches, schema))?
            .unbind())
    }

    /// The address of the first column's values buffer of every row group of
    /// table `name`, as Rust holds them: equal to pyarrow's when nothing was
    /// copied.
    fn value_addresses(&self, name: &str) -> PyResult<Vec<usize>> {
        let table = self.kept(name)?;
        Ok(table
            .parts
            .iter()
            .flat_map(|p| &p.kept.batches)
            .map(|b| b.column(0).to_data().buffers()[0].as_ptr() as usize)
            .collect())
    }

    /// Writes the run under `out_dir` as the CLI writes it: Parquet parts
    /// byte for byte the same, and `run.json`.
    fn save(&self, py: Python<'_>, out_dir: PathBuf) -> PyResult<()> {
        py.allow_threads(|| self.tables.save(&out_dir))
            .map_err(|e| PyOSError::new_err(one_line(&e.into())))
    }
}

impl RunResult {
    fn kept(&self, name: &str) -> PyResult<&KeptTable> {
        self.tables.table(name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "no table {name:?}; a run has {}",
                self.table_names().join(", ")
            ))
        })
    }
}

/// The schema of a whole table: a part's, without the metadata that names
/// the part (`netsim.rank`, `netsim.shard`).
fn run_schema(table: &KeptTable) -> SchemaRef {
    let schema = &table.parts[0].kept.schema;
    let metadata = schema
        .metadata()
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "netsim.rank" | "netsim.shard"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Arc::new(Schema::new_with_metadata(schema.fields().clone(), metadata))
}

/// `batch` as a `pyarrow.RecordBatch` sharing its buffers: pyarrow moves
/// the exported structures out and releases the buffers when it is done.
fn export_batch<'py>(
    pyarrow: &Bound<'py, PyModule>,
    batch: &RecordBatch,
) -> PyResult<Bound<'py, PyAny>> {
    let data = StructArray::from(batch.clone()).into_data();
    let array = FFI_ArrowArray::new(&data);
    let schema = FFI_ArrowSchema::try_from(data.data_type())
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    // Both stay where they are until the call returns; pyarrow leaves them
    // released, so dropping them afterwards frees nothing it holds.
    let (array, schema) = (Box::new(array), Box::new(schema));
    let imported = pyarrow.getattr("RecordBatch")?.call_method1(
        "_import_from_c",
        (
            &*array as *const FFI_ArrowArray as usize,
            &*schema as *const FFI_ArrowSchema as usize,
        ),
    )?;
    Ok(imported)
}

/// `schema` as a `pyarrow.Schema`.
fn export_schema<'py>(
    pyarrow: &Bound<'py, PyModule>,
    schema: &Schema,
) -> PyResult<Bound<'py, PyAny>> {
    let ffi = Box::new(
        FFI_ArrowSchema::try_from(schema).map_err(|e| PyRuntimeError::new_err(e.to_string()))?,
    );
    pyarrow.getattr("Schema")?.call_method1(
        "_import_from_c",
        (&*ffi as *const FFI_ArrowSchema as usize,),
    )
}

/// Runs `netsim` with the arguments `argv` (the program name first) on a
/// worker thread, the GIL released. Every 100 ms the calling thread looks
/// for Ctrl-C (the run stops; `KeyboardInterrupt` is raised and nothing is
/// returned) and calls `on_progress(sim_time_ns, events)` if given.
///
/// Bad arguments raise `ValueError` with the CLI's one-line message.
#[pyfunction]
#[pyo3(signature = (argv, on_progress=None))]
fn run(py: Python<'_>, argv: Vec<String>, on_progress: Option<PyObject>) -> PyResult<RunResult> {
    let args: Vec<OsString> = argv.into_iter().map(OsString::from).collect();
    let origins = Origins::of(&args);
    let parsed = expand_args(args).map_err(|e| PyValueError::new_err(one_line(&e)))?;
    let cli = Cli::try_parse_from(parsed).map_err(|e| PyValueError::new_err(clap_line(&e)))?;
    let Command::Run(mut run_args) = cli.command else {
        return Err(PyValueError::new_err("netsim.run runs a simulation"));
    };
    run_args.origins = origins;
    let progress = Arc::new(Progress::new());
    let (done, finished) = mpsc::channel::<()>();
    // Shared with the GIL-free closures below, which must be `Sync`.
    let finished = Mutex::new(finished);
    let worker = {
        let progress = Arc::clone(&progress);
        std::thread::Builder::new()
            .name("netsim-run".into())
            .spawn(move || {
                let outcome =
                    panic::catch_unwind(AssertUnwindSafe(|| run_args.run_in_memory(&progress)));
                drop(done);
                outcome
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the run: {e}")))?
    };
    loop {
        let waiting = py.allow_threads(|| finished.lock().expect("poll lock").recv_timeout(POLL));
        if waiting != Err(mpsc::RecvTimeoutError::Timeout) {
            break;
        }
        // Signal handlers run on the main thread, between these polls; so
        // does the progress bar, which may raise too.
        let polled = py.check_signals().and_then(|()| match &on_progress {
            Some(report) => report
                .call1(py, (progress.sim_time().as_ns(), progress.events()))
                .map(drop),
            None => Ok(()),
        });
        if let Err(raised) = polled {
            progress.stop();
            // The shards stop at their next window; the stopped run's
            // tables are dropped with it.
            let _ = py.allow_threads(|| worker.join());
            return Err(raised);
        }
    }
    match py.allow_threads(|| worker.join()) {
        Ok(Ok(Ok(tables))) => Ok(RunResult { tables }),
        Ok(Ok(Err(error))) => Err(PyValueError::new_err(one_line(&error))),
        Ok(Err(payload)) | Err(payload) => Err(PyRuntimeError::new_err(panic_text(&*payload))),
    }
}

/// `netsim topo` with the arguments `argv` (the program name first): the
/// fabric's nodes and links as two `pyarrow.RecordBatch`es, shared with
/// Rust. Bad arguments raise `ValueError` with the CLI's one-line message.
#[pyfunction]
fn topology(py: Python<'_>, argv: Vec<String>) -> PyResult<(PyObject, PyObject)> {
    let cli = Cli::try_parse_from(argv).map_err(|e| PyValueError::new_err(clap_line(&e)))?;
    let Command::Topo(cmd) = cli.command else {
        return Err(PyValueError::new_err(
            "netsim.topology generates a topology",
        ));
    };
    let topo = py
        .allow_threads(|| cmd.topology.generate(&cmd.kind))
        .map_err(|e| PyValueError::new_err(one_line(&e)))?;
    let pyarrow = py.import("pyarrow")?;
    Ok((
        export_batch(&pyarrow, &fabric::nodes(&topo))?.unbind(),
        export_batch(&pyarrow, &fabric::links(&topo))?.unbind(),
    ))
}

/// A clap error on one line, as the `netsim` binary prints it.
fn clap_line(error: &clap::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or("invalid arguments");
    first.trim_start_matches("error: ").to_string()
}

/// What a run that panicked said (a bug: the panic message was printed too).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if payload.is::<Stopped>() {
        return "the run was stopped".into();
    }
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic");
    format!("netsim panicked: {text}")
}

/// The extension module.
#[pymodule]
fn _netsim(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(run, module)?)?;
    module.add_function(wrap_pyfunction!(topology, module)?)?;
    module.add_class::<RunResult>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
