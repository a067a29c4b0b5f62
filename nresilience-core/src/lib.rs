//! The building blocks of nresilience: the retry budget, backoff curves, the retry
//! executor and the nested-retry context.
//!
//! Nothing here knows about HTTP; `nresilience-axum` and `nresilience-client` put these
//! pieces on the wire, through `nresilience-wire`.
//!
//! # Who each part is for
//!
//! - **A service that retries**: the crate root — [`RetryPolicy`] and its builder,
//!   [`RetryBudget`] and [`BudgetOptions`], [`Backoff`] and [`Jitter`], [`Hedge`],
//!   [`AttemptCeiling`], [`Criticality`], [`Verdict`] and [`Classify`] for its own
//!   classifier, and what a failed call returns ([`RetryError`], [`StopReason`]); the
//!   guards in [`breaker`] and [`limiter`]; [`overload::OverloadControl`] to tune or turn off
//!   overload control; the metric and attribute names in [`telemetry`].
//! - **A driver author** (a client middleware of another HTTP or RPC stack): [`call`], the
//!   decision machine a driver steps, with [`Flights`](call::Flights) and
//!   [`Timer`](call::Timer); [`chain`] and [`nesting`], the context a server layer sets and a
//!   call reads; [`scope`] and [`clock`], what both are built on.
//!
//! The load tracker and the latency window are the executor's own: crate-private, reached by
//! the workspace's allocation and contention tests through a `test-support` feature that is
//! not part of the API.
//!
//! # Example
//!
//! ```
//! use nresilience_core::{RetryPolicy, StopReason};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let policy = RetryPolicy::default(); // 3 attempts, budget on, default backoff
//! let error = policy
//!     .execute(|attempt| async move { Err::<(), _>(format!("attempt {} failed", attempt.number())) })
//!     .await
//!     .unwrap_err();
//! assert_eq!(error.reason(), StopReason::AttemptsExhausted);
//! assert_eq!(error.last_error().map(String::as_str), Some("attempt 3 failed"));
//! # }
//! ```
//!
//! The ids in parentheses (B1, C2, O5 …) name the rules of the repository's
//! [docs/rules.md](https://github.com/nresilience/nresilience-rs/blob/main/docs/rules.md),
//! each given there in full; the text beside an id says the rule in brief.
#![forbid(unsafe_code)]

pub mod backoff;
pub mod budget;
pub mod chain;
pub mod clock;
mod criticality;
mod executor;
pub mod fleet;
mod guards;
mod keyed;
pub mod nesting;
mod outcome;
pub mod overload;
pub mod scope;
pub mod telemetry;
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub mod test_support;
mod verdict;

pub use backoff::{
    Backoff, BackoffKind, Delays, InvalidBackoff, Jitter, MeasuredBase, NextAttempt, RetryKind,
};
pub use budget::{BudgetOptions, InvalidBudget, RetryBudget, TokenBucket};
pub use criticality::Criticality;
pub use executor::call::{self, Attempt};
pub use executor::error::{CallRejected, InvalidPolicy, LastAttempt, RetryError};
pub use executor::execute::Execute;
pub use executor::hedge::Hedge;
pub use executor::latency::ceiling::AttemptCeiling;
pub use executor::policy::{RetryPolicy, RetryPolicyBuilder};
pub use guards::{breaker, limiter};
pub use outcome::{RejectReason, StopReason};
pub use verdict::{Classify, DefaultClassifier, Verdict};
