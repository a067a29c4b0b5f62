//! A call retried under a policy whose retry budget runs dry: a dependency that fails twice
//! and then answers, then one that keeps failing, then ten successes that fund one more retry.
//! Runs in a fraction of a second and touches no network.
//!
//! ```text
//! cargo run -p nresilience-core --example retry_budget
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nresilience_core::{clock, Backoff, BudgetOptions, RetryBudget, RetryError, RetryPolicy};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Two tokens to start with; only successes refill the bucket (0.1 token each, no floor),
    // so what the budget allows is easy to follow.
    let options = BudgetOptions::new().minimum_per_second(0.0).capacity(2.0);
    let policy = RetryPolicy::builder()
        .name("example")
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(20)))
        .budget(RetryBudget::automatic().with_options(options))
        .rejection_pause(Duration::from_millis(10))
        .build()?;
    println!(
        "policy: {} attempts in all, budget of {} tokens",
        policy.max_attempts(),
        balance(&policy)
    );

    println!("\n1. a dependency that fails twice, then answers");
    let failures = AtomicU32::new(0);
    let result = policy
        .execute(|attempt| {
            let failed = failures.fetch_add(1, Ordering::Relaxed);
            async move {
                if failed < 2 {
                    println!("   attempt {}: failed", attempt.number());
                    Err("connection reset")
                } else {
                    println!("   attempt {}: answered", attempt.number());
                    Ok("order 7")
                }
            }
        })
        .await;
    report(&result, &policy);

    println!("\n2. a dependency that keeps failing");
    let result = policy.execute(always_failing).await;
    report(&result, &policy);

    println!("\n3. ten successful calls, then the failing dependency again");
    for _ in 0..10 {
        let _ = policy.execute(|_| async { Ok::<_, &str>("ok") }).await;
    }
    println!("   after ten successes: {:.1} tokens", balance(&policy));
    let result = policy.execute(always_failing).await;
    report(&result, &policy);
    Ok(())
}

async fn always_failing(attempt: nresilience_core::Attempt) -> Result<&'static str, &'static str> {
    println!("   attempt {}: failed", attempt.number());
    Err("503 Service Unavailable")
}

fn report(result: &Result<&str, RetryError<&str>>, policy: &RetryPolicy) {
    match result {
        Ok(value) => println!("   => {value}"),
        Err(error) => {
            println!(
                "   => stopped after {} attempt(s): {} (last error: {:?})",
                error.attempts(),
                error.reason(),
                error.last_error()
            );
            if let Some(rejected) = error.rejection() {
                println!("      refusal: {rejected}");
            }
        }
    }
    println!("   budget left: {:.1} tokens", balance(policy));
}

/// The tokens in the policy's bucket now; zero when the budget is off.
fn balance(policy: &RetryPolicy) -> f64 {
    let now = clock::now();
    policy.bucket(now).map_or(0.0, |bucket| bucket.balance(now))
}
