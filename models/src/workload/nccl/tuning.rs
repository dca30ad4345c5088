//! NCCL's tuning model: for each algorithm and protocol, a latency
//! (base plus a hardware latency per step) and a bandwidth, and the
//! choice of the pair that finishes first.
//!
//! The tables are NCCL 2.18's as SimAI 1.6 carries them in
//! `MockNccl.h` (`baseLat`, `hwLat`, `llMaxBws`, `perChMax*Bws`; see
//! docs/design/nccl-in-simai.md section 3.2). SimAI 1.6 itself never
//! consults them: it picks NVLS for an all-reduce of a TP group of 8 or
//! more H100/H800 ranks when `AS_NVLS_ENABLE=1`, and the ring otherwise.
//! netsim runs NCCL's model over them, so on one H100 server a large
//! all-reduce goes to NVLS as in SimAI, a tiny one to the ring with LL.
//!
//! Costs here are estimates for comparison (floating microseconds and
//! GB/s, as NCCL's own model); simulated time never comes from them
//! except [`latency`], which is whole nanoseconds.

use super::{NcclAlgo, Protocol};
use crate::workload::CollectiveOp;
use netsim_engine::SimTime;

/// What the model needs to know of one collective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub op: CollectiveOp,
    pub ranks: u32,
    /// Servers the group spans (1: all inside one NVLink domain).
    pub servers: u32,
    pub size_bytes: u64,
    /// Parallel rings (or trees) NCCL would run.
    pub channels: u32,
    /// One GPU's NVLink bandwidth, bits per second (0: no NVSwitch).
    pub nvlink_bps: u64,
    /// One GPU's NIC bandwidth, bits per second.
    pub nic_bps: u64,
    /// H100-class GPUs: third-generation NVSwitch, NVLS possible.
    pub hopper: bool,
    /// NVLS allowed (`--nvls`, `AS_NVLS_ENABLE`).
    pub nvls: bool,
}

/// `baseLat[algo][LL, LL128, Simple]`, nanoseconds.
fn base_ns(algo: NcclAlgo, p: Protocol) -> u64 {
    let row: [u64; 3] = match algo {
        NcclAlgo::Tree => [6_800, 14_000, 0],
        NcclAlgo::Ring => [6_600, 14_000, 8_400],
        NcclAlgo::Nvls | NcclAlgo::NvlsTree => [0, 0, 23_000],
    };
    row[p as usize]
}

/// `hwLat[NVLINK or NET][algo][LL, LL128, Simple]`, nanoseconds.
fn hw_ns(net: bool, algo: NcclAlgo, p: Protocol) -> u64 {
    let row: [u64; 3] = match (net, algo) {
        (false, NcclAlgo::Tree) => [600, 1_250, 4_000],
        (false, NcclAlgo::Ring) => [600, 1_900, 3_400],
        (false, NcclAlgo::Nvls | NcclAlgo::NvlsTree) => [0, 0, 0],
        (true, NcclAlgo::Tree) => [5_000, 8_500, 14_000],
        (true, NcclAlgo::Ring) => [2_700, 4_000, 14_000],
        (true, NcclAlgo::Nvls) => [0, 0, 18_000],
        (true, NcclAlgo::NvlsTree) => [0, 0, 19_000],
    };
    row[p as usize]
}

/// Whether NCCL runs `algo` with protocol `p` at all (NVLS only Simple).
fn runs(algo: NcclAlgo, p: Protocol) -> bool {
    !matches!(algo, NcclAlgo::Nvls | NcclAlgo::NvlsTree) || p == Protocol::Simple
}

fn log2_floor(n: u32) -> u64 {
    u64::from(n.max(1).ilog2())
}

/// NCCL's latency of `algo` with `p` on `shape`: the base latency and the
/// hardware latency of every step, NVLink steps and network steps apart.
pub fn latency(shape: &Shape, algo: NcclAlgo, p: Protocol) -> SimTime {
    let (n, nodes) = (u64::from(shape.ranks), u64::from(shape.servers.max(1)));
    let (intra, inter) = (hw_ns(false, algo, p), hw_ns(true, algo, p));
    let base = base_ns(algo, p);
    let ns = match algo {
        NcclAlgo::Ring => {
            let all_reduce = shape.op == CollectiveOp::AllReduce;
            let steps = if all_reduce { 2 * (n - 1) } else { n - 1 };
            let inter_steps = match (all_reduce, nodes > 1) {
                (true, true) => 2 * nodes,
                (true, false) => 0,
                (false, _) => nodes - 1,
            };
            base + steps.saturating_sub(inter_steps) * intra + inter_steps * inter
        }
        NcclAlgo::Tree => {
            let local = n / nodes;
            base + 2 * ((local - 1) * intra + log2_floor(shape.servers) * inter)
        }
        NcclAlgo::Nvls => base + intra + if nodes > 1 { inter } else { 0 },
        NcclAlgo::NvlsTree => base + intra + 2 * log2_floor(shape.servers) * inter,
    };
    SimTime::from_ns(ns)
}

/// `[1 server, 2 servers, more]` index of NCCL's per-size tables.
fn nodes_index(servers: u32) -> usize {
    match servers {
        0 | 1 => 0,
        2 => 1,
        _ => 2,
    }
}

/// Hopper's `llMaxBws`, `perChMaxRingLL128Bws`, `perChMaxTreeLL128Bws`,
/// `perChMaxTreeBws`, GB/s.
const LL_MAX_GBPS: [f64; 3] = [87.7, 22.5, 19.0];
const RING_LL128_PER_CHANNEL_GBPS: f64 = 36.7;
const TREE_LL128_PER_CHANNEL_GBPS: [f64; 3] = [36.7, 36.7, 29.0];
const TREE_PER_CHANNEL_GBPS: [f64; 3] = [38.7, 41.4, 36.0];

/// NCCL's algorithm bandwidth of `algo` with `p`, GB/s: the bus bandwidth
/// of the slowest link a GPU drives (its NVLink, or the NICs of its
/// server's rings), NCCL's per-protocol corrections, and the bus-to-
/// algorithm ratio.
pub fn bandwidth_gbps(shape: &Shape, algo: NcclAlgo, p: Protocol) -> f64 {
    let gbps = |bps: u64| bps as f64 / 8e9;
    let (nvlink, nic) = (gbps(shape.nvlink_bps), gbps(shape.nic_bps));
    let local = f64::from(shape.ranks / shape.servers.max(1));
    let channels = f64::from(shape.channels.max(1));
    let ni = nodes_index(shape.servers);
    let mut bus = if shape.servers > 1 {
        // Each channel leaves the server through its own NIC.
        let nics = nic * local.min(channels).max(1.0);
        if nvlink > 0.0 {
            nvlink.min(nics)
        } else {
            nics
        }
    } else if nvlink > 0.0 {
        nvlink
    } else {
        nic
    };
    let multi = shape.servers > 1 || shape.op == CollectiveOp::AllReduce;
    match (algo, p) {
        (NcclAlgo::Ring, Protocol::Ll) => {
            bus = LL_MAX_GBPS[ni].min(bus * if multi { 0.25 } else { 1.0 / 3.0 })
        }
        (NcclAlgo::Ring, Protocol::Ll128) => {
            bus = (bus * 0.92).min(channels * RING_LL128_PER_CHANNEL_GBPS)
        }
        (NcclAlgo::Tree, _) => {
            bus = (bus * 0.92).min(channels * TREE_PER_CHANNEL_GBPS[ni]);
            match p {
                Protocol::Ll => bus = (bus / 3.8).min(LL_MAX_GBPS[ni]),
                Protocol::Ll128 => {
                    bus = (bus * 120.0 / 128.0).min(channels * TREE_LL128_PER_CHANNEL_GBPS[ni])
                }
                Protocol::Simple => {}
            }
        }
        _ => {}
    }
    let n = f64::from(shape.ranks);
    let ratio = match algo {
        NcclAlgo::Ring => {
            let steps = if shape.op == CollectiveOp::AllReduce {
                2.0 * (n - 1.0)
            } else {
                n - 1.0
            };
            n / steps
        }
        NcclAlgo::Nvls if shape.op != CollectiveOp::AllReduce => n / (n - 1.0),
        NcclAlgo::Nvls | NcclAlgo::NvlsTree => 5.0 / 6.0,
        NcclAlgo::Tree => 0.5,
    };
    bus * ratio
}

/// NCCL's estimate of `algo` with `p` on `shape`, microseconds.
pub fn time_us(shape: &Shape, algo: NcclAlgo, p: Protocol) -> f64 {
    let lat_us = latency(shape, algo, p).as_ns() as f64 / 1e3;
    // GB/s is bytes per nanosecond: bytes / (1e3 * GB/s) is microseconds.
    lat_us + shape.size_bytes as f64 / (1e3 * bandwidth_gbps(shape, algo, p))
}

/// The algorithms NCCL considers for `shape` (with `nvls` allowed).
pub fn candidates(shape: &Shape) -> Vec<NcclAlgo> {
    let mut out = vec![NcclAlgo::Ring];
    let nvls_ok = shape.nvls && shape.hopper && shape.nvlink_bps > 0;
    if shape.op != CollectiveOp::AllReduce {
        // NCCL 2.19+ runs these with NVLS too; modelled in one server only.
        if nvls_ok && shape.servers == 1 && shape.ranks > 1 {
            out.push(NcclAlgo::Nvls);
        }
        return out;
    }
    if shape.servers > 1 {
        out.push(NcclAlgo::Tree);
    }
    let local = shape.ranks / shape.servers.max(1);
    if nvls_ok && local > 1 {
        out.push(if shape.servers > 1 {
            NcclAlgo::NvlsTree
        } else {
            NcclAlgo::Nvls
        });
    }
    out
}

/// NCCL's choice for `shape`: the algorithm among [`candidates`] and the
/// protocol (`protocol` when given) that finish first; ring first on ties.
pub fn choose(shape: &Shape, protocol: Option<Protocol>) -> (NcclAlgo, Protocol) {
    let mut best = (
        NcclAlgo::Ring,
        protocol.unwrap_or(Protocol::Simple),
        f64::MAX,
    );
    for algo in candidates(shape) {
        for p in Protocol::ALL {
            if protocol.is_some_and(|want| want != p) || !runs(algo, p) {
                continue;
            }
            let t = time_us(shape, algo, p);
            if t < best.2 {
                best = (algo, p, t);
            }
        }
    }
    (best.0, best.1)
}

/// H100-class GPU types (third-generation NVSwitch).
pub fn is_hopper(gpu_type: &str) -> bool {
    matches!(
        gpu_type.to_ascii_uppercase().as_str(),
        "H100" | "H800" | "H200" | "H20" | "GH200"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One H100 server of SimAI's Spectrum-X template: 8 GPUs, 2,880 Gb/s
    /// NVLink, 400 Gb/s NICs.
    fn h100(op: CollectiveOp, servers: u32, size_bytes: u64) -> Shape {
        Shape {
            op,
            ranks: 8 * servers,
            servers,
            size_bytes,
            channels: 8,
            nvlink_bps: 2_880_000_000_000,
            nic_bps: 400_000_000_000,
            hopper: true,
            nvls: true,
        }
    }

    #[test]
    fn latencies_are_the_tables_sums() {
        // Ring all-reduce in one server: 8.4 us + 14 steps x 3.4 us.
        let s = h100(CollectiveOp::AllReduce, 1, 1 << 20);
        assert_eq!(
            latency(&s, NcclAlgo::Ring, Protocol::Simple),
            SimTime::from_ns(8_400 + 14 * 3_400)
        );
        assert_eq!(
            latency(&s, NcclAlgo::Nvls, Protocol::Simple),
            SimTime::from_ns(23_000)
        );
        // Two servers: 2 x 2 network steps, 26 NVLink steps, LL.
        let s = h100(CollectiveOp::AllReduce, 2, 1 << 20);
        assert_eq!(
            latency(&s, NcclAlgo::Ring, Protocol::Ll),
            SimTime::from_ns(6_600 + 26 * 600 + 4 * 2_700)
        );
    }

    #[test]
    fn one_h100_server_picks_nvls_for_large_all_reduce_as_simai() {
        let big = h100(CollectiveOp::AllReduce, 1, 64 << 20);
        assert_eq!(choose(&big, None), (NcclAlgo::Nvls, Protocol::Simple));
        // A tiny all-reduce is latency-bound: the ring with LL.
        let tiny = h100(CollectiveOp::AllReduce, 1, 1024);
        assert_eq!(choose(&tiny, None), (NcclAlgo::Ring, Protocol::Ll));
        // NVLS off, or an A100: the ring, with Simple for large messages.
        let off = Shape { nvls: false, ..big };
        assert_eq!(choose(&off, None), (NcclAlgo::Ring, Protocol::Simple));
        let a100 = Shape {
            hopper: false,
            ..big
        };
        assert_eq!(choose(&a100, None).0, NcclAlgo::Ring);
    }

    #[test]
    fn protocols_move_with_size_and_a_forced_protocol_is_kept() {
        let at = |size| choose(&h100(CollectiveOp::AllGather, 2, size), None).1;
        assert_eq!(at(4 << 10), Protocol::Ll);
        assert_eq!(at(1 << 30), Protocol::Simple);
        let s = h100(CollectiveOp::AllReduce, 4, 1 << 30);
        assert_eq!(choose(&s, Some(Protocol::Ll)).1, Protocol::Ll);
        // LL moves twice the bytes: never faster than Simple on bandwidth.
        for algo in [NcclAlgo::Ring, NcclAlgo::Tree] {
            assert!(
                bandwidth_gbps(&s, algo, Protocol::Ll) < bandwidth_gbps(&s, algo, Protocol::Simple)
            );
        }
        assert!(is_hopper("h100") && !is_hopper("A100"));
    }
}
