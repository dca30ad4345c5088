//! Typed errors for topology generation, import, export and routing.

use std::path::PathBuf;

/// Everything that can go wrong building, reading, writing or routing a topology.
/// Messages name the offending flag, or the file, line and field.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// A generator parameter is out of range; `flag` is the command-line flag that sets it.
    #[error("{flag}: {message}")]
    BadParam {
        /// The flag (e.g. `--k`).
        flag: &'static str,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// The topology kind is not one this crate knows.
    #[error("unknown topology `{0}`; expected one of fat-tree, dragonfly, spectrum-x, hpn, hpn-dual-plane, dcn, dcn-dual-tor, star, simai:FILE")]
    UnknownKind(String),
    /// A SimAI-format file is malformed.
    #[error("{path}:{line}: {field}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The field on that line (`node_num`, `bandwidth`, ...).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The graph breaks a structural invariant (see [`crate::Topology`]).
    #[error("invalid topology: {0}")]
    Invalid(String),
    /// The graph exceeds an id or port-count limit.
    #[error("topology too large: {0}")]
    TooLarge(String),
    /// Some host cannot reach another through switches.
    #[error("host {from} cannot reach host {to}: the network is disconnected")]
    Unreachable {
        /// Source host.
        from: u32,
        /// Destination host.
        to: u32,
    },
}

impl TopoError {
    /// Shorthand for [`TopoError::BadParam`].
    pub fn param(flag: &'static str, message: impl Into<String>) -> TopoError {
        TopoError::BadParam {
            flag,
            message: message.into(),
        }
    }
}
