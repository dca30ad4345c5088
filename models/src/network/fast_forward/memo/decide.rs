//! The memo's decisions at a check barrier (DESIGN.md §3c): which of the
//! collectives about to start form contention domains, which domains get a
//! sandbox to make their record, and which are replayed. Every value a
//! decision reads is agreed through `all_max`, so every shard decides alike.

use super::guard;
use super::key::{self, Canon};
use super::payoff;
use super::predict::Prediction;
use super::resources::Resource;
use super::{some, CachedCanon, Held, Record};
use crate::network::Network;
use crate::telemetry::TelemetrySink;
use crate::workload::TaskKind;
use hashbrown::{HashMap, HashSet};
use netsim_engine::{Aborted, AllMax, NodeId, SimTime};
use std::cmp::Reverse;
use std::sync::Arc;

/// What the rounds of one check share: the prediction (a round after a
/// replay adds what the replayed domain's completions make ready), the
/// agreed DAG view and this shard's active resources (unchanged within a
/// check: a replay starts nothing before the next event), and the guard's
/// walks built on them until a round replays a domain (whose completions
/// the guard then follows).
/// Round 1's outcome: the agreed entry starts (per plan entry, `t + 1`;
/// 0: not foreseen) and the domains' keys, shared with the cache of last
/// builds (`memo_canons`): most domains are busy and dropped unused, and
/// a copy of each key per round was most of what the memo allocated and
/// freed (perf report fast-forward-13, section 6).
type Foreseen = (Vec<u64>, Vec<Arc<Canon>>);

/// A domain whose key has no record yet: its candidate's index, its
/// labelled ports' round-robin state (agreed, + 1) and its tasks' ready
/// times, from which its sandbox starts.
type ToMake = (usize, Vec<u64>, Vec<SimTime>);

#[derive(Default)]
struct Shared {
    /// Whether the memo's prediction was made at this check (then a round
    /// after a replay only follows the new exits).
    predicted: bool,
    dag: Option<guard::DagView>,
    /// The resources of the flows this shard sends (unchanged within a
    /// check, like the DAG view).
    active: Option<Vec<Resource>>,
    /// The guard's walks, and whether they are prepared for this round.
    guard: Option<(bool, guard::Guard)>,
    /// Whether the guard was prepared from `dag` already (a later
    /// preparation resets only what the last one set).
    guard_viewed: bool,
}

/// The least simulated time between two decision rounds.
const ROUND_PERIOD: SimTime = SimTime::from_us(10);

impl super::Memo {
    /// Keeps `canon`'s key if it has a record, else takes the key of the
    /// record nearest it within the tolerance ([`super::tolerant`]), if any.
    fn find_record(&self, fabric: &crate::network::Fabric, canon: &mut Canon) {
        if self.records.contains_key(&canon.key) {
            return;
        }
        // A repeat whose times differ within the tolerance of the
        // record's span takes that record's key.
        let tolerance = fabric.config.fast_forward.map_or(0.0, |ff| ff.tolerance);
        let slack = |k: &[u64]| (tolerance * self.records[k].span.as_ps() as f64) as u64;
        if let Some(k) = self.near.find(&canon.key, &canon.times, slack) {
            canon.key = k.to_vec();
        }
    }
}

impl<S: TelemetrySink> Network<'_, S> {
    /// The memo's step at check instant `now` (DESIGN.md §3c): splits the
    /// collectives about to start into contention domains and replays
    /// those it can, making a record in a sandbox first where none exists;
    /// again while a round replays something, since the completions of
    /// what it replayed may foresee the next collectives' starts.
    pub(crate) fn memo_agree(&mut self, now: SimTime, all_max: AllMax<'_>) -> Result<(), Aborted> {
        let Some(m) = self.ff.memo.as_mut() else {
            return Ok(());
        };
        if m.recording.is_some() {
            // A sandbox (it takes jumps, so it has check instants) only
            // records.
            return Ok(());
        }
        // Rounds at most once per `ROUND_PERIOD` of simulated time: at a
        // check period under it, a round at every check cost more than the
        // jumps it allowed saved. (At the default period, every check.)
        if now < m.next_round {
            return Ok(());
        }
        m.next_round = now + ROUND_PERIOD;
        self.stats.memo_rounds += 1;
        // Keys built at the last check may serve this one; older ones go.
        m.check += 1;
        let check = m.check;
        m.canons.retain(|_, c| c.check + 1 >= check);
        // The senders that ended since the last check leave the list.
        let t = &self.transport;
        m.sending.retain(|flow| {
            t.sender_of.get(flow).is_some_and(|&i| {
                let s = &t.senders[i as usize];
                s.end.is_none() && !s.gave_up
            })
        });
        // The completions' last instants passed: those complete leave
        // (costs what leaves, not every replayed task ahead).
        while let Some(&Reverse((last, t))) = m.completions.peek() {
            if last >= now {
                break;
            }
            m.completions.pop();
            // Its latest replay's (the entry may be an earlier one's).
            let (a, b) = m.done_at[t as usize];
            if a.max(b) >= now {
                m.completions.push(Reverse((a.max(b), t)));
            } else {
                m.completing[t as usize] = false;
            }
        }
        m.prune_exits(&self.fabric.workload);
        m.held.retain(|h| h.until > now);
        let mut grow = Vec::new();
        let mut shared = Shared {
            guard: m.guard.take().map(|g| (false, g)),
            ..Shared::default()
        };
        let mut result = Ok(());
        loop {
            match self.memo_round(now, all_max, &mut grow, &mut shared) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let m = self.ff.memo.as_mut().expect("memo on");
        m.guard = shared.guard.map(|(_, g)| g);
        if let Some(dag) = shared.dag {
            m.dag_spare = dag.values;
        }
        result
    }

    /// One round of [`Network::memo_agree`]; whether to go on (the same on
    /// every shard): it replayed a domain, or a domain's replay was cut
    /// short by a flow on its resources and the domain (by its first
    /// collective, in `grow`) is to grow by what it starts itself.
    fn memo_round(
        &mut self,
        now: SimTime,
        all_max: AllMax<'_>,
        grow: &mut Vec<u32>,
        shared: &mut Shared,
    ) -> Result<bool, Aborted> {
        let Some((entries, canons)) = self.memo_foresee(now, all_max, grow, shared)? else {
            return Ok(false);
        };
        let (agreed, base) = self.memo_agreed_rows(now, &canons, shared, all_max)?;
        let (mut candidates, mut to_make) =
            self.memo_candidates(canons, (&agreed, &base), &entries);
        if candidates.is_empty() {
            return Ok(false);
        }
        let refused =
            self.memo_refuse_new_keys(now, all_max, shared, (&mut candidates, &mut to_make), grow)?;
        if !to_make.is_empty() {
            self.memo_make_records(&candidates, &to_make, all_max)?;
        }
        let replayed = self.memo_replay_ready(now, candidates, shared, grow);
        Ok(refused || replayed)
    }

    /// Round 1 of [`Network::memo_round`]: the entry flows' starts this
    /// shard can foresee, agreed, and the contention domains of the
    /// collectives they start (not replayed yet), as keys; `None` if none.
    fn memo_foresee(
        &mut self,
        now: SimTime,
        all_max: AllMax<'_>,
        grow: &[u32],
        shared: &mut Shared,
    ) -> Result<Option<Foreseen>, Aborted> {
        let fabric = self.fabric;
        let m = self.ff.memo.as_mut().expect("memo on");
        let mut p = m.predict.take().unwrap_or_else(|| Prediction::new(fabric));
        if shared.predicted {
            p.follow(fabric, m, &self.tasks.dag, now);
        } else {
            p.predict(fabric, m, &self.tasks.dag, &self.nodes, now);
            shared.predicted = true;
        }
        m.predict = Some(p);
        let m = self.ff.memo.as_mut().expect("memo on");
        let predicted = m.predict.as_ref().expect("predicted");
        let mut entries = vec![0u64; m.plan.entries.len()];
        for (slot, &f) in entries.iter_mut().zip(&m.plan.entries) {
            if let Some(t) = predicted.start(f) {
                *slot = some(t);
            }
        }
        all_max(&mut entries)?;
        let colls: Vec<u32> = m
            .plan
            .foreseen(&entries)
            .into_iter()
            .filter(|&c| !m.replayed[c as usize])
            .collect();
        if colls.is_empty() {
            return Ok(None);
        }
        let domains = key::domains(fabric, &m.plan, &mut m.coll_resources, &colls);
        let canons = self.memo_canons(domains, grow, &entries);
        Ok(Some((entries, canons)))
    }

    /// The keys of `domains` (a domain whose first collective is in
    /// `grow` grows first, away from the others' resources). A domain that
    /// does not grow and whose entries' agreed starts are those of its
    /// last build, at this check or the last, takes that build's key: a
    /// collective stays foreseen over several checks and rounds, and its
    /// key is a function of its entries alone.
    fn memo_canons(
        &mut self,
        mut domains: Vec<Vec<u32>>,
        grow: &[u32],
        entries: &[u64],
    ) -> Vec<Arc<Canon>> {
        let fabric = self.fabric;
        let m = self.ff.memo.as_mut().expect("memo on");
        let mut used: Option<Vec<HashSet<Resource>>> = None;
        let mut canons = Vec::with_capacity(domains.len());
        for d in 0..domains.len() {
            if !grow.contains(&domains[d][0]) {
                let mut starts = Vec::new();
                for &c in &domains[d] {
                    starts.extend_from_slice(m.plan.entry_starts(c, entries));
                }
                let check = m.check;
                let cached = m
                    .canons
                    .entry(domains[d].clone())
                    .or_insert_with(|| CachedCanon {
                        starts: Vec::new(),
                        canon: None,
                        check,
                    });
                if cached.canon.is_none() || cached.starts != starts {
                    cached.canon = Some(Arc::new(Canon::build(
                        fabric,
                        &m.plan,
                        &domains[d],
                        &[],
                        entries,
                    )));
                    cached.starts = starts;
                }
                cached.check = check;
                canons.push(cached.canon.clone().expect("just built"));
                continue;
            }
            // Only a domain that grows needs the others' resources.
            let used = used.get_or_insert_with(|| {
                let mut used = Vec::with_capacity(domains.len());
                for d in &domains {
                    let mut res = HashSet::new();
                    for &c in d {
                        res.extend(m.coll_resources.of(fabric, c, m.plan.tasks(c)));
                    }
                    used.push(res);
                }
                used
            });
            let foreign: HashSet<Resource> = used
                .iter()
                .enumerate()
                .filter(|&(e, _)| e != d)
                .flat_map(|(_, r)| r.iter().copied())
                .collect();
            let computes = key::extend(
                fabric,
                &m.plan,
                &m.replayed,
                &mut domains[d],
                &mut used[d],
                &foreign,
                &mut m.coll_resources,
            );
            canons.push(Arc::new(Canon::build(
                fabric,
                &m.plan,
                &domains[d],
                &computes,
                entries,
            )));
        }
        canons
    }

    /// Round 2 of [`Network::memo_round`], agreed: per domain of `canons`,
    /// a row at its `base` index (returned with the rows).
    fn memo_agreed_rows(
        &self,
        now: SimTime,
        canons: &[Arc<Canon>],
        shared: &mut Shared,
        all_max: AllMax<'_>,
    ) -> Result<(Vec<u64>, Vec<usize>), Aborted> {
        // Per domain: whether its resources are busy on this shard
        // (a byte queued, a packet on a wire, a pause, buffer in use, or a
        // flow of this shard sending through them); per labelled port, its
        // round-robin state; per task on this shard's hosts, when its
        // dependencies outside the domain are met (offset + 1 from the
        // domain's first start, 1 if already; 0: not foreseeable).
        if shared.active.is_none() {
            shared.active = Some(self.memo_active_resources());
        }
        let active = shared.active.as_ref().expect("just made");
        let predicted = self
            .ff
            .memo
            .as_ref()
            .expect("memo on")
            .predict
            .as_ref()
            .expect("predicted");
        let fabric = self.fabric;
        let mut agreed = Vec::new();
        let mut base = Vec::with_capacity(canons.len());
        for canon in canons {
            base.push(agreed.len());
            agreed.push(u64::from(self.memo_busy(now, canon, active)));
            for &(node, port) in &canon.ports {
                agreed.push(match self.nodes.binary_search(&NodeId(node)) {
                    Ok(local) => self.hosts[self.port_index(local, port)].round_robin as u64 + 1,
                    Err(_) => 0,
                });
            }
            for (k, &t) in canon.tasks.iter().enumerate() {
                let task = fabric.workload.tasks[t as usize];
                if self.nodes.binary_search(&NodeId(task.host)).is_err() {
                    agreed.push(0);
                    continue;
                }
                let outside = self.tasks.dag.remaining(t) - canon.inside[k];
                agreed.push(match predicted.chain(t) {
                    // An entry: its start is in the key already.
                    _ if canon.entry[k] || outside == 0 => 1,
                    Some((n, ready)) if n == outside => some(ready.max(canon.t0) - canon.t0),
                    _ => 0,
                });
            }
        }
        all_max(&mut agreed)?;
        Ok((agreed, base))
    }

    /// The domains that may replay (nothing busy, every dependency
    /// foreseeable), each `false` (not fresh), and those of them whose key
    /// has no record yet, to make.
    fn memo_candidates(
        &self,
        canons: Vec<Arc<Canon>>,
        (agreed, base): (&[u64], &[usize]),
        entries: &[u64],
    ) -> (Vec<(Canon, bool)>, Vec<ToMake>) {
        let fabric = self.fabric;
        // Records, made in a sandbox where a domain has none: the first
        // domain of each new key that the guard does not refuse outright
        // (round 3) is simulated by the shard of its first flow's source
        // alone (a function of the agreed key), and one `all_max` gives
        // every shard its record.
        let mut candidates: Vec<(Canon, bool)> = Vec::new();
        let mut to_make: Vec<ToMake> = Vec::new();
        let mut starts: Option<HashMap<u32, SimTime>> = None;
        for (d, canon) in canons.into_iter().enumerate() {
            let (ports, tasks) = (canon.ports.len(), canon.tasks.len());
            let row = &agreed[base[d]..base[d] + 1 + ports + tasks];
            if row[0] != 0 || row[1 + ports..].contains(&0) || self.rails_hold(&canon.tasks) {
                continue;
            }
            // Copied only here, to take the agreed row: a busy domain's
            // key is dropped as it was shared.
            let mut canon = Arc::unwrap_or_clone(canon);
            let at = canon.key.len() + ports;
            canon.key.extend_from_slice(&row[1..]);
            canon.times.extend((at..canon.key.len()).map(|i| i as u32));
            let m = self.ff.memo.as_ref().expect("memo on");
            m.find_record(fabric, &mut canon);
            if m.records
                .get(&canon.key)
                .is_some_and(|r| !r.fits(fabric, &canon))
            {
                // A record that took RED draws fits only its own domain
                // (its identity): another of its key (on other ports of
                // the same classes, or other hosts) is keyed with its own
                // identity, so it gets a record of its own.
                canon
                    .key
                    .extend([u64::MAX, super::identity(fabric, &canon)]);
                m.find_record(fabric, &mut canon);
            }
            if m.unrecordable.contains(&canon.key) {
                continue;
            }
            if !m.records.contains_key(&canon.key) {
                if !payoff::pays(&fabric.workload, &m.plan, &m.shape_left, &canon.tasks)
                    || !payoff::within_budget(m.sandbox_events, m.repaid_events)
                {
                    // No domain ahead can use its record, or the records
                    // so far have not repaid their sandboxes: simulated
                    // in the run, no sandbox.
                    continue;
                }
                let starts = starts.get_or_insert_with(|| {
                    m.plan
                        .entries
                        .iter()
                        .zip(entries)
                        .filter(|&(_, &s)| s != 0)
                        .map(|(&f, &s)| (f, SimTime(s - 1)))
                        .collect()
                });
                let at: Vec<SimTime> = canon
                    .tasks
                    .iter()
                    .zip(&row[1 + ports..])
                    .enumerate()
                    .map(|(k, (&t, &met))| {
                        let task = fabric.workload.tasks[t as usize];
                        match fabric.workload.kind(&task) {
                            TaskKind::Flow(f) if canon.entry[k] => {
                                starts[&f] - fabric.workload.host_overhead
                            }
                            _ => canon.t0 + SimTime(met - 1),
                        }
                    })
                    .collect();
                to_make.push((candidates.len(), row[1..1 + ports].to_vec(), at));
            }
            // Fresh (a miss) if a sandbox is made for it below.
            candidates.push((canon, false));
        }
        (candidates, to_make)
    }

    /// Round 3 of [`Network::memo_round`]: the DAG as every shard's hosts
    /// see it, agreed; drops from `to_make` the new keys whose replay the
    /// guard or a held resource would refuse even at the least span its
    /// flows allow (each its payload at line rate), and marks the rest's
    /// candidates fresh. Whether a refused domain is to grow.
    fn memo_refuse_new_keys(
        &mut self,
        now: SimTime,
        all_max: AllMax<'_>,
        shared: &mut Shared,
        (candidates, to_make): (&mut [(Canon, bool)], &mut Vec<ToMake>),
        grow: &mut Vec<u32>,
    ) -> Result<bool, Aborted> {
        let fabric = self.fabric;
        // A refused new key gets no sandbox; its domain may grow as one
        // the guard refused.
        if shared.dag.is_none() {
            shared.dag = Some(self.memo_dag_view(all_max)?);
        }
        let (prepared, guard) = shared
            .guard
            .get_or_insert_with(|| (false, guard::Guard::new(&fabric.workload)));
        if !*prepared {
            // The replays since the last preparation may have settled
            // tasks the exits reach (the next layer replayed after the
            // compute between them).
            let m = self.ff.memo.as_mut().expect("memo on");
            m.prune_exits(&fabric.workload);
            guard.prepare(
                fabric,
                shared.dag.as_ref().expect("just made"),
                shared.guard_viewed,
                &m.done_at,
                (&m.completing, &m.settled),
                &m.exits,
                now,
            );
            *prepared = true;
            shared.guard_viewed = true;
        }
        let m = self.ff.memo.as_ref().expect("memo on");
        let mut refused = Vec::new();
        let mut new_keys: HashSet<Vec<u64>> = HashSet::new();
        to_make.retain(|(i, _, _)| {
            let canon = &candidates[*i].0;
            if new_keys.contains(&canon.key) {
                return false; // the key's record is made for another domain
            }
            let least = canon
                .flows
                .iter()
                .map(|&f| guard::least_fct(fabric, f))
                .max()
                .unwrap_or(SimTime::ZERO);
            let until = canon.t0 + least;
            let held = m.held(canon, until);
            let b = guard.earliest_touching(fabric, canon.region(), None, now, until);
            if held || b < until {
                if !held {
                    refused.push(fabric.workload.tasks[canon.tasks[0] as usize].collective);
                }
                return false;
            }
            new_keys.insert(canon.key.clone());
            true
        });
        for (i, _, _) in to_make.iter() {
            candidates[*i].1 = true;
        }
        let mut again = false;
        for first in refused {
            if !grow.contains(&first) {
                grow.push(first);
                again = true;
            }
        }
        Ok(again)
    }

    /// Makes the records of `to_make`'s keys: each in a sandbox on the
    /// shard of its first flow's source, one `all_max` giving every shard
    /// every record (or that its key is unrecordable).
    fn memo_make_records(
        &mut self,
        candidates: &[(Canon, bool)],
        to_make: &[ToMake],
        all_max: AllMax<'_>,
    ) -> Result<(), Aborted> {
        let sizes: Vec<usize> = to_make
            .iter()
            .map(|(i, _, _)| Record::encoded_len(&candidates[*i].0))
            .collect();
        let mut shared = vec![0u64; sizes.iter().sum()];
        let mut at = 0;
        for ((i, round_robin, ready), &size) in to_make.iter().zip(&sizes) {
            let canon = &candidates[*i].0;
            if self.source_is_local(canon.flows[0]) {
                let before = self.stats.memo_sandbox_events;
                let record = self.memo_sandbox(canon, round_robin, ready);
                let events = self.stats.memo_sandbox_events - before;
                Record::encode(record.as_ref(), events, &mut shared[at..at + size]);
            }
            at += size;
        }
        all_max(&mut shared)?;
        let m = self.ff.memo.as_mut().expect("memo on");
        let mut at = 0;
        for ((i, _, _), &size) in to_make.iter().zip(&sizes) {
            let canon = &candidates[*i].0;
            // Recorded or not, its events (the third value).
            m.sandbox_events += shared[at + 2];
            match Record::decode(canon, &shared[at..at + size]) {
                Some(record) => {
                    m.near.insert(&canon.key, &canon.times);
                    m.records.insert(canon.key.clone(), record);
                }
                None => {
                    m.unrecordable.insert(canon.key.clone());
                }
            }
            at += size;
        }
        Ok(())
    }

    /// Replays the candidates with a record that fits whose resources
    /// nothing else can reach before the record's span ends; a domain cut
    /// short by such a flow is to grow. Whether to go on.
    fn memo_replay_ready(
        &mut self,
        now: SimTime,
        candidates: Vec<(Canon, bool)>,
        shared: &mut Shared,
        grow: &mut Vec<u32>,
    ) -> bool {
        let fabric = self.fabric;
        let m = self.ff.memo.as_ref().expect("memo on");
        let ready: Vec<(Canon, bool)> = candidates
            .into_iter()
            .filter(|(canon, _)| {
                m.records
                    .get(&canon.key)
                    .is_some_and(|r| r.fits(fabric, canon))
            })
            .collect();
        if ready.is_empty() {
            return false;
        }
        let mut again = false;
        let (_, guard) = shared.guard.as_mut().expect("prepared in round 3");
        // The earliest a flow that uses a domain's resources could start,
        // per domain with a record, the same on every shard.
        let m = self.ff.memo.as_ref().expect("memo on");
        let bound: Vec<SimTime> = ready
            .iter()
            .map(|(canon, _)| {
                let record = &m.records[&canon.key];
                let own: Vec<(SimTime, SimTime)> = record
                    .done
                    .iter()
                    .map(|&(a, b)| (canon.t0 + a, canon.t0 + b))
                    .collect();
                let until = canon.t0 + record.span;
                guard.earliest_touching(fabric, canon.region(), Some(&own), now, until)
            })
            .collect();
        for ((canon, fresh), b) in ready.into_iter().zip(bound) {
            let m = self.ff.memo.as_ref().expect("memo on");
            let until = canon.t0 + m.records[&canon.key].span;
            let first = fabric.workload.tasks[canon.tasks[0] as usize].collective;
            if m.held(&canon, until) {
                // Growing would not help: the other replay holds it.
                continue;
            }
            if b >= until {
                let m = self.ff.memo.as_mut().expect("memo on");
                let mut resources: Vec<Resource> = canon.resources.iter().copied().collect();
                resources.sort_unstable();
                m.held.push(Held {
                    resources,
                    from: canon.t0,
                    until,
                });
                self.memo_replay(canon, fresh);
                // Its completions change what the next round foresees (the
                // prediction follows its exits) and the guard follows.
                if let Some((prepared, _)) = &mut shared.guard {
                    *prepared = false;
                }
                again = true;
            } else if !grow.contains(&first) {
                grow.push(first);
                again = true;
            }
        }
        again
    }
}
