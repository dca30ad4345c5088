//! The DPU's figures as flags (and scenario keys), shared by `netsim run`
//! (`--dpu-workers N --algo dpu`) and `netsim dpu-bench`. Defaults are
//! BlueField-2's; docs/models/dpu.md gives each one's source.

use anyhow::bail;
use netsim_engine::SimTime;
use netsim_models::dpu::DpuParams;
use netsim_models::workload::file::parse_size;
use netsim_topo::units::{parse_gbps, parse_ns};

/// The DPU attached to every host's NIC.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "DPU")]
pub struct DpuArgs {
    /// Arm cores per DPU, the most workers one DPU runs (BlueField-2: 8).
    #[arg(long, default_value_t = 8)]
    pub dpu_cores: u32,
    /// The DPU memory controller's bandwidth, Gb/s, reads and writes
    /// together (BlueField-2: one single-channel DDR4-3200, 204.8).
    #[arg(long, value_parser = parse_gbps, default_value = "204.8", value_name = "GBPS")]
    pub dpu_mem_gbps: u64,
    /// Latency through the DPU memory controller, ns.
    #[arg(long, value_parser = parse_ns, default_value = "100", value_name = "NS")]
    pub dpu_mem_latency_ns: u64,
    /// Host memory <-> NIC path, Gb/s each way (PCIe Gen4 x16: 252).
    #[arg(long, value_parser = parse_gbps, default_value = "252", value_name = "GBPS")]
    pub dpu_pcie_gbps: u64,
    /// Latency of one PCIe crossing, ns.
    #[arg(long, value_parser = parse_ns, default_value = "500", value_name = "NS")]
    pub dpu_pcie_latency_ns: u64,
    /// Arm core time to post one RDMA operation, ns.
    #[arg(long, value_parser = parse_ns, default_value = "1000", value_name = "NS")]
    pub dpu_post_ns: u64,
    /// Arm core time to poll one completion, ns.
    #[arg(long, value_parser = parse_ns, default_value = "500", value_name = "NS")]
    pub dpu_poll_ns: u64,
    /// Staging fragment: a worker reads at most this much at a time and
    /// forwards each fragment as it lands (UCX's host fragment: 512KiB).
    #[arg(long, value_parser = parse_chunk, default_value = "512KiB", value_name = "SIZE")]
    pub dpu_chunk: u64,
}

impl DpuArgs {
    /// The DPU's figures; an error names the flag.
    pub fn params(&self) -> anyhow::Result<DpuParams> {
        let params = DpuParams {
            cores: self.dpu_cores,
            mem_bps: self.dpu_mem_gbps,
            mem_latency: SimTime(self.dpu_mem_latency_ns),
            pcie_bps: self.dpu_pcie_gbps,
            pcie_latency: SimTime(self.dpu_pcie_latency_ns),
            post: SimTime(self.dpu_post_ns),
            poll: SimTime(self.dpu_poll_ns),
            chunk_bytes: self.dpu_chunk,
        };
        if let Err(e) = params.validate() {
            // `validate` names the field; say the flag instead.
            let flag = match e.split_whitespace().next().unwrap_or("") {
                "cores" => "--dpu-cores",
                "mem_bps" => "--dpu-mem-gbps",
                "mem_latency" => "--dpu-mem-latency-ns",
                "pcie_bps" => "--dpu-pcie-gbps",
                "pcie_latency" => "--dpu-pcie-latency-ns",
                "post" => "--dpu-post-ns",
                "poll" => "--dpu-poll-ns",
                _ => "--dpu-chunk",
            };
            bail!("{flag}: {e}");
        }
        Ok(params)
    }
}

/// A staging fragment: a size (`512KiB`) of 4 KiB..=16 GiB.
fn parse_chunk(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if !(4096..=1 << 34).contains(&bytes) {
        return Err(format!("{bytes} bytes is outside 4 KiB..=16 GiB"));
    }
    Ok(bytes)
}
