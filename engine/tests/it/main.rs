//! The engine's integration tests, one binary: its ordering contract end to
//! end (PHOLD identical on any number of shards) and the lookahead check.

mod determinism;
mod lookahead;
