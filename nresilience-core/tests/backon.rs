//! nresilience's curves and budget in backon's retry loop (K1, K3, B1, B5): the curve's
//! delays are backon's `Backoff`, and the budget pays for each retry through `.when(..)`.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::Retryable;
use nresilience_core::{
    clock, Backoff, BudgetOptions, Criticality, Jitter, RetryKind, TokenBucket,
};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn k1_k3_the_curves_delays_drive_backons_retries() {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let delays = Backoff::default()
        .with_jitter(Jitter::None)
        .delays(RetryKind::Transient);
    let result = (|| async {
        calls.fetch_add(1, Ordering::Relaxed);
        Err::<(), _>("reset")
    })
    .retry(delays.take(3))
    .sleep(tokio::time::sleep)
    .await;
    assert_eq!(result, Err("reset"));
    assert_eq!(
        calls.load(Ordering::Relaxed),
        4,
        "the first attempt and three retries"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(100 + 200 + 400));
}

/// A call that always fails, through backon with nresilience's curve and the recipe: a token
/// withdrawn before each retry (the deposit after a success is the caller's).
async fn failing_call(bucket: &TokenBucket, calls: &AtomicU32) -> Result<(), &'static str> {
    (|| async {
        calls.fetch_add(1, Ordering::Relaxed);
        Err::<(), _>("reset")
    })
    .retry(Backoff::default().delays(RetryKind::Transient).take(10))
    .sleep(tokio::time::sleep)
    .when(|_| bucket.try_withdraw(clock::now(), Criticality::Normal))
    .await
}

#[tokio::test(start_paused = true)]
async fn b1_b5_backon_with_the_budget_retries_only_what_the_budget_pays_for() {
    // Two tokens and no floor: two retries, whatever backon's curve would allow.
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(2.0);
    let bucket = TokenBucket::new(options, clock::now()).unwrap();
    let calls = AtomicU32::new(0);

    assert!(failing_call(&bucket, &calls).await.is_err());
    assert_eq!(calls.load(Ordering::Relaxed), 3, "two retries, paid for");

    assert!(failing_call(&bucket, &calls).await.is_err());
    assert_eq!(
        calls.load(Ordering::Relaxed),
        4,
        "the empty bucket refuses: one attempt"
    );

    // Ten successes fund one more retry: the caller deposits after each.
    for _ in 0..10 {
        let served = (|| async { Ok::<(), &str>(()) })
            .retry(Backoff::default().delays(RetryKind::Transient).take(10))
            .sleep(tokio::time::sleep)
            .await;
        if served.is_ok() {
            bucket.deposit(clock::now());
        }
    }
    let _ = failing_call(&bucket, &calls).await;
    assert_eq!(
        calls.load(Ordering::Relaxed),
        6,
        "one retry, funded by the successes"
    );
}
