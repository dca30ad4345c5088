//! The memo's decisions on a DAG small enough to follow by hand: the
//! guard's walk where a flow's data has all arrived but its last
//! acknowledgement has not (it still starts in the agreed view, and its
//! destination no longer waits for it), and the exits pruned once what
//! they reach is settled.

use super::guard::{DagView, Guard};
use super::key::Canon;
use super::predict::Prediction;
use super::Memo;
use crate::network::config::NetConfig;
use crate::network::Fabric;
use crate::workload::{Builder, NONE};
use netsim_engine::SimTime;

/// The fixture's tasks (and flows: the same ids).
pub(super) const C: u32 = 0;
pub(super) const A: u32 = 1;
pub(super) const X: u32 = 2;
pub(super) const Y: u32 = 3;

pub(super) const US: u64 = 1_000_000;
/// The fixture's host overhead: a flow starts this long after it is ready.
pub(super) const OVERHEAD: SimTime = SimTime(US);

/// On a leaf-spine of 100 Gb/s links (k = 4: hosts 0 and 1 under one
/// leaf, 2 and 3 under the other): flows C (0 -> 1, `c_bytes`) and A
/// (0 -> 1, 1 kB), wanting nothing; X (1 -> 3, 1 kB) after both, at host
/// 1; Y (2 -> 3, 1 kB), a domain under the second leaf, which X crosses
/// and neither A nor C does.
pub(super) fn fabric(c_bytes: u64) -> Fabric {
    leaf_spine(|b| {
        assert_eq!(b.flow(0, 1, c_bytes, NONE, &[]), C);
        assert_eq!(b.flow(0, 1, 1000, NONE, &[]), A);
        assert_eq!(b.flow(1, 3, 1000, NONE, &[C, A]), X);
        assert_eq!(b.flow(2, 3, 1000, NONE, &[]), Y);
    })
}

/// The leaf-spine of [`fabric`] with the workload `tasks` adds.
fn leaf_spine(tasks: impl FnOnce(&mut Builder)) -> Fabric {
    let mut b = Builder::new(OVERHEAD);
    tasks(&mut b);
    Fabric::k4_fat_tree(2, b.finish(), NetConfig::default(), 1)
}

/// 1 kB at 100 Gb/s.
pub(super) const KB_FCT: SimTime = SimTime(80_000);

/// The check instant of [`prepared`].
pub(super) const NOW: SimTime = SimTime(2 * US);

/// The fixture's guard prepared at [`NOW`], C starting at 0 and A at 1 us,
/// A `delivered` or not (then X waits for it too), and Y's domain.
pub(super) fn prepared(c_bytes: u64, delivered: bool) -> (Fabric, Guard, Canon) {
    let fabric = fabric(c_bytes);
    let mut dag = DagView::new(4);
    dag.starts(C, SimTime::ZERO);
    dag.starts(A, SimTime(US));
    if delivered {
        dag.delivered(A);
        dag.remaining(X, 1);
    } else {
        dag.remaining(X, 2);
    }
    dag.remaining(Y, 0);
    let mut guard = Guard::new(&fabric.workload);
    let none = vec![(SimTime::ZERO, SimTime::ZERO); 4];
    guard.prepare(
        &fabric,
        &dag,
        false,
        &none,
        (&[false; 4], &[false; 4]),
        &[],
        NOW,
    );
    let canon = Canon::of_flows(&fabric, &[Y], NOW);
    (fabric, guard, canon)
}

/// The guard's verdict for Y's domain up to `horizon` (see [`prepared`]).
fn verdict(c_bytes: u64, delivered: bool, horizon: SimTime) -> SimTime {
    let (fabric, mut guard, canon) = prepared(c_bytes, delivered);
    guard.earliest_touching(&fabric, canon.region(), None, NOW, horizon)
}

#[test]
fn a_delivered_flow_does_not_reach_its_destinations_dependents_again() {
    let horizon = SimTime(50 * US);
    // C (1 MB: 80 us at line rate) ends after the horizon, so X, which
    // waits for it, cannot start before: nothing touches the domain,
    // whether A is delivered or not. A delivered A reached X a second
    // time, which the horizon's skip of C's reach made X's last missing
    // one: X "started" at A's end plus the overhead.
    assert_eq!(verdict(1_000_000, true, horizon), SimTime::MAX);
    assert_eq!(verdict(1_000_000, false, horizon), SimTime::MAX);
    // C of 1 kB ends before it: X starts once its host has seen what it
    // still waits for, C alone when A is delivered, and touches.
    assert_eq!(verdict(1000, true, horizon), KB_FCT + OVERHEAD);
    assert_eq!(
        verdict(1000, false, horizon),
        SimTime(US) + KB_FCT + OVERHEAD
    );
}

#[test]
fn exits_into_settled_computes_are_pruned() {
    // E (0 -> 1) replayed; at host 1, compute P after it, Q after P, and
    // flows G after Q, H after P: P and Q lead only to G and H.
    let (e, p, q, g, h) = (0, 1, 2, 3, 4);
    let fabric = leaf_spine(|b| {
        assert_eq!(b.flow(0, 1, 1000, NONE, &[]), e);
        assert_eq!(b.compute(1, SimTime(US), NONE, &[e]), p);
        assert_eq!(b.compute(1, SimTime(US), NONE, &[p]), q);
        assert_eq!(b.flow(1, 2, 1000, NONE, &[q]), g);
        assert_eq!(b.flow(1, 3, 1000, NONE, &[p]), h);
    });
    let workload = &fabric.workload;
    let mut m = Memo::new(&fabric, 0);
    m.exits = vec![e];
    let mut prediction = Prediction::new(&fabric);
    prediction.followed = 1;
    m.predict = Some(prediction);
    m.completing[e as usize] = true;
    // G replayed settles Q, not P (H is not replayed): E stays an exit.
    m.completing[g as usize] = true;
    m.prune_exits(workload);
    assert_eq!(m.exits, [e]);
    assert_eq!(m.settled, [false, false, true, false, false]);
    // A flow is never settled, nor a compute past the depth followed.
    let (completing, settled) = (&m.completing, &mut m.settled);
    assert!(!super::settles(workload, completing, settled, h, 0));
    assert!(!super::settles(
        workload,
        completing,
        settled,
        p,
        super::SETTLE_DEPTH
    ));
    // H replayed too: P settles, E leaves the exits, and the prediction's
    // count of exits followed with it.
    m.completing[h as usize] = true;
    m.prune_exits(workload);
    assert!(m.exits.is_empty());
    assert!(m.settled[p as usize]);
    assert_eq!(m.predict.as_ref().map(|p| p.followed), Some(0));
}

#[test]
fn a_preparation_from_the_same_view_resets_what_the_last_one_set() {
    // C (1 kB) starts at 0; A, replayed, is seen complete at host 1 at
    // `NOW` + 1 us; X waits for both and crosses Y's domain.
    let fabric = fabric(1000);
    let mut dag = DagView::new(4);
    dag.starts(C, SimTime::ZERO);
    dag.remaining(X, 2);
    let mut guard = Guard::new(&fabric.workload);
    let canon = Canon::of_flows(&fabric, &[Y], NOW);
    let mut done_at = vec![(SimTime::ZERO, SimTime::ZERO); 4];
    done_at[A as usize] = (NOW + SimTime(US), NOW + SimTime(US));
    let mut replayed = [false; 4];
    replayed[A as usize] = true;
    let horizon = SimTime(50 * US);
    guard.prepare(
        &fabric,
        &dag,
        false,
        &done_at,
        (&replayed, &[false; 4]),
        &[A],
        NOW,
    );
    let touches = NOW + SimTime(US) + OVERHEAD;
    assert_eq!(
        guard.earliest_touching(&fabric, canon.region(), None, NOW, horizon),
        touches
    );
    // Without A's completion X never starts: its count from the last
    // preparation is reset, in a preparation from the same view as from
    // a new one.
    for same_view in [true, false] {
        guard.prepare(
            &fabric,
            &dag,
            same_view,
            &done_at,
            (&[false; 4], &[false; 4]),
            &[],
            NOW,
        );
        let walk = guard.earliest_touching(&fabric, canon.region(), None, NOW, horizon);
        assert_eq!(walk, SimTime::MAX);
    }
}
