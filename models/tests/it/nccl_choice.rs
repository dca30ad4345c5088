//! `--algo auto` against what SimAI 1.6's MockNccl picks on its own A100
//! and H100 Spectrum-X files of 8, 16 and 128 GPUs
//! (`tests/data/simai-choice/choice.txt`, which says how it was read):
//! `--nccl-tuning simai` picks as MockNccl, and NCCL's model (the default,
//! PXN off and on) keeps its recorded picks.

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

/// SimAI's H100 topology files, kept once for the packet-level comparisons.
const SIMAI_PACKET_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../runs/tests/data/simai-packet"
);

#[test]
fn auto_picks_what_mocknccl_picks_and_nccls_model_is_kept() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/simai-choice");
    let table = std::fs::read_to_string(format!("{dir}/choice.txt")).unwrap();
    let mut topos = std::collections::BTreeMap::new();
    let mut cases = 0;
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [file, op, size, nvls, simai, want_simai, want_off, want_on] = f[..] else {
            panic!("bad line {line}")
        };
        let topo = topos.entry(file).or_insert_with(|| {
            // SimAI's H100 files are the packet-level tests' own copies.
            let path = [dir, SIMAI_PACKET_DIR]
                .map(|d| format!("{d}/{file}"))
                .into_iter()
                .find(|p| std::path::Path::new(p).exists())
                .unwrap_or_else(|| panic!("no topology file {file}"));
            let text = std::fs::read_to_string(path).unwrap();
            netsim_topo::parse_simai(&text, file).unwrap()
        });
        let op = match op {
            "allreduce" => CollectiveOp::AllReduce,
            "allgather" => CollectiveOp::AllGather,
            "reducescatter" => CollectiveOp::ReduceScatter,
            "alltoall" => CollectiveOp::AllToAll,
            _ => panic!("bad op {line}"),
        };
        // MockNccl's label, as netsim names it (its all-to-all: direct flows).
        let label = if op == CollectiveOp::AllToAll {
            "direct"
        } else {
            &simai.to_lowercase()
        };
        assert!(want_simai.starts_with(label), "{line}");
        let size = size.parse().unwrap();
        for (simai_choice, pxn, want) in [
            (true, false, want_simai),
            (false, false, want_off),
            (false, true, want_on),
        ] {
            let nccl = Nccl {
                nvls: nvls == "1",
                pxn,
                simai_choice,
                ..Nccl::default()
            };
            assert_eq!(chosen(topo, op, size, nccl), want, "{line}");
        }
        cases += 1;
    }
    assert_eq!(cases, 160);
}
