//! The engine catches a model that sends a cross-shard event earlier than the
//! lookahead allows, and stops the other shards instead of hanging; a
//! progress handle ends up counting every event, and stops a run when asked.

use netsim_engine::{run_on_threads, Context, Layout, Model, NodeId, Progress, SimTime, Stopped};

/// Node 0 pings node 1 with a fixed delay; node 1 answers back.
struct PingPong {
    delay: SimTime,
}

impl Model for PingPong {
    type Payload = u32;

    fn start(&mut self, ctx: &mut Context<'_, u32>) {
        if ctx.node() == NodeId(0) {
            ctx.schedule_self(SimTime::from_ns(1), 0);
        }
    }

    fn handle(&mut self, ctx: &mut Context<'_, u32>, hops: u32) {
        let peer = NodeId(1 - ctx.node().0);
        ctx.send(peer, self.delay, hops + 1);
    }
}

fn run_with(delay: SimTime, progress: Option<&Progress>) -> u64 {
    let layout = Layout::blocks(2, 2, SimTime::from_ns(10)).unwrap();
    let reports = run_on_threads(&layout, 1, SimTime::from_us(1), progress, |_, _| PingPong {
        delay,
    });
    reports.iter().map(|r| r.handled_events).sum()
}

fn run(delay: SimTime) -> u64 {
    run_with(delay, None)
}

#[test]
fn progress_counts_every_event_and_reaches_the_last_one() {
    let progress = Progress::new();
    assert_eq!(run_with(SimTime::from_ns(10), Some(&progress)), 100);
    assert_eq!(progress.events(), 100);
    // Events at 1, 11, ..., 991 ns.
    assert_eq!(progress.sim_time(), SimTime::from_ns(991));
}

#[test]
fn a_run_asked_to_stop_unwinds_with_stopped() {
    let layout = Layout::blocks(2, 2, SimTime::from_ns(10)).unwrap();
    let progress = Progress::new();
    let unwound = std::thread::scope(|scope| {
        scope.spawn(|| {
            while progress.events() < 1_000 {
                std::thread::yield_now();
            }
            progress.stop();
        });
        // Without an end, the ping-pong goes on until it is stopped.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_on_threads(&layout, 1, SimTime::MAX, Some(&progress), |_, _| PingPong {
                delay: SimTime::from_ns(10),
            })
        }))
    });
    let payload = unwound.err().expect("the run returned instead of stopping");
    assert!(payload.is::<Stopped>());
}

#[test]
fn sends_at_the_lookahead_are_accepted() {
    // One event at 1 ns, then one every 10 ns until 1 us.
    assert_eq!(run(SimTime::from_ns(10)), 100);
}

#[test]
#[should_panic(expected = "lookahead violated")]
fn a_send_below_the_lookahead_is_caught() {
    run(SimTime::from_ps(9_999));
}

#[test]
fn zero_shards_and_out_of_range_shards_are_errors() {
    use netsim_engine::{LayoutError, ShardId};
    assert_eq!(
        Layout::new(vec![], 0, SimTime::MAX).unwrap_err(),
        LayoutError::NoShards
    );
    assert!(matches!(
        Layout::new(vec![ShardId(0), ShardId(2)], 2, SimTime::from_ns(1)),
        Err(LayoutError::ShardOutOfRange { node: 1, .. })
    ));
    assert_eq!(
        Layout::new(vec![ShardId(0), ShardId(1)], 2, SimTime::ZERO).unwrap_err(),
        LayoutError::ZeroLookahead
    );
}
