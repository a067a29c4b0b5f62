//! Refusals through the executor under a paused clock: the token of a retry never sent or
//! refused a connection (SPEC B13), the open breaker (G1), what counts against the breaker
//! (G2), and when a refusal is announced (B7).

#![allow(clippy::unwrap_used)]

mod support;

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nresilience_core::breaker::{BreakerOptions, BreakerState, CircuitBreaker};
use nresilience_core::{
    clock, Backoff, BudgetOptions, Jitter, RejectReason, RetryBudget, RetryError, RetryPolicy,
    RetryPolicyBuilder, StopReason, Verdict,
};
use tokio::time::Instant;

fn base() -> RetryPolicyBuilder {
    RetryPolicy::builder()
        .backoff(Backoff::default().with_jitter(Jitter::None))
        .attempt_ceiling(None)
}

/// A breaker that opens on `failures` consecutive transient failures, with the original
/// library's 15 s break.
fn breaker(failures: u32) -> Arc<CircuitBreaker> {
    let options = BreakerOptions::default().consecutive_failures(Some(failures));
    Arc::new(CircuitBreaker::new(options, clock::now()).unwrap())
}

/// Runs a call whose attempts all fail with `verdict`, counting the attempts that ran.
async fn failing(policy: &RetryPolicy, verdict: Verdict) -> (u32, RetryError<()>) {
    let ran = AtomicU32::new(0);
    let classify = move |_: &Result<(), ()>| verdict;
    let error = policy
        .execute_with(&classify, |_| {
            ran.fetch_add(1, Ordering::Relaxed);
            async { Err::<(), ()>(()) }
        })
        .await
        .unwrap_err();
    (ran.into_inner(), error)
}

/// Polls `call` until `after` has passed on the virtual clock, then drops it unfinished.
async fn give_up_after<F: Future>(after: Duration, call: F) {
    assert!(
        tokio::time::timeout(after, call).await.is_err(),
        "the call was still running when its caller gave up"
    );
}

/// A budget only successes refill: its balance moves only when a call spends or returns.
fn successes_only() -> RetryBudget {
    RetryBudget::automatic().with_options(BudgetOptions::default().minimum_per_second(0.0))
}

fn balance(policy: &RetryPolicy) -> f64 {
    let now = clock::now();
    policy.bucket(now).unwrap().balance(now)
}

#[tokio::test(start_paused = true)]
async fn b13_pushback_past_the_deadline_spends_no_token() {
    let policy = base().max_attempts(4).build().unwrap();
    let full = balance(&policy);
    let far = Verdict::Throttled {
        self_imposed: false,
        retry_after: Some(Duration::from_secs(99_999_999_999)),
    };
    // More calls than the bucket holds tokens: each would have drained one.
    for _ in 0..100 {
        let (ran, error) = failing(&policy, far).await;
        assert_eq!(ran, 1);
        assert_eq!(error.reason(), StopReason::DeadlineExceeded);
    }
    assert_eq!(
        balance(&policy),
        full,
        "no retry went out, none was paid for"
    );
    let (ran, error) = failing(&policy, Verdict::TRANSIENT).await;
    assert_eq!(ran, 4, "a genuine retry is still funded");
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
}

#[tokio::test(start_paused = true)]
async fn b13_a_call_dropped_during_its_backoff_returns_its_token() {
    let policy = base()
        .backoff(Backoff::constant(Duration::from_secs(1)).with_jitter(Jitter::None))
        .budget(successes_only())
        .build()
        .unwrap();
    let full = balance(&policy);
    let mut call = Box::pin(failing(&policy, Verdict::TRANSIENT));
    // Half way through the first retry's backoff, its token is held.
    assert!(tokio::time::timeout(Duration::from_millis(500), &mut call)
        .await
        .is_err());
    assert_eq!(balance(&policy), full - 1.0);
    drop(call);
    assert_eq!(balance(&policy), full);
}

#[tokio::test(start_paused = true)]
async fn b13_a_retry_the_breaker_refuses_returns_its_token() {
    let policy = base().circuit_breaker(breaker(1)).build().unwrap();
    let full = balance(&policy);
    let (ran, error) = failing(&policy, Verdict::TRANSIENT).await;
    assert_eq!(ran, 1, "the failure opened the breaker before the retry");
    assert_eq!(error.reason(), StopReason::BreakerOpen);
    assert_eq!(balance(&policy), full);
}

#[tokio::test(start_paused = true)]
async fn b13_a_retry_refused_a_connection_returns_its_token() {
    // One token, refilled by successes only: a call's first paid retry would empty it.
    let policy = base()
        .max_attempts(4)
        .budget(successes_only())
        .build()
        .unwrap();
    let full = balance(&policy);
    for _ in 0..20 {
        let (ran, error) = failing(&policy, Verdict::Unreachable).await;
        assert_eq!(
            ran, 4,
            "the dependency saw none of the retries: each was funded again"
        );
        assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    }
    assert_eq!(balance(&policy), full, "nothing reached the dependency");
    let (ran, error) = failing(&policy, Verdict::TRANSIENT).await;
    assert_eq!(
        ran, 2,
        "a retry the dependency saw is paid for, and the next refused"
    );
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(balance(&policy), full - 1.0);
    // Empty now: a first attempt refused a connection was paid by nothing, and gives nothing.
    let (ran, error) = failing(&policy, Verdict::Unreachable).await;
    assert_eq!(ran, 1);
    assert_eq!(error.reason(), StopReason::BudgetExhausted);
    assert_eq!(balance(&policy), full - 1.0);
}

#[tokio::test(start_paused = true)]
async fn g1_an_open_breaker_refuses_after_the_pause_with_the_rest_of_the_break() {
    let breaker = breaker(1);
    let policy = base()
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    let single = base()
        .max_attempts(1)
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    let _ = failing(&single, Verdict::TRANSIENT).await;
    assert_eq!(breaker.state(clock::now()), BreakerState::Open);

    for policy in [&policy, &single] {
        let start = Instant::now();
        let (ran, error) = failing(policy, Verdict::TRANSIENT).await;
        assert_eq!(ran, 0, "nothing goes out while the breaker is open");
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(100),
            "the pause only"
        );
        assert_eq!(error.reason(), StopReason::BreakerOpen);
        assert_eq!(error.attempts(), 0);
        let rejected = error.rejection().unwrap();
        assert_eq!(rejected.reason, RejectReason::BreakerOpen);
        assert_eq!(
            rejected.retry_after,
            breaker.retry_after(clock::now()),
            "the hint is the rest of the break, read after the pause"
        );
    }
    assert!(breaker.retry_after(clock::now()).unwrap() < Duration::from_secs(15));
}

#[tokio::test(start_paused = true)]
async fn g1_a_break_longer_than_the_deadline_is_a_refusal_not_a_deadline() {
    let breaker = breaker(1);
    let policy = base()
        .deadline(Some(Duration::from_secs(2)))
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    let (_, opened) = failing(&policy, Verdict::TRANSIENT).await;
    assert_eq!(opened.reason(), StopReason::BreakerOpen);
    let start = Instant::now();
    let (ran, error) = failing(&policy, Verdict::TRANSIENT).await;
    assert_eq!(ran, 0);
    assert_eq!(error.reason(), StopReason::BreakerOpen);
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn g2_throttles_do_not_open_a_breaker_that_transient_failures_do() {
    let breaker = breaker(5);
    let policy = base()
        .max_attempts(1)
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    for verdict in [Verdict::THROTTLED, Verdict::Permanent] {
        for _ in 0..10 {
            let (ran, _) = failing(&policy, verdict).await;
            assert_eq!(ran, 1);
        }
        assert_eq!(breaker.state(clock::now()), BreakerState::Closed);
    }
    for _ in 0..5 {
        let _ = failing(&policy, Verdict::TRANSIENT).await;
    }
    assert_eq!(breaker.state(clock::now()), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn b7_a_refusal_is_announced_when_decided_not_after_the_pause() {
    let capture = support::Capture::install();
    let policy = base()
        .backoff(Backoff::none())
        .budget(successes_only())
        .build()
        .unwrap();
    let _ = failing(&policy, Verdict::TRANSIENT).await; // spends the banked token
    give_up_after(
        Duration::from_millis(50),
        failing(&policy, Verdict::TRANSIENT),
    )
    .await;
    let refused = capture.events_named("nresilience.budget_exhausted");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[1].field("pause_ms"), Some("100"));

    let breaker = breaker(1);
    let guarded = base()
        .max_attempts(1)
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    let _ = failing(&guarded, Verdict::TRANSIENT).await;
    give_up_after(
        Duration::from_millis(50),
        failing(&guarded, Verdict::TRANSIENT),
    )
    .await;
    assert_eq!(capture.events_named("nresilience.breaker_open").len(), 1);
}
