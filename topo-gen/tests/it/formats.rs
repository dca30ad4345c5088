//! SimAI text format (exact output, strict import errors), JSON export, atomic export.

use netsim_topo::{
    build, export, parse_simai, to_simai_string, Format, SimaiParams, SimaiTemplate, TopoError,
    TopoSpec,
};

/// SimAI's generator output for `-topo Spectrum-X -g 16 -bw 100Gbps -nvbw 2400Gbps -gt A100`:
/// header, switch ids, then per GPU its NVLink and NIC links, then ASW x PSW.
#[test]
fn spectrum_x_16_gpus_matches_simai_line_for_line() {
    let mut p = SimaiParams::defaults(SimaiTemplate::SpectrumX);
    p.gpus = 16;
    p.nic_bps = 100_000_000_000;
    p.nvlink_bps = 2_400_000_000_000;
    p.gpu_type = "A100".into();
    let text = to_simai_string(&build(&TopoSpec::Simai(p)).unwrap());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "90 8 2 72 544 A100");
    let ids: String = (16..90).map(|i| format!("{i} ")).collect();
    assert_eq!(lines[1], ids);
    assert_eq!(lines[2], "0 16 2400Gbps 0.000025ms 0");
    assert_eq!(lines[3], "0 18 100Gbps 0.0005ms 0");
    assert_eq!(lines[5], "1 19 100Gbps 0.0005ms 0");
    assert_eq!(lines[18], "8 17 2400Gbps 0.000025ms 0");
    assert_eq!(lines[19], "8 18 100Gbps 0.0005ms 0");
    assert_eq!(lines[34], "18 26 400Gbps 0.0005ms 0");
    assert_eq!(lines[34 + 64], "19 26 400Gbps 0.0005ms 0");
    assert_eq!(*lines.last().unwrap(), "25 89 400Gbps 0.0005ms 0");
    assert_eq!(lines.len(), 2 + 544);
    assert!(text.ends_with("0\n"));
}

#[test]
fn hpn_dual_plane_and_dcn_follow_simai_numbering() {
    let mut p = SimaiParams::defaults(SimaiTemplate::HpnDualPlane);
    p.gpus = 1024;
    let t = build(&TopoSpec::Simai(p)).unwrap();
    let text = to_simai_string(&t);
    // 1024 GPUs, 128 NVSwitches, 16 ASWs (8 per plane), 120 PSWs; 60 PSWs per plane.
    assert_eq!(text.lines().next().unwrap(), "1288 8 128 136 4032 H100");
    let l: Vec<&str> = text.lines().collect();
    assert_eq!(l[2], "0 1024 2880Gbps 0.000025ms 0");
    assert_eq!(l[3], "0 1152 200Gbps 0.0005ms 0");
    assert_eq!(l[4], "0 1160 200Gbps 0.0005ms 0");
    let asw_psw = &l[2 + 1024 * 3..];
    assert_eq!(asw_psw[0], "1152 1168 400Gbps 0.0005ms 0");
    assert_eq!(asw_psw[60 * 8], "1160 1228 400Gbps 0.0005ms 0");
    let d = build(&TopoSpec::default_for("dcn-dual-tor").unwrap()).unwrap();
    let text = to_simai_string(&d);
    // SimAI: 512 GPUs, 4 segments of 128, 8 ASWs in two sides, 8 PSWs.
    assert_eq!(text.lines().next().unwrap(), "592 8 64 16 1600 H100");
    let l: Vec<&str> = text.lines().collect();
    assert_eq!(l[2 + 3 * 128], "128 528 2880Gbps 0.000025ms 0");
    assert_eq!(l[2 + 3 * 128 + 1], "128 577 200Gbps 0.0005ms 0");
    assert_eq!(l[2 + 3 * 128 + 2], "128 581 200Gbps 0.0005ms 0");
}

fn parse_err(text: &str) -> (usize, &'static str, String) {
    match parse_simai(text, "f.topo") {
        Err(TopoError::Parse {
            path,
            line,
            field,
            message,
        }) => {
            assert_eq!(path, "f.topo");
            (line, field, message)
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn malformed_simai_files_name_line_and_field() {
    let good = "4 2 1 1 3 H100\n2 3 \n0 2 100Gbps 0.000025ms 0\n1 2 100Gbps 0.000025ms 0\n0 3 100Gbps 0.0005ms 0\n";
    assert!(parse_simai(good, "f").is_ok());
    let cases: [(&str, usize, &str); 12] = [
        ("", 1, "header"),
        ("4 2 1 1 H100\n", 1, "header"),
        ("4 2 x 1 3 H100\n2 3 \n", 1, "nvswitch_num"),
        ("4 2 2 2 3 H100\n2 3 \n", 1, "node_num"),
        ("4 2 1 1 3 H100\n2 \n", 2, "switch_id"),
        ("4 2 1 1 3 H100\n1 3 \n", 2, "switch_id"),
        (
            "4 2 1 1 3 H100\n2 3 \n0 2 100GBps 0.000025ms 0\n",
            3,
            "bandwidth",
        ),
        ("4 2 1 1 3 H100\n2 3 \n0 2 100Gbps 25 0\n", 3, "latency"),
        ("4 2 1 1 3 H100\n2 3 \n0 9 100Gbps 0.0005ms 0\n", 3, "dst"),
        (
            "4 2 1 1 3 H100\n2 3 \n0 2 100Gbps 0.0005ms 1.5\n",
            3,
            "error_rate",
        ),
        (
            "4 2 1 1 3 H100\n2 3 \n0 2 100Gbps 0.0005ms 0\n",
            1,
            "link_num",
        ),
        (
            "4 2 1 1 1 H100\n2 3 \n0 2 100Gbps 0.0005ms 0\n0 3 100Gbps 0.0005ms 0\n",
            4,
            "link_num",
        ),
    ];
    for (text, line, field) in cases {
        let (l, f, m) = parse_err(text);
        assert_eq!((l, f), (line, field), "{text:?}: {m}");
    }
    let e = parse_simai("4 2 1 1 1 H100\n2 3 \n0 1 100Gbps 0.0005ms 0\n", "f").unwrap_err();
    assert!(e.to_string().starts_with("f:3: dst:"), "{e}");
}

#[test]
fn json_export_has_nodes_and_links() {
    let t = build(&TopoSpec::default_for("dragonfly").unwrap()).unwrap();
    let mut buf = Vec::new();
    netsim_topo::write_json(&t, &mut buf).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
    assert_eq!(
        v["nodes"].as_array().unwrap().len(),
        t.node_count() as usize
    );
    assert_eq!(v["nodes"][0]["role"], "host");
    assert_eq!(v["nodes"][0]["group"], 0);
    assert_eq!(v["nodes"][1100]["role"], "router");
    let l = &v["links"][0];
    assert_eq!((l["a"].as_u64(), l["b"].as_u64()), (Some(0), Some(1056)));
    assert_eq!(l["bandwidth_bps"], 100_000_000_000u64);
    assert_eq!(l["latency_ps"], 1_000_000);
}

#[test]
fn export_is_atomic_and_round_trips_through_files() {
    let dir = std::env::temp_dir().join(format!("netsim-topo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = build(&TopoSpec::default_for("dcn").unwrap()).unwrap();
    let path = dir.join("dcn.topo");
    export(&t, Format::Simai, &path).unwrap();
    let back =
        build(&TopoSpec::default_for(&format!("simai:{}", path.display())).unwrap()).unwrap();
    let again = dir.join("again.topo");
    export(&back, Format::Simai, &again).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(&again).unwrap()
    );
    let json = dir.join("dcn.json");
    export(&t, Format::Json, &json).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["again.topo", "dcn.json", "dcn.topo"],
        "no temporary files left"
    );
    let missing = dir.join("no-such-dir").join("x.topo");
    assert!(matches!(
        export(&t, Format::Simai, &missing),
        Err(TopoError::Io { .. })
    ));
    assert!(!missing.exists());
    let e = build(&TopoSpec::default_for("simai:/no/such/file").unwrap()).unwrap_err();
    assert!(matches!(e, TopoError::Io { .. }));
    std::fs::remove_dir_all(&dir).unwrap();
}
