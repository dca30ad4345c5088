//! The topology crate's integration tests, one binary: generators against
//! closed-form counts, file formats, routing sanity and multi-plane fabrics.

mod formats;
mod generators;
mod planes;
mod routing;
mod three_tier;
