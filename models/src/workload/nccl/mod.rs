//! Collectives as NCCL runs them on rail-optimized GPU servers: NVLS
//! (NVLink SHARP: the NVSwitch reduces and multicasts), NVLS-Tree, PXN
//! relays, LL/LL128/Simple protocols and NCCL's own choice among them.
//!
//! Everything here is opt-in ([`WorkloadSpec::nccl`](super::WorkloadSpec)
//! `None` keeps the older model exactly): with NCCL's model on, an
//! all-reduce over whole servers runs one ring per local rank as
//! all-gather and reduce-scatter already do (SimAI's MockNccl builds its
//! all-reduce rings so too), instead of the hierarchical `ring+nvswitch`.
//!
//! ```text
//!   tuning.rs  NCCL's cost model (base and hardware latencies, bandwidths
//!              per algorithm and protocol) and the choice it makes
//!   nvls.rs    NVLS (all-reduce, all-gather, reduce-scatter) and NVLS-Tree
//!   run.rs     one collective: choice, protocol, rings per rail, PXN
//! ```
//! PXN is a relay on the rings of [`super::algorithms::relayed_rings`].

pub mod nvls;
pub mod run;
pub mod tuning;

use super::algorithms::HostTasks;
use super::Builder;
use netsim_engine::SimTime;
use netsim_topo::NodeIndex;

/// NCCL's protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    /// 8-byte stores of 4 data bytes and a 4-byte flag: half the bytes
    /// on the wire are flags, the lowest latency.
    Ll,
    /// 128-byte lines of 120 data bytes and an 8-byte flag.
    Ll128,
    /// Plain data with a fence per step: full bandwidth, the highest latency.
    Simple,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ll => "ll",
            Protocol::Ll128 => "ll128",
            Protocol::Simple => "simple",
        }
    }

    pub fn parse(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Bytes on the wire for `data_bytes` of payload (flags included).
    pub fn wire_bytes(self, data_bytes: u64) -> u64 {
        match self {
            Protocol::Ll => data_bytes.saturating_mul(2),
            Protocol::Ll128 => data_bytes.saturating_mul(128).div_ceil(120),
            Protocol::Simple => data_bytes,
        }
    }
}

/// How NCCL's model is asked for: the SimAI knobs `AS_NVLS_ENABLE`
/// (`nvls`), `AS_PXN_ENABLE` (`pxn`) and the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nccl {
    /// Whether `--algo auto` may choose NVLS or NVLS-Tree (it does so only
    /// on H100-class GPUs).
    pub nvls: bool,
    /// Inter-server ring hops relayed over NVLink to the GPU on the
    /// destination's rail.
    pub pxn: bool,
    /// `None`: chosen by the tuning model with the algorithm.
    pub protocol: Option<Protocol>,
    /// Whether each member waits NCCL's tuning latency (the algorithm's and
    /// protocol's base and hardware latencies) before its first send.
    /// SimAI 1.6 adds none (its only per-flow cost is `AS_SEND_LAT`), so
    /// comparing against it needs this off.
    pub tuning_latency: bool,
    /// `--algo auto` picks as SimAI 1.6's MockNccl (`get_algo_proto_info`)
    /// instead of NCCL's tuning model: NVLS for an all-reduce of 8 or more
    /// H100-class ranks when `nvls`, the ring otherwise, whatever the size;
    /// protocol Simple unless one is asked for.
    pub simai_choice: bool,
    /// NVLS all-reduce in one server as SimAI 1.6's MockNccl builds it
    /// (`--nvls-flows mocknccl`, [`nvls::mocknccl_all_reduce`]) instead of
    /// NCCL's bytes through the NVSwitch's engine.
    pub mocknccl_nvls: bool,
}

impl Default for Nccl {
    /// NCCL's defaults on Hopper: NVLS allowed, PXN on, protocol chosen.
    fn default() -> Nccl {
        Nccl {
            nvls: true,
            pxn: true,
            protocol: None,
            tuning_latency: true,
            simai_choice: false,
            mocknccl_nvls: false,
        }
    }
}

/// NCCL's algorithms as netsim runs them (the row of `collectives.algorithm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NcclAlgo {
    Ring,
    /// Double binary tree.
    Tree,
    Nvls,
    NvlsTree,
}

macro_rules! labels {
    ($($algo:ident => $name:literal),*) => {
        /// `collectives.algorithm` of what ran: `ring/ll128`, `nvls/simple`;
        /// `pxn` marks rings whose inter-server hops were relayed.
        pub fn label(algo: NcclAlgo, pxn: bool, protocol: Protocol) -> &'static str {
            match (algo, pxn, protocol) {
                $(
                    (NcclAlgo::$algo, false, Protocol::Ll) => concat!($name, "/ll"),
                    (NcclAlgo::$algo, false, Protocol::Ll128) => concat!($name, "/ll128"),
                    (NcclAlgo::$algo, false, Protocol::Simple) => concat!($name, "/simple"),
                    (NcclAlgo::$algo, true, Protocol::Ll) => concat!($name, "+pxn/ll"),
                    (NcclAlgo::$algo, true, Protocol::Ll128) => concat!($name, "+pxn/ll128"),
                    (NcclAlgo::$algo, true, Protocol::Simple) => concat!($name, "+pxn/simple"),
                )*
            }
        }
    };
}

labels!(Ring => "ring", Tree => "tree", Nvls => "nvls", NvlsTree => "nvls-tree");

/// Each member's entry delayed by `latency` (the protocol's and
/// algorithm's fixed cost, NCCL's tuning latency): one compute task per
/// member, none when the latency is zero.
pub fn delayed(
    b: &mut Builder,
    coll: u32,
    group: &[NodeIndex],
    latency: SimTime,
    entry: &HostTasks,
) -> HostTasks {
    if latency == SimTime::ZERO {
        return entry.clone();
    }
    group
        .iter()
        .map(|&h| {
            let deps = entry.get(&h).map_or(&[][..], Vec::as_slice);
            (h, vec![b.compute(h, latency, coll, deps)])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_carry_their_flags() {
        assert_eq!(Protocol::Ll.wire_bytes(1000), 2000);
        assert_eq!(Protocol::Ll128.wire_bytes(120), 128);
        assert_eq!(Protocol::Ll128.wire_bytes(1_200_000), 1_280_000);
        assert_eq!(Protocol::Simple.wire_bytes(77), 77);
        assert_eq!(Protocol::parse("ll128"), Some(Protocol::Ll128));
        assert_eq!(label(NcclAlgo::Ring, true, Protocol::Ll), "ring+pxn/ll");
        assert_eq!(
            label(NcclAlgo::NvlsTree, false, Protocol::Simple),
            "nvls-tree/simple"
        );
    }
}
