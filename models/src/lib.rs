//! netsim-models: the network (ports, switches, NICs, congestion control) and workload models.

pub mod dpu;
pub mod faults;
pub mod flow;
pub mod load;
pub mod network;
pub mod telemetry;
pub mod traffic;
pub mod workload;
