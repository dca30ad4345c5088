//! The per-node work estimate against hand counts: ECMP splits, ACKs, NVLink inside a server,
//! conservation over a whole workload.

use netsim_models::load::node_work;
use netsim_models::network::config::NetConfig;
use netsim_models::workload::groups::{GroupSpec, Parallelism};
use netsim_models::workload::{
    build, Algorithm, CollectiveOp, Dtype, OpSpec, Phase, PhaseKind, ReduceOp, Workload,
    WorkloadSpec,
};
use netsim_topo::{FatTreeParams, Role, Routing, SimaiParams, SimaiTemplate, TopoSpec};

use crate::common::flow;

/// One flow across a k=4 fat-tree: 2 aggregation switches and 4 cores share its packets.
#[test]
fn ecmp_splits_a_flow_and_its_acks_evenly() {
    let topo = netsim_topo::build(&TopoSpec::FatTree(FatTreeParams {
        k: 4,
        ..FatTreeParams::default()
    }))
    .unwrap();
    let routing = Routing::build(&topo).unwrap();
    let config = NetConfig::default();
    let mtu = u64::from(config.mtu_bytes);
    // Host 0 (pod 0) to the last host (pod 3): 40 packets, 40 ACKs (one per packet).
    let last = topo.host_count() - 1;
    let work = node_work(
        &topo,
        &routing,
        &Workload::from_flows(vec![flow(0, last, 40 * mtu)]),
        &config,
    );
    // Each end sends 40 and receives 40.
    assert_eq!(work[0], 80);
    assert_eq!(work[last as usize], 80);
    let by_role = |role: Role, pod: Option<u32>| -> Vec<u64> {
        (0..topo.node_count())
            .filter(|&n| topo.role(n) == role && (pod.is_none() || topo.node(n).coords.pod == pod))
            .map(|n| work[n as usize])
            .filter(|&w| w > 0)
            .collect()
    };
    // Both ToRs forward every packet both ways: 2 x (40 + 40).
    assert_eq!(by_role(Role::Tor, None), vec![160, 160]);
    // Each pod's 2 aggregation switches take half: 2 x (20 + 20).
    assert_eq!(by_role(Role::Agg, Some(0)), vec![80, 80]);
    assert_eq!(by_role(Role::Agg, Some(3)), vec![80, 80]);
    // 4 cores take a quarter each way: 2 x (10 + 10).
    assert_eq!(by_role(Role::Core, None), vec![40, 40, 40, 40]);
    // Conservation: per packet 1 + 5 x 2 + 1 = 12 events, 80 packets.
    assert_eq!(work.iter().sum::<u64>(), 12 * 80);
}

/// A GPU reaches a GPU of its own server over NVLink: only the server works.
#[test]
fn nvlink_traffic_stays_in_the_server() {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 64;
    let topo = netsim_topo::build(&TopoSpec::Simai(p)).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let config = NetConfig::default();
    let mtu = u64::from(config.mtu_bytes);
    let work = node_work(
        &topo,
        &routing,
        &Workload::from_flows(vec![flow(0, 1, 8 * mtu)]),
        &config,
    );
    for n in 0..topo.node_count() {
        let w = work[n as usize];
        match topo.role(n) {
            Role::Host if n < 2 => assert_eq!(w, 16, "GPU {n}"),
            Role::NvSwitch if topo.node(n).coords.server == Some(0) => {}
            _ => assert_eq!(w, 0, "node {n} ({:?})", topo.role(n)),
        }
    }
    let nvswitch: u64 = (0..topo.node_count())
        .filter(|&n| topo.role(n) == Role::NvSwitch)
        .map(|n| work[n as usize])
        .sum();
    // 8 packets and 8 ACKs, each forwarded once by some NVSwitch (2 events), maybe split.
    assert!((32..=32 + 8).contains(&nvswitch), "{nvswitch}");
}

/// TP 8 over NVSwitch then DP over the rails on a 64-GPU Spectrum-X: every GPU does the same
/// work (the layout is symmetric), and rail switches carry only the DP phase.
#[test]
fn a_tp_dp_workload_loads_every_gpu_alike() {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 64;
    let topo = netsim_topo::build(&TopoSpec::Simai(p)).unwrap();
    let routing = Routing::build(&topo).unwrap();
    let config = NetConfig::default();
    let allreduce = |group: GroupSpec| OpSpec {
        op: CollectiveOp::AllReduce,
        algorithm: Algorithm::Ring,
        size_bytes: 1 << 20,
        group,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    };
    let mut spec = WorkloadSpec::single(allreduce(GroupSpec::Tp));
    spec.parallelism = Some(Parallelism::new(64, 8, 1, 1).unwrap());
    spec.phases.push(Phase {
        name: "dp".into(),
        kind: PhaseKind::Collective(allreduce(GroupSpec::Dp)),
        after: vec![0],
        stage: None,
    });
    let workload = build(&spec, &topo, &config).unwrap();
    let work = node_work(&topo, &routing, &workload, &config);
    let gpus: Vec<u64> = topo.hosts().map(|n| work[n as usize]).collect();
    assert!(gpus[0] > 0);
    assert!(gpus.iter().all(|&w| w == gpus[0]), "{gpus:?}");
    // Every packet of every flow is charged 1 at its sender and 1 at its receiver, both ways.
    let mtu = u64::from(config.mtu_bytes);
    let packets: u64 = workload
        .flows
        .iter()
        .map(|f| f.size_bytes.div_ceil(mtu))
        .sum();
    assert_eq!(gpus.iter().sum::<u64>(), 4 * packets);
}
