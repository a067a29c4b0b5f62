//! How the hops of a chain of services behave as one system: the signals a hop sends its
//! caller about how its own calls ended, so that no layer above piles retries onto a layer
//! that has already refused or retried.
//!
//! - **Overloaded**: a hop whose call was refused by its retry budget or circuit breaker
//!   answers `503` with `x-nresilience-overloaded: 1` (and `Retry-After` when the refusal has
//!   a hint). A caller's retrying client does not retry that answer.
//! - **Retried**: a hop whose call failed after it had retried answers its `5xx` with
//!   `x-nresilience-retried: N`, N the attempts it made. The layer nearest the failure has
//!   retried already; a caller's retrying client does not retry that answer either.
//!
//! Both are read from peers, so they are parsed strictly and never fail: a value that is not
//! exactly what is written, or a header sent twice, is no signal. [`Signal`] is which endings
//! send which.
//!
//! - **Deadline**: every attempt says how long its caller will still wait
//!   (`x-nresilience-deadline-ms`); a retrying call made while serving it gives up no later
//!   than its caller does, instead of retrying for a caller that has gone ([`Inbound`]).
//!
//! - **Depth, potential attempts and criticality**: every request says how deep in the chain
//!   it is, how many attempts could reach it and how much its caller waits on it, in one
//!   header (`x-nresilience-chain: depth=2, attempts=9, criticality=normal`, `ChainFacts`),
//!   so a nested retry reports the worst case, a hop calling itself is stopped, and the hops
//!   below shed what nobody waits on first.
//!
//! The headers themselves — their names, and the parse and format of every value — are the
//! `nresilience-wire` crate's, through which the HTTP crates write and read them. [`Learned`]
//! is how a server layer finds out, without handler code, how the retrying calls made while
//! serving one request ended.

mod inbound;
pub(crate) mod learned;
mod signal;

pub use inbound::{deadline_from, inbound, serving, serving_sync, Inbound};
pub use learned::{learning, learning_sync, Learned, LearningFuture};
pub use signal::Signal;
