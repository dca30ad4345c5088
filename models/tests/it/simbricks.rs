//! netsim as the network of a SimBricks co-simulation (issue 34): four dummy
//! NICs on a k=4 fat-tree beside netsim's own flows; probes arrive at
//! send + NIC latency + fabric delay (closed form) + netsim latency, the
//! same on every run and on 1 and 2 shards.

use crate::common::{fat_tree, flow, layout};
use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::network::{host_mac, simulate, ExternalPorts, Fabric};
use netsim_models::telemetry::MemorySink;
use simbricks::dummy_nic::{self, Arrival, Probe};
use simbricks::{Channel, Params};
use std::time::Duration;

const NIC_HOSTS: [u32; 4] = [0, 5, 10, 15];
const NIC_LATENCY_NS: u64 = 500;
const NET_LATENCY_NS: u64 = 800;
const SYNC_NS: u64 = 500;
const END_US: u64 = 400;
const TIMEOUT: Duration = Duration::from_secs(60);
/// The test fabric's links: 100 Gb/s, 1 us.
const RATE_BPS: u64 = 100_000_000_000;
const LINK_PS: u64 = 1_000_000;

/// Links from `src` to `dst` on a k=4 fat-tree (2 hosts per edge switch,
/// 4 per pod).
fn links_between(src: u32, dst: u32) -> u64 {
    if src / 2 == dst / 2 {
        2
    } else if src / 4 == dst / 4 {
        4
    } else {
        6
    }
}

/// Store and forward over idle links: every link serialises the frame and
/// adds its latency.
fn fabric_delay_ps(src: u32, dst: u32, frame_bytes: usize) -> u64 {
    let serialization_ps = frame_bytes as u64 * 8 * 1_000_000_000_000 / RATE_BPS;
    links_between(src, dst) * (serialization_ps + LINK_PS)
}

/// Probes of NIC `i`: to each other NIC, 30 us apart so none meet another.
fn probes(i: usize) -> Vec<Probe> {
    (0..6u32)
        .map(|k| {
            let dst = NIC_HOSTS[(i + 1 + k as usize % 3) % 4];
            Probe {
                send_ps: (20 + 50 * u64::from(k)) * 1_000_000 + i as u64 * 7_000_000,
                dst_mac: host_mac(dst),
                frame_bytes: [64, 1500, 777, 1536, 200, 1024][k as usize],
                id: i as u32 * 100 + k,
            }
        })
        .collect()
}

/// One co-simulation on `shards` shards: the NICs' arrivals and netsim's flow records.
fn cosimulate(shards: u32) -> (Vec<Vec<Arrival>>, Vec<netsim_models::telemetry::FlowRecord>) {
    let dir = tempfile::tempdir().unwrap();
    let nics: Vec<_> = (0..4)
        .map(|i| {
            let sock = dir.path().join(format!("nic{i}.sock"));
            let shm = dir.path().join(format!("nic{i}.shm"));
            let url = format!(
                "listen:{}:{}:sync=true:latency={NIC_LATENCY_NS}:sync_interval={SYNC_NS}",
                sock.display(),
                shm.display()
            );
            let config = dummy_nic::Config {
                params: Params::parse(&url).unwrap(),
                shm_path: shm,
                mac: host_mac(NIC_HOSTS[i]),
                probes: probes(i),
                end_ps: END_US * 1_000_000,
                timeout: TIMEOUT,
            };
            std::thread::spawn(move || dummy_nic::run(&config))
        })
        .collect();
    let links = (0..4)
        .map(|i| {
            let url = format!(
                "connect:{}:sync=true:latency={NET_LATENCY_NS}:sync_interval={SYNC_NS}",
                dir.path().join(format!("nic{i}.sock")).display()
            );
            let channel = Channel::connect(&Params::parse(&url).unwrap(), TIMEOUT).unwrap();
            (NIC_HOSTS[i], channel)
        })
        .collect();
    let topo = netsim_topo::build(&fat_tree(4, 3)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    // netsim's own flows, on edge switches no probe leaves by.
    let flows = vec![
        flow(2, 3, 1_000_000),
        flow(6, 7, 500_000),
        flow(8, 9, 700_000),
        flow(12, 13, 300_000),
    ];
    let mut fabric = Fabric::new(topo, routing, flows, NetConfig::default(), 11);
    fabric.external = ExternalPorts::new(links, TIMEOUT, None);
    let layout = layout(&fabric.topo, shards);
    let run = simulate(&fabric, &layout, SimTime::from_us(END_US), None, |_| {
        MemorySink::default()
    });
    assert_eq!(fabric.external.error(), None);
    let arrivals = nics
        .into_iter()
        .map(|nic| {
            let report = nic.join().unwrap().unwrap();
            assert_eq!((report.damaged, report.sent), (0, 6));
            report.arrivals
        })
        .collect();
    (arrivals, crate::common::flows(&run))
}

#[test]
fn probes_cross_a_fat_tree_in_closed_form_time_on_any_shard_count() {
    let (arrivals, flows) = cosimulate(1);
    let mut seen = 0;
    for (i, got) in arrivals.iter().enumerate() {
        for arrival in got {
            let src = NIC_HOSTS
                .iter()
                .position(|&h| host_mac(h) == arrival.src_mac)
                .unwrap();
            let expected = arrival.send_ps
                + NIC_LATENCY_NS * 1000
                + fabric_delay_ps(NIC_HOSTS[src], NIC_HOSTS[i], arrival.frame_bytes)
                + NET_LATENCY_NS * 1000;
            assert_eq!(
                arrival.arrive_ps, expected,
                "probe {} to host {}",
                arrival.id, NIC_HOSTS[i]
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 24, "every probe came back");
    assert_eq!(flows.len(), 4);
    assert!(
        flows.iter().all(|f| f.end_ns.is_some()),
        "netsim's flows finished"
    );
    assert_eq!(
        cosimulate(1),
        (arrivals.clone(), flows.clone()),
        "same on a second run"
    );
    assert_eq!(cosimulate(2), (arrivals, flows), "same on 2 shards");
}
