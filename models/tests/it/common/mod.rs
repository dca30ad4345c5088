//! What the model integration tests share: a layout of a fabric over shards
//! (structural, or by estimated work as `netsim run` makes it), a run's
//! flow, collective and offload records in order, a flow spec in one line,
//! small fabrics.

use netsim_engine::{Layout, SimTime};
use netsim_models::load::node_work;
use netsim_models::network::{collective_records, Fabric, NetRun};
use netsim_models::telemetry::{CollectiveRecord, FlowRecord, MemorySink, SwitchOffloadRecord};
use netsim_models::traffic::FlowSpec;
use netsim_partition::{partition, partition_weighted, PartitionConfig, Strategy};
use netsim_topo::Topology;

/// `topo` on `shards` shards: one block for 1, else the structural
/// partition with no latency floor (its lookahead the partition's).
pub fn layout(topo: &Topology, shards: u32) -> Layout {
    if shards == 1 {
        Layout::blocks(topo.node_count(), 1, SimTime::MAX).unwrap()
    } else {
        let p = partition(
            topo,
            &PartitionConfig {
                shards,
                strategy: Strategy::Structural,
                latency_floor_ps: 0,
            },
        )
        .unwrap();
        Layout::new(p.shard_of, p.shards, p.lookahead).unwrap()
    }
}

/// `fabric` on `shards` shards as `netsim run` lays it out: one block for
/// 1, else partitioned by `strategy` weighted by the estimated work of each
/// node, no latency floor; asserts the partition cuts links.
pub fn work_layout(fabric: &Fabric, shards: u32, strategy: Strategy) -> Layout {
    if shards == 1 {
        return Layout::blocks(fabric.topo.node_count(), 1, SimTime::MAX).unwrap();
    }
    let work = node_work(
        &fabric.topo,
        &fabric.routing,
        &fabric.workload,
        &fabric.config,
    );
    let config = PartitionConfig {
        shards,
        strategy,
        latency_floor_ps: 0,
    };
    let p = partition_weighted(&fabric.topo, &config, &work).unwrap();
    assert!(p.report.edge_cut > 0);
    Layout::new(p.shard_of, shards, p.lookahead).unwrap()
}

/// Every flow record of `run`, whichever shard wrote it, in flow id order.
pub fn flows(run: &NetRun<MemorySink>) -> Vec<FlowRecord> {
    let mut flows: Vec<FlowRecord> = run
        .shards
        .iter()
        .flat_map(|s| s.sink.flows.clone())
        .collect();
    flows.sort_by_key(|f| f.flow_id);
    flows
}

/// Every collective's record of `run`, merged over its shards.
pub fn collectives(
    fabric: &netsim_models::network::Fabric,
    run: &NetRun<MemorySink>,
) -> Vec<CollectiveRecord> {
    collective_records(&fabric.workload, &run.spans())
}

/// Every switch's offload counters of `run`, in node order.
pub fn offload(run: &NetRun<MemorySink>) -> Vec<SwitchOffloadRecord> {
    let mut rows: Vec<SwitchOffloadRecord> = run
        .shards
        .iter()
        .flat_map(|s| s.sink.switch_offload.clone())
        .collect();
    rows.sort_by_key(|r| r.node);
    rows
}

/// A flow of `size_bytes` from `src` to `dst` starting at time zero.
pub fn flow(src: u32, dst: u32, size_bytes: u64) -> FlowSpec {
    FlowSpec {
        src,
        dst,
        size_bytes,
        start: SimTime::ZERO,
    }
}

/// The link of the small test fabrics: 100 Gb/s, 1 us.
pub fn link() -> netsim_topo::LinkParams {
    netsim_topo::LinkParams {
        bandwidth_bps: 100_000_000_000,
        latency_ps: 1_000_000,
    }
}

/// `hosts` hosts on one switch over [`link`]s.
pub fn star(hosts: u32) -> netsim_topo::TopoSpec {
    netsim_topo::TopoSpec::Star(netsim_topo::StarParams {
        hosts,
        host_link: link(),
    })
}

/// A non-blocking fat-tree of `tiers` tiers (2: a leaf-spine) over [`link`]s.
pub fn fat_tree(k: u32, tiers: u32) -> netsim_topo::TopoSpec {
    netsim_topo::TopoSpec::FatTree(netsim_topo::FatTreeParams {
        k,
        tiers,
        oversub: 1,
        host_link: link(),
        agg_link: link(),
        core_link: link(),
        ..netsim_topo::FatTreeParams::default()
    })
}

/// `--cc none`, no link sampling.
pub fn cc_none() -> netsim_models::network::config::NetConfig {
    netsim_models::network::config::NetConfig {
        cc: netsim_models::network::config::CcKind::None,
        sample_period: SimTime::ZERO,
        ..Default::default()
    }
}

/// `--cc none` with PFC: a lossless fabric, no link sampling.
pub fn lossless() -> netsim_models::network::config::NetConfig {
    netsim_models::network::config::NetConfig {
        pfc: true,
        ..cc_none()
    }
}

/// `spec` built on `topo` (ECMP seed 3).
pub fn workload_fabric(
    topo: &netsim_topo::TopoSpec,
    spec: &netsim_models::workload::WorkloadSpec,
    config: netsim_models::network::config::NetConfig,
) -> netsim_models::network::Fabric {
    let topo = netsim_topo::build(topo).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let workload = netsim_models::workload::build(spec, &topo, &config).unwrap();
    netsim_models::network::Fabric::with_workload(topo, routing, workload, config, 3)
}

/// `fabric` at flow level, to the end.
pub fn fluid(fabric: &netsim_models::network::Fabric) -> NetRun<MemorySink> {
    netsim_models::flow::check(fabric).unwrap();
    netsim_models::flow::simulate(fabric, SimTime::MAX, None, MemorySink::default())
}

/// `fabric` at packet level on one shard, to the end.
pub fn packets(fabric: &netsim_models::network::Fabric) -> NetRun<MemorySink> {
    let layout = layout(&fabric.topo, 1);
    netsim_models::network::simulate(fabric, &layout, SimTime::MAX, None, |_| {
        MemorySink::default()
    })
}

/// `spec` built on a [`star`] of `hosts` hosts under [`cc_none`] and run at
/// packet level on one shard, for at most a simulated second.
pub fn star_run(
    hosts: u32,
    spec: &netsim_models::workload::WorkloadSpec,
) -> (Fabric, NetRun<MemorySink>) {
    let topo = netsim_topo::build(&star(hosts)).unwrap();
    let routing = netsim_topo::Routing::build(&topo).unwrap();
    let workload = netsim_models::workload::build(spec, &topo, &cc_none()).unwrap();
    let fabric = Fabric::with_workload(topo, routing, workload, cc_none(), 7);
    let layout = layout(&fabric.topo, 1);
    let run = netsim_models::network::simulate(
        &fabric,
        &layout,
        SimTime::from_us(1_000_000),
        None,
        |_| MemorySink::default(),
    );
    (fabric, run)
}

/// SimAI's 128-GPU Spectrum-X and, on all its hosts from time zero, the
/// 128-GPU MoE (`moe-pp4-ep2-tp8-128.txt`, rings) repeated `iterations`
/// times.
pub fn moe_128_job(iterations: u32) -> (Topology, netsim_models::workload::Job) {
    use netsim_models::workload::{simai, Algorithm, Job};
    use netsim_topo::{SimaiParams, SimaiTemplate, TopoSpec};
    const MOE: &str = include_str!("../../../../runs/scenarios/workloads/moe-pp4-ep2-tp8-128.txt");
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 128;
    let topo = netsim_topo::build(&TopoSpec::Simai(p)).unwrap();
    let mut spec = simai::parse(MOE, "moe.txt", 128, Algorithm::Ring).unwrap();
    spec.iterations = iterations;
    let job = Job {
        name: None,
        spec,
        hosts: (0..topo.host_count()).collect(),
        start: SimTime::ZERO,
    };
    (topo, job)
}
