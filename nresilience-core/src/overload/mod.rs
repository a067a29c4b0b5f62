//! Overload control: serve what the dependency's capacity allows (O1–O7). On by default
//! (O3).
//!
//! Budgets bound the retries a fault sets off; nothing in them bounds the queue in front of
//! a slowed dependency. Once that queue holds more than the dependency can serve within its
//! callers' patience, it serves work whose callers have already left, and every caller
//! fails, though the dependency still works at its full (reduced) rate. A policy with
//! [`OverloadControl`] keeps, per dependency, a load tracker (`tracker.rs`):
//!
//! - **O1, send nothing nobody will wait for.** The attempts the dependency holds — those in
//!   flight, and those abandoned by their callers that it is still working on — over the rate
//!   at which it finished attempts over the last window is the wait of the next one. When that
//!   wait is longer than the time the call has left (its own deadline, or its caller's, C2),
//!   the attempt is not sent.
//! - **O2, O5, a concurrency limit that binds on accumulation.** Unbound until, for two
//!   windows, the dependency answers less than four fifths of what it is sent (the attempts
//!   O1 turned away from callers who could have waited longer than its attempts take counted
//!   as sent), or its callers give up on more than a fifth of the attempts that end (work
//!   accumulating, as in a queue);
//!   then the work held, lower while work still accumulates, never below a floor, raised when
//!   a raise lets the dependency finish more, and let go after a calm window. A dependency
//!   that is slower but keeps pace is not limited, which no latency-based limit
//!   ([`LimitAlgorithm`]'s others) can tell from a queue; nor is the ramp of its attempts in
//!   flight up to a latency of seconds, in which the dependency finishes more window after
//!   window where a queue finishes the same.
//! - **O6, criticality under the limit.** Sheddable attempts may fill half of it, normal ones
//!   all but a tenth, which critical ones keep.
//! - **O7, attempts that last as long as the caller waits.** An attempt over the limit waits
//!   for room, newest first, within its deadline; those that began waiting while the
//!   dependency finished nothing go first once it serves again, oldest first (`waiting.rs`).
//!
//! A refused attempt ends its call with `StopReason::Saturated`: a self-imposed refusal (B8)
//! that spends no budget, deposits nothing and carries the expected wait as its hint. A hop
//! serving a request answers it with the overload signal (C1), so the hops above fail fast
//! too. With nothing held, nothing is refused. `docs/overload.md` has the evidence for the
//! design and for the default.

pub(crate) mod admission;
mod keyed;
mod limit;
mod options;
pub(crate) mod tracker;
pub(crate) mod waiting;
mod window;

#[cfg(test)]
mod tests;

pub(crate) use admission::{Admission, Answer, Saturated, SaturatedBy, Ticket};
pub(crate) use keyed::KeyedTrackers;
pub use options::{InvalidOverload, LimitAlgorithm, OverloadControl};
pub(crate) use tracker::LoadTracker;
pub(crate) use waiting::WaitTicket;
