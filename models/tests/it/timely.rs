//! TIMELY at packet level: a flow alone never sees its RTT rise, so it
//! runs at line rate; an incast's RTT does, and the senders slow down
//! before the switch has to pause them.

use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::network::profile::CcProfile;
use netsim_models::network::{simulate, Fabric, NetRun};
use netsim_models::telemetry::MemorySink;
use netsim_models::traffic::{generate, TrafficPattern};
use netsim_topo::{build, FatTreeParams, Routing, TopoSpec};

use crate::common::{flow, flows, layout};

fn fat_tree_k4() -> TopoSpec {
    TopoSpec::FatTree(FatTreeParams {
        k: 4,
        ..FatTreeParams::default()
    })
}

fn run(flows: Vec<netsim_models::traffic::FlowSpec>, config: NetConfig) -> NetRun<MemorySink> {
    let topo = build(&fat_tree_k4()).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let fabric = Fabric::new(topo, routing, flows, config, 1);
    let layout = layout(&fabric.topo, 1);
    simulate(&fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    })
}

fn simai(cc: CcKind) -> NetConfig {
    CcProfile::Simai.config(cc)
}

#[test]
fn a_flow_alone_runs_at_line_rate() {
    // Across the core: its RTT stays far below TLow (50 us), so every
    // round grows a rate already at the line's.
    let alone = vec![flow(0, 15, 4 << 20)];
    let timely = flows(&run(alone.clone(), simai(CcKind::Timely)));
    let line_rate = flows(&run(alone, simai(CcKind::None)));
    assert_eq!(timely[0].fct_ns, line_rate[0].fct_ns);
    assert!(timely[0].finished);
}

#[test]
fn an_incast_slows_down_before_the_switch_pauses_it() {
    let topo = build(&fat_tree_k4()).unwrap();
    let incast = generate(
        &TrafficPattern::Incast { degree: 15 },
        topo.host_count(),
        1 << 20,
        3,
    )
    .unwrap();
    let line_rate = run(incast.clone(), simai(CcKind::None));
    let timely = run(incast, simai(CcKind::Timely));
    // At line rate, 15 senders fill the last hop's queue until PFC pauses
    // them; TIMELY's RTT rises past TLow and its gradient turns positive,
    // so its rates fall before that.
    assert!(line_rate.stats().pfc_pauses > 0);
    assert_eq!(timely.stats().pfc_pauses, 0);
    let records = flows(&timely);
    assert!(records.iter().all(|f| f.finished));
    assert_eq!(timely.stats().delivered_payload_bytes, 15 << 20);
    // Every sender was cut below line rate at some point: none finishes
    // as early as it would alone.
    let alone_ns = flows(&line_rate)
        .iter()
        .map(|f| f.ideal_fct_ns)
        .max()
        .unwrap();
    assert!(records.iter().all(|f| f.fct_ns.unwrap() > 2 * alone_ns));
}
