//! The measured ceiling learns from the attempts it cuts (SPEC E7), on the paused clock: a
//! dependency that turns slower than the ceiling is met again within a few refreshes, the
//! ceiling at most triples per refresh, and the original library's ceiling never rises.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use nresilience_core::{AttemptCeiling, Backoff, RetryBudget, RetryPolicy};
use tokio::time::Instant;

/// A single-attempt policy with `ceiling` and `attempt_timeout`, after 20 successes of
/// 10 ms: its ceiling is the 50 ms floor.
async fn fitted_to_10ms(ceiling: AttemptCeiling, attempt_timeout: Duration) -> RetryPolicy {
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
            .execute(|_| async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok::<(), ()>(())
            })
            .await
            .unwrap();
    }
    policy
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
