//! SimAI templates past one pod of PSWs: pods of segments joined by a core
//! tier, checked against closed-form counts, routing and a SimAI-file round trip.

use netsim_topo::{
    build, parse_simai, to_simai_string, NextHops, Role, Routing, SimaiParams, SimaiTemplate,
    TopoSpec, Topology,
};

fn template(t: SimaiTemplate, edit: impl FnOnce(&mut SimaiParams)) -> Topology {
    let mut p = SimaiParams::defaults(t);
    edit(&mut p);
    build(&TopoSpec::Simai(p)).unwrap()
}

/// Switches of `role` and their port counts, ascending and deduplicated.
fn radixes(topo: &Topology, role: Role) -> (u32, Vec<usize>) {
    let mut r: Vec<usize> = (0..topo.node_count())
        .filter(|&n| topo.role(n) == role)
        .map(|n| topo.ports(n).len())
        .collect();
    let count = r.len() as u32;
    r.sort_unstable();
    r.dedup();
    (count, r)
}

#[test]
fn spectrum_x_at_32768_gpus_has_a_non_blocking_super_spine() {
    let topo = template(SimaiTemplate::SpectrumX, |p| p.gpus = 32_768);
    // 64 segments of 512 GPUs in 8 pods of 8; each pod's 64 ASWs meet its 64
    // PSWs, and each PSW has 64 core uplinks at 1:1, one per core of its group.
    assert_eq!(topo.host_count(), 32_768);
    assert_eq!(radixes(&topo, Role::NvSwitch), (4_096, vec![8]));
    assert_eq!(radixes(&topo, Role::Tor), (512, vec![64 + 64]));
    assert_eq!(radixes(&topo, Role::Agg), (512, vec![64 + 64]));
    assert_eq!(radixes(&topo, Role::Core), (64 * 64, vec![8]));
    assert_eq!(topo.link_count(), 32_768 * 2 + 512 * 64 + 512 * 64);
}

#[test]
fn hpn_pods_meet_a_core_tier_at_fifteen_to_one() {
    // One plane: 32 segments of 1,024 GPUs, at most 30 a pod: 2 pods of 16.
    // Each PSW has 16 * 8 * 2 = 256 ASW links and ceil(240 / 15) = 16 cores.
    let topo = template(SimaiTemplate::Hpn, |p| p.gpus = 32_768);
    assert_eq!(radixes(&topo, Role::Tor), (512, vec![128 + 120]));
    assert_eq!(radixes(&topo, Role::Agg), (240, vec![256 + 16]));
    assert_eq!(radixes(&topo, Role::Core), (120 * 16, vec![2]));
    // Two planes: at most 15 segments a pod, so 3 pods of 11, 11 and 10
    // segments; a plane's ASWs reach only their plane's 60 PSWs of the pod.
    let topo = template(SimaiTemplate::HpnDualPlane, |p| p.gpus = 32_768);
    let (agg, agg_radix) = radixes(&topo, Role::Agg);
    assert_eq!(agg, 3 * 120);
    assert_eq!(agg_radix, vec![10 * 8 + 8, 11 * 8 + 8]);
    assert_eq!(radixes(&topo, Role::Core), (120 * 8, vec![3]));
    // A core joins PSWs of one plane only.
    for n in 0..topo.node_count() {
        if topo.role(n) == Role::Core {
            let plane = topo.node(n).coords.plane;
            assert!(topo
                .ports(n)
                .iter()
                .all(|p| topo.node(p.peer).coords.plane == plane));
        }
    }
}

#[test]
fn a_pod_to_pod_path_climbs_to_the_core_and_the_file_reads_back() {
    // 4 pods of one 64-GPU segment; 8 PSWs a pod with 4 cores each at 2:1.
    let topo = template(SimaiTemplate::SpectrumX, |p| {
        p.gpus = 256;
        p.nics_per_asw = 8;
        p.asw_per_psw = 8;
        p.psw = 8;
        p.core_oversub = 2;
    });
    assert_eq!(radixes(&topo, Role::Core), (8 * 4, vec![4]));
    let routing = Routing::build(&topo).unwrap();
    // GPU 0 to GPU 64 (pod 1, same rail): GPU, ASW, PSW, core, PSW, ASW, GPU;
    // every PSW of the pod is a choice at the ASW, every core of the group at the PSW.
    let path = routing.path(&topo, 0, 64, &mut |_| 0);
    let roles: Vec<Role> = path.iter().map(|&n| topo.role(n)).collect();
    use Role::*;
    assert_eq!(roles, [Host, Tor, Agg, Core, Agg, Tor, Host]);
    let fan_out = |n: u32| match routing.next_hops(n, 64) {
        NextHops::Ports(p) => p.len(),
        NextHops::Mask(m) => m.count_ones() as usize,
    };
    assert_eq!((fan_out(path[1]), fan_out(path[2])), (8, 4));
    assert_eq!(topo.node(path[1]).coords.pod, Some(0));
    assert_eq!(topo.node(path[5]).coords.pod, Some(1));
    // SimAI reads the file back with the PSWs as aggregation switches.
    let text = to_simai_string(&topo);
    let back = parse_simai(&text, "mem").unwrap();
    assert_eq!(to_simai_string(&back), text);
    for role in [Tor, Agg, Core] {
        assert_eq!(back.count_role(role), topo.count_role(role), "{role:?}");
    }
}

#[test]
fn two_tiers_are_unchanged_below_one_pod() {
    let topo = template(SimaiTemplate::SpectrumX, |p| p.gpus = 4_096);
    assert_eq!(topo.count_role(Role::Agg), 0);
    assert_eq!(radixes(&topo, Role::Core), (64, vec![64]));
    assert!((0..topo.node_count()).all(|n| topo.node(n).coords.pod.is_none()));
}
