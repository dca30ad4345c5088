//! Link faults of one direction: a degraded transmitter slows what it
//! sends and nothing that comes back over the same link.

use netsim_engine::SimTime;
use netsim_models::faults::parse_fault;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::network::{simulate, Fabric, FaultPlan};
use netsim_topo::{build, FatTreeParams, Routing, TopoSpec};

use crate::common::{flow, flows, layout};

/// The FCTs of a flow from host 0 to the last host and one back, with host
/// 0's uplink at `gbps` from time zero, both ways (`sep` `-`) or from host
/// 0 only (`->`).
fn both_ways_with(sep: &str, gbps: u32) -> (u64, u64) {
    let topo = build(&TopoSpec::FatTree(FatTreeParams {
        k: 4,
        ..FatTreeParams::default()
    }))
    .unwrap();
    let routing = Routing::build(&topo).unwrap();
    let last = topo.host_count() - 1;
    let edge = topo.ports(0)[0].peer;
    let spec = format!("link-rate:0{sep}{edge}@0ns={gbps}");
    let faults = vec![parse_fault(&spec, &topo).unwrap()];
    let plan = FaultPlan::new(&topo, faults, SimTime::from_us(100), |dead| {
        Routing::build_avoiding(&topo, None, dead, u64::MAX)
    })
    .unwrap();
    let config = NetConfig {
        cc: CcKind::None,
        sample_period: SimTime::ZERO,
        ..NetConfig::default()
    };
    let flows_in = vec![flow(0, last, 1 << 20), flow(last, 0, 1 << 20)];
    let mut fabric = Fabric::new(topo, routing, flows_in, config, 1);
    fabric.faults = plan;
    let layout = layout(&fabric.topo, 1);
    let run = simulate(&fabric, &layout, SimTime::MAX, None, |_| {
        netsim_models::telemetry::MemorySink::default()
    });
    let f = flows(&run);
    (f[0].fct_ns.unwrap(), f[1].fct_ns.unwrap())
}

#[test]
fn a_one_way_rate_fault_slows_one_direction() {
    let (out_ns, back_ns) = both_ways_with("-", 25);
    let (out_one_way_ns, back_one_way_ns) = both_ways_with("->", 25);
    let (healthy_out_ns, healthy_back_ns) = both_ways_with("-", 100);
    // 1 MiB at a quarter of the rate: about four times the serialisation.
    assert!(out_ns > 3 * healthy_out_ns && back_ns > 3 * healthy_back_ns);
    // One way, the flow out is as slow (its ACKs, on the healthy way back,
    // leave a little earlier) and the flow back as fast as on a healthy
    // link, within 1% (its ACKs share the slow way out with the data).
    let near = |a: u64, b: u64| a.abs_diff(b) * 100 < b;
    assert!(near(out_one_way_ns, out_ns), "{out_one_way_ns} vs {out_ns}");
    assert!(
        near(back_one_way_ns, healthy_back_ns),
        "{back_one_way_ns} vs {healthy_back_ns}"
    );
}
