//! The building blocks of nresilience: the retry budget, backoff curves, the retry
//! executor and the nested-retry context.
//!
//! Nothing here knows about HTTP; `nresilience-axum` and `nresilience-client` put these
//! pieces on the wire.
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
#![forbid(unsafe_code)]

pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod call;
mod ceiling;
mod criticality;
mod error;
mod execute;
pub mod latency;
pub mod limiter;
pub mod nesting;
mod policy;
#[cfg(feature = "simulate")]
pub mod simulate;
pub mod telemetry;
mod verdict;

pub use backoff::{
    Backoff, BackoffKind, InvalidBackoff, Jitter, MeasuredBase, NextAttempt, RetryKind,
};
pub use budget::{BudgetOptions, InvalidBudget, RetryBudget, TokenBucket};
pub use ceiling::AttemptCeiling;
pub use criticality::Criticality;
pub use error::{CallRejected, InvalidPolicy, LastAttempt, RejectReason, RetryError, StopReason};
pub use execute::{Attempt, Report};
pub use policy::{RetryPolicy, RetryPolicyBuilder};
pub use verdict::{Classify, DefaultClassifier, Verdict};
