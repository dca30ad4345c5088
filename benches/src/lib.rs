//! Benchmark models for netsim's engine.

pub mod phold;
