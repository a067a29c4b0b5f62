//! A fleet of clients bounded as one client is: the dependency, which sees every caller's
//! attempts, counts the share of them that are retries and advises its callers how much of
//! their own budgets to use (F1–F3).
//!
//! A retry budget of 10 % of a client's successes bounds that client; its floor (3 retries a
//! second whatever the traffic) does not compose, so many small clients of one dependency add
//! their floors up. The service counts, with [`RetryShare`], the first attempts and the
//! retries reaching it (each attempt says which it is on the wire), and tells its callers the
//! share it sees against the share it accepts, with an [`Allowance`]; a client follows it
//! with [`TokenBucket::follow`](crate::TokenBucket::follow), the floor first. A dependency that
//! says nothing leaves every budget as it is. Over its capacity, the service's own
//! [`ServerAdmission`] refuses retries before first attempts (F4).
//!
//! ```
//! use std::time::Instant;
//! use nresilience_core::fleet::RetryShare;
//! use nresilience_core::{BudgetOptions, TokenBucket};
//!
//! let start = Instant::now();
//! let service = RetryShare::new(0.1, start).expect("a share between 0 and 1");
//! let client = TokenBucket::new(BudgetOptions::default(), start)?;
//! for _ in 0..200 {
//!     service.record(true, start); // a retry for every first attempt: ten times the share
//!     service.record(false, start);
//! }
//! let advice = service.advice(start);
//! assert_eq!(advice.retries(), 1.0);
//! client.follow(advice.allowance(), start);
//! // The floor goes first: a tenth of it left, the fraction whole.
//! assert!((client.allowance(start).floor_share() - 0.1).abs() < 1e-6);
//! assert_eq!(client.allowance(start).fraction_share(), 1.0);
//! # Ok::<(), nresilience_core::InvalidBudget>(())
//! ```

mod admission;
#[cfg(test)]
mod admission_tests;
pub(crate) mod allowance;
mod share;
#[cfg(test)]
mod tests;

pub use admission::{Admitted, Refusal, Refused, ServerAdmission};
pub use allowance::Allowance;
pub use share::{Advice, RetryShare, DEFAULT_ACCEPTED};
