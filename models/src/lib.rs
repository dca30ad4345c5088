//! netsim-models: the network (ports, switches, NICs, congestion control) and workload models.

pub mod telemetry;
