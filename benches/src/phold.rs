//! PHOLD, the standard benchmark of parallel discrete-event engines.
//!
//! `nodes` nodes each start with `events_per_node` events in flight. Handling
//! an event sends one new event to a uniformly random node after `lookahead +
//! exponential(mean)`, so the population stays constant and most events cross
//! shards. Each node counts the events it handles and folds their times and
//! tokens into a hash: two runs agree on every count and hash only if they
//! handled exactly the same events in the same order at every node.

use netsim_engine::{
    run_on_threads, splitmix64, Context, Layout, LayoutError, Model, NodeId, ShardId, SimTime,
};

/// Parameters of a PHOLD run.
#[derive(Clone, Debug)]
pub struct PholdConfig {
    pub nodes: u32,
    pub events_per_node: u32,
    /// Fixed part of every delay; also the engine's lookahead.
    pub lookahead: SimTime,
    /// Mean of the exponential part of every delay, in picoseconds.
    pub mean_delay_ps: f64,
    /// Events at or after this time are not handled.
    pub end: SimTime,
    pub seed: u64,
}

/// One shard's PHOLD nodes.
#[derive(Debug)]
pub struct Phold {
    nodes: Vec<NodeId>,
    node_count: u64,
    events_per_node: u32,
    lookahead: SimTime,
    mean_delay_ps: f64,
    handled: Vec<u64>,
    hashes: Vec<u64>,
}

/// The outcome of a PHOLD run, per node in node order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PholdOutcome {
    pub handled_per_node: Vec<u64>,
    pub hash_per_node: Vec<u64>,
    pub windows: u64,
}

impl PholdOutcome {
    pub fn events(&self) -> u64 {
        self.handled_per_node.iter().sum()
    }

    /// One hash over every node's final state.
    pub fn state_hash(&self) -> u64 {
        self.hash_per_node
            .iter()
            .zip(&self.handled_per_node)
            .fold(0, |mut h, (&hash, &count)| {
                h ^= hash ^ count.rotate_left(32);
                splitmix64(&mut h)
            })
    }
}

impl Phold {
    fn new(config: &PholdConfig, nodes: &[NodeId]) -> Phold {
        Phold {
            nodes: nodes.to_vec(),
            node_count: u64::from(config.nodes),
            events_per_node: config.events_per_node,
            lookahead: config.lookahead,
            mean_delay_ps: config.mean_delay_ps,
            handled: vec![0; nodes.len()],
            hashes: vec![0; nodes.len()],
        }
    }

    #[inline]
    fn delay(&self, ctx: &mut Context<'_, u64>) -> SimTime {
        self.lookahead + SimTime(ctx.rng().exponential(self.mean_delay_ps) as u64)
    }
}

impl Model for Phold {
    /// A token drawn by the sender, folded into the receiver's hash.
    type Payload = u64;

    fn start(&mut self, ctx: &mut Context<'_, u64>) {
        for _ in 0..self.events_per_node {
            let delay = SimTime(ctx.rng().exponential(self.mean_delay_ps) as u64);
            let token = ctx.rng().next_u64();
            ctx.schedule_self(delay, token);
        }
    }

    #[inline]
    fn handle(&mut self, ctx: &mut Context<'_, u64>, token: u64) {
        let local = ctx.local_index();
        self.handled[local] += 1;
        let mut h = self.hashes[local] ^ token ^ ctx.now().as_ps().rotate_left(17);
        self.hashes[local] = splitmix64(&mut h);
        let target = NodeId(ctx.rng().below(self.node_count) as u32);
        let delay = self.delay(ctx);
        let token = ctx.rng().next_u64();
        ctx.send(target, delay, token);
    }
}

/// Runs PHOLD on `shards` worker threads (nodes dealt in contiguous blocks).
pub fn run_phold(config: &PholdConfig, shards: u32) -> Result<PholdOutcome, LayoutError> {
    let layout = Layout::blocks(config.nodes, shards, config.lookahead)?;
    let reports = run_on_threads(
        &layout,
        config.seed,
        config.end,
        None,
        |_: ShardId, nodes| Phold::new(config, nodes),
    );
    let n = config.nodes as usize;
    let mut outcome = PholdOutcome {
        handled_per_node: vec![0; n],
        hash_per_node: vec![0; n],
        windows: reports.first().map_or(0, |r| r.windows),
    };
    for report in reports {
        let phold = report.model;
        for (i, node) in phold.nodes.iter().enumerate() {
            outcome.handled_per_node[node.index()] = phold.handled[i];
            outcome.hash_per_node[node.index()] = phold.hashes[i];
        }
    }
    Ok(outcome)
}
