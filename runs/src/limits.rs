//! Limits a run checks before it starts: the number of sample rows (its
//! memory is checked in [`crate::memory_check`]).

use anyhow::bail;
use netsim_engine::SimTime;
use netsim_models::network::config::NetConfig;
use netsim_models::workload::{TaskKind, Workload};
use netsim_topo::Topology;

/// The most rows the `links` and `queues` tables may be asked for: beyond
/// this a run writes samples for hours.
const MAX_SAMPLE_ROWS: u64 = 1_000_000_000;

/// Fails when the workload surely runs so long that sampling every
/// `config.sample_period` would write more than [`MAX_SAMPLE_ROWS`] rows
/// (every period adds a row per link direction, idle rows kept).
pub fn check_samples(
    workload: &Workload,
    config: &NetConfig,
    topo: &Topology,
) -> anyhow::Result<()> {
    let period = config.sample_period;
    if period == SimTime::ZERO {
        return Ok(());
    }
    let span = run_lower_bound(workload, config, topo);
    let links = u64::from(topo.link_count());
    let rows = (span.as_ps() / period.as_ps()).saturating_mul(2 * links);
    if rows > MAX_SAMPLE_ROWS {
        bail!(
            "--sample-ns: the run lasts at least {:.6} s of simulated time (its flows' ideal \
             completion times), so sampling every {} ns writes over {rows} rows (at most \
             {MAX_SAMPLE_ROWS}): raise --sample-ns or set it to 0",
            span.as_ps() as f64 / 1e12,
            period.as_ns()
        );
    }
    Ok(())
}

/// A lower bound on the run's simulated length: its latest flow start, its
/// longest compute task, the host overhead, and the time every host needs
/// to put the wire bytes of its flows on (or take them off) its links at
/// their full rate, from its first flow's start on.
pub fn run_lower_bound(workload: &Workload, config: &NetConfig, topo: &Topology) -> SimTime {
    let latest_start = workload.flows.iter().map(|f| f.start).max();
    let longest_compute = workload
        .tasks
        .iter()
        .filter_map(|t| match workload.kind(t) {
            TaskKind::Compute(d) => Some(d),
            TaskKind::Flow(_) => None,
        });
    let overhead = workload.has_tasks().then_some(workload.host_overhead);
    latest_start
        .into_iter()
        .chain(longest_compute)
        .chain(overhead)
        .chain([host_bytes_bound(workload, config, topo)])
        .max()
        .unwrap_or(SimTime::ZERO)
}

/// The longest any host takes to send, or to receive, the wire bytes of
/// all its flows at the sum of its links' rates, starting at its first
/// flow's start: no flow of the host can end before.
fn host_bytes_bound(workload: &Workload, config: &NetConfig, topo: &Topology) -> SimTime {
    let nodes = topo.node_count() as usize;
    // Per node: wire bytes sent, wire bytes received, first start.
    let mut sent = vec![0u64; nodes];
    let mut received = vec![0u64; nodes];
    let mut first = vec![SimTime::MAX; nodes];
    let (mtu, header) = (u64::from(config.mtu_bytes), u64::from(config.header_bytes));
    for f in &workload.flows {
        let wire = f.size_bytes + f.size_bytes.div_ceil(mtu) * header;
        let (s, d) = (f.src as usize, f.dst as usize);
        sent[s] = sent[s].saturating_add(wire);
        received[d] = received[d].saturating_add(wire);
        first[s] = first[s].min(f.start);
        first[d] = first[d].min(f.start);
    }
    let mut bound = SimTime::ZERO;
    for node in 0..nodes {
        let bytes = sent[node].max(received[node]);
        if bytes == 0 {
            continue;
        }
        let rate_bps: u64 = topo
            .ports(node as u32)
            .iter()
            .map(|p| topo.link(p.link).bandwidth_bps)
            .sum();
        if rate_bps == 0 {
            continue;
        }
        let ps = u128::from(bytes) * 8_000_000_000_000 / u128::from(rate_bps);
        let busy = SimTime(u64::try_from(ps).unwrap_or(u64::MAX));
        bound = bound.max(first[node].saturating_add(busy));
    }
    bound
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim_models::traffic::FlowSpec;
    use netsim_topo::{LinkParams, StarParams, TopoSpec};

    #[test]
    fn an_incast_lasts_at_least_its_bytes_over_the_receivers_link() {
        let topo = netsim_topo::build(&TopoSpec::Star(StarParams {
            hosts: 9,
            host_link: LinkParams {
                bandwidth_bps: 100_000_000_000,
                latency_ps: 1_000_000,
            },
        }))
        .unwrap();
        let config = NetConfig::default();
        let size = 1_000_000;
        let flows = (1..9)
            .map(|src| FlowSpec {
                src,
                dst: 0,
                size_bytes: size,
                start: SimTime::from_us(10),
            })
            .collect();
        let workload = Workload::from_flows(flows);
        let wire =
            size + size.div_ceil(u64::from(config.mtu_bytes)) * u64::from(config.header_bytes);
        // Eight flows into host 0 at 100 Gb/s, from 10 us on.
        let expected = SimTime::from_us(10) + SimTime(8 * wire * 8 * 10);
        assert_eq!(run_lower_bound(&workload, &config, &topo), expected);
    }
}
