//! `--algo auto --nccl-tuning simai` against what SimAI 1.6's MockNccl
//! picks on its own A100 and H100 Spectrum-X files
//! (`tests/data/simai-choice/choice.txt`, which says how it was read).

use netsim_engine::SimTime;
use netsim_models::network::config::{CcKind, NetConfig};
use netsim_models::workload::groups::GroupSpec;
use netsim_models::workload::nccl::Nccl;
use netsim_models::workload::{Algorithm, CollectiveOp, Dtype, OpSpec, ReduceOp, WorkloadSpec};

/// The collectives.algorithm of `op` of `size_bytes` over every GPU of
/// `topo` with `--algo auto` and `nccl`, on a lossless fabric.
fn chosen(topo: &netsim_topo::Topology, op: CollectiveOp, size_bytes: u64, nccl: Nccl) -> String {
    let mut spec = WorkloadSpec::single(OpSpec {
        op,
        algorithm: Algorithm::Auto,
        size_bytes,
        group: GroupSpec::All,
        dtype: Dtype::Float32,
        reduce_op: ReduceOp::Sum,
    });
    spec.nccl = Some(nccl);
    let config = NetConfig {
        cc: CcKind::None,
        pfc: true,
        sample_period: SimTime::ZERO,
        ..NetConfig::default()
    };
    let w = netsim_models::workload::build(&spec, topo, &config).unwrap();
    w.collectives[0].algorithm.to_string()
}

#[test]
fn auto_with_simai_tuning_picks_what_mocknccl_picks() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/simai-choice");
    let table = std::fs::read_to_string(format!("{dir}/choice.txt")).unwrap();
    let mut topos = std::collections::BTreeMap::new();
    let mut cases = 0;
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [file, op, size, nvls, _simai, want] = f[..] else {
            panic!("bad line {line}")
        };
        let topo = topos.entry(file).or_insert_with(|| {
            let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
            netsim_topo::parse_simai(&text, file).unwrap()
        });
        let op = match op {
            "allreduce" => CollectiveOp::AllReduce,
            "allgather" => CollectiveOp::AllGather,
            _ => CollectiveOp::ReduceScatter,
        };
        let nccl = Nccl {
            nvls: nvls == "1",
            pxn: false,
            simai_choice: true,
            ..Nccl::default()
        };
        let got = chosen(topo, op, size.parse().unwrap(), nccl);
        assert_eq!(got, want, "{line}");
        cases += 1;
    }
    assert_eq!(cases, 96);
}
