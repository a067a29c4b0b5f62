//! The retry executor under a paused tokio clock (SPEC E1–E6, B5–B10, K13, K14, K16, N3, N5).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nresilience_core::breaker::{BreakerOptions, BreakerState, CircuitBreaker};
use nresilience_core::limiter::RateLimiter;
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::{
    AttemptCeiling, Backoff, BudgetOptions, Criticality, Jitter, LastAttempt, RetryBudget,
    RetryPolicy, StopReason, Verdict,
};
use tokio::time::Instant;

fn exact() -> Backoff {
    Backoff::default().with_jitter(Jitter::None)
}

fn base() -> nresilience_core::RetryPolicyBuilder {
    RetryPolicy::builder()
        .backoff(exact())
        .attempt_ceiling(None)
}

/// A budget only successes refill (no floor, B2), holding `capacity` tokens or, without one,
/// the B3 default for a zero floor.
fn successes_only(capacity: Option<f64>) -> RetryBudget {
    let options = BudgetOptions::default().minimum_per_second(0.0);
    let options = match capacity {
        Some(capacity) => options.capacity(capacity),
        None => options,
    };
    RetryBudget::automatic().with_options(options)
}

/// Runs a call whose attempts all fail, returning the virtual instants the attempts began.
async fn failing_call(policy: &RetryPolicy) -> (Vec<Duration>, nresilience_core::RetryError<()>) {
    let start = Instant::now();
    let seen = Mutex::new(Vec::new());
    let error = policy
        .execute(|_| {
            seen.lock().unwrap().push(start.elapsed());
            async { Err::<(), ()>(()) }
        })
        .await
        .unwrap_err();
    (seen.into_inner().unwrap(), error)
}

#[tokio::test(start_paused = true)]
async fn e2_defaults_are_three_attempts_thirty_second_deadline_budget_on() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.max_attempts(), 3);
    assert_eq!(policy.deadline(), Some(Duration::from_secs(30)));
    assert_eq!(policy.attempt_timeout(), Some(Duration::from_secs(10)));
    assert_eq!(policy.attempt_ceiling(), Some(AttemptCeiling::default()));
    assert_eq!(policy.budget(), &RetryBudget::automatic());
    assert_eq!(policy.backoff(), &Backoff::default());
    let (_, error) = failing_call(&policy).await;
    assert_eq!(error.attempts(), 3);
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
}

#[tokio::test(start_paused = true)]
async fn k12_sleeps_follow_the_curve_exactly_without_jitter() {
    let policy = base().max_attempts(5).build().unwrap();
    let (starts, error) = failing_call(&policy).await;
    let ms = |v: u64| Duration::from_millis(v);
    assert_eq!(starts, vec![ms(0), ms(100), ms(300), ms(700), ms(1500)]);
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    assert_eq!(error.attempts(), 5);
}

#[tokio::test(start_paused = true)]
async fn e1_throttled_waits_on_the_throttled_base() {
    let policy = base().build().unwrap();
    let start = Instant::now();
    let seen = Mutex::new(Vec::new());
    let classify = |_: &Result<(), ()>| Verdict::THROTTLED;
    let _ = policy
        .execute_with(&classify, |_| {
            seen.lock().unwrap().push(start.elapsed());
            async { Err::<(), ()>(()) }
        })
        .await;
    let seen = seen.into_inner().unwrap();
    assert_eq!(
        seen,
        vec![
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(3)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn k13_pushback_is_served_verbatim_and_capped_by_the_maximum_delay() {
    for (cap, expected) in [(30, 2), (1, 1)] {
        let policy = RetryPolicy::builder()
            .attempt_ceiling(None)
            .backoff(Backoff::default().with_maximum_delay(Some(Duration::from_secs(cap))))
            .max_attempts(2)
            .build()
            .unwrap();
        let pushback = |_: &Result<(), ()>| Verdict::Throttled {
            self_imposed: false,
            retry_after: Some(Duration::from_secs(2)),
        };
        let start = Instant::now();
        let seen = Mutex::new(Vec::new());
        let _ = policy
            .execute_with(&pushback, |_| {
                seen.lock().unwrap().push(start.elapsed());
                async { Err::<(), ()>(()) }
            })
            .await;
        // Full jitter is on, yet the pushback is served to the nanosecond.
        assert_eq!(seen.into_inner().unwrap()[1], Duration::from_secs(expected));
    }
}

#[tokio::test(start_paused = true)]
async fn k16_a_clamped_policy_keeps_an_hour_of_pushback_within_five_seconds_of_its_curve() {
    let policy = base()
        .backoff(exact().with_pushback_margin(Some(Duration::from_secs(5))))
        .deadline(Some(Duration::from_secs(20)))
        .build()
        .unwrap();
    let hour = |_: &Result<(), ()>| Verdict::Throttled {
        self_imposed: false,
        retry_after: Some(Duration::from_secs(3_600)),
    };
    let start = Instant::now();
    let seen = Mutex::new(Vec::new());
    let error = policy
        .execute_with(&hour, |_| {
            seen.lock().unwrap().push(start.elapsed());
            async { Err::<(), ()>(()) }
        })
        .await
        .unwrap_err();
    // The throttled curve computes 1 s, then 2 s; each retry waits it plus the margin, where
    // the verbatim default would stop at once (an hour, capped at 30 s, is past the deadline,
    // K14).
    let secs = Duration::from_secs;
    assert_eq!(seen.into_inner().unwrap(), vec![secs(0), secs(6), secs(13)]);
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    let verbatim = base().deadline(Some(secs(20))).build().unwrap();
    let error = verbatim
        .execute_with(&hour, |_| async { Err::<(), ()>(()) })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::DeadlineExceeded);
    assert_eq!(error.attempts(), 1);
}

#[tokio::test(start_paused = true)]
async fn k14_a_delay_that_would_pass_the_deadline_fails_at_once_without_sleeping() {
    let policy = base()
        .backoff(Backoff::constant(Duration::from_secs(2)).with_jitter(Jitter::None))
        .deadline(Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let start = Instant::now();
    let (starts, error) = failing_call(&policy).await;
    assert_eq!(starts.len(), 1);
    assert_eq!(error.reason(), StopReason::DeadlineExceeded);
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "no sleep into a certain failure"
    );
}

#[tokio::test(start_paused = true)]
async fn k14_pushback_at_least_the_time_left_stops_at_once() {
    let policy = base()
        .deadline(Some(Duration::from_secs(5)))
        .build()
        .unwrap();
    let pushback = |_: &Result<(), ()>| Verdict::Throttled {
        self_imposed: false,
        retry_after: Some(Duration::from_secs(5)),
    };
    let start = Instant::now();
    let error = policy
        .execute_with(&pushback, |_| async { Err::<(), ()>(()) })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::DeadlineExceeded);
    assert_eq!(error.attempts(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn e6_deadline_cancels_a_running_attempt() {
    let policy = base()
        .deadline(Some(Duration::from_millis(500)))
        .attempt_timeout(None)
        .build()
        .unwrap();
    let start = Instant::now();
    let error = policy
        .execute(|_| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<(), ()>(())
        })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::DeadlineExceeded);
    assert!(error.is_timeout());
    assert_eq!(start.elapsed(), Duration::from_millis(500));
}

#[tokio::test(start_paused = true)]
async fn e6_attempt_timeout_cuts_an_attempt_as_transient() {
    let policy = base()
        .attempt_timeout(Some(Duration::from_millis(50)))
        .build()
        .unwrap();
    let error = policy
        .execute(|_| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<(), ()>(())
        })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    assert_eq!(error.attempts(), 3);
    assert!(matches!(error.last_attempt(), LastAttempt::TimedOut));
}

#[tokio::test(start_paused = true)]
async fn e6_permanent_stops_after_one_attempt() {
    let policy = base().build().unwrap();
    let classify = |_: &Result<(), &str>| Verdict::Permanent;
    let error = policy
        .execute_with(&classify, |_| async { Err::<(), _>("bad request") })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::Permanent);
    assert_eq!(error.attempts(), 1);
    assert_eq!(error.last_error(), Some(&"bad request"));
}

#[tokio::test(start_paused = true)]
async fn h4_exhausted_retryable_value_is_returned_not_an_error() {
    let policy = base().build().unwrap();
    let by_status = |r: &Result<u16, ()>| match r {
        Ok(503) | Err(_) => Verdict::TRANSIENT,
        Ok(_) => Verdict::Success,
    };
    let calls = AtomicU32::new(0);
    let last = policy
        .execute_with(&by_status, |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Ok::<u16, ()>(503) }
        })
        .await;
    assert_eq!(last.ok(), Some(503));
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

#[tokio::test(start_paused = true)]
async fn b7_refusal_pauses_100ms_then_hints_the_floors_time_to_the_missing_token() {
    let options = BudgetOptions::default()
        .minimum_per_second(4.0)
        .capacity(1.0);
    let policy = base()
        .backoff(Backoff::none())
        .budget(RetryBudget::automatic().with_options(options))
        .build()
        .unwrap();
    let start = Instant::now();
    let (starts, error) = failing_call(&policy).await;
    // The banked token funds the first retry; the second is refused.
    assert_eq!(starts, vec![Duration::ZERO, Duration::ZERO]);
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100),
        "the rejection pause"
    );
    let rejected = error.rejection().expect("a budget refusal");
    // After the pause the floor (4/s) has accrued 0.4 of the token: 150 ms remain.
    assert_eq!(rejected.retry_after, Some(Duration::from_millis(150)));
}

#[tokio::test(start_paused = true)]
async fn b7_rejection_pause_never_passes_the_deadline() {
    let policy = base()
        .backoff(Backoff::none())
        .deadline(Some(Duration::from_millis(30)))
        .budget(successes_only(None))
        .build()
        .unwrap();
    let start = Instant::now();
    let _ = failing_call(&policy).await; // spends the one banked token
    let start2 = Instant::now();
    let (_, error) = failing_call(&policy).await;
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(start2.elapsed(), Duration::from_millis(30));
    assert!(start.elapsed() >= Duration::from_millis(30));
}

#[tokio::test(start_paused = true)]
async fn b7_zero_floor_gives_no_hint() {
    let policy = base()
        .backoff(Backoff::none())
        .budget(successes_only(None))
        .build()
        .unwrap();
    let (_, error) = failing_call(&policy).await;
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(error.rejection().unwrap().retry_after, None);
}

#[tokio::test(start_paused = true)]
async fn b5_first_attempt_runs_even_with_an_empty_bucket() {
    let policy = base().budget(successes_only(None)).build().unwrap();
    let now = Instant::now().into_std();
    let bucket = policy.bucket(now).unwrap();
    while bucket.try_withdraw(now, Criticality::Normal) {}
    for _ in 0..5 {
        let (starts, error) = failing_call(&policy).await;
        assert_eq!(starts.len(), 1, "the first attempt always runs");
        assert_eq!(error.reason(), StopReason::BudgetExhausted);
    }
    let value = policy.execute(|_| async { Ok::<_, ()>(7) }).await;
    assert_eq!(value.unwrap(), 7);
}

#[tokio::test(start_paused = true)]
async fn b1_successes_fund_retries_ten_to_one() {
    let policy = base()
        .backoff(Backoff::none())
        .max_attempts(2)
        .budget(successes_only(None))
        .build()
        .unwrap();
    let now = Instant::now().into_std();
    assert!(policy
        .bucket(now)
        .unwrap()
        .try_withdraw(now, Criticality::Normal));
    for _ in 0..10 {
        policy
            .execute(|_| async { Ok::<(), ()>(()) })
            .await
            .unwrap();
    }
    let (starts, _) = failing_call(&policy).await;
    assert_eq!(starts.len(), 2, "ten successes funded one retry");
    let (starts, error) = failing_call(&policy).await;
    assert_eq!(starts.len(), 1);
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
}

#[tokio::test(start_paused = true)]
async fn b9_sheddable_retries_are_refused_at_half_the_bucket() {
    let policy = base()
        .backoff(Backoff::none())
        .max_attempts(2)
        .criticality(Criticality::Sheddable)
        .budget(successes_only(Some(10.0)))
        .build()
        .unwrap();
    let mut retried = 0;
    for _ in 0..20 {
        let (starts, _) = failing_call(&policy).await;
        retried += starts.len() - 1;
    }
    assert_eq!(retried, 5, "10 tokens, half left behind");
    let now = Instant::now().into_std();
    assert_eq!(policy.bucket(now).unwrap().balance(now), 5.0);
}

#[tokio::test(start_paused = true)]
async fn b8_self_imposed_throttles_neither_spend_nor_deposit() {
    let policy = base()
        .backoff(Backoff::none())
        .max_attempts(4)
        .budget(successes_only(Some(2.0)))
        .build()
        .unwrap();
    let classify = |_: &Result<(), ()>| Verdict::SELF_IMPOSED;
    for _ in 0..10 {
        let error = policy
            .execute_with(&classify, |_| async { Err::<(), ()>(()) })
            .await
            .unwrap_err();
        assert_eq!(error.attempts(), 4, "every retry ran");
    }
    let now = Instant::now().into_std();
    assert_eq!(policy.bucket(now).unwrap().balance(now), 2.0);
}

#[tokio::test(start_paused = true)]
async fn e6_server_throttling_is_charged_to_the_budget() {
    let policy = base()
        .backoff(Backoff::none())
        .max_attempts(4)
        .budget(successes_only(Some(2.0)))
        .build()
        .unwrap();
    let classify = |_: &Result<(), ()>| Verdict::THROTTLED;
    let error = policy
        .execute_with(&classify, |_| async { Err::<(), ()>(()) })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(error.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn e5_ceiling_cuts_an_attempt_far_slower_than_recent_successes() {
    // E5 alone: how the ceiling learns from these cuts is E7's (tests/ceiling_learns.rs), and
    // how it stands aside for a dependency's queue is O1's (tests/overload.rs).
    let policy = RetryPolicy::builder()
        .backoff(Backoff::none())
        .attempt_ceiling(Some(AttemptCeiling::default().learn_from_cuts(false)))
        .overload_control(None)
        .build()
        .unwrap();
    for _ in 0..20 {
        policy
            .execute(|_| async {
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok::<(), ()>(())
            })
            .await
            .unwrap();
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    let start = Instant::now();
    let error = policy
        .execute(|attempt| async move {
            assert!(attempt.timeout().unwrap() < Duration::from_millis(130));
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<(), ()>(())
        })
        .await
        .unwrap_err();
    assert!(error.is_timeout());
    assert_eq!(error.attempts(), 3);
    // Each attempt was cut near 3 × p95 (≈ 120 ms), far below the 10 s attempt timeout.
    let elapsed = start.elapsed();
    assert!(
        elapsed > Duration::from_millis(330) && elapsed < Duration::from_millis(400),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn b10_clones_share_the_bucket_separate_builds_do_not() {
    let now = Instant::now().into_std();
    let a = RetryPolicy::builder().name("b10").build().unwrap();
    let b = a.clone();
    let c = RetryPolicy::builder().name("b10").build().unwrap();
    assert_eq!(a, c, "equal settings compare equal");
    assert!(Arc::ptr_eq(a.bucket(now).unwrap(), b.bucket(now).unwrap()));
    assert!(!Arc::ptr_eq(a.bucket(now).unwrap(), c.bucket(now).unwrap()));
    assert_eq!(a, c, "a warmed bucket does not change equality");
    let shared = RetryPolicy::builder()
        .budget(RetryBudget::shared("b10-executor"))
        .build()
        .unwrap();
    let shared2 = RetryPolicy::builder()
        .budget(RetryBudget::shared("b10-executor"))
        .build()
        .unwrap();
    assert!(Arc::ptr_eq(
        shared.bucket(now).unwrap(),
        shared2.bucket(now).unwrap()
    ));
    assert!(RetryPolicy::builder()
        .budget(RetryBudget::None)
        .build()
        .unwrap()
        .bucket(now)
        .is_none());
}

#[tokio::test]
async fn invalid_settings_are_rejected_at_build_with_a_reason() {
    let cases = [
        RetryPolicy::builder().max_attempts(0).build().unwrap_err(),
        RetryPolicy::builder()
            .deadline(Some(Duration::ZERO))
            .build()
            .unwrap_err(),
        RetryPolicy::builder()
            .backoff(Backoff::default().with_factor(0.5))
            .build()
            .unwrap_err(),
        RetryPolicy::builder()
            .budget(RetryBudget::automatic().with_options(BudgetOptions::default().fraction(0.0)))
            .build()
            .unwrap_err(),
        RetryPolicy::builder()
            .attempt_ceiling(Some(AttemptCeiling::default().quantile(2.0)))
            .build()
            .unwrap_err(),
    ];
    for error in cases {
        assert!(
            error.to_string().starts_with("invalid retry policy: "),
            "{error}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn n5_retrying_call_sets_in_process_context_and_restores_the_outer_one() {
    let policy = base().build().unwrap();
    nesting::scope(NestingSource::Header, async {
        policy
            .execute(|_| async {
                assert_eq!(nesting::current(), Some(NestingSource::InProcess));
                Ok::<(), ()>(())
            })
            .await
            .unwrap();
        assert_eq!(
            nesting::current(),
            Some(NestingSource::Header),
            "restored, not cleared"
        );
    })
    .await;
    let single = base().max_attempts(1).build().unwrap();
    single
        .execute(|_| async {
            assert_eq!(
                nesting::current(),
                None,
                "a single attempt is no retrying context"
            );
            Ok::<(), ()>(())
        })
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn n5_nested_retry_in_process_is_reported_once_before_the_first_attempt() {
    let capture = support::Capture::install();
    let outer = base().name("outer").build().unwrap();
    let inner = base().name("inner").build().unwrap();
    let inner_attempts = AtomicU32::new(0);
    let _ = outer
        .execute(|_| async {
            let _ = inner
                .execute(|_| {
                    // By the first attempt, the report already exists.
                    if inner_attempts.fetch_add(1, Ordering::Relaxed) == 0 {
                        assert_eq!(support::Capture::count_now("NestedRetry"), 1);
                    }
                    async { Err::<(), ()>(()) }
                })
                .await;
            Ok::<(), ()>(())
        })
        .await;
    let nested = capture.spans_named("NestedRetry");
    assert_eq!(nested.len(), 1, "{nested:?}");
    let span = &nested[0];
    assert_eq!(span.field("nresilience.source"), Some("in_process"));
    assert_eq!(span.field("nresilience.policy"), Some("inner"));
    assert_eq!(span.field("nresilience.attempts"), Some("3"));
    assert_eq!(
        span.field("nresilience.outcome"),
        Some("attempts_exhausted")
    );
    assert_eq!(
        inner_attempts.load(Ordering::Relaxed),
        3,
        "detection changed nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn n5_marked_request_reports_header_source_and_single_attempts_do_not_report() {
    let capture = support::Capture::install();
    let policy = base().name("under-header").build().unwrap();
    let single = base().name("single").max_attempts(1).build().unwrap();
    nesting::scope(NestingSource::Header, async {
        policy
            .execute(|_| async { Ok::<(), ()>(()) })
            .await
            .unwrap();
        single
            .execute(|_| async { Ok::<(), ()>(()) })
            .await
            .unwrap();
    })
    .await;
    policy
        .execute(|_| async { Ok::<(), ()>(()) })
        .await
        .unwrap();
    let nested = capture.spans_named("NestedRetry");
    assert_eq!(nested.len(), 1, "{nested:?}");
    assert_eq!(nested[0].field("nresilience.source"), Some("header"));
    assert_eq!(nested[0].field("nresilience.policy"), Some("under-header"));
    assert_eq!(nested[0].field("nresilience.outcome"), Some("succeeded"));
}

#[tokio::test(start_paused = true)]
async fn call_span_carries_outcome_and_attempts_and_retry_events() {
    let capture = support::Capture::install();
    let policy = base().name("traced").build().unwrap();
    let _ = failing_call(&policy).await;
    let calls = capture.spans_named("resilience");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].field("otel.name"), Some("resilience traced"));
    assert_eq!(calls[0].field("nresilience.attempts"), Some("3"));
    assert_eq!(
        calls[0].field("nresilience.outcome"),
        Some("attempts_exhausted")
    );
    assert_eq!(capture.events_named("nresilience.retrying").len(), 2);
    assert_eq!(capture.events_named("nresilience.attempt").len(), 3);
}

#[tokio::test(start_paused = true)]
async fn b8_limiter_refusals_are_self_imposed_and_cost_the_budget_nothing() {
    let now = Instant::now().into_std();
    let limiter = Arc::new(RateLimiter::new(1.0, 1, now).unwrap());
    // No curve, no cap: only the limiter's own pushback paces the retries.
    let policy = base()
        .backoff(Backoff::none().with_maximum_delay(None))
        .max_attempts(3)
        .rate_limiter(Arc::clone(&limiter))
        .budget(successes_only(Some(1.0)))
        .build()
        .unwrap();
    let ran = AtomicU32::new(0);
    let error = policy
        .execute(|_| {
            ran.fetch_add(1, Ordering::Relaxed);
            async { Err::<(), ()>(()) }
        })
        .await
        .unwrap_err();
    // The limiter's one permit ran the first attempt; the retry was refused by this process,
    // waited the limiter's time, and ran with the refilled permit.
    assert_eq!(ran.load(Ordering::Relaxed), 2);
    assert_eq!(error.attempts(), 3);
    let now = Instant::now().into_std();
    // Only the retry that reached the dependency spent the one token.
    assert_eq!(policy.bucket(now).unwrap().balance(now), 0.0);
}

/// The breaker counts attempts, not calls: with the default 3 attempts, two calls that fail
/// every attempt are six transient failures in a row, past the default 5, and open it.
#[tokio::test(start_paused = true)]
async fn b8_the_breaker_counts_each_attempt_so_two_failed_calls_of_three_attempts_open_it() {
    let start = Instant::now().into_std();
    let breaker = Arc::new(CircuitBreaker::new(BreakerOptions::default(), start).unwrap());
    let policy = base()
        .backoff(Backoff::none())
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    let error = policy
        .execute(|_| async { Err::<(), ()>(()) })
        .await
        .unwrap_err();
    assert_eq!(error.attempts(), 3);
    let now = Instant::now().into_std();
    assert_eq!(
        breaker.state(now),
        BreakerState::Closed,
        "three failures of five"
    );
    let _ = policy.execute(|_| async { Err::<(), ()>(()) }).await;
    let now = Instant::now().into_std();
    assert_eq!(
        breaker.state(now),
        BreakerState::Open,
        "the second call's second attempt"
    );
}

#[tokio::test(start_paused = true)]
async fn b8_half_open_breaker_recovers_through_the_executor_after_self_imposed_refusals() {
    let start = Instant::now().into_std();
    let breaker = Arc::new(
        CircuitBreaker::new(
            BreakerOptions::default()
                .consecutive_failures(Some(2))
                .probes_to_close(1),
            start,
        )
        .unwrap(),
    );
    // A limiter that is always empty after its single permit refuses every later probe.
    let limiter = Arc::new(RateLimiter::new(1e-6, 1, start).unwrap());
    assert!(limiter.try_acquire(start));
    let policy = base()
        .backoff(Backoff::none())
        .max_attempts(1)
        .budget(RetryBudget::None)
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    for _ in 0..2 {
        let _ = policy.execute(|_| async { Err::<(), ()>(()) }).await;
    }
    assert_eq!(breaker.state(Instant::now().into_std()), BreakerState::Open);
    tokio::time::advance(breaker.options().break_duration).await;

    let limited = base()
        .backoff(Backoff::none())
        .max_attempts(1)
        .budget(RetryBudget::None)
        .circuit_breaker(Arc::clone(&breaker))
        .rate_limiter(limiter)
        .build()
        .unwrap();
    for _ in 0..50 {
        let error = limited
            .execute(|_| async { Ok::<(), ()>(()) })
            .await
            .unwrap_err();
        assert!(matches!(error.last_attempt(), LastAttempt::Refused));
    }
    assert_eq!(
        breaker.state(Instant::now().into_std()),
        BreakerState::HalfOpen
    );
    // The refusals returned the probe slot each time: a real probe still gets through.
    policy
        .execute(|_| async { Ok::<(), ()>(()) })
        .await
        .unwrap();
    assert_eq!(
        breaker.state(Instant::now().into_std()),
        BreakerState::Closed
    );
}

#[tokio::test(start_paused = true)]
async fn b10_a_reloaded_policy_keeps_its_bucket_unless_the_budget_changes() {
    let now = Instant::now().into_std();
    let policy = base().name("reload").build().unwrap();
    let bucket = Arc::clone(policy.bucket(now).unwrap());
    assert!(bucket.try_withdraw(now, Criticality::Normal));
    let reloaded = policy.reconfigure().max_attempts(5).build().unwrap();
    assert!(Arc::ptr_eq(&bucket, reloaded.bucket(now).unwrap()));
    assert_eq!(reloaded.max_attempts(), 5);
    let rebudgeted = policy
        .reconfigure()
        .budget(RetryBudget::automatic().with_options(BudgetOptions::default().capacity(5.0)))
        .build()
        .unwrap();
    assert!(!Arc::ptr_eq(&bucket, rebudgeted.bucket(now).unwrap()));
}

#[tokio::test(start_paused = true)]
async fn k4_measured_base_comes_from_recent_successful_latency() {
    let policy = RetryPolicy::builder()
        .attempt_ceiling(None)
        .backoff(Backoff::measured(1.0).with_jitter(Jitter::None))
        .build()
        .unwrap();
    for _ in 0..20 {
        policy
            .execute(|_| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<(), ()>(())
            })
            .await
            .unwrap();
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    let (starts, _) = failing_call(&policy).await;
    // The first retry waits one normal call (300 ms, within the window's 4.4 % error),
    // not the configured 100 ms; the second doubles it.
    let first = starts[1].as_secs_f64();
    assert!((first - 0.3).abs() < 0.3 * 0.045, "{first}");
    let second = (starts[2] - starts[1]).as_secs_f64();
    assert!((second - 2.0 * first).abs() < 1e-6, "{second} vs {first}");
}
