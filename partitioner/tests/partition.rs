//! Partition invariants and balance on standard fabrics, for both strategies.

use netsim_engine::SimTime;
use netsim_partition::{is_uncuttable, partition, PartitionConfig, PartitionError, Strategy};
use netsim_topo::{
    build, FatTreeParams, LinkParams, SimaiParams, SimaiTemplate, TopoSpec, Topology,
};

fn check(topo: &Topology, cfg: &PartitionConfig) -> netsim_partition::Partition {
    let p = partition(topo, cfg).unwrap();
    assert_eq!(p.shard_of.len(), topo.node_count() as usize);
    let mut used = vec![0u32; cfg.shards as usize];
    for s in &p.shard_of {
        assert!(s.0 < cfg.shards);
        used[s.index()] += 1;
    }
    assert!(used.iter().all(|&c| c > 0), "empty shard: {used:?}");
    let mut min_cut = SimTime::MAX;
    let mut cut = 0;
    for (i, l) in topo.links().iter().enumerate() {
        if p.shard_of[l.a as usize] != p.shard_of[l.b as usize] {
            assert!(
                !is_uncuttable(topo, i as u32, cfg.latency_floor_ps),
                "link {i} cut"
            );
            assert!(l.latency_ps >= cfg.latency_floor_ps);
            min_cut = min_cut.min(SimTime(l.latency_ps));
            cut += 1;
        }
    }
    assert_eq!(p.lookahead, min_cut);
    assert_eq!(p.report.lookahead, min_cut);
    assert_eq!(p.report.edge_cut, cut);
    p
}

fn fat_tree(k: u32) -> Topology {
    build(&TopoSpec::FatTree(FatTreeParams {
        k,
        ..FatTreeParams::default()
    }))
    .unwrap()
}

#[test]
fn fat_tree_16_balanced_within_5_percent() {
    let topo = fat_tree(16);
    for strategy in [Strategy::Structural, Strategy::Metis] {
        for shards in [2, 4, 16] {
            let p = check(
                &topo,
                &PartitionConfig {
                    shards,
                    strategy,
                    latency_floor_ps: 0,
                },
            );
            assert!(
                p.report.load_imbalance <= 0.05,
                "{strategy} {shards}: imbalance {}",
                p.report.load_imbalance
            );
            assert_eq!(p.lookahead, SimTime::from_ns(1000));
        }
    }
}

#[test]
fn latency_floor_keeps_fast_links_inside_shards() {
    let mut params = FatTreeParams {
        k: 8,
        ..FatTreeParams::default()
    };
    params.core_link = LinkParams {
        bandwidth_bps: 400_000_000_000,
        latency_ps: 2_000_000,
    };
    let topo = build(&TopoSpec::FatTree(params)).unwrap();
    for strategy in [Strategy::Structural, Strategy::Metis] {
        let cfg = PartitionConfig {
            shards: 4,
            strategy,
            latency_floor_ps: 1_500_000,
        };
        let p = check(&topo, &cfg);
        assert_eq!(p.lookahead, SimTime::from_ns(2000), "{strategy}");
    }
}

#[test]
fn nvlink_and_nic_links_are_never_cut() {
    let mut p = SimaiParams::defaults(SimaiTemplate::Hpn);
    p.gpus = 4096;
    let topo = build(&TopoSpec::Simai(p)).unwrap();
    for strategy in [Strategy::Structural, Strategy::Metis] {
        let part = check(
            &topo,
            &PartitionConfig {
                shards: 4,
                strategy,
                latency_floor_ps: 0,
            },
        );
        assert_eq!(part.lookahead, SimTime::from_ns(500));
        assert!(
            part.report.load_imbalance <= 0.05,
            "{strategy}: {}",
            part.report.load_imbalance
        );
    }
}

#[test]
fn one_shard_cuts_nothing_and_too_many_shards_is_an_error() {
    let topo = fat_tree(4);
    let p = check(
        &topo,
        &PartitionConfig {
            shards: 1,
            strategy: Strategy::Metis,
            latency_floor_ps: 0,
        },
    );
    assert_eq!(p.lookahead, SimTime::MAX);
    assert_eq!(p.report.edge_cut, 0);
    let star = build(&TopoSpec::default_for("star").unwrap()).unwrap();
    let e = partition(
        &star,
        &PartitionConfig {
            shards: 2,
            strategy: Strategy::Structural,
            latency_floor_ps: 0,
        },
    );
    assert!(
        matches!(
            e,
            Err(PartitionError::TooManyShards {
                shards: 2,
                atoms: 1
            })
        ),
        "{e:?}"
    );
    let e = partition(
        &star,
        &PartitionConfig {
            shards: 0,
            strategy: Strategy::Structural,
            latency_floor_ps: 0,
        },
    );
    assert!(matches!(e, Err(PartitionError::NoShards)));
}

#[test]
fn dragonfly_structural_keeps_groups_whole() {
    let topo = build(&TopoSpec::default_for("dragonfly").unwrap()).unwrap();
    let p = check(
        &topo,
        &PartitionConfig {
            shards: 3,
            strategy: Strategy::Structural,
            latency_floor_ps: 0,
        },
    );
    for a in 0..topo.node_count() {
        for b in 0..topo.node_count() {
            if topo.node(a).coords.group == topo.node(b).coords.group {
                assert_eq!(p.shard_of[a as usize], p.shard_of[b as usize]);
            }
        }
    }
    assert!(p.report.load_imbalance <= 0.05);
}
