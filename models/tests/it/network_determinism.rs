//! The network model on 1, 2 and 4 shards writes identical telemetry: the
//! same flow rows, queue samples, PFC events and link samples, value for value,
//! on fat-trees, dragonflies and rail-optimized GPU fabrics (whose partitions
//! cut GPU-to-rail-switch links), partitioned by estimated work as `netsim run`
//! does.

use crate::common::work_layout;
use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, EcmpMode, NetConfig};
use netsim_models::network::{simulate, Fabric};
use netsim_models::telemetry::MemorySink;
use netsim_models::traffic::{generate, TrafficPattern};
use netsim_partition::Strategy;
use netsim_topo::{
    build, DragonflyParams, FatTreeParams, Routing, SimaiParams, SimaiTemplate, TopoSpec,
};

/// Every row the run wrote, in a canonical order, as text: flows, queues,
/// PFC, links.
fn telemetry(fabric: &Fabric, shards: u32, strategy: Strategy) -> [Vec<String>; 4] {
    let layout = work_layout(fabric, shards, strategy);
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
    assert_same_on(fabric, &[2, 4], Strategy::Structural);
}

fn assert_same_on(fabric: &Fabric, shard_counts: &[u32], strategy: Strategy) {
    let reference = telemetry(fabric, 1, strategy);
    assert!(reference[0].len() == fabric.workload.flows.len());
    assert!(!reference[1].is_empty());
    assert!(!reference[3].is_empty());
    for &shards in shard_counts {
        let other = telemetry(fabric, shards, strategy);
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
fn fat_tree_uec_trimming_is_identical_on_1_2_4_shards_every_load_balancer() {
    use netsim_models::network::config::{LoadBalancing, Transport};
    for lb in [
        LoadBalancing::Oblivious,
        LoadBalancing::Bitmap,
        LoadBalancing::Reps,
    ] {
        let mut config = NetConfig {
            transport: Transport::Uec,
            cc: CcKind::None,
            pfc: false,
            trim: true,
            buffer_bytes: 256 << 10,
            sample_period: SimTime::from_us(5),
            ..NetConfig::default()
        };
        config.uec.lb = lb;
        let fabric = fabric(small_fat_tree(), config, 300_000);
        assert_same_on_1_2_4_shards(&fabric);
    }
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

/// A 32-GPU Spectrum-X (4 servers, 8 rail switches): every multi-shard partition cuts
/// GPU-to-rail links, since a server's 8 GPUs hang off 8 different rail switches.
fn small_spectrum_x() -> TopoSpec {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 32;
    TopoSpec::Simai(p)
}

#[test]
fn spectrum_x_traffic_is_identical_on_1_2_4_shards_both_strategies() {
    let config = NetConfig {
        sample_period: SimTime::from_us(5),
        ..NetConfig::default()
    };
    let fabric = fabric(small_spectrum_x(), config, 300_000);
    assert_same_on(&fabric, &[2, 4], Strategy::Structural);
    assert_same_on(&fabric, &[3, 4], Strategy::Metis);
}

/// TP 4 all-reduces over NVSwitch, then DP all-reduces over the rails, with compute in
/// between: the AICB shape, on an HPN fabric (dual ToR) cut into 2 and 4 shards.
#[test]
fn hpn_tp_dp_workload_is_identical_on_1_2_4_shards() {
    use netsim_models::workload::groups::{GroupSpec, Parallelism};
    use netsim_models::workload::{
        build as build_workload, Algorithm, CollectiveOp, Dtype, OpSpec, Phase, PhaseKind,
        ReduceOp, WorkloadSpec,
    };
    let mut p = SimaiParams::defaults(SimaiTemplate::Hpn);
    p.gpus = 32;
    let topo = build(&TopoSpec::Simai(p)).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let config = NetConfig {
        sample_period: SimTime::from_us(5),
        ..NetConfig::default()
    };
    let allreduce = |group: GroupSpec, size_bytes: u64| OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ring,
        size_bytes,
        group,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    };
    let mut spec = WorkloadSpec::single(allreduce(GroupSpec::Tp, 256 << 10));
    spec.parallelism = Some(Parallelism::new(32, 4, 1, 1).unwrap());
    spec.phases.push(Phase {
        name: "compute".into(),
        kind: PhaseKind::Compute {
            duration: SimTime::from_us(2),
            group: GroupSpec::All,
        },
        after: vec![0],
        stage: None,
    });
    spec.phases.push(Phase {
        name: "dp".into(),
        kind: PhaseKind::Collective(allreduce(GroupSpec::Dp, 512 << 10)),
        after: vec![1],
        stage: None,
    });
    let workload = build_workload(&spec, &topo, &config).unwrap();
    let fabric = Fabric::with_workload(topo, routing, workload, config, 3);
    assert_same_on_1_2_4_shards(&fabric);
}
