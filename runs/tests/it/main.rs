//! The `netsim` crate's integration tests, one binary: the binary end to
//! end (runs, bad input, the fuzz campaign), golden outputs, telemetry
//! schemas, fast-forward and memoization against full packet level,
//! agreement with published results. The MPI tests are `tests/mpi.rs`,
//! built with `--features mpi`.
//!
//! One module per concern; run one with a filter:
//! `cargo test -p netsim --test it golden::`.

mod common;

mod aicb;
mod bad_input;
mod cc_agreement;
mod chakra;
mod cli;
mod dpu;
mod dpu_bench;
mod fast_forward;
mod faults;
mod flow_ina;
mod flow_level;
mod fuzz;
mod golden;
mod host_jitter;
mod interrupt;
mod jobs;
mod lazy;
mod memo;
mod memo_draws;
mod memo_guard;
mod nccl;
mod partition;
mod schemas;
mod simai;
mod simai_rules;
mod telemetry;
mod traces;
mod uet_htsim;
