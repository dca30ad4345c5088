//! Partition invariants and balance on standard fabrics, for both strategies.

use netsim_engine::SimTime;
use netsim_partition::{
    is_uncuttable, max_shards, partition, partition_weighted, PartitionConfig, PartitionError,
    Strategy,
};
use netsim_topo::{
    build, FatTreeParams, LinkParams, Role, SimaiParams, SimaiTemplate, TopoSpec, Topology,
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
fn gpu_servers_stay_whole_and_their_nic_links_are_cut() {
    let mut p = SimaiParams::defaults(SimaiTemplate::Hpn);
    p.gpus = 4096;
    let topo = build(&TopoSpec::Simai(p)).unwrap();
    for strategy in [Strategy::Structural, Strategy::Metis] {
        let part = check(
            &topo,
            &PartitionConfig {
                shards: 16,
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
        // Every GPU shares its server's shard (NVLink uncut), while some GPU-to-ASW links
        // are cut: a segment no longer has to stay in one shard.
        let mut server_shard = std::collections::HashMap::new();
        for n in 0..topo.node_count() {
            if let Some(server) = topo.node(n).coords.server {
                let s = *server_shard
                    .entry(server)
                    .or_insert(part.shard_of[n as usize]);
                assert_eq!(s, part.shard_of[n as usize], "server {server} split");
            }
        }
        let cut_nics = topo
            .links()
            .iter()
            .filter(|l| topo.is_host(l.a) || topo.is_host(l.b))
            .filter(|l| part.shard_of[l.a as usize] != part.shard_of[l.b as usize])
            .count();
        assert!(cut_nics > 0, "{strategy}: no NIC link cut");
    }
    // As many shards as servers plus switches, and no more.
    let atoms = max_shards(&topo, 0);
    assert_eq!(
        atoms,
        4096 / 8 + topo.count_role(Role::Tor) + topo.count_role(Role::Core)
    );
    assert!(partition(
        &topo,
        &PartitionConfig {
            shards: atoms + 1,
            strategy: Strategy::Metis,
            latency_floor_ps: 0,
        }
    )
    .is_err());
}

#[test]
fn fat_tree_hosts_stay_with_their_tor() {
    let topo = fat_tree(8);
    let p = check(
        &topo,
        &PartitionConfig {
            shards: 8,
            strategy: Strategy::Metis,
            latency_floor_ps: 0,
        },
    );
    for l in topo.links() {
        if topo.is_host(l.a) || topo.is_host(l.b) {
            assert_eq!(p.shard_of[l.a as usize], p.shard_of[l.b as usize]);
        }
    }
}

/// Weights as an incast to host 0 would give them: the receiver, its ToR and the pod's
/// switches carry most of the work. Both strategies still balance it, the structural one
/// by splitting the heavy pod.
#[test]
fn skewed_weights_are_balanced_by_splitting_the_heavy_pod() {
    let topo = fat_tree(8);
    let mut weights = vec![10u64; topo.node_count() as usize];
    for n in 0..topo.node_count() {
        if topo.node(n).coords.pod == Some(0) {
            weights[n as usize] = 200;
        }
    }
    weights[0] = 3000;
    for strategy in [Strategy::Structural, Strategy::Metis] {
        let cfg = PartitionConfig {
            shards: 8,
            strategy,
            latency_floor_ps: 0,
        };
        let p = partition_weighted(&topo, &cfg, &weights).unwrap();
        // The heaviest atom (host 0 with its ToR) bounds what any placement can do.
        let total: u64 = weights.iter().sum();
        let atom0 = 3000 + 200 * 4;
        let bound = (atom0 as f64 * 8.0 / total as f64 - 1.0).max(0.05);
        assert!(
            p.report.load_imbalance <= bound + 1e-9,
            "{strategy}: {} > {bound}",
            p.report.load_imbalance
        );
        let loads: u64 = p.report.shard_weights.iter().sum();
        assert_eq!(loads, total);
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
