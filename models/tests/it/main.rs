//! The models crate's integration tests, one binary: the packet-level
//! network, flow level, collectives, DPUs, the Ultra Ethernet transport
//! and multi-plane fabrics against closed forms and conservation laws;
//! identical telemetry on any shard count; fast-forward against full packet
//! level; property tests over the readers of a user's files.
//!
//! One module per concern; run one with a filter:
//! `cargo test -p netsim-models --test it network_determinism::`.

mod common;

mod chakra;
mod chakra_runs;
mod collectives;
mod dpu;
mod fast_forward;
mod faults;
mod ff_domains;
mod ff_rails;
mod flow_ina;
mod flow_level;
mod fold;
mod goal;
mod idle_rows;
mod lazy;
mod lazy_dag;
mod load;
mod memo_near;
mod memory;
mod mocknccl;
mod nccl;
mod nccl_choice;
mod nccl_tree;
mod network;
mod network_determinism;
mod nvls;
mod parser_properties;
mod pipeline;
mod planes;
mod qp_rate;
mod qp_round_robin;
mod simbricks;
mod streamed_rows;
mod timely;
mod traces;
mod uec;
