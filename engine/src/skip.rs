//! Fast-forward's side of the window loop: the check instants, the
//! shards' agreement on a jump (of the whole run, or of parts of the
//! model), and moving the pending events by it. The model decides what is
//! steady; the engine only agrees and moves keys.

use crate::shard::{Model, ShardState};
use crate::sync::{Aborted, Comm};
use crate::SimTime;

/// The collective maximum [`Model::skip_agree`] is handed.
pub type AllMax<'a> = &'a mut dyn FnMut(&mut [u64]) -> Result<(), Aborted>;

/// What one shard offers at a check instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkipProposal {
    /// The longest jump this shard's state allows; zero when it is not steady.
    pub max_skip: SimTime,
    /// This shard has work that a jump would advance (some shard must).
    pub active: bool,
}

impl SkipProposal {
    /// Nothing to advance and nothing against a jump.
    pub const NONE: SkipProposal = SkipProposal {
        max_skip: SimTime::MAX,
        active: false,
    };
}

/// What the fast-forward of a run did (the same `skipped` and `skips` on
/// every shard).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkipStats {
    /// Simulated time jumped over.
    pub skipped: SimTime,
    pub skips: u64,
    /// Estimate of the events this shard did not handle: its event rate
    /// since the previous check instant times each jump.
    pub events_avoided: u64,
}

/// Fast-forward's check instants and what its jumps did.
pub(crate) struct Checks {
    /// The model's [`Model::skip_period`]; `SimTime::MAX`: no checks.
    period: SimTime,
    /// The next check instant.
    pub(crate) next: SimTime,
    /// The previous check instant (after its jump) and the events handled by then.
    last: SimTime,
    events_at_last: u64,
    pub(crate) skip: SkipStats,
}

impl Checks {
    pub(crate) fn new(period: SimTime) -> Checks {
        Checks {
            period,
            next: period,
            last: SimTime::ZERO,
            events_at_last: 0,
            skip: SkipStats::default(),
        }
    }

    /// Check instant `now` jumped by `delta` (zero: none) with the global
    /// next event at `global_next` and `handled_events` handled: counts the
    /// jump and moves to the next instant.
    pub(crate) fn passed(
        &mut self,
        now: SimTime,
        delta: SimTime,
        global_next: SimTime,
        handled_events: u64,
    ) {
        if delta > SimTime::ZERO {
            let since = u128::from((now - self.last).as_ps().max(1));
            let rate_events = u128::from(handled_events - self.events_at_last);
            let avoided = rate_events * u128::from(delta.as_ps()) / since;
            self.skip.events_avoided += u64::try_from(avoided).unwrap_or(u64::MAX);
            self.skip.skipped += delta;
            self.skip.skips += 1;
            self.next = now + delta + self.period;
        } else {
            // The first check instant after `global_next`.
            let periods = (global_next - now).as_ps() / self.period.as_ps() + 1;
            self.next = now.saturating_add(SimTime(self.period.as_ps().saturating_mul(periods)));
        }
        (self.last, self.events_at_last) = (now + delta, handled_events);
    }

    /// `parts` parts jumped by `skipped` in all at the last check: counted
    /// as jumps (their events avoided are not estimated); the checks keep
    /// their period, the rest of the run going on.
    pub(crate) fn parts_jumped(&mut self, (parts, skipped): (u64, SimTime)) {
        self.skip.skips += parts;
        self.skip.skipped += skipped;
    }
}

/// After a check at `now` without a whole-run jump: agrees on the jumps of
/// parts of the model ([`Model::skip_parts`]) and makes them; whether any
/// part jumped. Moved events keep their keys and land later than `now`;
/// the others stay: the conservative contract holds as after a jump.
/// Gives how many parts jumped and the sum of their jumps, if any did.
pub(crate) fn try_skip_parts<M: Model, C: Comm<M::Payload>>(
    state: &mut ShardState<M::Payload>,
    model: &mut M,
    comm: &mut C,
    now: SimTime,
    end: SimTime,
) -> Result<Option<(u64, SimTime)>, Aborted> {
    let (parts, skipped) = {
        let mut pending = state.queue.iter().map(|e| (e.time, e.payload));
        model.skip_parts(now, end, &mut pending, &mut |values: &mut [u64]| {
            comm.all_max(values)
        })?
    };
    if parts == 0 {
        return Ok(None);
    }
    state.queue.retime(|event| {
        event.time += model.skip_part_event(event.target, &mut event.payload);
    });
    model.skip_parts_done(now);
    Ok(Some((parts, skipped)))
}

/// The check at instant `now`: agrees on a jump with the other shards and
/// makes it; returns the jump (zero: none).
pub(crate) fn try_skip<M: Model, C: Comm<M::Payload>>(
    state: &mut ShardState<M::Payload>,
    model: &mut M,
    comm: &mut C,
    now: SimTime,
    end: SimTime,
    votes: &mut Vec<u64>,
) -> Result<SimTime, Aborted> {
    let proposal = model.skip_proposal(now);
    let mut delta = proposal.max_skip.min(end - now);
    if delta > SimTime::ZERO {
        for event in state.queue.iter() {
            if model.skip_pinned(&event.payload) {
                delta = delta.min(event.time - now);
            }
        }
    }
    let mut agreed = [u64::MAX - delta.as_ps(), u64::from(proposal.active)];
    comm.all_max(&mut agreed)?;
    let delta = SimTime(u64::MAX - agreed[0]);
    if delta == SimTime::ZERO || agreed[1] == 0 {
        return Ok(SimTime::ZERO);
    }
    votes.clear();
    model.skip_votes(now, delta, votes);
    comm.all_max(votes)?;
    state.queue.retime(|event| {
        if !model.skip_pinned(&event.payload) {
            event.time += delta;
            model.skip_event(&mut event.payload, votes);
        }
    });
    model.skip(now, delta, votes);
    Ok(delta)
}
