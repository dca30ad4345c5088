//! SimBricks' parameter "URLs": `connect:PATH:sync=BOOL[:latency=NS][:sync_interval=NS]`.
//!
//! The grammar is that of SimBricks' `lib/simbricks/parser/parser.c`
//! (`listen:SOCKET:SHM:sync=...` for listeners). Latency and sync interval
//! are in nanoseconds, as SimBricks' orchestration writes them (its channel
//! latency defaults to 500 ns).

use crate::Error;
use std::path::PathBuf;

/// Which end of the socket this side is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Connect to a listener's UNIX socket.
    Connect,
    /// Listen on the socket; the shared-memory pool is created at this path.
    Listen { shm_path: PathBuf },
}

/// One parsed URL with SimBricks' defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub role: Role,
    pub socket_path: PathBuf,
    /// Synchronised mode (`sync=true`): required, as SimBricks' parser makes it.
    pub sync: bool,
    pub latency_ps: u64,
    pub sync_interval_ps: u64,
}

fn bad(url: &str, why: &str) -> Error {
    Error::Url(format!("{why}: {url}"))
}

fn ns_to_ps(url: &str, value: &str) -> Result<u64, Error> {
    let ns: u64 = value
        .parse()
        .map_err(|_| bad(url, "not a whole number of nanoseconds"))?;
    ns.checked_mul(1000)
        .filter(|&ps| ps <= crate::LATENCY_PS_MAX)
        .ok_or_else(|| bad(url, "value above 100 ms"))
}

impl Params {
    /// Parses `url`, checking latency > 0 and latency >= sync interval when
    /// synchronised (SimBricks' `SimbricksBaseIfInit` rules).
    pub fn parse(url: &str) -> Result<Params, Error> {
        let mut parts = url.split(':');
        let role = parts.next().unwrap_or_default();
        let socket_path = parts.next().filter(|p| !p.is_empty());
        let socket_path =
            PathBuf::from(socket_path.ok_or_else(|| bad(url, "socket path missing"))?);
        let role = match role {
            "connect" => Role::Connect,
            "listen" => {
                let shm = parts.next().filter(|p| !p.is_empty());
                let shm = shm.ok_or_else(|| bad(url, "shared memory path missing"))?;
                Role::Listen {
                    shm_path: PathBuf::from(shm),
                }
            }
            _ => return Err(bad(url, "type is neither 'listen' nor 'connect'")),
        };
        let sync = match parts.next() {
            Some("sync=true") => true,
            Some("sync=false") => false,
            _ => return Err(bad(url, "expected sync=true or sync=false")),
        };
        let mut params = Params {
            role,
            socket_path,
            sync,
            latency_ps: crate::proto::DEFAULT_LATENCY_PS,
            sync_interval_ps: crate::proto::DEFAULT_LATENCY_PS,
        };
        for arg in parts {
            match arg.split_once('=') {
                Some(("latency", v)) => params.latency_ps = ns_to_ps(url, v)?,
                Some(("sync_interval", v)) => params.sync_interval_ps = ns_to_ps(url, v)?,
                _ => return Err(bad(url, "invalid optional parameter")),
            }
        }
        params.check().map_err(|why| bad(url, why))?;
        Ok(params)
    }

    /// SimBricks' own checks on link parameters.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.latency_ps == 0 {
            return Err("latency must be greater than zero");
        }
        if self.sync && self.sync_interval_ps == 0 {
            return Err("sync interval must be greater than zero");
        }
        if self.sync && self.latency_ps < self.sync_interval_ps {
            return Err("latency must be at least the sync interval");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_simbricks_test_url() {
        let p = Params::parse("connect:/some/path:sync=true:latency=100:sync_interval=42").unwrap();
        assert_eq!(p.role, Role::Connect);
        assert_eq!(p.socket_path, PathBuf::from("/some/path"));
        assert!(p.sync);
        assert_eq!((p.latency_ps, p.sync_interval_ps), (100_000, 42_000));
    }

    #[test]
    fn listen_url_and_defaults() {
        let p = Params::parse("listen:/ux/path:/shm/path:sync=false").unwrap();
        assert_eq!(
            p.role,
            Role::Listen {
                shm_path: PathBuf::from("/shm/path")
            }
        );
        assert!(!p.sync);
        assert_eq!((p.latency_ps, p.sync_interval_ps), (500_000, 500_000));
    }

    #[test]
    fn rejects_malformed_urls() {
        for url in [
            "",
            "connect",
            "connect::sync=true",
            "dial:/p:sync=true",
            "connect:/p",
            "connect:/p:sync=yes",
            "connect:/p:sync=true:latency=",
            "connect:/p:sync=true:latency=-1",
            "connect:/p:sync=true:latency=0",
            "connect:/p:sync=true:latency=10:sync_interval=20",
            "connect:/p:sync=true:bogus=1",
            "connect:/p:sync=true:latency=99999999999999999",
            "listen:/p:sync=true",
        ] {
            assert!(Params::parse(url).is_err(), "{url} accepted");
        }
    }
}
