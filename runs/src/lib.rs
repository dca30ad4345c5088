//! The netsim command line as a library: argument parsing, scenario files, wiring a run.

pub mod partition_cmd;
pub mod topo_cmd;
pub mod topology_args;
