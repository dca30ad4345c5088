//! The progress bar of a run on a terminal: simulated time, events/s and an
//! ETA when the end time is known. Silent when stderr is not a terminal.
//!
//! The shards only bump two atomics once per window ([`Progress`]); a display
//! thread polls them a few times a second and draws, so the simulation pays
//! nothing per event for being watched.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use netsim_engine::{Progress, SimTime};
use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often the display redraws.
const REFRESH: Duration = Duration::from_millis(200);

/// Runs `work`, showing a progress bar of `progress` on stderr meanwhile if
/// `show` is set and stderr is a terminal. `end` is the simulated time the
/// run stops at, if known; it gives the bar its length and ETA. The bar is
/// cleared before returning, so a summary line can follow.
pub fn with_progress_bar<T>(
    progress: &Progress,
    end: Option<SimTime>,
    show: bool,
    work: impl FnOnce() -> T,
) -> T {
    if !show || !std::io::stderr().is_terminal() {
        return work();
    }
    let bar = bar(end);
    let (stop, stopped) = mpsc::channel::<()>();
    let result = std::thread::scope(|scope| {
        let bar = &bar;
        scope.spawn(move || {
            let started = Instant::now();
            loop {
                let now = progress.sim_time();
                let events = progress.events();
                let rate = events as f64 / started.elapsed().as_secs_f64().max(1e-9);
                bar.set_message(format!(
                    "sim {}, {:.1} M events, {:.2} M/s",
                    human_time(now),
                    events as f64 / 1e6,
                    rate / 1e6
                ));
                bar.set_position(now.as_ns());
                bar.tick();
                if stopped.recv_timeout(REFRESH) != Err(mpsc::RecvTimeoutError::Timeout) {
                    break;
                }
            }
        });
        let result = work();
        // Disconnects the channel: the display thread wakes up and ends.
        drop(stop);
        result
    });
    bar.finish_and_clear();
    result
}

/// A bar against `end`, or a spinner when the end is not known.
fn bar(end: Option<SimTime>) -> ProgressBar {
    let bar = match end {
        Some(end) => ProgressBar::new(end.as_ns()).with_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{wide_bar}] {percent:>3}% {msg}, ETA {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        ),
        None => ProgressBar::no_length().with_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .expect("a valid template"),
        ),
    };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    bar
}

/// `t` in the largest unit that keeps it at least 1 (ns, us, ms, s).
fn human_time(t: SimTime) -> String {
    let ps = t.as_ps() as f64;
    if ps < 1e6 {
        format!("{:.1} ns", ps / 1e3)
    } else if ps < 1e9 {
        format!("{:.1} us", ps / 1e6)
    } else if ps < 1e12 {
        format!("{:.3} ms", ps / 1e9)
    } else {
        format!("{:.3} s", ps / 1e12)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_time_picks_a_readable_unit() {
        assert_eq!(human_time(SimTime::from_ns(12)), "12.0 ns");
        assert_eq!(human_time(SimTime::from_ns(1_500)), "1.5 us");
        assert_eq!(human_time(SimTime::from_us(2_500)), "2.500 ms");
        assert_eq!(human_time(SimTime::from_us(3_000_000)), "3.000 s");
    }
}
