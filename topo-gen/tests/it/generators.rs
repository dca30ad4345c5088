//! Closed-form counts, SimAI reference headers, format round trips and bad-input errors.

use netsim_topo::{
    bisection_bps, build, parse_simai, simai_header, to_simai_string, Arrangement, DragonflyParams,
    FatTreeParams, Role, SimaiParams, SimaiTemplate, TopoError, TopoSpec,
};

fn simai(template: SimaiTemplate, gpus: Option<u32>) -> netsim_topo::Topology {
    let mut p = SimaiParams::defaults(template);
    if let Some(g) = gpus {
        p.gpus = g;
    }
    build(&TopoSpec::Simai(p)).unwrap()
}

#[test]
fn simai_reference_headers() {
    let cases = [
        (SimaiTemplate::SpectrumX, Some(128), "216 8 16 72 768 H100"),
        (SimaiTemplate::SpectrumX, None, "4736 8 512 128 12288 H100"),
        (SimaiTemplate::Hpn, None, "17640 8 1920 360 74880 H100"),
        (SimaiTemplate::Dcn, None, "592 8 64 16 1088 H100"),
    ];
    for (t, g, want) in cases {
        let topo = simai(t, g);
        assert_eq!(simai_header(&topo), want, "{t:?} {g:?}");
        let text = to_simai_string(&topo);
        assert_eq!(text.lines().next().unwrap(), want);
        assert_eq!(text.lines().count(), 2 + topo.link_count() as usize);
    }
}

#[test]
fn fat_tree_closed_form_counts() {
    for k in [2u32, 4, 8, 16, 24] {
        let t = build(&TopoSpec::FatTree(FatTreeParams {
            k,
            ..FatTreeParams::default()
        }))
        .unwrap();
        assert_eq!(t.host_count(), k * k * k / 4, "k={k}");
        assert_eq!(t.node_count() - t.host_count(), 5 * k * k / 4, "k={k}");
        assert_eq!(t.link_count(), 3 * k * k * k / 4, "k={k}");
        assert_eq!(t.count_role(Role::Core), k * k / 4);
        // Hosts 0..k/2-1 share the first edge switch.
        let e = t.ports(0)[0].peer;
        assert!((0..k / 2).all(|h| t.ports(h)[0].peer == e));
    }
}

#[test]
fn dragonfly_closed_form_counts() {
    for (p, a, h, g) in [
        (4u32, 8u32, 4u32, None),
        (2, 4, 2, None),
        (1, 2, 1, Some(2)),
        (3, 6, 3, Some(10)),
    ] {
        for arrangement in [
            Arrangement::Absolute,
            Arrangement::Relative,
            Arrangement::Circulant,
        ] {
            let t = build(&TopoSpec::Dragonfly(DragonflyParams {
                p,
                a,
                h,
                groups: g,
                arrangement,
                ..DragonflyParams::default()
            }))
            .unwrap();
            let g = g.unwrap_or(a * h + 1);
            assert_eq!(t.host_count(), p * a * g);
            assert_eq!(t.count_role(Role::Router), a * g);
            let global = t.link_count() - p * a * g - g * a * (a - 1) / 2;
            if g == a * h + 1 {
                assert_eq!(global, g * a * h / 2, "{arrangement:?}");
                // Every router has exactly h global ports and every pair of groups one link.
                for r in t.host_count()..t.node_count() {
                    assert_eq!(t.ports(r).len() as u32, p + a - 1 + h);
                }
            }
        }
    }
    let t = build(&TopoSpec::default_for("dragonfly").unwrap()).unwrap();
    assert_eq!(t.host_count(), 1056);
}

#[test]
fn simai_export_import_export_is_identical() {
    for t in [
        SimaiTemplate::SpectrumX,
        SimaiTemplate::Hpn,
        SimaiTemplate::HpnDualPlane,
        SimaiTemplate::Dcn,
        SimaiTemplate::DcnDualTor,
    ] {
        let topo = simai(t, Some(256));
        let a = to_simai_string(&topo);
        let back = parse_simai(&a, "mem").unwrap();
        assert_eq!(to_simai_string(&back), a, "{t:?}");
        assert_eq!(back.count_role(Role::Tor), topo.count_role(Role::Tor));
        assert_eq!(back.count_role(Role::Core), topo.count_role(Role::Core));
    }
    let ft = build(&TopoSpec::default_for("fat-tree").unwrap()).unwrap();
    let a = to_simai_string(&ft);
    let back = parse_simai(&a, "mem").unwrap();
    assert_eq!(to_simai_string(&back), a);
    assert_eq!(back.count_role(Role::Agg), ft.count_role(Role::Agg));
}

#[test]
fn bisection_closed_forms() {
    // Full-bisection fat-tree: N/2 host links' worth; a 2-tier leaf-spine oversubscribed
    // 3:1 has a third of that; a fat-tree with thin core links is cut at the core.
    for k in [4u32, 8, 16] {
        let t = build(&TopoSpec::FatTree(FatTreeParams {
            k,
            ..FatTreeParams::default()
        }))
        .unwrap();
        assert_eq!(
            bisection_bps(&t),
            t.host_count() as u64 / 2 * 100_000_000_000
        );
        let t = build(&TopoSpec::FatTree(FatTreeParams {
            k,
            tiers: 2,
            oversub: 3,
            ..FatTreeParams::default()
        }))
        .unwrap();
        assert_eq!(t.host_count(), 3 * k * k / 2);
        assert_eq!(bisection_bps(&t), (k * k / 4) as u64 * 100_000_000_000);
        let mut p = FatTreeParams {
            k,
            ..FatTreeParams::default()
        };
        p.core_link.bandwidth_bps = 10_000_000_000;
        let t = build(&TopoSpec::FatTree(p)).unwrap();
        assert_eq!(bisection_bps(&t), (k * k * k / 8) as u64 * 10_000_000_000);
    }
    // Balanced dragonfly with g = a*h+1: one global link per pair of groups.
    let t = build(&TopoSpec::default_for("dragonfly").unwrap()).unwrap();
    assert!(bisection_bps(&t) >= 16 * 16 * 100_000_000_000);
}

#[test]
fn bad_input_is_a_typed_error() {
    let e = build(&TopoSpec::FatTree(FatTreeParams {
        k: 7,
        ..FatTreeParams::default()
    }));
    assert!(
        matches!(e, Err(TopoError::BadParam { flag: "--k", .. })),
        "{e:?}"
    );
    let e = build(&TopoSpec::Dragonfly(DragonflyParams {
        groups: Some(34),
        ..DragonflyParams::default()
    }));
    assert!(
        matches!(
            e,
            Err(TopoError::BadParam {
                flag: "--groups",
                ..
            })
        ),
        "{e:?}"
    );
    let mut p = SimaiParams::defaults(SimaiTemplate::Hpn);
    p.gpus = 1001;
    let e = build(&TopoSpec::Simai(p));
    assert!(
        matches!(e, Err(TopoError::BadParam { flag: "--gpus", .. })),
        "{e:?}"
    );
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.asw_per_psw = 7;
    let e = build(&TopoSpec::Simai(p)).unwrap_err();
    assert!(e.to_string().contains("cannot hold one segment"), "{e}");
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.core_oversub = 0;
    let e = build(&TopoSpec::Simai(p));
    assert!(
        matches!(
            e,
            Err(TopoError::BadParam {
                flag: "--core-oversub",
                ..
            })
        ),
        "{e:?}"
    );
    assert!(matches!(
        TopoSpec::default_for("hpnx"),
        Err(TopoError::UnknownKind(_))
    ));
}

#[test]
fn huge_parameters_are_errors_not_panics() {
    let e = build(&TopoSpec::FatTree(FatTreeParams {
        k: u32::MAX - 1,
        oversub: u32::MAX,
        ..FatTreeParams::default()
    }));
    assert!(
        matches!(e, Err(TopoError::BadParam { flag: "--k", .. })),
        "{e:?}"
    );
    let e = build(&TopoSpec::FatTree(FatTreeParams {
        k: 1024,
        ..FatTreeParams::default()
    }));
    assert!(
        matches!(e, Err(TopoError::BadParam { flag: "--k", .. })),
        "{e:?}"
    );
    let e = build(&TopoSpec::Dragonfly(DragonflyParams {
        p: u32::MAX,
        a: u32::MAX,
        h: u32::MAX,
        ..DragonflyParams::default()
    }));
    assert!(matches!(e, Err(TopoError::BadParam { .. })), "{e:?}");
    let e = build(&TopoSpec::Dragonfly(DragonflyParams {
        p: 1000,
        a: 1000,
        h: 1000,
        ..DragonflyParams::default()
    }));
    assert!(matches!(e, Err(TopoError::BadParam { .. })), "{e:?}");
    let mut p = SimaiParams::defaults(SimaiTemplate::Dcn);
    p.nv_switch_per_server = u32::MAX;
    p.psw = u32::MAX;
    assert!(matches!(
        build(&TopoSpec::Simai(p)),
        Err(TopoError::BadParam { .. })
    ));
    let e = parse_simai("5 1 0 1 4294967295 H100\n4 \n", "f");
    assert!(
        matches!(
            e,
            Err(TopoError::Parse {
                field: "link_num",
                ..
            })
        ),
        "{e:?}"
    );
}

#[test]
fn link_explosions_are_errors() {
    let e = build(&TopoSpec::Dragonfly(DragonflyParams {
        p: 1,
        a: 4000,
        h: 1,
        ..DragonflyParams::default()
    }));
    assert!(
        matches!(e, Err(TopoError::BadParam { flag: "--a", .. })),
        "{e:?}"
    );
    let mut p = SimaiParams::defaults(SimaiTemplate::Dcn);
    p.gpus = 8;
    p.psw = 60_000_000;
    let e = build(&TopoSpec::Simai(p));
    assert!(
        matches!(e, Err(TopoError::BadParam { flag: "--psw", .. })),
        "{e:?}"
    );
}
