//! The physical limit of a run: the share of the users' calls that db's capacity could serve
//! within their patience, whatever the clients did, from the fault's parameters alone (P3).
//!
//! The bound treats db as a fluid server whose capacity the fault changes for its window,
//! and the calls as waiting at most the users' patience W. A call started in the window's
//! first L − W seconds can only be served in the window (its user is gone when it ends); a
//! call of its last min(L, W) seconds can also be served after it, in the capacity db has to
//! spare over the users' rate for the W seconds after. The window's capacity goes first to
//! the calls that cannot wait for its end. No scheduler does better: this is an upper bound,
//! and stacks are measured against it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::args::ChainArgs;
use super::fault::{Fault, FaultKind};

/// A run's physical limit, and how it was worked out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// The share of the run's calls db could serve in time.
    pub run: f64,
    /// The share of the calls started in the fault's window.
    pub during: f64,
    /// The arithmetic, in words and numbers.
    pub arithmetic: String,
}

/// The share of db's healthy capacity that serves calls in time while `fault` acts: 1/F for
/// a slowdown, nothing when db finishes nothing or refuses connections, the healthy share of
/// queries when some fail.
#[must_use]
pub fn capacity_share(fault: &Fault) -> f64 {
    match fault.kind {
        FaultKind::Slow => 1.0 / fault.factor(),
        FaultKind::Errors => 1.0 - fault.factor(),
        FaultKind::Stall | FaultKind::Down => 0.0,
        FaultKind::Surge | FaultKind::Brownout | FaultKind::Tail | FaultKind::Throttle => 1.0,
    }
}

/// The physical limit of the run `args` describes.
#[must_use]
pub fn physical_limit(args: &ChainArgs) -> Limit {
    let fault = args.db.fault();
    let rate = f64::from(args.rps);
    let patience = args.user_timeout().as_secs_f64();
    let run = args.duration() as f64;
    let healthy_time = Duration::from_millis(args.db.db_query_ms).as_secs_f64();
    let capacity = args.db.capacity();
    match fault.kind {
        FaultKind::Tail => {
            // A log-normal's mean is its median × e^(σ²/2), σ = ln 10 / 2.326.
            let sigma = 10f64.ln() / 2.326_347_874;
            let mean = healthy_time * (sigma * sigma / 2.0).exp();
            let tail_capacity = f64::from(args.db.db_workers) / mean;
            let share = (tail_capacity / rate).min(1.0);
            Limit {
                run: share,
                during: share,
                arithmetic: format!(
                    "db's {} workers over a mean query time of {:.1} ms (median {} ms × e^(σ²/2)) serve {} calls/s against the users' {}: {}",
                    args.db.db_workers,
                    mean * 1e3,
                    args.db.db_query_ms,
                    rate_of(tail_capacity),
                    rate_of(rate),
                    percent(share),
                ),
            }
        }
        FaultKind::Brownout => {
            let slowed = healthy_time * fault.factor();
            let share = if slowed < patience { 1.0 } else { 0.0 };
            let window = (fault.end.min(secs(run)) - fault.start.min(secs(run))).as_secs_f64();
            let served = (run - window) * rate + window * rate * share;
            Limit {
                run: served / (run * rate),
                during: share,
                arithmetic: format!(
                    "db has no capacity limit and a slowed query takes {:.0} ms, {} the users' {} s: {}",
                    slowed * 1e3,
                    if share == 1.0 { "within" } else { "past" },
                    patience,
                    percent(served / (run * rate)),
                ),
            }
        }
        _ => windowed(&fault, rate, patience, run, healthy_time, capacity),
    }
}

/// The limit of a fault that changes db's capacity, or the users' rate, for its window.
fn windowed(
    fault: &Fault,
    rate: f64,
    patience: f64,
    run: f64,
    healthy_time: f64,
    capacity: f64,
) -> Limit {
    let start = fault.start.as_secs_f64().min(run);
    let length = fault.end.as_secs_f64().min(run) - start;
    let outside = run - length;
    let (window_rate, window_capacity, capacity_words) = match fault.kind {
        FaultKind::Surge => (
            rate * fault.factor(),
            capacity,
            format!(
                "the users call {}/s, db serves {}/s",
                rate_of(rate * fault.factor()),
                rate_of(capacity)
            ),
        ),
        FaultKind::Throttle => {
            let admitted = capacity.min(fault.factor());
            (rate, admitted, format!("db admits {}/s", rate_of(admitted)))
        }
        _ => {
            // A query slower than the users' patience is served for nobody.
            let slowed = healthy_time * fault.factor();
            let share = if fault.kind == FaultKind::Slow && slowed >= patience {
                0.0
            } else {
                capacity_share(fault)
            };
            (
                rate,
                capacity * share,
                format!(
                    "db serves {}/s in time ({}/s healthy)",
                    rate_of(capacity * share),
                    rate_of(capacity)
                ),
            )
        }
    };
    let in_window = window_rate * length;
    let late_seconds = patience.min(length);
    let late = window_rate * late_seconds;
    let early = in_window - late;
    let window_work = window_capacity * length;
    let served_early = early.min(window_work);
    let spare_after = ((capacity - rate) * patience).max(0.0);
    let served_late = late.min(window_work - served_early + spare_after);
    let healthy = outside * rate.min(capacity);
    let calls = outside * rate + in_window;
    let run_share = (healthy + served_early + served_late) / calls;
    let during = if in_window > 0.0 {
        (served_early + served_late) / in_window
    } else {
        1.0
    };
    Limit {
        run: run_share,
        during,
        arithmetic: format!(
            "in the fault {capacity_words}. Of its {} calls, the {} started over {} s before its end are served only in it: min({}, {} × {} s) = {}; the {} of its last {} s also after it, in db's spare ({} − {})/s × {} s: {}. ({} + {} + {}) / {} = {}",
            count(in_window),
            count(early),
            patience,
            count(early),
            rate_of(window_capacity),
            length,
            count(served_early),
            count(late),
            late_seconds,
            rate_of(capacity),
            rate_of(rate),
            patience,
            count(served_late),
            count(healthy),
            count(served_early),
            count(served_late),
            count(calls),
            percent(run_share),
        ),
    }
}

fn secs(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.max(0.0))
}

fn rate_of(rate: f64) -> String {
    format!("{rate:.0}")
}

fn count(n: f64) -> String {
    format!("{:.0}", n.round())
}

fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{ChainArgs, FaultArgs};

    fn limit(kind: FaultKind, length: u64) -> Limit {
        let mut args = ChainArgs::default();
        args.db.fault = FaultArgs {
            fault: kind,
            fault_length: length,
            ..args.db.fault
        };
        physical_limit(&args)
    }

    #[test]
    fn p3_a_slowdown_serves_its_capacity_in_the_window_and_its_last_calls_after_it() {
        // 200 calls/s, db 400/s, 80/s while 5× slower, users waiting 2 s, 20 s in all: of the
        // fault's 1,000 calls, 400 in it and the 400 of its last 2 s after it.
        let slow = limit(FaultKind::Slow, 5);
        assert!((slow.run - 3_800.0 / 4_000.0).abs() < 1e-9, "{slow:?}");
        assert!((slow.during - 0.8).abs() < 1e-9, "{slow:?}");
        // 20 s of it: 1,600 in it, 400 after, of 4,000; 35 s in all.
        let long = limit(FaultKind::Slow, 20);
        assert!((long.during - 0.5).abs() < 1e-9, "{long:?}");
        assert!((long.run - 5_000.0 / 7_000.0).abs() < 1e-9, "{long:?}");
    }

    #[test]
    fn p3_an_outage_leaves_the_calls_that_can_wait_for_its_end() {
        for kind in [FaultKind::Stall, FaultKind::Down] {
            let outage = limit(kind, 5);
            assert!((outage.during - 0.4).abs() < 1e-9, "{outage:?}");
            assert!((outage.run - 0.85).abs() < 1e-9, "{outage:?}");
        }
    }

    #[test]
    fn p3_a_surge_is_bound_by_db_and_the_spare_after_it() {
        // 600 calls/s for 5 s against 400/s: 2,000 in it, 400 after, of 3,000.
        let surge = limit(FaultKind::Surge, 5);
        assert!((surge.during - 0.8).abs() < 1e-9, "{surge:?}");
        assert!((surge.run - 5_400.0 / 6_000.0).abs() < 1e-9, "{surge:?}");
    }

    #[test]
    fn p3_faults_with_capacity_to_spare_can_serve_every_call() {
        for kind in [FaultKind::Errors, FaultKind::Brownout, FaultKind::Tail] {
            let limit = limit(kind, 5);
            assert!((limit.run - 1.0).abs() < 1e-9, "{kind:?}: {limit:?}");
        }
        // 100/s admitted of 200 for 5 s: 500 in it, the last 2 s' 400 after it.
        let throttle = limit(FaultKind::Throttle, 5);
        assert!((throttle.during - 0.9).abs() < 1e-9, "{throttle:?}");
    }
}
