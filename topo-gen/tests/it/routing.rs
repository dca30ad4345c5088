//! Routing sanity: every host reaches every other host along next hops, on shortest paths,
//! within the diameter; compression by destination class; dragonfly Valiant paths.

use netsim_topo::{
    build, valiant_path, DragonflyIndex, FatTreeParams, NextHops, Role, Routing, SimaiParams,
    SimaiTemplate, TopoSpec, Topology,
};

/// A small deterministic generator for ECMP choices.
struct Lcg(u64);
impl Lcg {
    fn pick(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

fn path_latency(topo: &Topology, path: &[u32]) -> u64 {
    path.windows(2)
        .map(|w| {
            topo.ports(w[0])
                .iter()
                .filter(|p| p.peer == w[1])
                .map(|p| topo.link(p.link).latency_ps)
                .min()
                .unwrap()
        })
        .sum()
}

/// Walks every ordered host pair (two random ECMP walks each) and returns the longest path.
fn check_all_pairs(topo: &Topology, routing: &Routing) -> usize {
    let mut rng = Lcg(7);
    let mut longest = 0;
    for s in topo.hosts() {
        for d in topo.hosts() {
            if s == d {
                assert!(routing.next_hops(s, d).is_empty());
                continue;
            }
            for _ in 0..2 {
                let path = routing.path(topo, s, d, &mut |n| rng.pick(n));
                assert_eq!(*path.last().unwrap(), d);
                // Hosts never transit.
                assert!(path[1..path.len() - 1].iter().all(|&n| !topo.is_host(n)));
                assert_eq!(
                    Some(path_latency(topo, &path)),
                    routing.path_latency_ps(s, d)
                );
                assert!(
                    path.len() - 1 <= routing.diameter_hops() as usize,
                    "{s}->{d}: {path:?}"
                );
                longest = longest.max(path.len() - 1);
            }
        }
    }
    longest
}

fn spec(kind: &str) -> TopoSpec {
    TopoSpec::default_for(kind).unwrap()
}

#[test]
fn fat_tree_routes_and_compresses_by_tor() {
    for tiers in [2, 3] {
        let topo = build(&TopoSpec::FatTree(FatTreeParams {
            k: 4,
            tiers,
            ..FatTreeParams::default()
        }))
        .unwrap();
        let r = Routing::build(&topo).unwrap();
        let tors = topo.count_role(Role::Tor);
        assert_eq!(r.class_count(), tors);
        assert_eq!(
            r.entry_count() as u32,
            (topo.node_count() - topo.host_count()) * tors
        );
        let want = if tiers == 3 { 6 } else { 4 };
        assert_eq!(r.diameter_hops(), want);
        assert_eq!(check_all_pairs(&topo, &r), want as usize);
    }
    // k = 16: 128 ToR classes, routed in more than one chunk.
    let topo = build(&TopoSpec::FatTree(FatTreeParams {
        k: 16,
        ..FatTreeParams::default()
    }))
    .unwrap();
    let r = Routing::build(&topo).unwrap();
    assert_eq!(r.class_count(), 128);
    assert_eq!(r.diameter_hops(), 6);
    let mut rng = Lcg(11);
    for s in topo.hosts().step_by(37) {
        for d in topo.hosts().filter(|&d| d != s) {
            let path = r.path(&topo, s, d, &mut |n| rng.pick(n));
            assert_eq!(*path.last().unwrap(), d);
            assert_eq!(Some(path_latency(&topo, &path)), r.path_latency_ps(s, d));
        }
    }
    let half: Vec<bool> = (0..topo.node_count())
        .map(|n| topo.node(n).coords.pod.is_some_and(|p| p >= 8))
        .collect();
    check_scoped(&topo, &half);
    // k = 8: an edge switch spreads traffic to another pod over all k/2 uplinks.
    let topo = build(&spec("fat-tree")).unwrap();
    let r = Routing::build(&topo).unwrap();
    let edge0 = topo.host_count();
    assert_eq!(r.next_hops(edge0, topo.host_count() - 1).len(), 4);
    assert_eq!(r.next_hops(edge0, 1), NextHops::Ports(&[1]));
    assert_eq!(r.next_hops(0, 100), NextHops::Mask(1));
}

#[test]
fn dragonfly_minimal_and_valiant() {
    for arrangement in ["absolute", "relative", "circulant"] {
        let mut s = spec("dragonfly");
        if let TopoSpec::Dragonfly(p) = &mut s {
            p.p = 2;
            p.a = 4;
            p.h = 2;
            p.arrangement = arrangement.parse().unwrap();
        }
        let topo = build(&s).unwrap();
        let r = Routing::build(&topo).unwrap();
        assert_eq!(r.class_count(), topo.count_role(Role::Router));
        assert_eq!(r.diameter_hops(), 5, "{arrangement}");
        assert_eq!(check_all_pairs(&topo, &r), 5);
        let idx = DragonflyIndex::new(&topo).unwrap();
        assert_eq!(idx.groups(), 9);
        let mut rng = Lcg(3);
        for (src, dst) in [(0u32, 71u32), (5, 40), (17, 18)] {
            let gs = topo.node(src).coords.group.unwrap();
            let gd = topo.node(dst).coords.group.unwrap();
            let mid = idx.intermediate_router(gs, gd, 12345).unwrap();
            let g = topo.node(mid).coords.group.unwrap();
            assert!(g != gs && g != gd);
            let path = valiant_path(&topo, &r, &idx, src, dst, mid, &mut |n| rng.pick(n));
            assert_eq!((path[0], *path.last().unwrap()), (src, dst));
            assert!(path.contains(&mid));
            // Two minimal legs: at most 4 router hops to the intermediate, 4 on to dst + host links.
            assert!(path.len() - 1 <= 10, "{path:?}");
        }
    }
}

#[test]
fn simai_gpus_use_nvlink_inside_a_server_and_both_tors_outside() {
    let mut p = SimaiParams::defaults(SimaiTemplate::Hpn);
    p.gpus = 256;
    p.nics_per_asw = 16; // two segments
    let topo = build(&TopoSpec::Simai(p)).unwrap();
    let r = Routing::build(&topo).unwrap();
    assert_eq!(r.diameter_hops(), 4);
    // GPU 0 -> GPU 1: same server, over the NVSwitch (port 0).
    assert_eq!(r.next_hops(0, 1), NextHops::Mask(0b001));
    assert_eq!(r.path(&topo, 0, 1, &mut |_| 0).len(), 3);
    // GPU 0 -> GPU 200 (other segment): both ToR uplinks, ECMP.
    assert_eq!(r.next_hops(0, 200), NextHops::Mask(0b110));
    // Same rail, same segment, other server: one hop through either ASW.
    assert_eq!(r.path(&topo, 0, 8, &mut |_| 1).len(), 3);
    // Only one server's GPUs reach each other through an NVSwitch.
    let nvs = topo.ports(0)[0].peer;
    assert_eq!(topo.role(nvs), Role::NvSwitch);
    assert!(r.next_hops(nvs, 9).is_empty());
    let small = build(&TopoSpec::Simai(SimaiParams {
        gpus: 64,
        ..SimaiParams::defaults(SimaiTemplate::SpectrumX)
    }))
    .unwrap();
    let r = Routing::build(&small).unwrap();
    assert_eq!(check_all_pairs(&small, &r), 4);
}

#[test]
fn star_and_imported_fabrics_route() {
    let topo = build(&spec("star")).unwrap();
    let r = Routing::build(&topo).unwrap();
    assert_eq!(r.diameter_hops(), 2);
    assert_eq!(check_all_pairs(&topo, &r), 2);
    let mut d = SimaiParams::defaults(SimaiTemplate::DcnDualTor);
    d.gpus = 256;
    let topo = build(&TopoSpec::Simai(d)).unwrap();
    let back = netsim_topo::parse_simai(&netsim_topo::to_simai_string(&topo), "mem").unwrap();
    let r = Routing::build(&back).unwrap();
    assert_eq!(r.diameter_hops(), 4);
}

#[test]
fn disconnected_fabric_is_an_error() {
    let text = "4 1 0 2 2 H100\n2 3 \n0 2 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n";
    let topo = netsim_topo::parse_simai(text, "mem").unwrap();
    let e = Routing::build(&topo).unwrap_err();
    assert!(
        matches!(e, netsim_topo::TopoError::Unreachable { .. }),
        "{e}"
    );
}

/// Tables built for the nodes of one "rank" agree with the full tables wherever they
/// answer, and are smaller.
fn check_scoped(topo: &Topology, owned: &[bool]) {
    let full = Routing::build(topo).unwrap();
    let scoped = Routing::build_for(topo, owned).unwrap();
    assert!(scoped.memory_bytes() < full.memory_bytes());
    for node in 0..topo.node_count() {
        for dst in topo.hosts() {
            let all = full.next_hops(node, dst);
            if owned[node as usize] {
                assert_eq!(scoped.next_hops(node, dst), all, "{node} -> {dst}");
                if topo.is_host(node) {
                    assert_eq!(
                        scoped.path_latency_ps(node, dst),
                        full.path_latency_ps(node, dst)
                    );
                }
            }
            if owned[node as usize] || !topo.is_host(node) {
                let first = (!all.is_empty()).then(|| all.get(0));
                assert_eq!(scoped.first_next_hop(node, dst), first, "{node} -> {dst}");
            }
        }
    }
}

#[test]
fn tables_built_for_some_nodes_agree_with_the_full_tables() {
    let fat_tree = build(&spec("fat-tree")).unwrap();
    // The first half of the pods (hosts and switches), like a structural partition.
    let half: Vec<bool> = (0..fat_tree.node_count())
        .map(|n| fat_tree.node(n).coords.pod.is_some_and(|p| p < 4))
        .collect();
    check_scoped(&fat_tree, &half);
    // Every third node: owned hosts behind foreign switches and the reverse.
    let scattered: Vec<bool> = (0..fat_tree.node_count()).map(|n| n % 3 == 0).collect();
    check_scoped(&fat_tree, &scattered);

    let mut s = spec("dragonfly");
    if let TopoSpec::Dragonfly(p) = &mut s {
        (p.p, p.a, p.h) = (2, 4, 2);
    }
    let dragonfly = build(&s).unwrap();
    let groups: Vec<bool> = (0..dragonfly.node_count())
        .map(|n| dragonfly.node(n).coords.group.is_some_and(|g| g % 2 == 1))
        .collect();
    check_scoped(&dragonfly, &groups);

    // Dual-ToR GPUs: hosts with several ports, NVSwitches as their own components.
    let mut p = SimaiParams::defaults(SimaiTemplate::Hpn);
    p.gpus = 128;
    let hpn = build(&TopoSpec::Simai(p)).unwrap();
    let odd: Vec<bool> = (0..hpn.node_count()).map(|n| n % 2 == 1).collect();
    check_scoped(&hpn, &odd);
}

#[test]
fn tables_built_for_some_nodes_still_check_reachability() {
    let text = "4 1 0 2 2 H100\n2 3 \n0 2 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n";
    let topo = netsim_topo::parse_simai(text, "mem").unwrap();
    let e = Routing::build_for(&topo, &[true, false, false, false]).unwrap_err();
    assert!(
        matches!(e, netsim_topo::TopoError::Unreachable { .. }),
        "{e}"
    );
}
