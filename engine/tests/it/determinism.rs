//! The ordering contract end to end: PHOLD on any number of shards handles
//! exactly the same events in the same order at every node.

use netsim_benches::phold::{run_phold, PholdConfig};
use netsim_engine::SimTime;

fn config(seed: u64) -> PholdConfig {
    PholdConfig {
        nodes: 96,
        events_per_node: 4,
        lookahead: SimTime::from_ns(100),
        mean_delay_ps: 150_000.0,
        end: SimTime::from_us(200),
        seed,
    }
}

#[test]
fn phold_is_identical_on_1_2_3_4_and_8_shards() {
    let config = config(7);
    let reference = run_phold(&config, 1).unwrap();
    // Sanity: the run did real work and every node took part.
    assert!(
        reference.events() > 50_000,
        "only {} events",
        reference.events()
    );
    assert!(reference.handled_per_node.iter().all(|&c| c > 0));
    for shards in [2, 3, 4, 8] {
        let outcome = run_phold(&config, shards).unwrap();
        assert_eq!(
            outcome.handled_per_node, reference.handled_per_node,
            "handled-event counts differ on {shards} shards"
        );
        assert_eq!(
            outcome.state_hash(),
            reference.state_hash(),
            "final state differs on {shards} shards"
        );
        assert_eq!(outcome.windows, reference.windows);
    }
}

#[test]
fn phold_depends_on_the_seed() {
    let a = run_phold(&config(1), 2).unwrap();
    let b = run_phold(&config(2), 2).unwrap();
    assert_ne!(a.state_hash(), b.state_hash());
}

#[test]
fn phold_population_is_conserved() {
    // Every handled event schedules exactly one more, so the number handled
    // up to time T equals the number created that landed before T; with the
    // population fixed, the rate is nodes * events_per_node / mean delay.
    let config = config(3);
    let outcome = run_phold(&config, 4).unwrap();
    let mean_delay_ps = config.lookahead.as_ps() as f64 + config.mean_delay_ps;
    let expected = f64::from(config.nodes * config.events_per_node) * config.end.as_ps() as f64
        / mean_delay_ps;
    let ratio = outcome.events() as f64 / expected;
    assert!((0.97..1.03).contains(&ratio), "events/expected = {ratio}");
}
