//! Every optional setting of a policy, each turned on: a circuit breaker, a rate limiter,
//! hedging, overload control, a shared budget, the caller's criticality. The defaults are
//! the README's table. Run: `cargo run -p nresilience-core --example settings`.

use std::sync::Arc;
use std::time::Duration;

use nresilience_core::breaker::{BreakerOptions, CircuitBreaker};
use nresilience_core::limiter::RateLimiter;
use nresilience_core::overload::OverloadControl;
use nresilience_core::{clock, Backoff, BudgetOptions, Hedge, Jitter, RetryBudget, RetryPolicy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let now = clock::now();
    // Shared by every policy that should see the same dependency as one: breakers and
    // limiters are per process, not per policy.
    let breaker = Arc::new(CircuitBreaker::new(BreakerOptions::new(), now)?);
    let limiter = Arc::new(RateLimiter::new(200.0, 20, now)?);

    let policy = RetryPolicy::builder()
        .name("inventory")
        .max_attempts(4)
        .deadline(Some(Duration::from_secs(2)))
        .attempt_timeout(Some(Duration::from_millis(500)))
        .backoff(Backoff::exponential().with_jitter(Jitter::Equal))
        // One bucket for every policy named so, in this process.
        .budget(RetryBudget::shared("inventory").with_options(BudgetOptions::new().fraction(0.2)))
        .circuit_breaker(breaker)
        .rate_limiter(limiter)
        // A second attempt beside a first one slower than 95 % of recent ones.
        .hedge(Some(Hedge::at_quantile(0.95)))
        .overload_control(Some(OverloadControl::new()))
        // Take the criticality the request being served says (C3).
        .ambient_criticality(true)
        .build()?;

    assert_eq!(policy.max_attempts(), 4);
    assert!(policy.circuit_breaker().is_some() && policy.rate_limiter().is_some());
    assert!(policy.hedge().is_some() && policy.overload_control().is_some());
    println!("{policy:?}");
    Ok(())
}
