//! Fast-forward (DESIGN.md §3c): jumps over steady states (`jumps.rs`) and
//! memoization of repeated collective waves (`memo/`).
//!
//! The rest of the network sees only this file's [`FastForwarding`] and the
//! hooks it calls on `Network`, each a no-op when fast-forward is off:
//!
//! | hook                  | called by                 | tells fast-forward          |
//! |-----------------------|---------------------------|-----------------------------|
//! | `memo_scheduled`      | `tasks.rs`                | a flow start or compute end is scheduled |
//! | `memo_flow_start`     | `nic.rs`                  | a flow starts (true: replayed) |
//! | `memo_end`            | the `MemoEnd` event       | a replayed flow ends        |
//! | `memo_seen`           | `tasks.rs`                | a host saw a task complete  |
//! | `memo_pfc`            | `port.rs`                 | a PFC frame arrived         |
//! | `memo_draw`           | `switch.rs`               | a random draw was taken     |
//! | `rail_flow_start`     | `nic.rs`                  | a flow starts (true: it follows a twin) |
//! | `rail_mirror`         | `port.rs`                 | a packet leaves a port      |
//! | `rail_leader_finished`| `nic.rs`                  | a sender finished           |
//! | `rail_end`, `rail_done` | the `RailEnd`, `RailDone` events | a follower ends, its row |
//! | `rail_marked`, `rail_paused` | `switch.rs`, `port.rs` | a switch marked, a port was paused |
//! | `ff_*`, `memo_agree`  | the engine's skip hooks   | check instants and jumps    |
//!
//! and for samples, [`FastForwarding::unsent_bytes`] and
//! [`FastForwarding::sampled`]: the bytes replays have yet to put on a
//! port's wire.

mod advance;
mod domain_agree;
mod domain_wait;
mod domains;
mod jumps;
mod memo;
mod quiet;
mod rails;
pub(crate) mod twin_draws;

use super::config::FastForward;
use super::Network;
use crate::telemetry::TelemetrySink;
use crate::workload::Workload;
use netsim_engine::SimTime;

/// What the sample rings hold per port and per flow in flight at its
/// source under `config` (`None`: off, nothing), for the memory check.
pub(crate) fn bytes_per_port_and_sender(config: Option<FastForward>) -> (u64, u64) {
    config.map_or((0, 0), |ff| jumps::Steady::bytes_per_port_and_sender(&ff))
}

/// For `run.json`: how many flows of `fabric` follow a twin under
/// `--ff-rails on`, or why none does.
pub fn rail_classes(fabric: &super::Fabric) -> String {
    match rails::Rails::build(fabric) {
        rails::Built::Rails(r) => format!("{} flows follow a twin", r.follower_count()),
        rails::Built::Refused(why) => why.to_string(),
    }
}

/// A shard's fast-forward state: jumps' samples and memoization, each
/// `None` when off.
#[derive(Debug)]
pub(crate) struct FastForwarding {
    steady: Option<jumps::Steady>,
    memo: Option<memo::Memo>,
    /// Per-domain jumps (`--ff-scope domain`).
    domains: Option<domains::Domains>,
    /// Rail replay (`--ff-rails on`; `None` too where refused).
    rails: Option<rails::Rails>,
}

impl FastForwarding {
    /// The state for a shard of `ports` ports under `config` (`None`:
    /// off); memoization only for a workload with tasks.
    pub(crate) fn new(
        config: Option<FastForward>,
        fabric: &super::Fabric,
        ports: usize,
    ) -> FastForwarding {
        let workload: &Workload = &fabric.workload;
        let steady = config.map(|ff| {
            assert!(
                workload.ina_ops.is_empty(),
                "fast-forward does not cover in-network aggregation"
            );
            jumps::Steady::new(ff, ports)
        });
        let memo = config
            .filter(|ff| ff.memo && workload.has_tasks())
            .map(|_| memo::Memo::new(fabric, ports));
        let domains = config.filter(|ff| ff.domains).map(|_| {
            let nodes = fabric.topo.node_count() as usize;
            domains::Domains::new(workload.flows.len(), workload.tasks.len(), nodes, ports)
        });
        let rails = config
            .filter(|ff| ff.rails)
            .and_then(|_| match rails::Rails::build(fabric) {
                rails::Built::Rails(r) => Some(r),
                rails::Built::Refused(_) => None,
            });
        FastForwarding {
            steady,
            memo,
            domains,
            rails,
        }
    }

    /// Of priority `prio`'s bytes started at port `gport`, those memo
    /// replays have yet to put on the wire at `at`.
    pub(crate) fn unsent_bytes(&self, gport: usize, prio: usize, at: SimTime) -> u64 {
        self.memo
            .as_ref()
            .map_or(0, |m| m.unsent_bytes(gport, prio, at))
    }

    /// Sender slot `i` holds flow `flow`, which starts now: its samples
    /// start afresh.
    pub(crate) fn sender_opened(&mut self, i: usize, flow: u32) {
        if let Some(steady) = &mut self.steady {
            steady.sender_opened(i);
        }
        if let Some(d) = &mut self.domains {
            d.sender_opened(flow);
        }
    }

    /// Flow `flow`'s sender on this shard finished: a transient for the
    /// domains of its resources.
    pub(crate) fn sender_finished(&mut self, flow: u32) {
        if let Some(d) = &mut self.domains {
            d.sender_finished(flow);
        }
    }

    /// Port `gport` was sampled at `at`: replays wholly on its wire by then
    /// are in its byte counters alone.
    pub(crate) fn sampled(&mut self, gport: usize, at: SimTime) {
        if let Some(m) = &mut self.memo {
            m.sampled(gport, at);
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// The period of the engine's check instants (`MAX`: fast-forward off).
    pub(crate) fn ff_period(&self) -> SimTime {
        match (&self.ff.steady, self.fabric.config.fast_forward) {
            (Some(_), Some(config)) => config.period,
            _ => SimTime::MAX,
        }
    }

    /// A random draw was taken on this shard (a record with draws is exact
    /// only for the domain it simulated).
    #[inline]
    pub(crate) fn memo_draw(&mut self) {
        if let Some(m) = &mut self.ff.memo {
            m.draw();
        }
    }
}
