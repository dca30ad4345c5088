//! A shard: the nodes it owns, their event queue, and the window loop.

use crate::skip::{try_skip, try_skip_parts, AllMax, Checks, SkipProposal, SkipStats};
use crate::sync::{Aborted, Comm};
use crate::{Event, EventQueue, Layout, NodeId, NodeRng, Progress, ShardId, SimTime};

/// A simulation model: the state of the nodes one shard owns and how they
/// react to events. The engine calls it; it never sees queues, shards or
/// threads, only a [`Context`].
pub trait Model: Send {
    /// What an event carries. Kept small and `Copy`: events are moved by
    /// value through the queue and across shards. Packets belong in a
    /// model-side pool, with the payload naming them by index.
    type Payload: Copy + Send + 'static;

    /// Called once for every owned node at time zero, in increasing node
    /// order, before any event is handled: the place to schedule the first
    /// events.
    fn start(&mut self, ctx: &mut Context<'_, Self::Payload>);

    /// Handles one event addressed to `ctx.node()`.
    fn handle(&mut self, ctx: &mut Context<'_, Self::Payload>, payload: Self::Payload);

    // Fast-forward (see `run_shard`). The defaults never skip.

    /// The period of the check instants at which the run may jump ahead;
    /// `SimTime::MAX`, the default, never checks. The same on every shard.
    fn skip_period(&self) -> SimTime {
        SimTime::MAX
    }

    /// At check instant `now` (every event earlier than `now` handled, on
    /// every shard): how far this shard's nodes could jump ahead.
    fn skip_proposal(&mut self, _now: SimTime) -> SkipProposal {
        SkipProposal::NONE
    }

    /// Whether a pending event's time is absolute: a jump never passes it
    /// and never moves it. Every other pending event moves with the jump.
    fn skip_pinned(&self, _payload: &Self::Payload) -> bool {
        true
    }

    /// Fills `votes` (empty on entry; as many values on every shard) with
    /// this shard's share of what the jump `now -> now + delta` needs agreed;
    /// the engine replaces them by their maximum over shards.
    fn skip_votes(&mut self, _now: SimTime, _delta: SimTime, _votes: &mut Vec<u64>) {}

    /// Rewrites the payload of a pending event that moves with the jump
    /// (the engine moves its time).
    fn skip_event(&self, _payload: &mut Self::Payload, _votes: &[u64]) {}

    /// Advances the model's own state over the jump `now -> now + delta`.
    fn skip(&mut self, _now: SimTime, _delta: SimTime, _votes: &[u64]) {}

    /// At check instant `now`, before the jump is agreed: whatever else the
    /// model decides together with the other shards, through `all_max`
    /// (each call replaces the values by their maximum over shards; every
    /// shard must call it as many times, with as many values). Decisions
    /// made here are functions of the state at `now` and of agreed values,
    /// so they do not depend on the partition. The default agrees nothing.
    fn skip_agree(&mut self, _now: SimTime, _all_max: AllMax<'_>) -> Result<(), Aborted> {
        Ok(())
    }

    /// At check instant `now`, when the whole run did not jump: agrees,
    /// through `all_max` (as [`Model::skip_agree`]), on jumps of parts of
    /// the model that are steady alone (fast-forward's contention
    /// domains), given every pending event of this shard (`pending`,
    /// time and payload, in no order); returns how many parts jump and
    /// the sum of their jumps (the same on every shard). The default
    /// jumps none.
    fn skip_parts(
        &mut self,
        _now: SimTime,
        _end: SimTime,
        _pending: &mut dyn Iterator<Item = (SimTime, Self::Payload)>,
        _all_max: AllMax<'_>,
    ) -> Result<(u64, SimTime), Aborted> {
        Ok((0, SimTime::ZERO))
    }

    /// After [`Model::skip_parts`] jumped some: how far the pending event
    /// for `target` moves (zero: it stays), its payload rewritten as it
    /// moves. Only events of a jumped part move.
    fn skip_part_event(&self, _target: NodeId, _payload: &mut Self::Payload) -> SimTime {
        SimTime::ZERO
    }

    /// After the parts' events moved: advances their state.
    fn skip_parts_done(&mut self, _now: SimTime) {}

    /// Inputs from outside the simulation (a co-simulator's messages).
    /// Called at every window boundary, `done` being the time before which
    /// every local event is handled: the model hands out what it produced
    /// before `done`, injects what came in (at times `>= done`), and
    /// returns its external bound: no event at or after it may be handled
    /// until the next call, because inputs up to there are not known yet.
    /// The bound counts as a pending event in the window's minimum, so
    /// other shards wait for it too. `Err` stops every shard. The default,
    /// no external inputs, never bounds.
    fn external(
        &mut self,
        _done: SimTime,
        _inject: &mut Inject<'_, Self::Payload>,
    ) -> Result<SimTime, Aborted> {
        Ok(SimTime::MAX)
    }
}

/// Sequence numbers from here up key the events [`Inject::push`] makes, so
/// that they follow, at the same instant and node, the node's own events,
/// in the order the model numbers them, whatever the windows were.
pub const EXTERNAL_SEQ_BASE: u64 = 1 << (crate::queue::SEQ_BITS - 1);

/// What [`Model::external`] injects events through.
pub struct Inject<'a, P> {
    done: SimTime,
    state: &'a mut ShardState<P>,
}

impl<P: Copy> Inject<'_, P> {
    /// Schedules `payload` at `target`, a node of this shard, at `time`,
    /// keyed `(target, EXTERNAL_SEQ_BASE + seq)`: `seq` must be unique per
    /// target and grow with the order the inputs are to be taken in.
    ///
    /// # Panics
    /// If `time` is before the handled past, `target` is another shard's,
    /// or `seq` is out of range: model bugs that would break the order.
    pub fn push(&mut self, time: SimTime, target: NodeId, seq: u64, payload: P) {
        assert!(
            time >= self.done,
            "external event at {time} is before {}",
            self.done
        );
        assert!(
            seq < EXTERNAL_SEQ_BASE,
            "external sequence numbers exhausted"
        );
        assert_eq!(
            self.state.layout.shard_of(target),
            self.state.shard,
            "external event for another shard"
        );
        let event = Event::new(time, target, EXTERNAL_SEQ_BASE + seq, target, payload);
        self.state.queue.push(event);
    }
}

/// What a model sees while handling an event at one node.
pub struct Context<'a, P> {
    now: SimTime,
    node: NodeId,
    local: usize,
    state: &'a mut ShardState<P>,
}

impl<P: Copy> Context<'_, P> {
    /// The current simulated time.
    #[inline]
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The node handling the event.
    #[inline]
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Position of `node()` among this shard's nodes (increasing node order);
    /// models index their per-node state with it.
    #[inline]
    pub fn local_index(&self) -> usize {
        self.local
    }

    /// The random stream of `node()`, derived from `(seed, node id)`.
    #[inline]
    pub fn rng(&mut self) -> &mut NodeRng {
        &mut self.state.rngs[self.local]
    }

    /// Schedules `payload` at `target` after `delay`.
    ///
    /// # Panics
    /// If `target` is another node and `delay` is zero (nodes influence each
    /// other only through links of at least 1 ps), or if `target` lives on
    /// another shard and `delay` is below the lookahead: both are model bugs
    /// that would break the ordering contract.
    #[inline]
    pub fn send(&mut self, target: NodeId, delay: SimTime, payload: P) {
        assert!(
            delay.0 > 0 || target == self.node,
            "node {} sent a zero-delay event to node {target}",
            self.node
        );
        let state = &mut *self.state;
        let seq = state.next_seq[self.local];
        state.next_seq[self.local] = seq + 1;
        let event = Event::new(self.now + delay, self.node, seq, target, payload);
        let dest = state.layout.shard_of(target);
        if dest == state.shard {
            state.queue.push(event);
        } else {
            assert!(
                delay >= state.layout.lookahead(),
                "lookahead violated: node {} at {} sent an event to node {target} on shard {dest} \
                 with delay {delay}, below the lookahead {}",
                self.node,
                self.now,
                state.layout.lookahead()
            );
            state.outbox_next = state.outbox_next.min(event.time);
            state.outboxes[dest.index()].push(event);
        }
    }

    /// Schedules `payload` at the current node after `delay` (may be zero).
    #[inline]
    pub fn schedule_self(&mut self, delay: SimTime, payload: P) {
        self.send(self.node, delay, payload);
    }
}

/// Per-shard engine state that a [`Context`] writes into.
pub(crate) struct ShardState<P> {
    shard: ShardId,
    layout: Layout,
    pub(crate) queue: EventQueue<P>,
    outboxes: Vec<Vec<Event<P>>>,
    /// Earliest time among events put in outboxes since the last exchange.
    outbox_next: SimTime,
    next_seq: Vec<u64>,
    rngs: Vec<NodeRng>,
}

/// What a shard hands back when its run ends.
#[derive(Debug)]
pub struct ShardReport<M> {
    pub shard: ShardId,
    /// The model, with the final state of the shard's nodes.
    pub model: M,
    /// Events handled by this shard.
    pub handled_events: u64,
    /// Synchronisation windows (the same on every shard).
    pub windows: u64,
    /// Time of the last event this shard handled (zero if none).
    pub last_event_time: SimTime,
    pub skip: SkipStats,
}

/// The longest window of a run that reports its progress: 100 us of
/// simulated time (about 0.4 M events on the k=16 permutation). Windows
/// start at the next event, so an idle stretch costs no extra exchange.
const PROGRESS_WINDOW: SimTime = SimTime::from_us(100);

/// Runs one shard from time zero until no event earlier than `end` remains
/// anywhere, synchronising with the other shards through `comm`.
///
/// Window loop: learn the global next event time `T`, handle every local
/// event earlier than `min(T + lookahead, end)`, then exchange outboxes. No
/// event another shard creates in this window can land before `T +
/// lookahead`, so handling up to there is safe.
///
/// With `progress`, the shard reports the window start and its handled
/// events there once per window, and returns [`Aborted`] (aborting the
/// others) once [`Progress::stop`] was called.
///
/// Once [`Progress::interrupt`] was called, every shard leaves the loop
/// after the same exchange and returns what it has: a shard that sees it
/// offers time zero as its next event. The agreed global next time never
/// decreases (nothing is scheduled before it), so a global next below the
/// previous one can only be that offer, and every shard reads it from the
/// same exchange. Until one window has passed time zero the offer waits.
///
/// A shard without lookahead to keep (one shard alone) would make the
/// whole run one window; a run with `progress` ends its windows at most
/// `PROGRESS_WINDOW` of simulated time apart instead, so it reports its
/// progress and sees a stop or an interrupt during the run. Events are
/// handled in the same order whatever the windows, so results are the same.
///
/// Fast-forward: when the model has a [`Model::skip_period`] `P`, windows
/// also end at the check instants `P, 2P, ...` (after a jump of `d` from
/// `c`: `c + d + P, ...`), so when the global next event time first reaches
/// one, the state is "every event before it handled" on any partition. The
/// shards then agree (two `all_max` steps) on a jump `d`: the minimum of
/// their proposals, of the time to their earliest pinned event and to
/// `end`. Every unpinned pending event moves by `d`, in key order, and the
/// model advances its state; nothing lies before `c + d` afterwards, so the
/// lookahead contract holds as before. At instant 0, before any event is
/// handled, the model's [`Model::skip_agree`] runs once, without a jump.
pub fn run_shard<M: Model, C: Comm<M::Payload>>(
    layout: &Layout,
    shard: ShardId,
    seed: u64,
    end: SimTime,
    mut model: M,
    comm: &mut C,
    progress: Option<&Progress>,
) -> Result<ShardReport<M>, Aborted> {
    let mut state = ShardState::start(layout, shard, seed, &mut model);
    let mut inbox = Vec::new();
    let mut handled_events = 0u64;
    let mut windows = 0u64;
    let mut last_event_time = SimTime::ZERO;
    let mut reported_events = 0u64;
    let period = model.skip_period();
    let mut checks = Checks::new(period);
    if period != SimTime::MAX {
        // Check instant 0, before anything is handled: only the model's
        // agreement (what starts at once may be decided there), no jump.
        model.skip_agree(SimTime::ZERO, &mut |values: &mut [u64]| {
            comm.all_max(values)
        })?;
    }
    let mut votes = Vec::new();
    let window_length = match progress {
        Some(_) => layout.lookahead().min(PROGRESS_WINDOW),
        None => layout.lookahead(),
    };
    // Every local event before `done` is handled.
    let mut done = SimTime::ZERO;
    // The previous exchange's global next event time (never decreases).
    let mut agreed_next = SimTime::ZERO;
    loop {
        let mut inject = Inject {
            done,
            state: &mut state,
        };
        let external_bound = model
            .external(done, &mut inject)
            .inspect_err(|_| comm.abort())?;
        let interrupting = progress.is_some_and(Progress::interrupted);
        let local_next = match interrupting && agreed_next > SimTime::ZERO {
            true => SimTime::ZERO,
            false => state
                .queue
                .next_time()
                .min(state.outbox_next)
                .min(external_bound),
        };
        state.outbox_next = SimTime::MAX;
        let global_next = comm.exchange(&mut state.outboxes, local_next, &mut inbox)?;
        for event in inbox.drain(..) {
            state.queue.push(event);
        }
        if global_next < agreed_next {
            // A shard was interrupted: every shard stops after this exchange.
            break;
        }
        agreed_next = global_next;
        if let Some(progress) = progress {
            // After the last window `global_next` is `end` or "no event":
            // the last event handled is as far as the run is known to be.
            let reached = if global_next < end {
                global_next
            } else {
                last_event_time
            };
            progress.window(reached, handled_events - reported_events);
            reported_events = handled_events;
            if progress.stopping() {
                // Every shard stops: the others at their own look or at
                // the next exchange, which now fails.
                comm.abort();
                return Err(Aborted);
            }
        }
        if global_next >= end {
            break;
        }
        if global_next >= checks.next {
            let now = checks.next;
            model.skip_agree(now, &mut |values: &mut [u64]| comm.all_max(values))?;
            let delta = try_skip(&mut state, &mut model, comm, now, end, &mut votes)?;
            checks.passed(now, delta, global_next, handled_events);
            if delta == SimTime::ZERO {
                if let Some(parts) = try_skip_parts(&mut state, &mut model, comm, now, end)? {
                    // Some parts' events moved later: learn the new global next.
                    checks.parts_jumped(parts);
                    continue;
                }
            }
            if delta > SimTime::ZERO {
                // Learn the new global next event time before handling anything.
                continue;
            }
        }
        windows += 1;
        let window_end = global_next
            .saturating_add(window_length)
            .min(end)
            .min(checks.next)
            .min(external_bound);
        if let Some(last) = state.handle_until(&mut model, window_end, &mut handled_events) {
            last_event_time = last;
        }
        done = done.max(window_end);
    }
    Ok(ShardReport {
        shard,
        model,
        handled_events,
        windows,
        last_event_time,
        skip: checks.skip,
    })
}

impl<P: Copy> ShardState<P> {
    /// The state of `shard` with each of its nodes' model started.
    fn start<M: Model<Payload = P>>(
        layout: &Layout,
        shard: ShardId,
        seed: u64,
        model: &mut M,
    ) -> ShardState<P> {
        let nodes = layout.nodes(shard);
        let mut state = ShardState {
            shard,
            layout: layout.clone(),
            queue: EventQueue::default(),
            outboxes: (0..layout.shards()).map(|_| Vec::new()).collect(),
            outbox_next: SimTime::MAX,
            next_seq: vec![0; nodes.len()],
            rngs: nodes.iter().map(|&n| NodeRng::new(seed, n)).collect(),
        };
        for (local, &node) in nodes.iter().enumerate() {
            let mut ctx = Context {
                now: SimTime::ZERO,
                node,
                local,
                state: &mut state,
            };
            model.start(&mut ctx);
        }
        state
    }

    /// Handles every local event before `window_end`, in order, counting
    /// them in `handled_events`; returns the time of the last one, if any.
    #[inline]
    fn handle_until<M: Model<Payload = P>>(
        &mut self,
        model: &mut M,
        window_end: SimTime,
        handled_events: &mut u64,
    ) -> Option<SimTime> {
        let mut last = None;
        while let Some(event) = self.queue.pop_before(window_end) {
            let mut ctx = Context {
                now: event.time,
                node: event.target,
                local: self.layout.local_index(event.target),
                state: self,
            };
            model.handle(&mut ctx, event.payload);
            *handled_events += 1;
            last = Some(event.time);
        }
        last
    }
}
