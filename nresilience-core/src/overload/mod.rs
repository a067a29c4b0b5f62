//! Overload control: serve what the dependency's capacity allows (O1, O2).
//!
//! Budgets bound the retries a fault sets off; nothing in them bounds the queue in front of
//! a slowed dependency. Once that queue holds more than the dependency can serve within its
//! callers' patience, it serves work whose callers have already left, and every caller
//! fails, though the dependency still works at its full (reduced) rate. A policy with
//! [`OverloadControl`] keeps, per dependency, a [`LoadTracker`]:
//!
//! - **O1, send nothing nobody will wait for.** The attempts the dependency holds — those in
//!   flight, and those abandoned by their callers that it is still working on — over the rate
//!   at which it finished attempts over the last window is the wait of the next one. When the
//!   latency shows a queue and that wait is longer than the time the call has left (its own
//!   deadline, or its caller's, C2), the attempt is not sent.
//! - **O2, an adaptive concurrency limit.** The attempts held may not exceed a limit that
//!   grows while latency stays near its no-load value and shrinks as it climbs or attempts
//!   are cut; never below a floor, so the dependency's recovery is seen.
//!
//! A refused attempt ends its call at once with `StopReason::Saturated`: a self-imposed
//! refusal (B8) that spends no budget, deposits nothing and carries the expected wait as its
//! hint. A hop serving a request answers it with the overload signal (C1), so the hops above
//! fail fast too. With nothing held, nothing is refused.

mod keyed;
mod limit;
mod options;
mod tracker;
mod window;

#[cfg(test)]
mod tests;

pub use keyed::KeyedTrackers;
pub use options::{InvalidOverload, LimitAlgorithm, OverloadControl};
pub use tracker::{Admission, Answer, LoadTracker, Saturated, SaturatedBy, Ticket};
