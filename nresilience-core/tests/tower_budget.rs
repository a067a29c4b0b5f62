//! tower's own `Retry` middleware spending nresilience's retry budget through tower's `Budget`
//! trait (feature `tower`; SPEC B1, B2): the bucket's tokens bound the retries, and a success
//! funds the next one.

#![allow(clippy::unwrap_used)]

use std::future::{ready, Ready};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use nresilience_core::{clock, BudgetOptions, TokenBucket};
use tower::retry::budget::Budget;
use tower::retry::{Policy, Retry};
use tower::{service_fn, ServiceExt};

/// Retries every error while the budget pays for it; deposits on success, as tower's
/// documentation has a policy do with its `TpsBudget`.
#[derive(Clone)]
struct Budgeted(Arc<TokenBucket>);

impl Policy<(), (), ()> for Budgeted {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut (), result: &mut Result<(), ()>) -> Option<Self::Future> {
        match result {
            // Through the trait: the bucket's own `deposit` takes the time.
            Ok(()) => {
                Budget::deposit(&*self.0);
                None
            }
            Err(()) => Budget::withdraw(&*self.0).then(|| ready(())),
        }
    }

    fn clone_request(&mut self, _: &()) -> Option<()> {
        Some(())
    }
}

#[tokio::test(start_paused = true)]
async fn b1_b2_towers_retry_spends_the_bucket_and_stops_when_it_refuses() {
    // Two tokens, no floor: two retries in all until successes fund more.
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(2.0);
    let bucket = Arc::new(TokenBucket::new(options, clock::now()).unwrap());
    let calls = Arc::new(AtomicU32::new(0));
    let failing = {
        let calls = Arc::clone(&calls);
        service_fn(move |()| {
            calls.fetch_add(1, Ordering::Relaxed);
            ready(Err::<(), ()>(()))
        })
    };
    let retry = Retry::new(Budgeted(Arc::clone(&bucket)), failing);

    assert!(retry.clone().oneshot(()).await.is_err());
    assert_eq!(
        calls.load(Ordering::Relaxed),
        3,
        "the first attempt and two retries"
    );
    assert!(retry.clone().oneshot(()).await.is_err());
    assert_eq!(
        calls.load(Ordering::Relaxed),
        4,
        "the budget refuses: one attempt"
    );

    // Ten successes fund one retry (a tenth of a token each).
    let succeeding = Retry::new(
        Budgeted(Arc::clone(&bucket)),
        service_fn(|()| ready(Ok::<(), ()>(()))),
    );
    for _ in 0..10 {
        succeeding.clone().oneshot(()).await.unwrap();
    }
    assert!(retry.oneshot(()).await.is_err());
    assert_eq!(
        calls.load(Ordering::Relaxed),
        6,
        "one retry, funded by the successes"
    );
}
