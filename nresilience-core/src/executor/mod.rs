//! The retry executor: a policy, the decision machine that runs one call under it, and what
//! the machine reads and returns.
//!
//! - `policy`: the settings, the buckets they fund retries from, the latency estimate.
//! - `call`: one call's decisions between attempts, as a state machine every driver runs.
//! - `flights` and `timer`: the attempts in flight and the one timer every driver polls.
//! - `execute`: the driver for async closures, `RetryPolicy::execute`.
//! - `error`: the error a failed call returns, and a configuration refused.
//! - `hedge`: when a call starts another attempt beside the one in flight.
//! - `latency`: how long attempts take — the window they are measured over, the measured
//!   attempt ceiling, and a policy's estimates per dependency.

pub mod call;
pub(crate) mod error;
pub(crate) mod execute;
mod flights;
pub(crate) mod hedge;
pub(crate) mod latency;
pub(crate) mod policy;
mod timer;
