//! Multi-plane fat-trees: closed-form counts, one port per plane at every host, every
//! host pair routed inside every plane, SimAI round trip and bounds on `planes`.

use netsim_topo::{
    bisection_bps, build, parse_simai, to_simai_string, FatTreeParams, Role, Routing, TopoError,
    TopoSpec, Topology,
};

fn multi_plane(k: u32, tiers: u32, planes: u32) -> Topology {
    build(&TopoSpec::FatTree(FatTreeParams {
        k,
        tiers,
        planes,
        ..FatTreeParams::default()
    }))
    .unwrap()
}

#[test]
fn a_k4_fat_tree_with_two_planes_has_closed_form_counts() {
    for planes in 1..=4u32 {
        let t = multi_plane(4, 3, planes);
        // k^3/4 hosts; per plane 5k^2/4 switches and 3k^3/4 links (k^3/4 of them host links).
        assert_eq!(t.host_count(), 16);
        assert_eq!(t.node_count(), 16 + planes * 20, "planes={planes}");
        assert_eq!(t.link_count(), planes * 48, "planes={planes}");
        assert_eq!(t.count_role(Role::Tor), planes * 8);
        assert_eq!(t.count_role(Role::Agg), planes * 8);
        assert_eq!(t.count_role(Role::Core), planes * 4);
        // Each plane adds a full bisection: N/2 host links' worth.
        assert_eq!(bisection_bps(&t), u64::from(planes) * 8 * 100_000_000_000);
        // Host h's port p leads to plane p's switches (ids plane-major after the hosts).
        for h in t.hosts() {
            let ports = t.ports(h);
            assert_eq!(ports.len(), planes as usize);
            for (p, port) in ports.iter().enumerate() {
                assert_eq!(plane_of(&t, planes, port.peer), Some(p as u32));
                assert_eq!(t.role(port.peer), Role::Tor);
            }
        }
    }
    // Leaf-spine: k leaves and k/2 spines per plane.
    let t = multi_plane(4, 2, 2);
    assert_eq!(t.node_count(), 8 + 2 * 6);
    assert_eq!(t.link_count(), 2 * (8 + 8));
}

/// The plane of switch `n` (switch ids are plane-major after the hosts).
fn plane_of(t: &Topology, planes: u32, n: u32) -> Option<u32> {
    let per_plane = (t.node_count() - t.host_count()) / planes;
    (n >= t.host_count()).then(|| (n - t.host_count()) / per_plane)
}

#[test]
fn every_host_pair_is_routed_in_every_plane() {
    for (tiers, planes, diameter) in [(3, 2, 6), (2, 3, 4)] {
        let t = multi_plane(4, tiers, planes);
        let r = Routing::build(&t).unwrap();
        assert_eq!(r.diameter_hops(), diameter);
        for s in t.hosts() {
            for d in t.hosts().filter(|&d| d != s) {
                // All planes are equally short, so the host may use any of its ports.
                let hops = r.next_hops(s, d);
                assert_eq!(hops.len(), planes as usize, "{s} -> {d}");
                for i in 0..hops.len() {
                    let port = hops.get(i);
                    let plane = port as u32;
                    // Walk the tables from the edge switch; the path stays in its plane.
                    let mut node = t.ports(s)[port as usize].peer;
                    let mut hops_taken = 1;
                    while node != d {
                        assert_eq!(plane_of(&t, planes, node), Some(plane), "{s} -> {d}");
                        let next = r.next_hops(node, d);
                        assert!(!next.is_empty(), "switch {node} has no route to {d}");
                        node = t.ports(node)[next.get(0) as usize].peer;
                        hops_taken += 1;
                    }
                    assert!(hops_taken <= diameter);
                }
            }
        }
    }
}

#[test]
fn a_multi_plane_fat_tree_round_trips_through_the_simai_format() {
    let t = multi_plane(4, 3, 2);
    let back = parse_simai(&to_simai_string(&t), "planes").unwrap();
    assert_eq!(back.node_count(), t.node_count());
    assert_eq!(back.link_count(), t.link_count());
    assert_eq!(back.host_count(), t.host_count());
    assert!(back.hosts().all(|h| back.ports(h).len() == 2));
}

#[test]
fn planes_are_bounded() {
    for planes in [0, 9] {
        let e = build(&TopoSpec::FatTree(FatTreeParams {
            k: 4,
            planes,
            ..FatTreeParams::default()
        }));
        assert!(
            matches!(
                e,
                Err(TopoError::BadParam {
                    flag: "--planes",
                    ..
                })
            ),
            "{e:?}"
        );
    }
}
