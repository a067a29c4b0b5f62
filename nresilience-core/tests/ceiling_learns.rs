//! The measured ceiling learns from the attempts it cuts (SPEC E7), on the paused clock: a
//! dependency that turns slower than the ceiling is met again within a few refreshes, the
//! ceiling at most triples per refresh, the original library's ceiling never rises, and a hop
//! serving a caller's deadline learns from the cuts that deadline makes (C2, C8).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use nresilience_core::chain::{self, Inbound};
use nresilience_core::{clock, AttemptCeiling, Backoff, RetryBudget, RetryPolicy};
use tokio::time::Instant;

/// A single-attempt policy with `ceiling` and `attempt_timeout`, after 20 successes of
/// 10 ms: its ceiling is the 50 ms floor.
async fn fitted_to_10ms(ceiling: AttemptCeiling, attempt_timeout: Duration) -> RetryPolicy {
    fitted_to(Duration::from_millis(10), ceiling, attempt_timeout).await
}

/// A single-attempt policy with `ceiling` and `attempt_timeout`, after 20 successes of
/// `latency`.
async fn fitted_to(
    latency: Duration,
    ceiling: AttemptCeiling,
    attempt_timeout: Duration,
) -> RetryPolicy {
    let policy = RetryPolicy::builder()
        .max_attempts(1)
        .backoff(Backoff::none())
        .budget(RetryBudget::None)
        .deadline(None)
        .attempt_timeout(Some(attempt_timeout))
        .attempt_ceiling(Some(ceiling))
        .build()
        .unwrap();
    for _ in 0..20 {
        policy
            .execute(|_| async move {
                tokio::time::sleep(latency).await;
                Ok::<(), ()>(())
            })
            .await
            .unwrap();
    }
    policy
}

/// `calls` calls served under a caller who waits `waits`, each to a dependency that takes a
/// second, a call every 10 ms; then, after a refresh, the timeout of a call with no caller.
async fn ceiling_after_callers_waiting(
    policy: &RetryPolicy,
    waits: Duration,
    calls: u32,
) -> Duration {
    for _ in 0..calls {
        let caller = Inbound::new().deadline(Some(clock::now() + waits));
        let call = policy.execute(|_| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<(), ()>(())
        });
        let cut = chain::serving(caller, call).await;
        assert!(cut.is_err(), "cut at the caller's deadline");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    let mut timeout = Duration::ZERO;
    let _ = policy
        .execute(|attempt| {
            timeout = attempt.timeout().unwrap_or(Duration::MAX);
            async { Ok::<(), ()>(()) }
        })
        .await;
    timeout
}

/// Calls that take `latency` each, one after the other, for `run`: the timeout each
/// attempt was given, in order, and whether it completed.
async fn calls_taking(
    policy: &RetryPolicy,
    latency: Duration,
    run: Duration,
) -> Vec<(Duration, bool)> {
    let end = Instant::now() + run;
    let mut seen = Vec::new();
    while Instant::now() < end {
        let mut timeout = Duration::MAX;
        let result = policy
            .execute(|attempt| {
                timeout = attempt.timeout().unwrap_or(Duration::MAX);
                async move {
                    tokio::time::sleep(latency).await;
                    Ok::<(), ()>(())
                }
            })
            .await;
        seen.push((timeout, result.is_ok()));
        // Calls apart, so that refreshes pass between them.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

#[tokio::test(start_paused = true)]
async fn e7_a_dependency_slower_than_the_ceiling_is_met_again() {
    let policy = fitted_to_10ms(AttemptCeiling::default(), Duration::from_secs(10)).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    let seen = calls_taking(&policy, Duration::from_millis(300), Duration::from_secs(5)).await;
    assert_eq!(
        seen[0],
        (Duration::from_millis(50), false),
        "cut at the floor"
    );
    let first_success = seen
        .iter()
        .position(|&(_, ok)| ok)
        .expect("attempts complete again");
    assert!(first_success < 20, "within two seconds: {seen:?}");
    for pair in seen.windows(2) {
        assert!(
            pair[1].0 <= pair[0].0 * 3,
            "at most threefold per refresh: {seen:?}"
        );
    }
    assert!(seen[first_success..].iter().all(|&(_, ok)| ok), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn e7_the_original_ceiling_never_rises_to_a_slower_dependency() {
    let original = AttemptCeiling::default().learn_from_cuts(false);
    let policy = fitted_to_10ms(original, Duration::from_secs(10)).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    let seen = calls_taking(&policy, Duration::from_millis(300), Duration::from_secs(5)).await;
    assert!(
        seen.iter()
            .all(|&(timeout, ok)| timeout == Duration::from_millis(50) && !ok),
        "{seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn e7_the_learning_ceiling_never_loosens_the_attempt_timeout() {
    // The ceiling climbs past the 60 ms attempt timeout, which then cuts every attempt.
    let policy = fitted_to_10ms(AttemptCeiling::default(), Duration::from_millis(60)).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    let slow = calls_taking(&policy, Duration::from_secs(1), Duration::from_secs(5)).await;
    assert!(slow
        .iter()
        .all(|&(timeout, ok)| timeout <= Duration::from_millis(60) && !ok));
    assert_eq!(slow.last().unwrap().0, Duration::from_millis(60));
}

#[tokio::test(start_paused = true)]
async fn c8_e7_attempts_cut_at_the_callers_deadline_teach_the_ceiling() {
    // Fitted to 10 ms: a 50 ms ceiling. The caller waits 30 ms, less than the ceiling and more
    // than a typical attempt: every attempt is cut there, and each cut says the dependency
    // took at least 30 ms.
    let policy = fitted_to_10ms(AttemptCeiling::default(), Duration::from_secs(10)).await;
    let ceiling = ceiling_after_callers_waiting(&policy, Duration::from_millis(30), 40).await;
    assert!(
        ceiling > Duration::from_millis(50),
        "the caller's cuts raised the ceiling: {ceiling:?}"
    );
    let original = AttemptCeiling::default().learn_from_cuts(false);
    let policy = fitted_to_10ms(original, Duration::from_secs(10)).await;
    let ceiling = ceiling_after_callers_waiting(&policy, Duration::from_millis(30), 40).await;
    assert_eq!(ceiling, Duration::from_millis(50), "fed by successes only");
}

#[tokio::test(start_paused = true)]
async fn c8_e7_a_caller_waiting_less_than_a_typical_attempt_teaches_nothing() {
    // Fitted to 100 ms: a 300 ms ceiling. A caller that waits 50 ms cuts every attempt
    // sooner than a typical one takes: samples of 50 ms, were they kept, would outnumber the
    // 20 healthy ones and pull the ceiling down to 150 ms.
    let policy = fitted_to(
        Duration::from_millis(100),
        AttemptCeiling::default(),
        Duration::from_secs(10),
    )
    .await;
    let before = ceiling_after_callers_waiting(&policy, Duration::from_millis(50), 0).await;
    assert!(before > Duration::from_millis(250), "{before:?}");
    let after = ceiling_after_callers_waiting(&policy, Duration::from_millis(50), 400).await;
    assert_eq!(after, before);
}
