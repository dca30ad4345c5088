//! netsim's decomposition of collectives against the flow lists SimAI 1.6's
//! MockNccl generates (`models/tests/data/mocknccl`, extracted from a build
//! of its `MockNcclGroup::genFlowModels` in /tmp, 16 MiB, TP group over
//! every GPU of SimAI's Spectrum-X file; docs/design/nccl-in-simai.md).
//! Each list is `count src dst bytes parent_src parent_dst`: how many
//! flows go from `src` to `dst` with `bytes`, waiting for a flow from
//! `parent_src` to `parent_dst` (`- -`: none).

use netsim_models::workload::{Algorithm, CollectiveOp, Workload};
use std::collections::BTreeMap;

use crate::common::lossless;
use crate::nccl::{nccl_spec, simple, spectrum_x};

const SIZE: u64 = 16 << 20;

/// The list `name` (without `.txt`), or `None` if it is not there.
fn mocknccl(name: &str) -> Option<BTreeMap<String, u64>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mocknccl");
    let text = std::fs::read_to_string(format!("{dir}/{name}.txt")).ok()?;
    let list = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (count, key) = l.split_once(' ').unwrap();
            (key.to_string(), count.parse().unwrap())
        })
        .collect();
    Some(list)
}

/// `collective` on `gpus` GPUs by NCCL's model, built.
fn netsim(gpus: u32, collective: CollectiveOp, algorithm: Algorithm, pxn: bool) -> Workload {
    let spec = nccl_spec(collective, algorithm, SIZE, simple(pxn));
    let topo = netsim_topo::build(&spectrum_x(gpus)).unwrap();
    netsim_models::workload::build(&spec, &topo, &lossless()).unwrap()
}

/// `count src dst bytes parent_src parent_dst` of every flow of `w`: the
/// flow it waits for (`- -` for none), as the MockNccl lists are written.
fn flow_multiset(w: &Workload) -> BTreeMap<String, u64> {
    use netsim_models::workload::TaskKind;
    let flow_of = |t: u32| match w.kind(&w.tasks[t as usize]) {
        TaskKind::Flow(f) => Some(f),
        TaskKind::Compute(_) => None,
    };
    let mut parents: Vec<Vec<u32>> = vec![Vec::new(); w.flows.len()];
    for t in 0..w.tasks.len() as u32 {
        let Some(parent) = flow_of(t) else { continue };
        for &d in w.dependents(t) {
            if let Some(child) = flow_of(d) {
                parents[child as usize].push(parent);
            }
        }
    }
    let mut out = BTreeMap::new();
    for (f, spec) in w.flows.iter().enumerate() {
        let head = format!("{} {} {}", spec.src, spec.dst, spec.size_bytes);
        let keys: Vec<String> = match parents[f].as_slice() {
            [] => vec![format!("{head} - -")],
            ps => ps
                .iter()
                .map(|&p| {
                    let p = &w.flows[p as usize];
                    format!("{head} {} {}", p.src, p.dst)
                })
                .collect(),
        };
        for k in keys {
            *out.entry(k).or_insert(0) += 1;
        }
    }
    out
}

/// netsim's flows and dependencies equal MockNccl's, flow for flow: rings
/// per rail with and without PXN for all-reduce and reduce-scatter,
/// all-gather, all-to-all, on 16 and 128 GPUs. SimAI never applies PXN to
/// all-gather (its test compares pointers): its PXN list is its list
/// without, which netsim's all-gather without PXN equals; with PXN netsim
/// relays over NVLink as NCCL does, and differs.
#[test]
fn decomposition_equals_mocknccls_flow_for_flow() {
    let cases = [
        ("ar", CollectiveOp::AllReduce),
        ("ag", CollectiveOp::AllGather),
        ("rs", CollectiveOp::ReduceScatter),
        ("a2a", CollectiveOp::AllToAll),
    ];
    let mut compared = 0;
    for gpus in [16, 128] {
        for (name, collective) in cases {
            for pxn in [false, true] {
                let file = format!("{name}-{gpus}-pxn-{}", if pxn { "on" } else { "off" });
                let Some(want) = mocknccl(&file) else {
                    continue;
                };
                let algorithm = match collective {
                    CollectiveOp::AllToAll => Algorithm::Direct,
                    _ => Algorithm::Ring,
                };
                let simai_pxn = pxn && collective != CollectiveOp::AllGather;
                let w = netsim(gpus, collective, algorithm, simai_pxn);
                assert_eq!(flow_multiset(&w), want, "{file}");
                if pxn && !simai_pxn {
                    let relayed = netsim(gpus, collective, algorithm, true);
                    assert_ne!(flow_multiset(&relayed), want, "{file}: PXN changed nothing");
                }
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 14);
}

/// MockNccl's NVLS all-reduce on one server (SimAI 1.6 runs NVLS only
/// there; on 16 GPUs it generates no flow, and the run stalls): 4 chunks,
/// each GPU sends `S/4` into the NVSwitch, which sends `S/4` back to each
/// once every GPU's copy of the chunk is in: `S` up and `S` down a GPU.
/// netsim streams the same GPU-NVSwitch pairs, one stream a GPU through
/// the switch's engine, but `S (n+1)/n` each way: NCCL's reduce-scatter
/// by `ld_reduce` (S up, the shard `S/n` down) and its all-gather by
/// multicast store (the shard up, `S` down); MockNccl moves no shard.
#[test]
fn nvls_moves_mocknccls_pairs_and_the_shard() {
    let want = mocknccl("nvls-ar-8").expect("the NVLS list");
    let n = 8u64;
    let w = netsim(8, CollectiveOp::AllReduce, Algorithm::Nvls, false);
    let nvswitch = w.flows[0].dst;
    let mut up: BTreeMap<u32, u64> = BTreeMap::new();
    let mut down: BTreeMap<u32, u64> = BTreeMap::new();
    let mut waits_for_every_gpu = true;
    for (key, count) in &want {
        let f: Vec<&str> = key.split(' ').collect();
        let (src, dst, bytes): (u32, u32, u64) = (
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
        );
        if dst == nvswitch {
            *up.entry(src).or_insert(0) += count * bytes;
            waits_for_every_gpu &= f[3] == "-";
        } else {
            assert_eq!(src, nvswitch, "{key}: not through the NVSwitch");
            *down.entry(dst).or_insert(0) += count;
            waits_for_every_gpu &= f[4].parse::<u32>() == Ok(nvswitch);
        }
    }
    assert!(waits_for_every_gpu, "a down flow waits for no up flow");
    // Every down flow waits for the 8 up flows of its chunk: 4 x 8 keys a GPU.
    assert!(down.values().all(|&keys| keys == 4 * n), "{down:?}");
    assert_eq!(up.len() as u64, n);
    assert!(up.values().all(|&bytes| bytes == SIZE), "{up:?}");
    // netsim: one stream a GPU into the same NVSwitch, S (n+1)/n.
    assert_eq!(w.flows.len() as u64, n);
    for f in &w.flows {
        assert_eq!(f.dst, nvswitch);
        assert!(
            up.contains_key(&f.src),
            "GPU {} not in MockNccl's list",
            f.src
        );
        assert_eq!(f.size_bytes, SIZE + SIZE / n, "GPU {}", f.src);
    }
    // Across servers MockNccl generates nothing; netsim runs NVLS-Tree.
    assert_eq!(mocknccl("nvls-ar-16"), Some(BTreeMap::new()));
    let w = netsim(16, CollectiveOp::AllReduce, Algorithm::Nvls, false);
    assert!(!w.flows.is_empty());
}
