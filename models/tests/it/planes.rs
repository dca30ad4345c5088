//! Multi-plane fat-trees under both transports: a host's NIC is striped over
//! the planes (one port, with its own line rate, in each), so an all-to-all
//! that is bound by the hosts' links gets about twice the goodput on two
//! planes; and the tables are the same on 1 and 2 shards.

use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, LoadBalancing, NetConfig, Transport};
use netsim_models::network::{simulate, Fabric, NetRun};
use netsim_models::telemetry::{FlowRecord, MemorySink};
use netsim_models::traffic::{generate, TrafficPattern};
use netsim_topo::{build, FatTreeParams, Routing, TopoSpec};

use crate::common::{flows, layout};

fn fat_tree(planes: u32) -> TopoSpec {
    TopoSpec::FatTree(FatTreeParams {
        k: 4,
        planes,
        ..FatTreeParams::default()
    })
}

/// The UEC defaults as `netsim run --transport uec` sets them: lossy, trimming.
fn uec() -> NetConfig {
    let mut config = NetConfig {
        transport: Transport::Uec,
        pfc: false,
        trim: true,
        cc: CcKind::None,
        ..NetConfig::default()
    };
    config.uec.lb = LoadBalancing::Bitmap;
    config
}

fn run(
    spec: &TopoSpec,
    pattern: TrafficPattern,
    config: &NetConfig,
    shards: u32,
) -> NetRun<MemorySink> {
    let topo = build(spec).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let flows = generate(&pattern, topo.host_count(), 200_000, 5).unwrap();
    let fabric = Fabric::new(topo, routing, flows, config.clone(), 1);
    let layout = layout(&fabric.topo, shards);
    simulate(&fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    })
}

/// Aggregate goodput, bits per second: the sum over flows of size over
/// completion time (each flow's average rate).
fn goodput_bps(flows: &[FlowRecord]) -> f64 {
    assert!(flows.iter().all(|f| f.finished));
    flows
        .iter()
        .map(|f| f.size_bytes as f64 * 8.0 / (f.fct_ns.unwrap() as f64 * 1e-9))
        .sum()
}

/// Delivered payload over the time the last flow ended, bits per second.
fn makespan_bps(flows: &[FlowRecord]) -> f64 {
    let bytes: u64 = flows.iter().map(|f| f.size_bytes).sum();
    let end_ns = flows.iter().map(|f| f.end_ns.unwrap()).max().unwrap();
    bytes as f64 * 8.0 / (end_ns as f64 * 1e-9)
}

#[test]
fn two_planes_double_an_all_to_all_bound_by_the_host_links() {
    for config in [NetConfig::default(), uec()] {
        let one = flows(&run(&fat_tree(1), TrafficPattern::AllToAll, &config, 1));
        let two = flows(&run(&fat_tree(2), TrafficPattern::AllToAll, &config, 1));
        // 16 hosts each sending 15 flows at once: one plane is bound by the
        // 100 Gb/s host links; two planes give each host two such links, so
        // the flows' rates add up to about twice as much (never more: each
        // port of the two-plane fabric carries a share of the same flows).
        let ratio = goodput_bps(&two) / goodput_bps(&one);
        assert!(
            (1.6..=2.05).contains(&ratio),
            "{:?}: goodput x{ratio:.2}",
            config.transport
        );
        // A flow keeps its plane (hashed per flow, UEC sprays inside it), so
        // the last flow ends on the busiest port, which carries more than half
        // of its host's flows: the whole all-to-all ends sooner, by less.
        let ratio = makespan_bps(&two) / makespan_bps(&one);
        assert!(
            (1.15..=2.05).contains(&ratio),
            "{:?}: makespan x{ratio:.2}",
            config.transport
        );
    }
}

#[test]
fn multi_plane_tables_match_on_one_and_two_shards() {
    for config in [NetConfig::default(), uec()] {
        let spec = fat_tree(2);
        let a = run(&spec, TrafficPattern::Permutation, &config, 1);
        let b = run(&spec, TrafficPattern::Permutation, &config, 2);
        assert_eq!(flows(&a), flows(&b), "{:?}", config.transport);
    }
}
