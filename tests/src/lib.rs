//! Cross-crate integration tests live in `tests/tests/`; this library holds nothing but their crate.
