//! A dummy NIC to put under `netsim run --simbricks` by hand: listens,
//! sends five 1,500-byte probes to another host and prints what comes back.
//!
//! `cargo run -p simbricks --example dummy_nic -- SOCKET SHM HOST DST_HOST END_US`

use simbricks::dummy_nic::{self, Probe};
use simbricks::Params;
use std::time::Duration;

/// Host `h`'s MAC in netsim's static map: `02:00` and `h`, big endian.
fn mac(host: u32) -> [u8; 6] {
    let id = host.to_be_bytes();
    [2, 0, id[0], id[1], id[2], id[3]]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, shm, host, dst, end_us] = &args[..] else {
        return Err("usage: dummy_nic SOCKET SHM HOST DST_HOST END_US".into());
    };
    let (host, dst, end_us): (u32, u32, u64) = (host.parse()?, dst.parse()?, end_us.parse()?);
    let params = Params::parse(&format!("listen:{socket}:{shm}:sync=true"))?;
    let probes = (0..5)
        .map(|k| Probe {
            send_ps: (10 + 10 * u64::from(k)) * 1_000_000,
            dst_mac: mac(dst),
            frame_bytes: 1500,
            id: k,
        })
        .collect();
    let config = dummy_nic::Config {
        params,
        shm_path: shm.into(),
        mac: mac(host),
        probes,
        end_ps: end_us * 1_000_000,
        timeout: Duration::from_secs(60),
    };
    let report = dummy_nic::run(&config)?;
    for a in &report.arrivals {
        println!(
            "host {host}: probe {} sent {} ps arrived {} ps",
            a.id, a.send_ps, a.arrive_ps
        );
    }
    println!(
        "host {host}: sent {} received {} damaged {} syncs {} peer_terminated {}",
        report.sent,
        report.arrivals.len(),
        report.damaged,
        report.syncs_received,
        report.peer_terminated
    );
    Ok(())
}
