//! What the `netsim` integration tests share: running the binary (plainly,
//! or in a directory with its address space limited and no MPI launcher in
//! its environment), a scratch directory per test, and reading a run back.

// Every test crate compiles this module for itself and uses a part of it.
#![allow(dead_code)]

pub mod tables;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `netsim args`, run to the end.
pub fn netsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netsim"))
        .args(args)
        .output()
        .expect("netsim runs")
}

/// An empty directory for the test `name`, unique to this test binary and
/// process (the binary's name is the crate's, so crates never share one).
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "netsim-{}-{}-{name}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

/// `netsim args` in `dir` with the extra environment `env`, which must end
/// with exit code 2 and one line on stderr containing `needle`; returns
/// that line.
pub fn rejects(dir: &Path, args: &[&str], env: &[(&str, &str)], needle: &str) -> String {
    let o = netsim_command(dir, args, env)
        .output()
        .expect("netsim runs");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(is_one_line_error(&err), "{args:?}: not one line: {err}");
    assert!(err.contains(needle), "{args:?}: `{needle}` not in: {err}");
    err.trim_end().to_string()
}

/// `netsim args --quiet --out out` in `dir`, which must succeed (else its
/// stderr is the panic); returns the output directory.
pub fn run_out(dir: &Path, args: &[&str], out: &str) -> PathBuf {
    let args = [args, &["--quiet", "--out", out]].concat();
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
