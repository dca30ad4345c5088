//! `--simbricks HOST=URL`: hosts whose port is a SimBricks Ethernet link, and
//! how a run with such links ends (peer failure, SIGTERM).

use crate::run_cmd::Fidelity;
use anyhow::{bail, Context as _};
use netsim_models::network::{ExternalPorts, Fabric};
use simbricks::{Channel, Params, Role};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by the SIGTERM handler; the network sends TERMINATE and stops.
static SIGTERM_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGTERM_SEEN.store(true, Ordering::Relaxed);
}

/// Flags of SimBricks co-simulation.
#[derive(clap::Args, Debug, Default)]
pub struct SimbricksArgs {
    /// Make host HOST's port a SimBricks Ethernet port, connecting to the
    /// peer NIC's socket: HOST=connect:SOCKET:sync=true[:latency=NS]
    /// [:sync_interval=NS] (SimBricks' URL). Repeatable. Host h's MAC is
    /// 02:00 followed by h (big endian).
    #[arg(
        long = "simbricks",
        value_name = "HOST=URL",
        help_heading = "SimBricks"
    )]
    pub simbricks: Vec<String>,
    /// Give host HOST's SimBricks port also the MAC MAC (aa:bb:cc:dd:ee:ff),
    /// for peers whose MAC is fixed (SimBricks' net_pktgen uses
    /// 00:00:00:00:00:ID). Repeatable.
    #[arg(
        long = "simbricks-mac",
        value_name = "HOST=MAC",
        help_heading = "SimBricks"
    )]
    pub simbricks_mac: Vec<String>,
    /// Seconds to wait for a SimBricks peer (to connect, or to let time
    /// advance) before the run fails.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400), help_heading = "SimBricks")]
    pub simbricks_timeout_s: u64,
}

impl SimbricksArgs {
    /// The links asked for, checked against a fabric of `hosts` hosts.
    pub fn parse(&self, hosts: u32) -> anyhow::Result<Vec<(u32, Params)>> {
        let mut links: Vec<(u32, Params)> = Vec::new();
        for spec in &self.simbricks {
            let (host, url) = spec
                .split_once('=')
                .with_context(|| format!("--simbricks {spec}: expected HOST=URL"))?;
            let host: u32 = host
                .parse()
                .with_context(|| format!("--simbricks {spec}: HOST is not a host id"))?;
            if host >= hosts {
                bail!("--simbricks {spec}: the fabric has hosts 0..{hosts}");
            }
            if links.iter().any(|(h, _)| *h == host) {
                bail!("--simbricks {spec}: host {host} already has a SimBricks link");
            }
            let params = Params::parse(url).with_context(|| format!("--simbricks {spec}"))?;
            if params.role != Role::Connect {
                bail!("--simbricks {spec}: netsim connects to NICs, which listen: use connect:");
            }
            links.push((host, params));
        }
        Ok(links)
    }

    /// The MACs assigned with `--simbricks-mac`, each to a host of `links`.
    pub fn parse_macs(&self, links: &[(u32, Params)]) -> anyhow::Result<Vec<([u8; 6], u32)>> {
        let mut macs: Vec<([u8; 6], u32)> = Vec::new();
        for spec in &self.simbricks_mac {
            let parsed = spec.split_once('=').and_then(|(host, mac)| {
                let bytes: Vec<u8> = mac
                    .split(':')
                    .map(|b| u8::from_str_radix(b, 16).ok().filter(|_| b.len() == 2))
                    .collect::<Option<_>>()?;
                Some((host.parse::<u32>().ok()?, <[u8; 6]>::try_from(bytes).ok()?))
            });
            let Some((host, mac)) = parsed else {
                bail!("--simbricks-mac {spec}: expected HOST=aa:bb:cc:dd:ee:ff");
            };
            if !links.iter().any(|(h, _)| *h == host) {
                bail!("--simbricks-mac {spec}: host {host} has no --simbricks link");
            }
            if macs.iter().any(|(m, _)| *m == mac) {
                bail!("--simbricks-mac {spec}: that MAC is already assigned");
            }
            macs.push((mac, host));
        }
        Ok(macs)
    }

    /// Connects the links (each peer must be listening within the timeout)
    /// and installs the SIGTERM handler; nothing when none were asked for.
    pub fn attach(
        &self,
        fabric: &Fabric,
        fidelity: Fidelity,
        ranks: usize,
    ) -> anyhow::Result<ExternalPorts> {
        let asked = self.parse(fabric.topo.host_count())?;
        let macs = self.parse_macs(&asked)?;
        if asked.is_empty() {
            return Ok(ExternalPorts::default());
        }
        if fidelity != Fidelity::Packet {
            bail!("--simbricks: frames need the packet level; use --fidelity packet");
        }
        if fabric.config.fast_forward.is_some() {
            bail!("--simbricks: fast-forward cannot jump over a co-simulator; drop --fast-forward");
        }
        if ranks > 1 {
            bail!("--simbricks: runs in one process; start it without mpirun");
        }
        let timeout = Duration::from_secs(self.simbricks_timeout_s);
        let mut links = Vec::with_capacity(asked.len());
        for (host, params) in asked {
            let channel = Channel::connect(&params, timeout)
                .with_context(|| format!("--simbricks host {host}"))?;
            links.push((host, channel));
        }
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(
                libc::SIGTERM,
                on_sigterm as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
        Ok(ExternalPorts::new(links, timeout, Some(&SIGTERM_SEEN)).with_macs(macs))
    }
}

/// A `[[simbricks]]` scenario table (`host`, `url`) as `--simbricks HOST=URL`.
pub fn table_spec(table: &toml::Value) -> anyhow::Result<String> {
    let toml::Value::Table(table) = table else {
        bail!("must be [[simbricks]] tables");
    };
    if let Some(other) = table.keys().find(|k| !matches!(k.as_str(), "host" | "url")) {
        bail!("unknown key `{other}` (host, url)");
    }
    match (table.get("host"), table.get("url")) {
        (Some(toml::Value::Integer(host)), Some(toml::Value::String(url))) => {
            Ok(format!("{host}={url}"))
        }
        _ => bail!("needs `host` (a host id) and `url` (a string)"),
    }
}

/// A run with SimBricks links stopped early: a peer's failure is the
/// run's error (one line); SIGTERM is a clean end; anything else unwinds on.
pub fn after_stop(fabric: &Fabric, panic: Box<dyn std::any::Any + Send>) -> anyhow::Result<()> {
    if let Some(error) = fabric.external.error() {
        bail!("{error}");
    }
    if SIGTERM_SEEN.load(Ordering::Relaxed) {
        eprintln!("netsim: SIGTERM: told the SimBricks peers TERMINATE; no tables written");
        return Ok(());
    }
    std::panic::resume_unwind(panic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_url_pairs_are_checked() {
        let args = |specs: &[&str]| SimbricksArgs {
            simbricks: specs.iter().map(|s| s.to_string()).collect(),
            simbricks_mac: Vec::new(),
            simbricks_timeout_s: 1,
        };
        let ok = args(&["3=connect:/tmp/a:sync=true:latency=500:sync_interval=500"])
            .parse(16)
            .unwrap();
        assert_eq!((ok[0].0, ok[0].1.latency_ps), (3, 500_000));
        for bad in [
            &["connect:/tmp/a:sync=true"][..],
            &["x=connect:/tmp/a:sync=true"],
            &["16=connect:/tmp/a:sync=true"],
            &["1=listen:/tmp/a:/tmp/s:sync=true"],
            &["1=connect:/tmp/a:sync=true", "1=connect:/tmp/b:sync=true"],
        ] {
            assert!(args(bad).parse(16).is_err(), "{bad:?} accepted");
        }
        let mut two = args(&["0=connect:/a:sync=true", "1=connect:/b:sync=true"]);
        let links = two.parse(2).unwrap();
        two.simbricks_mac = vec!["1=00:00:00:00:00:0a".into()];
        assert_eq!(
            two.parse_macs(&links).unwrap(),
            vec![([0, 0, 0, 0, 0, 10], 1)]
        );
        for bad in [
            &["1=00:00:00:00:00"][..],
            &["1=00:00:00:00:00:0g"],
            &["x=00:00:00:00:00:01"],
            &["2=00:00:00:00:00:01"],
            &["0=00:00:00:00:00:01", "1=00:00:00:00:00:01"],
        ] {
            two.simbricks_mac = bad.iter().map(|s| s.to_string()).collect();
            assert!(two.parse_macs(&links).is_err(), "{bad:?} accepted");
        }
        let table: toml::Value =
            toml::from_str("host = 5\nurl = \"connect:/s:sync=true\"").unwrap();
        assert_eq!(table_spec(&table).unwrap(), "5=connect:/s:sync=true");
        let table: toml::Value = toml::from_str("host = 5\nport = 1").unwrap();
        assert!(table_spec(&table).is_err());
    }
}
