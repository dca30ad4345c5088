//! What the `netsim` integration tests share: running the binary with its
//! arguments written as one command line (plainly, or in a directory with
//! its address space limited and no MPI launcher in its environment), a
//! scratch directory per test, the repository's files, and reading a run
//! back.

pub mod tables;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The arguments of `line`, split on whitespace as a shell splits words
/// without quotes: `"--topo fat-tree --k 4"`. No test passes an argument
/// that holds whitespace or is empty (a TOML inline table is written
/// without spaces: `{name="a",ranks=8}`).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// `netsim` with the arguments of `line` (see [`words`]), run to the end:
/// `netsim("--topo fat-tree --k 4 --workload allreduce")`.
pub fn netsim(line: impl AsRef<str>) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netsim"))
        .args(words(line.as_ref()))
        .output()
        .expect("netsim runs")
}

/// An empty directory for the test `name`, unique to this process and to
/// the test file that asks (tests in two files may share a name).
#[track_caller]
pub fn scratch(name: &str) -> PathBuf {
    let file = Path::new(std::panic::Location::caller().file())
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let dir = std::env::temp_dir().join(format!(
        "netsim-{}-{}-{file}-{name}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    assert_one_word(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The path of `relative` (a path under `runs/`, say
/// `scenarios/workloads/x.txt`) as one word of a command line.
pub fn runs_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    assert_one_word(&path);
    path.display().to_string()
}

/// A path that a command line of [`words`] would split is a setup the
/// tests cannot run in: say so rather than fail obscurely.
fn assert_one_word(path: &Path) {
    let text = path.display().to_string();
    assert!(
        !text.contains(char::is_whitespace),
        "{text}: the tests write paths into command lines split on whitespace"
    );
}

/// What a run wrote on stderr, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The run.json a run wrote into `out`.
pub fn run_json(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap()
}

/// The address space a case may use: a count that escapes its check aborts
/// on allocation instead of passing on a large machine.
pub const ADDRESS_SPACE_BYTES: u64 = 4 << 30;

/// The launcher variables `Ranks::init` looks for, cleared so that the
/// tests pass under `srun` or `mpirun` too.
const MPI_VARS: [&str; 9] = [
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "PMI_SIZE",
    "PMI_RANK",
    "PMIX_SIZE",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
    "SLURM_NTASKS",
    "SLURM_PROCID",
];

/// `netsim args` in `dir` with the extra environment `env`, the address
/// space limited to [`ADDRESS_SPACE_BYTES`]; not yet started.
pub fn netsim_command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_netsim"));
    command.args(args).current_dir(dir);
    for var in MPI_VARS {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    limit_address_space(&mut command, ADDRESS_SPACE_BYTES);
    command
}

/// `netsim` with the arguments of `line` in `dir` and the extra
/// environment `env`, which must end with exit code 2 and one line on
/// stderr containing `needle`; returns that line.
pub fn rejects(dir: &Path, line: &str, env: &[(&str, &str)], needle: &str) -> String {
    let args = words(line);
    let o = netsim_command(dir, &args, env)
        .output()
        .expect("netsim runs");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(is_one_line_error(&err), "{args:?}: not one line: {err}");
    assert!(err.contains(needle), "{args:?}: `{needle}` not in: {err}");
    err.trim_end().to_string()
}

/// `netsim line --quiet --out out` in `dir`, which must succeed (else its
/// stderr is the panic); returns the output directory.
pub fn run_out(dir: &Path, line: &str, out: &str) -> PathBuf {
    let args = [&words(line)[..], &["--quiet", "--out", out]].concat();
    let output = netsim_command(dir, &args, &[])
        .output()
        .expect("netsim runs");
    assert!(output.status.success(), "{}", stderr(&output));
    dir.join(out)
}

/// A run's `memo_hits` and `memo_misses` (run.json's `fast_forward`).
pub fn memo_counts(s: &serde_json::Value) -> (u64, u64) {
    let ff = &s["fast_forward"];
    (
        ff["memo_hits"].as_u64().unwrap(),
        ff["memo_misses"].as_u64().unwrap(),
    )
}

/// Bytes sent = delivered, across replays, and all of the workload's.
pub fn assert_conserved(s: &serde_json::Value, payload_bytes: u64) {
    assert_eq!(s["sent_payload_bytes"], s["delivered_payload_bytes"]);
    assert_eq!(s["sent_payload_bytes"].as_u64(), Some(payload_bytes));
}

#[cfg(unix)]
fn limit_address_space(command: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork
    // and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes as libc::rlim_t,
                rlim_max: bytes as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(unix))]
fn limit_address_space(_: &mut Command, _: u64) {}

/// Whether `stderr` of a run that exited with 2 is the promised error: one
/// line, `netsim: error: ...`, of reasonable length.
pub fn is_one_line_error(stderr: &str) -> bool {
    let lines: Vec<&str> = stderr.lines().collect();
    lines.len() == 1 && lines[0].starts_with("netsim: error: ") && lines[0].len() < 1500
}
