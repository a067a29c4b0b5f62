//! The chain rules through the executor (SPEC C1–C4, C6, C7): an answer that says its hop
//! refused for overload, or retried already, ends the call at once with that answer; a
//! policy gives up with the request being served and may take its criticality from it; the
//! request learns how its calls ended.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nresilience_core::breaker::{BreakerOptions, BreakerState, CircuitBreaker};
use nresilience_core::call::{Call, CallOptions, Step};
use nresilience_core::chain::{self, Inbound};
use nresilience_core::{
    clock, Backoff, BudgetOptions, Criticality, LastAttempt, RetryBudget, RetryPolicy, StopReason,
    Verdict,
};

/// Runs a call whose every attempt answers `503` classified as `verdict`; returns the
/// answer and how many attempts ran.
async fn answered(policy: &RetryPolicy, verdict: Verdict) -> (Result<u16, StopReason>, u32) {
    let ran = AtomicU32::new(0);
    let classify = move |_: &Result<u16, ()>| verdict;
    let result = policy
        .execute_with(&classify, |_| {
            ran.fetch_add(1, Ordering::Relaxed);
            async { Ok::<u16, ()>(503) }
        })
        .await
        .map_err(|error| error.reason());
    (result, ran.into_inner())
}

#[tokio::test(start_paused = true)]
async fn c1_an_overloaded_answer_is_returned_after_one_attempt_spending_and_depositing_nothing() {
    let policy = RetryPolicy::builder()
        .backoff(Backoff::none())
        .build()
        .unwrap();
    let now = clock::now();
    let bucket = Arc::clone(policy.bucket(now).unwrap());
    // Half full, so that a deposit would show.
    while bucket.balance(now) > bucket.capacity() / 2.0 {
        assert!(bucket.try_withdraw(now, Criticality::Normal));
    }
    let before = bucket.balance(now);
    let (result, ran) = answered(&policy, Verdict::OVERLOADED).await;
    assert_eq!(result, Ok(503), "the answer, not an error");
    assert_eq!(ran, 1);
    assert_eq!(
        bucket.balance(now),
        before,
        "nothing spent, nothing deposited"
    );
}

#[tokio::test(start_paused = true)]
async fn c6_an_answer_retried_below_is_returned_after_one_attempt() {
    let policy = RetryPolicy::builder()
        .backoff(Backoff::none())
        .build()
        .unwrap();
    let (result, ran) = answered(&policy, Verdict::RetriedBelow).await;
    assert_eq!(result, Ok(503));
    assert_eq!(ran, 1);
}

#[tokio::test(start_paused = true)]
async fn c1_c6_overload_is_no_evidence_for_a_breaker_and_a_failure_below_is() {
    let options = BreakerOptions::default().consecutive_failures(Some(3));
    let breaker = Arc::new(CircuitBreaker::new(options, clock::now()).unwrap());
    let policy = RetryPolicy::builder()
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    for _ in 0..10 {
        let _ = answered(&policy, Verdict::OVERLOADED).await;
    }
    assert_eq!(breaker.state(clock::now()), BreakerState::Closed);
    for _ in 0..3 {
        let _ = answered(&policy, Verdict::RetriedBelow).await;
    }
    assert_eq!(breaker.state(clock::now()), BreakerState::Open);
}

#[test]
fn c1_c6_the_outcomes_are_named() {
    assert_eq!(StopReason::Overloaded.as_str(), "overloaded");
    assert_eq!(StopReason::RetriedBelow.as_str(), "retried_below");
    assert_eq!(Verdict::OVERLOADED.as_str(), "overloaded");
    assert!(!Verdict::OVERLOADED.is_retryable());
    assert!(!Verdict::RetriedBelow.is_retryable());
}

/// Retries a 10-token bucket funds for 20 failing calls of two attempts each, run while
/// serving a request that said `said`.
async fn retries_funded(policy: &RetryPolicy, said: Option<Criticality>) -> usize {
    let inbound = Inbound::new().criticality(said);
    let mut retried = 0;
    for _ in 0..20 {
        let ran = AtomicU32::new(0);
        let call = policy.execute(|_| {
            ran.fetch_add(1, Ordering::Relaxed);
            async { Err::<(), ()>(()) }
        });
        let _ = chain::serving(inbound, call).await;
        retried += ran.into_inner() as usize - 1;
    }
    retried
}

fn ten_token_policy(ambient: bool) -> RetryPolicy {
    let budget = RetryBudget::automatic().with_options(
        BudgetOptions::default()
            .minimum_per_second(0.0)
            .capacity(10.0),
    );
    RetryPolicy::builder()
        .backoff(Backoff::none())
        .attempt_ceiling(None)
        .max_attempts(2)
        .budget(budget)
        .ambient_criticality(ambient)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn c3_an_ambient_policy_takes_the_requests_criticality() {
    // Sheddable, as the request says: half the bucket is left behind (B9).
    assert_eq!(
        retries_funded(&ten_token_policy(true), Some(Criticality::Sheddable)).await,
        5
    );
    // The request says nothing: the policy's own, Normal.
    assert_eq!(retries_funded(&ten_token_policy(true), None).await, 10);
    // A policy that does not take it ignores what the request says.
    assert_eq!(
        retries_funded(&ten_token_policy(false), Some(Criticality::Sheddable)).await,
        10
    );
}

#[test]
fn c3_ambient_criticality_without_retries_or_a_budget_is_refused_at_build() {
    let single = RetryPolicy::builder()
        .max_attempts(1)
        .ambient_criticality(true)
        .build()
        .unwrap_err();
    assert!(single.reason().contains("ambient_criticality"), "{single}");
    let unbudgeted = RetryPolicy::builder()
        .budget(RetryBudget::None)
        .ambient_criticality(true)
        .build()
        .unwrap_err();
    assert!(unbudgeted.reason().contains("budget"), "{unbudgeted}");
}

#[tokio::test(start_paused = true)]
async fn c2_a_call_whose_caller_has_given_up_makes_no_attempt() {
    let policy = RetryPolicy::default();
    let gone = Inbound::new().deadline(Some(clock::now()));
    let ran = AtomicU32::new(0);
    let call = policy.execute(|_| {
        ran.fetch_add(1, Ordering::Relaxed);
        async { Ok::<(), ()>(()) }
    });
    let error = chain::serving(gone, call).await.unwrap_err();
    assert_eq!(error.reason(), StopReason::DeadlineExceeded);
    assert_eq!(error.attempts(), 0);
    assert!(matches!(error.last_attempt(), LastAttempt::TimedOut));
    assert_eq!(ran.into_inner(), 0);
}

/// How long a call whose one attempt takes a second runs while serving a request whose
/// caller waits 120 ms, under a policy that does or does not inherit that deadline.
async fn run_under_a_120ms_caller(inherit: bool) -> (Option<StopReason>, Duration) {
    let policy = RetryPolicy::builder()
        .attempt_ceiling(None)
        .inherit_deadline(inherit)
        .build()
        .unwrap();
    let start = clock::now();
    let said = Inbound::new().deadline(Some(start + Duration::from_millis(120)));
    let call = policy.execute(|_| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok::<(), ()>(())
    });
    let result = chain::serving(said, call).await;
    (
        result.err().map(|error| error.reason()),
        clock::now() - start,
    )
}

#[tokio::test(start_paused = true)]
async fn c2_a_call_gives_up_with_its_caller_and_cuts_its_attempt_there() {
    assert_eq!(
        run_under_a_120ms_caller(true).await,
        (
            Some(StopReason::DeadlineExceeded),
            Duration::from_millis(120)
        )
    );
    assert_eq!(
        run_under_a_120ms_caller(false).await,
        (None, Duration::from_secs(1)),
        "a policy that does not inherit keeps its own deadline only"
    );
}

#[test]
fn c4_a_call_dropped_to_one_attempt_multiplies_the_chain_by_one() {
    let policy = RetryPolicy::default();
    let below_two = Inbound::new().depth(1).attempts(4);
    let mut call: Call<()> = chain::serving_sync(below_two, || {
        Call::start(&policy, clock::now(), CallOptions::default())
    });
    assert_eq!(call.potential_attempts(), 12);
    assert_eq!(call.depth(), 2);
    call.single_attempt();
    assert_eq!(
        call.potential_attempts(),
        4,
        "its request proved unreplayable"
    );
    assert!(matches!(call.next::<()>(clock::now()), Step::Run(_)));
}

#[tokio::test(start_paused = true)]
async fn c7_an_overloaded_answer_teaches_the_request_its_hint() {
    let policy = RetryPolicy::default();
    let hint = Some(Duration::from_secs(7));
    let classify = move |_: &Result<u16, ()>| Verdict::Overloaded { retry_after: hint };
    let mut serving = std::pin::pin!(chain::learning(
        policy.execute_with(&classify, |_| async { Ok::<u16, ()>(503) })
    ));
    assert_eq!(serving.as_mut().await.ok(), Some(503));
    let learned = *serving.value();
    assert!(learned.overloaded());
    assert_eq!(learned.retry_after(), hint);
}
