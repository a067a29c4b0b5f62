//! Retries per operation against a dependency that fails at random, with each library at
//! its defaults: nresilience (3 attempts, retry budget on), backon (`ExponentialBuilder`:
//! 3 retries, no budget) and tower's `Retry` with its `TpsBudget` defaults (10 s window,
//! 10/s floor, 20 %) and 3 attempts.
//!
//! Operations start one per virtual millisecond (1000/s, open loop) on a paused tokio clock,
//! so backoff delays cost no wall time; the figures are counts, not timings. tower's budget
//! reads the real clock internally, so its floor sees almost no time pass.
//!
//! Run: `cargo bench -p nresilience-core --bench storm`. Under `cargo test` (no `--bench`
//! argument) it runs 2,000 operations, as a smoke test.

#![allow(missing_docs)]

use std::future::Ready;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use nresilience_core::RetryPolicy;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tower::retry::budget::{Budget, TpsBudget};
use tower::{Service, ServiceExt};

const SEED: u64 = 42;

/// A dependency failing each attempt independently with probability `rate`.
#[derive(Clone)]
struct Flaky {
    rate: f64,
    rng: Arc<std::sync::Mutex<StdRng>>,
    attempts: Arc<AtomicU64>,
}

impl Flaky {
    fn new(rate: f64) -> Self {
        Self {
            rate,
            rng: Arc::new(std::sync::Mutex::new(StdRng::seed_from_u64(SEED))),
            attempts: Arc::new(AtomicU64::new(0)),
        }
    }

    fn attempt(&self) -> Result<(), ()> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        let fail = self.rng.lock().expect("rng").random_bool(self.rate);
        if fail {
            Err(())
        } else {
            Ok(())
        }
    }

    fn retries_per_operation(&self, operations: u64) -> f64 {
        (self.attempts.load(Ordering::Relaxed) - operations) as f64 / operations as f64
    }
}

impl Service<()> for Flaky {
    type Response = ();
    type Error = ();
    type Future = Ready<Result<(), ()>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), ()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, (): ()) -> Self::Future {
        std::future::ready(self.attempt())
    }
}

/// tower's retry with its budget, as its documentation builds it, capped at 3 attempts.
#[derive(Clone)]
struct TowerPolicy {
    budget: Arc<TpsBudget>,
    attempts_left: u32,
}

impl tower::retry::Policy<(), (), ()> for TowerPolicy {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut (), result: &mut Result<(), ()>) -> Option<Self::Future> {
        match result {
            Ok(()) => {
                self.budget.deposit();
                None
            }
            Err(()) if self.attempts_left > 1 && self.budget.withdraw() => {
                self.attempts_left -= 1;
                Some(std::future::ready(()))
            }
            Err(()) => None,
        }
    }

    fn clone_request(&mut self, _: &()) -> Option<()> {
        Some(())
    }
}

/// Starts one operation per virtual millisecond (open loop: a slow operation does not slow
/// the arrivals), then waits for them all.
async fn open_loop<F, Fut>(operations: u64, mut operation: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let mut running = tokio::task::JoinSet::new();
    for _ in 0..operations {
        running.spawn_local(operation());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while running.join_next().await.is_some() {}
}

async fn run(rate: f64, operations: u64) -> [f64; 3] {
    let ours = Flaky::new(rate);
    let policy = RetryPolicy::builder()
        .name("storm")
        .jitter_seed(SEED)
        .build()
        .expect("valid policy");
    open_loop(operations, || {
        let (policy, ours) = (policy.clone(), ours.clone());
        async move {
            let _ = policy.execute(|_| std::future::ready(ours.attempt())).await;
        }
    })
    .await;

    let backon = Flaky::new(rate);
    open_loop(operations, || {
        let backon = backon.clone();
        async move {
            let _ = (|| std::future::ready(backon.attempt()))
                .retry(ExponentialBuilder::default())
                .await;
        }
    })
    .await;

    let tower = Flaky::new(rate);
    let budget = Arc::new(TpsBudget::default());
    open_loop(operations, || {
        let policy = TowerPolicy {
            budget: Arc::clone(&budget),
            attempts_left: 3,
        };
        let service = tower::retry::Retry::new(policy, tower.clone());
        async move {
            let _ = service.oneshot(()).await;
        }
    })
    .await;

    [
        ours.retries_per_operation(operations),
        backon.retries_per_operation(operations),
        tower.retries_per_operation(operations),
    ]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    let operations = if std::env::args().any(|arg| arg == "--bench") {
        100_000
    } else {
        2_000
    };
    println!("retries per operation, {operations} operations at 1000/s (virtual), seed {SEED}");
    println!("| dependency fails | nresilience | backon | tower retry + TpsBudget |");
    println!("|---|---|---|---|");
    for (label, rate) in [("1 in 4", 0.25), ("1 in 2", 0.5)] {
        let local = tokio::task::LocalSet::new();
        let [ours, backon, tower] = local.block_on(&runtime, run(rate, operations));
        println!("| {label} | {ours:.3} | {backon:.3} | {tower:.3} |");
    }
}
