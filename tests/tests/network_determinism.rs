//! The network model on 1, 2 and 4 shards writes identical telemetry: the
//! same flow rows, queue samples, PFC events and link samples, value for value.

use netsim_engine::{Layout, SimTime};
use netsim_models::network::config::{CcKind, EcmpMode, NetConfig};
use netsim_models::network::{simulate, Fabric};
use netsim_models::telemetry::MemorySink;
use netsim_models::traffic::{generate, TrafficPattern};
use netsim_partition::{partition, PartitionConfig, Strategy};
use netsim_topo::{build, DragonflyParams, FatTreeParams, Routing, TopoSpec};

/// Every row the run wrote, in a canonical order, as text: flows, queues,
/// PFC, links.
fn telemetry(fabric: &Fabric, shards: u32) -> [Vec<String>; 4] {
    let layout = if shards == 1 {
        Layout::blocks(fabric.topo.node_count(), 1, SimTime::MAX).unwrap()
    } else {
        let p = partition(
            &fabric.topo,
            &PartitionConfig {
                shards,
                strategy: Strategy::Structural,
                latency_floor_ps: 0,
            },
        )
        .unwrap();
        assert!(p.report.edge_cut > 0);
        Layout::new(p.shard_of, shards, p.lookahead).unwrap()
    };
    let run = simulate(fabric, &layout, SimTime::from_us(400), None, |_| {
        MemorySink::default()
    });
    let mut flows: Vec<String> = Vec::new();
    let mut queues: Vec<String> = Vec::new();
    let mut pfc: Vec<String> = Vec::new();
    let mut links: Vec<String> = Vec::new();
    for shard in &run.shards {
        flows.extend(shard.sink.flows.iter().map(|r| format!("{r:?}")));
        queues.extend(shard.sink.queues.iter().map(|r| format!("{r:?}")));
        pfc.extend(shard.sink.pfc.iter().map(|r| format!("{r:?}")));
        links.extend(shard.sink.links.iter().map(|r| format!("{r:?}")));
    }
    let mut tables = [flows, queues, pfc, links];
    for table in &mut tables {
        table.sort();
    }
    tables
}

fn fabric(spec: TopoSpec, config: NetConfig, flow_size: u64) -> Fabric {
    let topo = build(&spec).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let flows = generate(
        &TrafficPattern::Uniform { flows_per_host: 2 },
        topo.host_count(),
        flow_size,
        5,
    )
    .unwrap();
    Fabric::new(topo, routing, flows, config, 11)
}

fn assert_same_on_1_2_4_shards(fabric: &Fabric) {
    let reference = telemetry(fabric, 1);
    assert!(reference[0].len() == fabric.workload.flows.len());
    assert!(!reference[1].is_empty());
    assert!(!reference[3].is_empty());
    for shards in [2, 4] {
        let other = telemetry(fabric, shards);
        for (table, (a, b)) in ["flows", "queues", "pfc", "links"]
            .iter()
            .zip(other.iter().zip(&reference))
        {
            assert_eq!(a, b, "{table} rows differ on {shards} shards");
        }
    }
}

fn small_fat_tree() -> TopoSpec {
    TopoSpec::FatTree(FatTreeParams {
        k: 4,
        ..FatTreeParams::default()
    })
}

fn small_dragonfly() -> TopoSpec {
    TopoSpec::Dragonfly(DragonflyParams {
        p: 2,
        a: 4,
        h: 2,
        groups: None,
        ..DragonflyParams::default()
    })
}

#[test]
fn fat_tree_dcqcn_lossless_is_identical_on_1_2_4_shards() {
    let config = NetConfig {
        sample_period: SimTime::from_us(5),
        buffer_bytes: 1 << 20,
        ..NetConfig::default()
    };
    let fabric = fabric(small_fat_tree(), config, 300_000);
    assert_same_on_1_2_4_shards(&fabric);
}

#[test]
fn dragonfly_dctcp_lossy_spray_is_identical_on_1_2_4_shards() {
    let config = NetConfig {
        cc: CcKind::Dctcp,
        pfc: false,
        ecmp: EcmpMode::Spray,
        buffer_bytes: 256 << 10,
        sample_period: SimTime::from_us(5),
        ..NetConfig::default()
    };
    let fabric = fabric(small_dragonfly(), config, 300_000);
    assert_same_on_1_2_4_shards(&fabric);
}

#[test]
fn dragonfly_hpcc_ugal_is_identical_on_1_2_4_shards() {
    use netsim_models::network::config::DragonflyRouting;
    let config = NetConfig {
        cc: CcKind::Hpcc,
        dragonfly_routing: DragonflyRouting::Ugal,
        sample_period: SimTime::from_us(5),
        ..NetConfig::default()
    };
    let fabric = fabric(small_dragonfly(), config, 300_000);
    assert_same_on_1_2_4_shards(&fabric);
}
