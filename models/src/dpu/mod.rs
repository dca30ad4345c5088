//! SmartNIC/DPU offload: a DPU (BlueField-2 by default) attached to every
//! host's NIC, collectives staged through its worker cores, and the
//! DPU-Bench offload-efficiency benchmark over them.
//!
//! ```text
//!   host memory H ──PCIe── E ──network port── ToR / fabric
//!                          │   (E: the NIC's embedded switch)
//!   DPU memory  D ──memory controller──┘
//! ```
//!
//! The DPU is not a curve: it is part of the packet-level fabric. [`attach`]
//! rebuilds a topology so that each server is a host-memory endpoint `H`, a
//! DPU-memory endpoint `D` and the NIC's embedded switch `E`, joined by links
//! whose bandwidths are the PCIe path, the DPU's one memory controller (every
//! byte a worker reads lands in `D`, every byte it writes leaves `D`, so all
//! its cores share that link) and the network port. A worker is one Arm core:
//! its RDMA posts and completion polls are compute tasks chained on that core
//! (`staged`), and its reads and writes are flows that queue, pause and are
//! paced like any other. What the benchmark measures therefore comes from
//! packets contending for the port, the fabric, PCIe and the memory
//! controller, and from the per-operation cost of each core.
//!
//! | part      | holds                                                       |
//! |-----------|-------------------------------------------------------------|
//! | `mod`     | [`DpuParams`] (BlueField-2 defaults), [`attach`], [`DpuFabric`] |
//! | `mod`     | [`default_net`]: the HDR100-like network DPU-Bench runs on   |
//!
//! The staged collectives themselves are workload algorithms
//! (`workload::dpu`), which depend on this module, not the other way; the
//! DPU-Bench driver (reference, offloaded run, offload efficiency) is
//! `netsim`'s `dpu_bench`.

use crate::network::config::{CcKind, NetConfig};
use netsim_engine::SimTime;
use netsim_topo::{NodeIndex, Role, TopoError, Topology, TopologyBuilder};

/// The DPU's resources. Defaults are NVIDIA BlueField-2 figures (see the
/// docs/models/dpu.md for sources); each is a flag of `netsim dpu-bench`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DpuParams {
    /// Arm cores per DPU; a worker is pinned to one, so workers per DPU <= cores.
    /// BlueField-2: eight Cortex-A72.
    pub cores: u32,
    /// The memory controller's bandwidth, bits/s, shared by reads and writes
    /// of every core. BlueField-2: one single-channel DDR4-3200 controller,
    /// 64-bit data: 3200 MT/s x 8 B = 25.6 GB/s = 204.8 Gb/s.
    pub mem_bps: u64,
    /// Latency through the memory controller.
    pub mem_latency: SimTime,
    /// Host memory <-> NIC path, each direction, bits/s. BlueField-2:
    /// PCIe Gen4 x16, 16 GT/s x 16 lanes x 128/130 = 252 Gb/s.
    pub pcie_bps: u64,
    /// Latency of one PCIe crossing.
    pub pcie_latency: SimTime,
    /// Core time to post one RDMA operation (build the work request, ring the doorbell).
    pub post: SimTime,
    /// Core time to poll one completion.
    pub poll: SimTime,
    /// Staging fragment: a worker reads at most this many bytes at a time
    /// into DPU memory and forwards each fragment once its read completes,
    /// so forwarding starts after one fragment rather than the whole
    /// buffer. Default 512 KiB, UCX's host bounce-buffer fragment for its
    /// pipelined rendezvous (`UCX_RNDV_FRAG_SIZE=host:512K`).
    pub chunk_bytes: u64,
}

impl Default for DpuParams {
    fn default() -> Self {
        DpuParams {
            cores: 8,
            mem_bps: 204_800_000_000,
            mem_latency: SimTime::from_ns(100),
            pcie_bps: 252_000_000_000,
            pcie_latency: SimTime::from_ns(500),
            post: SimTime::from_ns(1_000),
            poll: SimTime::from_ns(500),
            chunk_bytes: 512 * 1024,
        }
    }
}

impl DpuParams {
    /// Checks that every figure is usable; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.cores == 0 || self.cores > 1024 {
            return Err(format!("cores must be 1..=1024, got {}", self.cores));
        }
        for (name, bps) in [("mem_bps", self.mem_bps), ("pcie_bps", self.pcie_bps)] {
            if !(2..=netsim_topo::units::MAX_BANDWIDTH_BPS).contains(&bps) {
                return Err(format!(
                    "{name} must be 2..={} b/s, got {bps}",
                    netsim_topo::units::MAX_BANDWIDTH_BPS
                ));
            }
        }
        for (name, t) in [
            ("mem_latency", self.mem_latency),
            ("pcie_latency", self.pcie_latency),
        ] {
            if t == SimTime::ZERO || t.as_ps() > netsim_topo::units::MAX_LATENCY_PS {
                return Err(format!("{name} must be 1 ps..=100 ms"));
            }
        }
        for (name, t) in [("post", self.post), ("poll", self.poll)] {
            if t > SimTime::from_ns(100_000_000) {
                return Err(format!("{name} must be at most 100 ms"));
            }
        }
        if !(4096..=1 << 34).contains(&self.chunk_bytes) {
            return Err(format!(
                "chunk must be 4 KiB..=16 GiB, got {} bytes",
                self.chunk_bytes
            ));
        }
        Ok(())
    }

    /// Bandwidth of each direction of the memory-controller link: the
    /// packet model's links are full duplex, a DDR controller has one data
    /// bus that reads and writes share, so each direction gets half.
    pub fn mem_link_bps(&self) -> u64 {
        self.mem_bps / 2
    }
}

/// A topology with a DPU on every host's NIC, and where each server's parts are.
#[derive(Clone, Debug)]
pub struct DpuFabric {
    pub topo: Topology,
    /// Servers (the base topology's hosts).
    pub servers: u32,
    pub params: DpuParams,
}

impl DpuFabric {
    /// The host-memory endpoint of server `s`: where its host processes run.
    pub fn host(&self, s: u32) -> NodeIndex {
        assert!(s < self.servers);
        s
    }

    /// The DPU-memory endpoint of server `s`: where its workers' data lands.
    pub fn dpu(&self, s: u32) -> NodeIndex {
        assert!(s < self.servers);
        self.servers + s
    }

    /// The NIC's embedded switch of server `s`.
    pub fn nic_switch(&self, s: u32) -> NodeIndex {
        assert!(s < self.servers);
        2 * self.servers + s
    }

    /// Whether `node` is a DPU-memory endpoint.
    pub fn is_dpu(&self, node: NodeIndex) -> bool {
        (self.servers..2 * self.servers).contains(&node)
    }
}

/// The servers of a topology [`attach`] built (its hosts are host memories
/// `0..S`, then DPU memories `S..2S`), or `None` for any other topology.
pub fn servers(topo: &Topology) -> Option<u32> {
    topo.kind().ends_with("+dpu").then(|| topo.host_count() / 2)
}

/// The hosts a workload's ranks run on: every host, or on a topology with
/// DPUs only the host memories (DPU memories belong to the workers).
pub fn compute_hosts(topo: &Topology) -> u32 {
    servers(topo).unwrap_or_else(|| topo.host_count())
}

/// `base` with a DPU on each host's NIC: host `h` becomes server `h` (host
/// memory `h`, DPU memory `S + h`, embedded switch `2S + h`); the host's
/// links to the fabric now start at the embedded switch (the network port),
/// which also links to host memory (PCIe) and DPU memory (the memory
/// controller). Switches keep their order after the new nodes.
pub fn attach(base: &Topology, params: &DpuParams) -> Result<DpuFabric, TopoError> {
    params.validate().map_err(TopoError::Invalid)?;
    let s = base.host_count();
    let shift = 2 * s;
    let mut b = TopologyBuilder::new(&format!("{}+dpu", base.kind()));
    b.reserve(
        base.node_count() as usize + shift as usize,
        base.link_count() as usize + shift as usize,
    )?;
    // A server's parts keep the host's coordinates (pod, group), so the
    // partitioner keeps them with their switch like any host.
    let coords = |h: u32| base.node(h).coords;
    for h in 0..s {
        b.add_node(Role::Host, coords(h));
    }
    for h in 0..s {
        b.add_node(Role::Host, coords(h));
    }
    for h in 0..s {
        b.add_node(Role::Tor, coords(h));
    }
    for n in s..base.node_count() {
        b.add_node(base.role(n), base.node(n).coords);
    }
    // Host h's links now start at its embedded switch 2S + h; switch n is now n + 2S.
    let map = |n: NodeIndex| n + shift;
    for l in base.links() {
        b.add_link(map(l.a), map(l.b), l.bandwidth_bps, l.latency_ps);
    }
    for h in 0..s {
        b.add_link(h, shift + h, params.pcie_bps, params.pcie_latency.as_ps());
        b.add_link(
            s + h,
            shift + h,
            params.mem_link_bps(),
            params.mem_latency.as_ps(),
        );
    }
    Ok(DpuFabric {
        topo: b.finish()?,
        servers: s,
        params: *params,
    })
}

/// The network the benchmark runs on by default: the paper's HDR100
/// InfiniBand, lossless by link-level credits (PFC here) with no end-to-end
/// congestion control, and IB's usual local ACK timeout (4.096 us x 2^14 =
/// 67 ms) instead of RoCE's short one, which PFC-paused ACKs would trip.
/// No queue or link sampling.
pub fn default_net() -> NetConfig {
    NetConfig {
        cc: CcKind::None,
        pfc: true,
        rto: SimTime::from_us(67_109),
        sample_period: SimTime::ZERO,
        ..NetConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_topo::{StarParams, TopoSpec};

    #[test]
    fn attach_puts_host_dpu_and_nic_switch_per_server() {
        let base = netsim_topo::build(&TopoSpec::Star(StarParams {
            hosts: 3,
            ..StarParams::default()
        }))
        .unwrap();
        let f = attach(&base, &DpuParams::default()).unwrap();
        assert_eq!(f.topo.host_count(), 6);
        assert_eq!(f.topo.node_count(), 10);
        assert_eq!(f.topo.link_count(), 9);
        // Host memory and DPU memory each hang off the embedded switch only.
        for s in 0..3 {
            for n in [f.host(s), f.dpu(s)] {
                let ports = f.topo.ports(n);
                assert_eq!(ports.len(), 1);
                assert_eq!(ports[0].peer, f.nic_switch(s));
            }
            // The embedded switch: PCIe, memory, and the port to the star switch.
            assert_eq!(f.topo.ports(f.nic_switch(s)).len(), 3);
        }
        let mem = f.topo.link(f.topo.ports(f.dpu(0))[0].link);
        assert_eq!(mem.bandwidth_bps, 102_400_000_000);
    }
}
