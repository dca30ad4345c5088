//! The solver against closed forms (max-min shares, weighted classes,
//! capacities never exceeded) and against itself: a scan and the tree,
//! re-solves from a level and of whole components.

use super::*;

fn solve(share: &mut FairShare) -> Vec<RateChange> {
    let mut changed = Vec::new();
    share.resolve(&mut changed);
    changed
}

#[test]
fn flows_on_one_bottleneck_split_it_evenly() {
    let mut s = FairShare::new(vec![100, 100, 30]);
    s.add(0, &[0, 2]);
    s.add(1, &[1, 2]);
    s.add(2, &[2]);
    assert_eq!(solve(&mut s).len(), 3);
    assert_eq!((s.rate_bps(0), s.rate_bps(1), s.rate_bps(2)), (10, 10, 10));
}

#[test]
fn a_flow_limited_elsewhere_leaves_its_share_to_the_others() {
    // Classic max-min: flow 0 crosses a 10 b/s channel, so flows 1 and 2
    // share what it leaves of the common 100 b/s channel.
    let mut s = FairShare::new(vec![100, 10]);
    s.add(0, &[0, 1]);
    s.add(1, &[0]);
    s.add(2, &[0]);
    solve(&mut s);
    assert_eq!((s.rate_bps(0), s.rate_bps(1), s.rate_bps(2)), (10, 45, 45));
}

#[test]
fn classes_get_weighted_max_min_shares() {
    // Worked by hand. Channel 0 (120 b/s): class 0 with 3 members and
    // class 1 with 1. Channel 1 (100 b/s): class 1 with 2 members and
    // class 2 with 1. Channel 2 (12 b/s): class 2 alone.
    // Channel 2 caps class 2 at 12 first; channel 0 then gives each of
    // its 4 members 120 / 4 = 30 (channel 1 would leave class 1's two
    // members (100 - 12) / 2 = 44 each).
    let mut s = FairShare::new(vec![120, 100, 12]);
    s.add_class(0, &[0], &[3]);
    s.add_class(1, &[0, 1], &[1, 2]);
    s.add_class(2, &[1, 2], &[1, 1]);
    solve(&mut s);
    assert_eq!((s.rate_bps(0), s.rate_bps(1), s.rate_bps(2)), (30, 30, 12));
    assert_eq!((s.load(0), s.load(1), s.load(2)), (4, 3, 1));
    // Class 0 leaves: class 1's two members on channel 1 get
    // (100 - 12) / 2 = 44 each, below channel 0's 120.
    s.remove_flow(0);
    solve(&mut s);
    assert_eq!((s.rate_bps(1), s.rate_bps(2)), (44, 12));
    assert_eq!(s.weights(1), &[1, 2]);
}

#[test]
fn a_class_of_n_equals_n_flows_on_the_same_channels() {
    // N = 4 members of one class on an uplink shared with a plain flow:
    // each gets C / (N + 1), as 4 separate flows would.
    let (mut class, mut flows) = (
        FairShare::new(vec![1_000, 1_000]),
        FairShare::new(vec![1_000, 1_000]),
    );
    class.add_class(0, &[0, 1], &[4, 1]);
    class.add(1, &[0]);
    for f in 0..4 {
        flows.add(f, if f == 0 { &[0, 1] } else { &[0] });
    }
    flows.add(4, &[0]);
    solve(&mut class);
    solve(&mut flows);
    assert_eq!((class.rate_bps(0), class.rate_bps(1)), (200, 200));
    assert!((0..5).all(|f| flows.rate_bps(f) == 200));
}

#[test]
fn departures_only_touch_their_component() {
    let mut s = FairShare::new(vec![100, 100]);
    s.add(0, &[0]);
    s.add(1, &[0]);
    s.add(2, &[1]);
    solve(&mut s);
    assert_eq!(s.remove_flow(1), 50);
    let changed = solve(&mut s);
    assert_eq!(
        changed,
        vec![RateChange {
            flow: 0,
            old_bps: 50,
            slot: 0,
        }]
    );
    assert_eq!((s.rate_bps(0), s.rate_bps(2)), (100, 100));
}

#[test]
fn scanning_and_the_tree_give_the_same_rates_through_arrivals_and_departures() {
    // Random paths over 40 channels of uneven capacities; flows and
    // classes come and go (slots are reused), both solvers see the same
    // sequence.
    let caps: Vec<u64> = (0..40).map(|c| 1_000 + 37 * (c * c % 23)).collect();
    let (mut scan, mut tree) = (FairShare::new(caps.clone()), FairShare::new(caps.clone()));
    tree.scan_channels = 0;
    let mut x: u64 = 7;
    let mut rand = |n: u64| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (x >> 33) % n
    };
    let mut active = Vec::new();
    for flow in 0..300u32 {
        let mut path: Vec<u32> = (0..1 + rand(5)).map(|_| rand(40) as u32).collect();
        path.sort_unstable();
        path.dedup();
        // Every other flow a class of 1 to 4 members per channel.
        let weights: Vec<u32> = path.iter().map(|_| 1 + rand(4) as u32).collect();
        if flow % 2 == 0 {
            scan.add(flow, &path);
            tree.add(flow, &path);
        } else {
            scan.add_class(flow, &path, &weights);
            tree.add_class(flow, &path, &weights);
        }
        active.push(flow);
        if rand(3) == 0 {
            let gone = active.swap_remove(rand(active.len() as u64) as usize);
            assert_eq!(scan.remove_flow(gone), tree.remove_flow(gone));
        }
        let changes = solve(&mut scan);
        assert_eq!(changes, solve(&mut tree));
        // A change's slot finds what its flow id finds (slots are reused).
        for c in &changes {
            let by_id = scan.active(scan.slot_of(c.flow).expect("active"));
            let by_slot = scan.changed(c);
            assert_eq!(by_slot.rate_bps, by_id.rate_bps, "flow {}", c.flow);
            assert_eq!((by_slot.path, by_slot.weights), (by_id.path, by_id.weights));
            assert_ne!(by_slot.rate_bps, c.old_bps);
        }
        let mut used = vec![0u64; caps.len()];
        for &f in &active {
            assert_eq!(scan.rate_bps(f), tree.rate_bps(f), "flow {f}");
            assert_eq!(scan.path(f), tree.path(f));
            for (&c, &w) in scan.path(f).iter().zip(scan.weights(f)) {
                used[c as usize] += scan.rate_bps(f) * u64::from(w);
            }
        }
        // Every member counts against every channel it crosses.
        assert!(used.iter().zip(&caps).all(|(u, c)| u <= c));
    }
}

#[test]
fn re_solving_from_the_level_gives_the_rates_of_whole_components() {
    // Instants of several arrivals and departures at once (a flow may
    // leave in the instant it arrived) over 30 channels, some so small
    // that shares round to 0 and 1; the same sequence re-solved from
    // each change's level and as whole components, scanning and
    // through the tree.
    for seed in 0..12u64 {
        let caps: Vec<u64> = (0..30)
            .map(|c| match c % 7 {
                0 => 3 + c,
                1 => 40,
                _ => 500 + 97 * (c * c % 13),
            })
            .collect();
        let scan = if seed % 2 == 0 { SCAN_CHANNELS } else { 0 };
        let (mut level, mut whole) = (FairShare::new(caps.clone()), FairShare::new(caps.clone()));
        whole.from_level = false;
        (level.scan_channels, whole.scan_channels) = (scan, scan);
        let mut x = seed;
        let mut rand = |n: u64| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let (mut active, mut next) = (Vec::new(), 0u32);
        for _instant in 0..150 {
            for _ in 0..rand(6) {
                let mut path: Vec<u32> = (0..1 + rand(6)).map(|_| rand(30) as u32).collect();
                path.sort_unstable();
                path.dedup();
                let weights: Vec<u32> = path.iter().map(|_| 1 + rand(3) as u32).collect();
                level.add_class(next, &path, &weights);
                whole.add_class(next, &path, &weights);
                active.push(next);
                next += 1;
            }
            for _ in 0..rand(5).min(active.len() as u64) {
                let gone = active.swap_remove(rand(active.len() as u64) as usize);
                assert_eq!(level.remove_flow(gone), whole.remove_flow(gone));
            }
            let (mut a, mut b) = (solve(&mut level), solve(&mut whole));
            a.sort_unstable_by_key(|r| r.flow);
            b.sort_unstable_by_key(|r| r.flow);
            assert_eq!(a, b, "seed {seed}");
            for &f in &active {
                assert_eq!(level.rate_bps(f), whole.rate_bps(f), "seed {seed} flow {f}");
            }
        }
    }
}

#[test]
fn rates_never_exceed_a_channel_capacity() {
    // A chain of channels with flows of every span over them.
    let caps = vec![70, 50, 90, 30, 110];
    let mut s = FairShare::new(caps.clone());
    let mut f = 0;
    for a in 0..caps.len() as u32 {
        for b in a..caps.len() as u32 {
            s.add(f, &(a..=b).collect::<Vec<_>>());
            f += 1;
        }
    }
    solve(&mut s);
    for (c, &cap) in caps.iter().enumerate() {
        let used: u64 = (0..f)
            .filter(|&g| s.path(g).contains(&(c as u32)))
            .map(|g| s.rate_bps(g))
            .sum();
        assert!(used <= cap, "channel {c}: {used} > {cap}");
    }
    // Every flow is bottlenecked: some channel it crosses is (nearly) full
    // and gives no other flow on it a higher rate.
    for g in 0..f {
        let bottlenecked = s.path(g).iter().any(|&c| {
            let on: Vec<u32> = (0..f).filter(|&h| s.path(h).contains(&c)).collect();
            let used: u64 = on.iter().map(|&h| s.rate_bps(h)).sum();
            caps[c as usize] - used < on.len() as u64
                && on.iter().all(|&h| s.rate_bps(h) <= s.rate_bps(g))
        });
        assert!(bottlenecked, "flow {g} could go faster");
    }
}

#[test]
fn slots_freed_in_an_instant_are_solved_by_their_new_flows_or_not_at_all() {
    // The solver knows flows by slot, not id: flow 0 arrives and leaves in
    // one instant and flow 2 takes its slot; flow 3 arrives and leaves
    // alone on channel 3, whose slot stays free.
    let caps = vec![100, 100, 60, 10];
    let mut s = FairShare::new(caps.clone());
    s.add(1, &[0, 1]);
    solve(&mut s);
    let gone = s.add(0, &[1, 2]);
    assert_eq!(s.remove(gone), 0);
    assert_eq!(s.add(2, &[0, 2]), gone, "the freed slot is taken again");
    let alone = s.add(3, &[3]);
    s.remove(alone);
    solve(&mut s);
    let mut fresh = FairShare::new(caps);
    fresh.add(1, &[0, 1]);
    fresh.add(2, &[0, 2]);
    solve(&mut fresh);
    assert_eq!((s.rate_bps(1), s.rate_bps(2)), (50, 50));
    assert_eq!((fresh.rate_bps(1), fresh.rate_bps(2)), (50, 50));
    assert_eq!((s.rate_bps(0), s.rate_bps(3)), (0, 0));
    assert_eq!(s.load(3), 0);
}
