use super::*;

use BreakerOutcome::{Failure, Ignored, Success};

mod permits;

fn breaker(options: BreakerOptions, now: Instant) -> CircuitBreaker {
    CircuitBreaker::new(options, now).expect("valid options")
}

/// Acquires a permit and records `outcome` for it at once.
fn call(breaker: &CircuitBreaker, outcome: BreakerOutcome, now: Instant) {
    let permit = breaker.try_acquire(now).expect("admitted");
    breaker.record(permit, outcome, now);
}

/// A breaker that opened at `now` with the given options (one failure trips it).
fn opened(options: BreakerOptions, now: Instant) -> CircuitBreaker {
    let breaker = breaker(options.consecutive_failures(Some(1)), now);
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Open);
    breaker
}

/// A breaker that opens on the failure ratio alone.
fn by_ratio(ratio: f64) -> BreakerOptions {
    BreakerOptions::default()
        .consecutive_failures(None)
        .failure_ratio(Some(ratio))
}

const BREAK: Duration = Duration::from_secs(15);

#[test]
fn g2_opens_on_consecutive_transient_failures_a_success_resets_the_count() {
    let now = Instant::now();
    let breaker = breaker(BreakerOptions::default(), now);
    for _ in 0..4 {
        call(&breaker, Failure, now);
    }
    call(&breaker, Success, now);
    for _ in 0..4 {
        call(&breaker, Failure, now);
    }
    assert_eq!(breaker.state(now), BreakerState::Closed, "four in a row");
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Open, "five in a row");
}

#[test]
fn g2_throttled_and_permanent_outcomes_are_no_evidence_either_way() {
    let now = Instant::now();
    let breaker = breaker(BreakerOptions::default(), now);
    for _ in 0..50 {
        call(&breaker, Ignored, now);
    }
    assert_eq!(breaker.state(now), BreakerState::Closed);
    // Nor do they break a run of failures: ignored outcomes leave the count where it was.
    for _ in 0..4 {
        call(&breaker, Failure, now);
        call(&breaker, Ignored, now);
    }
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Open);
}

#[test]
fn opens_on_failure_ratio_only_after_minimum_throughput() {
    let now = Instant::now();
    let breaker = breaker(by_ratio(0.5).minimum_throughput(10), now);
    for _ in 0..9 {
        call(&breaker, Failure, now);
    }
    assert_eq!(
        breaker.state(now),
        BreakerState::Closed,
        "nine failures are below the minimum throughput of ten"
    );
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Open);
}

#[test]
fn stays_closed_below_the_failure_ratio_and_opens_at_it_exactly() {
    let now = Instant::now();
    let breaker = breaker(by_ratio(0.3).minimum_throughput(10), now);
    for _ in 0..8 {
        call(&breaker, Success, now);
    }
    call(&breaker, Failure, now);
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Closed, "2 in 10 < 0.3");
    call(&breaker, Success, now);
    call(&breaker, Success, now);
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Closed, "3 in 13 < 0.3");
    for _ in 0..4 {
        call(&breaker, Success, now);
    }
    assert_eq!(
        breaker.state(now),
        BreakerState::Closed,
        "a success never opens"
    );
    // 3 in 17, then 4 in 18, 5 in 19, 6 in 20: the ratio is reached exactly at 6/20.
    for _ in 0..2 {
        call(&breaker, Failure, now);
    }
    assert_eq!(breaker.state(now), BreakerState::Closed, "5 in 19 < 0.3");
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Open, "6 in 20 = 0.3");
}

#[test]
fn window_resets_after_the_sampling_window() {
    let start = Instant::now();
    let breaker = breaker(by_ratio(0.5).minimum_throughput(10), start);
    for _ in 0..9 {
        call(&breaker, Failure, start);
    }
    // The window is 30 s old: the tenth failure starts a fresh count of one.
    let later = start + Duration::from_secs(30);
    call(&breaker, Failure, later);
    assert_eq!(breaker.state(later), BreakerState::Closed);
    for _ in 0..8 {
        call(&breaker, Failure, later);
    }
    assert_eq!(
        breaker.state(later),
        BreakerState::Closed,
        "nine in the new window"
    );
    call(&breaker, Failure, later + Duration::from_secs(29));
    assert_eq!(breaker.state(later), BreakerState::Open);
}

#[test]
fn earlier_now_does_not_reset_the_window() {
    let start = Instant::now();
    let later = start + Duration::from_secs(20);
    let breaker = breaker(by_ratio(0.5).minimum_throughput(10), later);
    for _ in 0..9 {
        call(&breaker, Failure, later);
    }
    // A timestamp before the window began is no time at all, not a window elapsed.
    call(&breaker, Failure, start);
    assert_eq!(breaker.state(start), BreakerState::Open);
}

#[test]
fn g1_stays_open_for_the_break_with_the_rest_of_it_as_the_hint() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default(), start);
    assert_eq!(
        breaker.try_acquire(start).expect_err("open"),
        BreakerOpen::new(Some(BREAK))
    );
    let later = start + Duration::from_millis(100);
    assert_eq!(
        breaker.retry_after(later),
        Some(Duration::from_millis(14_900))
    );
    let almost = start + BREAK - Duration::from_millis(1);
    assert_eq!(breaker.state(almost), BreakerState::Open);
    assert_eq!(
        breaker
            .try_acquire(almost)
            .expect_err("still open")
            .retry_after(),
        Some(Duration::from_millis(1))
    );
    // A timestamp from before the breaker opened is refused with the whole break.
    let earlier = start - Duration::from_secs(1);
    assert_eq!(
        breaker
            .try_acquire(earlier)
            .expect_err("open")
            .retry_after(),
        Some(BREAK)
    );
    assert_eq!(breaker.state(start + BREAK), BreakerState::HalfOpen);
    assert_eq!(breaker.retry_after(start + BREAK), None, "half-open");
    // Once half-open, an earlier timestamp does not reopen it.
    assert_eq!(breaker.state(start), BreakerState::HalfOpen);
}

#[test]
fn g3_reading_the_state_or_the_hint_takes_no_probe_slot() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default(), start);
    let now = start + BREAK;
    for _ in 0..10 {
        assert_eq!(breaker.state(now), BreakerState::HalfOpen);
        assert_eq!(breaker.retry_after(now), None);
    }
    assert!(breaker.try_acquire(now).expect("the probe slot").is_probe());
}

#[test]
fn g3_half_open_admits_exactly_half_open_probes_at_once() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default().half_open_probes(3), start);
    let now = start + BREAK;
    let probes: Vec<_> = (0..3)
        .map(|_| breaker.try_acquire(now).expect("probe slot"))
        .collect();
    assert!(probes.iter().all(BreakerPermit::is_probe));
    let refused = breaker.try_acquire(now).expect_err("every slot taken");
    assert_eq!(
        refused.retry_after(),
        None,
        "nobody knows when a probe ends"
    );
    assert_eq!(
        refused.to_string(),
        "circuit breaker is half-open and every probe slot is taken"
    );
    assert_eq!(breaker.state(now), BreakerState::HalfOpen);
    let mut probes = probes.into_iter();
    let first = probes.next().expect("three probes");
    breaker.record(first, Success, now);
    let again = breaker
        .try_acquire(now)
        .expect("a recorded probe frees its slot");
    assert!(breaker.try_acquire(now).is_err());
    drop((again, probes));
}

#[test]
fn g3_two_successful_probes_close_it_and_start_a_fresh_count() {
    let start = Instant::now();
    let breaker = breaker(BreakerOptions::default(), start);
    for _ in 0..5 {
        call(&breaker, Failure, start);
    }
    let now = start + BREAK;
    call(&breaker, Success, now);
    assert_eq!(breaker.state(now), BreakerState::HalfOpen, "one is not two");
    call(&breaker, Success, now);
    assert_eq!(breaker.state(now), BreakerState::Closed);
    let permit = breaker.try_acquire(now).expect("closed");
    assert!(!permit.is_probe());
    breaker.record(permit, Failure, now);
    assert_eq!(
        breaker.state(now),
        BreakerState::Closed,
        "one failure after closing is not five in a row"
    );
}

#[test]
fn g3_a_failed_probe_reopens_for_a_doubled_break() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default(), start);
    let now = start + BREAK;
    let probe = breaker.try_acquire(now).expect("probe");
    breaker.record(probe, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Open);
    assert_eq!(
        breaker
            .try_acquire(now)
            .expect_err("reopened")
            .retry_after(),
        Some(BREAK * 2)
    );
    assert_eq!(breaker.state(now + BREAK), BreakerState::Open);
    assert_eq!(breaker.state(now + BREAK * 2), BreakerState::HalfOpen);
}

#[test]
fn g3_the_break_doubles_on_each_consecutive_open_up_to_the_maximum() {
    let start = Instant::now();
    let options = BreakerOptions::default()
        .break_duration(Duration::from_secs(10))
        .max_break_duration(Duration::from_secs(35));
    let breaker = opened(options, start);
    let mut now = start;
    for expected in [10, 20, 35, 35, 35] {
        let length = breaker.retry_after(now).expect("open");
        assert_eq!(length, Duration::from_secs(expected));
        now += length;
        call(&breaker, Failure, now);
    }
}

#[test]
fn g3_a_clean_close_resets_the_growth() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default(), start);
    let mut now = start + BREAK;
    call(&breaker, Failure, now);
    assert_eq!(breaker.retry_after(now), Some(BREAK * 2));
    now += BREAK * 2;
    call(&breaker, Success, now);
    call(&breaker, Success, now);
    assert_eq!(breaker.state(now), BreakerState::Closed);
    call(&breaker, Failure, now);
    assert_eq!(breaker.retry_after(now), Some(BREAK), "back to the base");
}

#[test]
fn g3_a_slow_probe_is_no_recovery() {
    let start = Instant::now();
    let threshold = Duration::from_millis(500);
    let breaker = opened(
        BreakerOptions::default().slow_call_threshold(Some(threshold)),
        start,
    );
    let now = start + BREAK;
    let probe = breaker.try_acquire(now).expect("probe");
    breaker.record(probe, Success, now + Duration::from_millis(501));
    assert_eq!(breaker.state(now), BreakerState::Open, "too slow: reopened");

    let now = now + Duration::from_millis(501) + BREAK * 2;
    for _ in 0..2 {
        let probe = breaker.try_acquire(now).expect("probe");
        breaker.record(probe, Success, now + threshold);
    }
    assert_eq!(breaker.state(now), BreakerState::Closed, "at the threshold");
}

#[test]
fn probes_to_close_counts_successes_across_slots() {
    let start = Instant::now();
    let options = BreakerOptions::default().probes_to_close(3);
    let breaker = opened(options, start);
    let now = start + BREAK;
    for _ in 0..2 {
        call(&breaker, Success, now);
        assert_eq!(breaker.state(now), BreakerState::HalfOpen);
    }
    call(&breaker, Success, now);
    assert_eq!(breaker.state(now), BreakerState::Closed);
}
