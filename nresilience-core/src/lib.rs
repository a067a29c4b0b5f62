//! The pure building blocks of nresilience: the retry budget, backoff curves and the
//! nested-retry context.
//!
//! Nothing here knows about HTTP; `nresilience-axum` and `nresilience-client` put these
//! pieces on the wire.
#![forbid(unsafe_code)]

pub mod backoff;
pub mod budget;
mod criticality;
pub mod latency;
pub mod nesting;

pub use backoff::{
    Backoff, BackoffKind, InvalidBackoff, Jitter, MeasuredBase, NextAttempt, RetryKind,
};
pub use budget::{BudgetOptions, InvalidBudget, RetryBudget, TokenBucket};
pub use criticality::Criticality;
