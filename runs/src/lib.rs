//! The netsim command line as a library: argument parsing, scenario files, wiring a run.

pub mod cli;
pub mod dpu_args;
pub mod dpu_bench;
pub mod dpu_bench_cmd;
pub mod fast_forward_args;
pub mod fault_args;
pub mod fcts;
pub mod jobs;
pub mod limits;
pub mod memory_check;
pub mod network_args;
pub mod partition_cmd;
pub mod progress;
pub mod ranks;
pub mod run_cmd;
pub mod run_plan;
pub mod run_sim;
pub mod run_summary;
pub mod run_tables;
pub mod scenario;
pub mod simbricks_args;
pub mod telemetry;
pub mod topo_cmd;
pub mod topology_args;
pub mod traffic_args;
pub mod workload_args;
