//! Probe permits: held until recorded, returned when dropped, and ignored when stale (G3, G4).

use super::*;

#[test]
fn g4_half_open_breaker_still_recovers_after_a_burst_of_ignored_outcomes() {
    // The limiter refused each probe after the breaker admitted it, or the probe was throttled.
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default(), start);
    let now = start + BREAK;
    for _ in 0..100 {
        let probe = breaker
            .try_acquire(now)
            .expect("the slot is back every time");
        assert!(probe.is_probe());
        breaker.record(probe, Ignored, now);
        assert_eq!(breaker.state(now), BreakerState::HalfOpen, "no evidence");
    }
    call(&breaker, Success, now);
    call(&breaker, Success, now);
    assert_eq!(breaker.state(now), BreakerState::Closed);
}

#[test]
fn probe_slot_is_held_until_the_permit_is_recorded() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default(), start);
    let now = start + BREAK;
    let probe = breaker.try_acquire(now).expect("probe");
    for later in [now, now + BREAK, now + Duration::from_secs(3600)] {
        assert_eq!(
            breaker
                .try_acquire(later)
                .expect_err("slot held")
                .retry_after(),
            None
        );
    }
    breaker.record(probe, Ignored, now);
    assert!(breaker.try_acquire(now).is_ok());
}

#[test]
fn g4_a_dropped_probe_permit_returns_its_slot_and_records_nothing() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default(), start);
    let now = start + BREAK;
    call(&breaker, Success, now);
    for _ in 0..10 {
        drop(breaker.try_acquire(now).expect("probe"));
    }
    assert_eq!(breaker.state(now), BreakerState::HalfOpen);
    call(&breaker, Success, now);
    assert_eq!(
        breaker.state(now),
        BreakerState::Closed,
        "the drops counted neither way"
    );
}

#[test]
fn ignored_outcomes_are_no_throughput_while_closed() {
    let now = Instant::now();
    let breaker = breaker(by_ratio(1.0).minimum_throughput(2), now);
    for _ in 0..100 {
        call(&breaker, Ignored, now);
    }
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Closed);
    call(&breaker, Failure, now);
    assert_eq!(breaker.state(now), BreakerState::Open);
}

#[test]
fn stale_closed_permits_neither_count_nor_free_half_open_slots() {
    let start = Instant::now();
    let options = BreakerOptions::default()
        .consecutive_failures(Some(1))
        .probes_to_close(1);
    let breaker = breaker(options, start);
    let stale: Vec<_> = (0..4)
        .map(|_| breaker.try_acquire(start).expect("closed"))
        .collect();
    call(&breaker, Failure, start);
    let now = start + BREAK;
    let probe = breaker.try_acquire(now).expect("probe");

    let mut stale = stale.into_iter();
    let mut next = || stale.next().expect("four stale permits");
    breaker.record(next(), Ignored, now);
    breaker.record(next(), Success, now);
    breaker.record(next(), Failure, now);
    drop(next());
    assert_eq!(
        breaker.state(now),
        BreakerState::HalfOpen,
        "neither closed nor reopened"
    );
    assert!(
        breaker.try_acquire(now).is_err(),
        "the probe still holds the only slot"
    );

    breaker.record(probe, Success, now);
    assert_eq!(breaker.state(now), BreakerState::Closed);
}

#[test]
fn stale_probes_from_an_earlier_half_open_phase_are_ignored() {
    let start = Instant::now();
    let breaker = opened(BreakerOptions::default().half_open_probes(2), start);
    let first = start + BREAK;
    let late = breaker.try_acquire(first).expect("probe");
    let failing = breaker.try_acquire(first).expect("probe");
    breaker.record(failing, Failure, first);
    assert_eq!(breaker.state(first), BreakerState::Open);

    let second = first + BREAK * 2;
    let current = [
        breaker.try_acquire(second).expect("probe"),
        breaker.try_acquire(second).expect("probe"),
    ];
    breaker.record(late, Success, second);
    assert_eq!(
        breaker.state(second),
        BreakerState::HalfOpen,
        "not closed by a stale probe"
    );
    assert!(
        breaker.try_acquire(second).is_err(),
        "a stale probe frees no slot of this phase"
    );
    for probe in current {
        breaker.record(probe, Success, second);
    }
    assert_eq!(breaker.state(second), BreakerState::Closed);
}

#[test]
fn permit_settles_with_the_breaker_that_issued_it() {
    let start = Instant::now();
    let issuer = opened(BreakerOptions::default().probes_to_close(1), start);
    let other = breaker(BreakerOptions::default(), start);
    let now = start + BREAK;
    let probe = issuer.try_acquire(now).expect("probe");
    other.record(probe, Success, now);
    assert_eq!(issuer.state(now), BreakerState::Closed);
    assert!(format!("{other:?}").contains("successes: 0, failures: 0"));
}

#[test]
fn permit_outlives_the_borrow_of_its_breaker() {
    // A call's state stores the permit next to the policy that owns the breaker.
    fn assert_static<T: 'static>(_: &T) {}
    let start = Instant::now();
    let breaker = std::sync::Arc::new(opened(BreakerOptions::default().probes_to_close(1), start));
    let now = start + BREAK;
    let probe = breaker.try_acquire(now).expect("probe");
    assert_static(&probe);
    let shared = std::sync::Arc::clone(&breaker);
    let probe = std::thread::spawn(move || {
        assert!(shared.try_acquire(now).is_err(), "slot held across threads");
        probe
    })
    .join()
    .unwrap();
    breaker.record(probe, Success, now);
    assert_eq!(breaker.state(now), BreakerState::Closed);
}

#[test]
fn debug_shows_state_counts_and_options() {
    let now = Instant::now();
    let breaker = breaker(BreakerOptions::default(), now);
    call(&breaker, Failure, now);
    call(&breaker, Success, now);
    call(&breaker, Failure, now);
    let debug = format!("{breaker:?}");
    assert!(
        debug.starts_with(
            "CircuitBreaker { state: Closed, successes: 1, failures: 2, failures_in_a_row: 1, \
             options: BreakerOptions {"
        ),
        "{debug}"
    );
    let permit = breaker.try_acquire(now).expect("closed");
    assert_eq!(
        format!("{permit:?}"),
        "BreakerPermit { generation: 0, probe: false }"
    );
    breaker.record(permit, Success, now);

    let breaker = opened(BreakerOptions::default(), now);
    assert!(format!("{breaker:?}").starts_with("CircuitBreaker { state: Open, break: 15s,"));
    let _probe = breaker.try_acquire(now + BREAK).expect("probe");
    assert!(format!("{breaker:?}").starts_with(
        "CircuitBreaker { state: HalfOpen, probes_in_flight: 1, probes_succeeded: 0,"
    ),);
    assert_eq!(
        BreakerOpen::new(Some(Duration::from_millis(1500))).to_string(),
        "circuit breaker is open, retry after 1.5s"
    );
}

#[test]
fn breaker_and_permit_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CircuitBreaker>();
    assert_send_sync::<BreakerPermit>();
    assert_send_sync::<BreakerOpen>();
    assert_send_sync::<InvalidBreaker>();
}
