//! A black-box mutation campaign over the `netsim` binary: shipped scenario
//! files, workload files (TOML, SimAI text, GOAL and Chakra traces), an htsim connection matrix,
//! a SimAI topology file and flag values are mutated and run, each with a
//! time limit and a 4 GiB address space. Exit code 0, or 2 with one line on
//! stderr, passes; a panic, an abort, another exit code, a multi-line error
//! or a hang fails the test and the case is saved to reproduce.
//!
//! A case that outlives `NETSIM_FUZZ_CASE_SECS` (default 30) is reported as
//! slow and given until `NETSIM_FUZZ_HANG_SECS` (default 300) before it counts
//! as a hang: one mutated number can make a valid fabric of millions of links
//! whose routes take a minute to compute, which is work, not a hang.
//!
//! Bounded in time: `NETSIM_FUZZ_SECS` (default 20) of cases. A plain
//! `cargo test` runs the cases of [`FIXED_SEED`], the same every time; a
//! campaign (`NETSIM_FUZZ_SECS` set) draws a fresh seed from the clock;
//! `NETSIM_FUZZ_SEED` replays either. The seed is printed on failure. A
//! long campaign:
//!
//! ```text
//! NETSIM_FUZZ_SECS=1800 cargo test --release -p netsim --test it fuzz:: -- --nocapture
//! ```
//!
//! Every input a campaign finds goes into `bad_input.rs` as a regression case.

use crate::common;
use clap::CommandFactory;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A small deterministic generator (splitmix64): a seed replays a campaign.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Values that break parsers: limits of integer types, floats that do not
/// fit, empty and odd strings, ranges, names of things that exist.
const INTERESTING: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "16",
    "64",
    "255",
    "256",
    "1000",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "1e30",
    "-1e30",
    "1e-30",
    "NaN",
    "inf",
    "-inf",
    "0.0",
    "0.5",
    "1.5",
    "1e3",
    "0x10",
    "",
    " ",
    "x",
    "-",
    "--",
    "0-4294967295",
    "1,1",
    "0-3,2",
    "3-1",
    "1MiB",
    "0B",
    "18446744073709551615B",
    "1EiB",
    "tm:/nonexistent",
    "simai:/nonexistent",
    "on",
    "off",
    "ring",
    "tree",
    "hd",
    "ina",
    "direct",
    "all",
    "tp",
    "dp",
    "fat-tree",
    "dragonfly",
    "star",
    "hpn",
    "spectrum-x",
    "dcn-dual-tor",
    "metis",
    "structural",
    "spray",
    "ugal",
    "valiant",
    "hpcc",
    "dctcp",
    "none",
    "float16",
    "sharp",
    "\u{e9}\u{e9}",
    "\"",
    "[",
    "]",
    "=",
    "#",
    "{",
    "}",
    "requires",
    "irequires",
];

/// A connection matrix in htsim's format.
const MATRIX: &str = "# four flows\nNodes 8\nConnections 4\n0->1 id 1 start 0 size 65536\n\
                      2->3 start 1.5 size 100000\n4->0 start 0 size 4096\n7->6 size 1\n";

/// A SimAI workload header and layers: the format of SimAI/AICB files.
const SIMAI_WORKLOAD: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 \
     pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0\n2\n\
     embedding -1 2000 ALLREDUCE 65536 2000 NONE 0 2000 ALLREDUCE 131072 100\n\
     mlp -1 6000 ALLGATHER 65536 6000 NONE 0 6000 REDUCESCATTER 131072 100\n";

/// A GOAL trace: LogGOPSim's dissemination barrier of 16 ranks.
const GOAL: &str = include_str!("../data/goal/dissemination_16.goal");

/// One thing to run: the arguments and the files it reads.
struct Case {
    kind: &'static str,
    args: Vec<String>,
    files: Vec<(String, Vec<u8>)>,
}

/// How a case ended.
enum Verdict {
    /// Exit 0: valid input that fits.
    Valid,
    /// Exit 2 with one error line.
    Rejected,
    Fail(String),
}

struct Seeds {
    scenarios: Vec<(String, String)>,
    workloads: Vec<(String, Vec<u8>)>,
    chakra: [Vec<Vec<u8>>; 4],
    topology: String,
    run_flags: Vec<(String, bool)>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Shipped files whose runs are already too large for this test's debug
/// build within a case's time limit: one mutated number (k = 64, 9,216
/// GPUs) turns them into valid runs of minutes, which would read as hangs.
const TOO_LARGE_TO_SEED: &[&str] = &[
    "fat-tree-k16-permutation.toml",
    "simai-gpt-spectrum-x-1024.toml",
    "gpt-micro-simai-1024.txt",
    "simai-moe-9216.txt",
];

fn load_seeds(scratch: &Path) -> Seeds {
    let dir = repo_root().join("runs/scenarios");
    let mut scenarios = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.extension().is_some_and(|e| e == "toml")
            && !TOO_LARGE_TO_SEED.contains(&name.as_str())
        {
            scenarios.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    scenarios.sort();
    let mut workloads = Vec::new();
    for entry in std::fs::read_dir(dir.join("workloads")).unwrap().flatten() {
        let path = entry.path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !TOO_LARGE_TO_SEED.contains(&name.as_str()) {
            workloads.push((name, std::fs::read(&path).unwrap()));
        }
    }
    workloads.sort();
    // ASTRA-sim's 8-rank microbenchmarks: each rank's Chakra file.
    let chakra = ["all_reduce", "all_gather", "all_to_all", "reduce_scatter"].map(|set| {
        let dir = repo_root().join(format!("runs/tests/data/chakra/{set}/8npus_1MB"));
        let read = |r| std::fs::read(dir.join(format!("{set}.{r}.et"))).unwrap();
        (0..8).map(read).collect()
    });
    // A SimAI topology file, written by the binary itself.
    let topo = common::words("topo spectrum-x --gpus 16 --format simai -o topo.txt");
    let o = common::netsim_command(scratch, &topo, &[])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let topology = std::fs::read_to_string(scratch.join("topo.txt")).unwrap();
    let command = netsim::cli::Cli::command();
    let run = command.find_subcommand("run").unwrap();
    let run_flags = run
        .get_arguments()
        .filter_map(|a| Some((a.get_long()?.to_string(), a.get_action().takes_values())))
        .filter(|(long, _)| !matches!(long.as_str(), "out" | "help" | "version"))
        .collect();
    Seeds {
        scenarios,
        workloads,
        chakra,
        topology,
        run_flags,
    }
}

/// One to three edits of `text`: a number or a token replaced by an
/// interesting value, a line deleted, duplicated or added, a byte changed,
/// the text cut short.
fn mutate(rng: &mut Rng, text: &[u8], flags: &[(String, bool)]) -> Vec<u8> {
    let mut out = text.to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = out.len();
        match rng.below(9) {
            0 | 1 => {
                // A number: the digits around a random position.
                let digits: Vec<usize> = (0..len).filter(|&i| out[i].is_ascii_digit()).collect();
                if let Some(&at) = digits.get(rng.below(digits.len())) {
                    let (mut a, mut b) = (at, at);
                    while a > 0 && (out[a - 1].is_ascii_digit() || out[a - 1] == b'.') {
                        a -= 1;
                    }
                    while b < len && (out[b].is_ascii_digit() || out[b] == b'.') {
                        b += 1;
                    }
                    let value = rng.pick(INTERESTING).as_bytes().to_vec();
                    out.splice(a..b, value);
                }
            }
            2 => {
                // A whitespace-separated token.
                let starts: Vec<usize> = (0..len)
                    .filter(|&i| {
                        !out[i].is_ascii_whitespace()
                            && (i == 0 || out[i - 1].is_ascii_whitespace())
                    })
                    .collect();
                if let Some(&a) = starts.get(rng.below(starts.len())) {
                    let b = (a..len)
                        .find(|&i| out[i].is_ascii_whitespace())
                        .unwrap_or(len);
                    let value = rng.pick(INTERESTING).as_bytes().to_vec();
                    out.splice(a..b, value);
                }
            }
            3 | 4 => {
                let mut lines: Vec<Vec<u8>> =
                    out.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
                let i = rng.below(lines.len());
                match rng.below(3) {
                    0 => {
                        lines.remove(i);
                    }
                    1 => {
                        let line = lines[i].clone();
                        lines.insert(i, line);
                    }
                    _ => {
                        let (flag, _) = rng.pick(flags);
                        let value = rng.pick(INTERESTING);
                        let line = if value.parse::<f64>().is_ok() {
                            format!("{flag} = {value}")
                        } else {
                            format!("{flag} = \"{value}\"")
                        };
                        lines.insert(i, line.into_bytes());
                    }
                }
                out = lines.join(&b'\n');
            }
            5 if len > 0 => {
                let at = rng.below(len);
                out[at] = b' ' + (rng.next() % 95) as u8;
            }
            6 if len > 0 => {
                out.truncate(rng.below(len));
            }
            7 => {
                let at = rng.below(len + 1);
                let long = "9".repeat(1 + rng.below(20_000));
                out.splice(at..at, long.into_bytes());
            }
            _ => {
                let at = rng.below(len + 1);
                let value = rng.pick(INTERESTING).as_bytes().to_vec();
                out.splice(at..at, value);
            }
        }
    }
    out
}

/// Flags that keep a run short and its output in the case's directory.
fn short_run(args: &mut Vec<String>) {
    for a in common::words("--end-us 30 --threads 1 --quiet --out out") {
        args.push(a.to_string());
    }
}

fn random_flags(rng: &mut Rng, seeds: &Seeds, args: &mut Vec<String>) {
    for _ in 0..1 + rng.below(3) {
        let (flag, takes_value) = rng.pick(&seeds.run_flags);
        args.push(format!("--{flag}"));
        if *takes_value {
            args.push(rng.pick(INTERESTING).to_string());
        }
    }
}

fn make_case(rng: &mut Rng, seeds: &Seeds) -> Case {
    let s = |line: &str| {
        let words = common::words(line).into_iter();
        words.map(String::from).collect::<Vec<_>>()
    };
    let mut files: Vec<(String, Vec<u8>)> = seeds
        .workloads
        .iter()
        .map(|(name, text)| (format!("workloads/{name}"), text.clone()))
        .collect();
    let (kind, mut args) = match rng.below(8) {
        0 => {
            let (name, text) = rng.pick(&seeds.scenarios);
            files.push((name.clone(), mutate(rng, text.as_bytes(), &seeds.run_flags)));
            if rng.chance(30) {
                (
                    "scenario (validate)",
                    s(&format!("validate --config {name}")),
                )
            } else {
                let mut args = s(&format!("--config {name}"));
                short_run(&mut args);
                ("scenario", args)
            }
        }
        1 => {
            let (name, text) = rng.pick(&seeds.workloads).clone();
            let path = format!("workloads/{name}");
            let mutated = mutate(rng, &text, &seeds.run_flags);
            files.retain(|(n, _)| *n != path);
            files.push((path.clone(), mutated));
            let mut args = s(&format!("--topo star --hosts 16 --workload {path}"));
            short_run(&mut args);
            ("workload file", args)
        }
        2 => {
            files.push((
                "w.txt".into(),
                mutate(rng, SIMAI_WORKLOAD.as_bytes(), &seeds.run_flags),
            ));
            let mut args = s("--topo fat-tree --k 4 --workload w.txt");
            short_run(&mut args);
            ("SimAI workload", args)
        }
        3 => {
            files.push((
                "cm.txt".into(),
                mutate(rng, MATRIX.as_bytes(), &seeds.run_flags),
            ));
            let mut args = s("--topo star --hosts 8 --traffic tm:cm.txt");
            short_run(&mut args);
            ("connection matrix", args)
        }
        4 => {
            files.push((
                "topo.txt".into(),
                mutate(rng, seeds.topology.as_bytes(), &seeds.run_flags),
            ));
            let mut args = s("--topo simai:topo.txt");
            short_run(&mut args);
            ("SimAI topology", args)
        }
        5 => {
            files.push((
                "x.goal".into(),
                mutate(rng, GOAL.as_bytes(), &seeds.run_flags),
            ));
            let mut args = s("--topo fat-tree --k 4 --workload x.goal");
            short_run(&mut args);
            ("GOAL trace", args)
        }
        6 => {
            // The text edits split at 0x0a (a field-1 tag), change bytes and
            // cut short; the varint 2^32 - 1 is a length past any file.
            let mut ranks = rng.pick(&seeds.chakra).clone();
            let victim = rng.below(ranks.len());
            ranks[victim] = mutate(rng, &ranks[victim], &seeds.run_flags);
            let at = rng.below(ranks[victim].len() + 1);
            if rng.chance(30) {
                ranks[victim].splice(at..at, [0xff, 0xff, 0xff, 0xff, 0x0f]);
            }
            for (r, bytes) in ranks.into_iter().enumerate() {
                files.push((format!("trace.{r}.et"), bytes));
            }
            let mut args = s("--topo fat-tree --k 4 --workload trace");
            short_run(&mut args);
            ("Chakra trace", args)
        }
        _ => {
            let base: &[&str] = &[
                "--topo star --hosts 8",
                "--topo fat-tree --k 4",
                "--topo star --hosts 8 --workload allreduce",
                "--topo fat-tree --k 4 --workload alltoall --size 64KiB",
                "--topo dragonfly --p 2 --a 2 --h 1",
                "--topo spectrum-x --gpus 16",
            ];
            let chosen = base[rng.below(base.len())];
            let mut args = s(chosen);
            short_run(&mut args);
            random_flags(rng, seeds, &mut args);
            ("flags", args)
        }
    };
    if rng.chance(10) {
        args.insert(0, "validate".into());
        args.retain(|a| a != "--quiet");
    }
    Case { kind, args, files }
}

/// How long a case may run: past `slow` it is reported, past `hang` it fails.
#[derive(Clone, Copy)]
struct CaseLimits {
    slow: Duration,
    hang: Duration,
}

/// The case's verdict and how long it ran.
fn run_case(case: &Case, dir: &Path, limits: CaseLimits) -> (Verdict, Duration) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("workloads")).unwrap();
    for (name, bytes) in &case.files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
    let stderr_path = dir.join("stderr.txt");
    let mut child = common::netsim_command(dir, &args, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("netsim starts");
    let started = Instant::now();
    let status: ExitStatus = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limits.hang {
            let _ = child.kill();
            let _ = child.wait();
            let why = format!("no result after {} s (a hang?)", limits.hang.as_secs());
            return (Verdict::Fail(why), started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let ran = started.elapsed();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let tail = |s: &str| s.chars().take(600).collect::<String>();
    let verdict = match status.code() {
        _ if stderr.contains("panicked") => Verdict::Fail(format!("panic: {}", tail(&stderr))),
        Some(0) => Verdict::Valid,
        // A failed run must not leave a run.json that looks finished.
        Some(2) if dir.join("out/run.json").exists() => {
            Verdict::Fail(format!("exit 2 but out/run.json exists: {}", tail(&stderr)))
        }
        Some(2) if common::is_one_line_error(&stderr) => Verdict::Rejected,
        Some(2) => Verdict::Fail(format!("exit 2 without one error line: {}", tail(&stderr))),
        Some(code) => Verdict::Fail(format!("exit code {code}: {}", tail(&stderr))),
        None => Verdict::Fail(format!("killed by a signal ({status}): {}", tail(&stderr))),
    };
    (verdict, ran)
}

fn quoted(args: &[String]) -> String {
    args.iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The seed of the cases a plain `cargo test` runs: a failure there is
/// one that every checkout sees, not a seed of the day.
const FIXED_SEED: u64 = 0x6E65_7473_696D_0001;

/// `NETSIM_FUZZ_SEED`, else a fresh seed from the clock in a campaign
/// (`NETSIM_FUZZ_SECS` set), else [`FIXED_SEED`].
fn seed() -> u64 {
    let campaign = std::env::var_os("NETSIM_FUZZ_SECS").is_some();
    let default = if campaign {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    } else {
        FIXED_SEED
    };
    env_u64("NETSIM_FUZZ_SEED", default)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_input_never_crashes_hangs_or_exhausts_memory() {
    let budget = Duration::from_secs(env_u64("NETSIM_FUZZ_SECS", 20));
    let limits = CaseLimits {
        slow: Duration::from_secs(env_u64("NETSIM_FUZZ_CASE_SECS", 30)),
        hang: Duration::from_secs(env_u64("NETSIM_FUZZ_HANG_SECS", 300)),
    };
    let seed = seed();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{seed}"));
    std::fs::create_dir_all(&root).unwrap();
    let seeds = load_seeds(&root);
    let mut rng = Rng(seed);
    let started = Instant::now();
    let (mut cases, mut valid, mut slow, mut failures) = (0u64, 0u64, 0u64, Vec::new());
    let mut by_kind = std::collections::BTreeMap::<&str, u64>::new();
    while started.elapsed() < budget {
        let case = make_case(&mut rng, &seeds);
        let dir = root.join("case");
        cases += 1;
        *by_kind.entry(case.kind).or_default() += 1;
        let (verdict, ran) = run_case(&case, &dir, limits);
        if ran > limits.slow {
            slow += 1;
            eprintln!(
                "fuzz: case {cases} ({}) is slow: {:.0} s\n  netsim {}",
                case.kind,
                ran.as_secs_f64(),
                quoted(&case.args)
            );
        }
        valid += u64::from(matches!(verdict, Verdict::Valid));
        if let Verdict::Fail(why) = verdict {
            let keep = root.join(format!("failure-{cases}"));
            let _ = std::fs::rename(&dir, &keep);
            std::fs::write(keep.join("args.txt"), case.args.join("\n")).unwrap();
            eprintln!(
                "fuzz: case {cases} ({}) failed: {why}\n  netsim {}\n  files in {}",
                case.kind,
                quoted(&case.args),
                keep.display()
            );
            failures.push(why);
        }
    }
    eprintln!(
        "fuzz: seed {seed}: {cases} cases in {:.0} s ({by_kind:?}), {valid} valid (exit 0), \
         {slow} slow, {} failed",
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed; replay with NETSIM_FUZZ_SEED={seed}",
        failures.len()
    );
    let _ = std::fs::remove_dir_all(&root);
}
