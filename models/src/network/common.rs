//! Shared ids and pure formulas of the network's parts: no state, nothing
//! imported from the network, so every part can use them and the parts
//! depend one way (`port` holds the switch's and the NIC's per-port state;
//! those never reach back into `port`).

use netsim_engine::{splitmix64, SimTime};

/// No node: an unset intermediate router, a node without an attached host.
pub(crate) const NO_NODE: u32 = u32::MAX;

/// A hint to bring `value`'s cache line into the L1 cache (no effect where
/// the target has no prefetch instruction): for what the same event reads
/// a few hundred instructions later.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing the program sees.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Serialisation time of `bytes` at `rate_bps` (at least 1 ps).
#[inline]
pub(crate) fn serialization(bytes: u64, rate_bps: u64) -> SimTime {
    SimTime(((u128::from(bytes) * 8_000_000_000_000) / u128::from(rate_bps)).max(1) as u64)
}

/// Hash-based ECMP: which of `n` next hops a node with seed `node_seed`
/// gives every packet from `src` to `dst` with UDP source port
/// `source_port` (a flow's id or its connection's: `Fabric::source_port`).
#[inline]
pub(crate) fn ecmp_pick(node_seed: u64, source_port: u32, src: u32, dst: u32, n: usize) -> usize {
    let mut h = node_seed ^ five_tuple_hash(source_port, src, dst);
    (splitmix64(&mut h) % n as u64) as usize
}

/// What a packet's entropy value adds to the ECMP hash (Ultra Ethernet
/// carries it in the UDP source port): zero for entropy 0, so RoCE packets
/// hash on their 5-tuple exactly as without it; a multiplicative spread
/// otherwise, so consecutive entropies land on unrelated next hops.
#[inline]
pub(crate) fn entropy_salt(entropy: u16) -> u64 {
    u64::from(entropy).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Hash of a flow's 5-tuple (source and destination address, the UDP
/// source port `source_port`, RoCEv2's UDP port 4791, UDP): the same for
/// every packet of a flow in one direction.
#[inline]
pub fn five_tuple_hash(source_port: u32, src: u32, dst: u32) -> u64 {
    let mut h = (u64::from(src) << 32 | u64::from(dst))
        ^ (u64::from(source_port) << 16)
        ^ 4791
        ^ (17 << 56);
    splitmix64(&mut h)
}
