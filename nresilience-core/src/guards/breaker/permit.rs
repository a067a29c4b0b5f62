//! What a breaker hands out and reports: the permit for one call, the call's outcome, the
//! breaker's state, and its refusal.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Core;

/// Leave to make one call, from
/// [`CircuitBreaker::try_acquire`](super::CircuitBreaker::try_acquire); hand it back to
/// [`CircuitBreaker::record`](super::CircuitBreaker::record) with the outcome.
///
/// A permit issued while the breaker is half-open holds a probe slot until then. Dropping
/// it unrecorded counts as [`BreakerOutcome::Ignored`]: the slot is returned and nothing is
/// recorded, so an early return or a cancelled call cannot leak a slot. The permit owns a
/// handle to its breaker (no lifetime), so it can live in a call's state next to the policy
/// that holds the breaker.
#[must_use = "record the call's outcome with CircuitBreaker::record"]
pub struct BreakerPermit {
    pub(super) core: Arc<Core>,
    pub(super) generation: u64,
    /// Holds a half-open probe slot that has not been returned yet.
    pub(super) probe: bool,
    /// When the call was admitted: a probe's duration is measured from here.
    pub(super) acquired: Instant,
}

impl BreakerPermit {
    /// Whether this permit holds a half-open probe slot.
    #[must_use]
    pub const fn is_probe(&self) -> bool {
        self.probe
    }
}

impl Drop for BreakerPermit {
    fn drop(&mut self) {
        if self.probe {
            self.core.release(self.generation);
        }
    }
}

impl fmt::Debug for BreakerPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerPermit")
            .field("generation", &self.generation)
            .field("probe", &self.probe)
            .finish()
    }
}

/// What became of a call a [`BreakerPermit`] admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerOutcome {
    /// The dependency answered well.
    Success,
    /// The dependency failed the call: an error, a timeout, a retryable status — a
    /// transient failure.
    Failure,
    /// No evidence either way: a throttle (the dependency defending itself), a permanent
    /// failure (the caller's own), or an attempt this process's limiter refused. Counts
    /// nothing, and returns a probe slot.
    Ignored,
}

/// The state of a [`CircuitBreaker`](super::CircuitBreaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go through and their outcomes are counted.
    Closed,
    /// Calls are refused until the break has passed.
    Open,
    /// A limited number of probe calls go through to test the dependency.
    HalfOpen,
}

/// A call refused by the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen {
    retry_after: Option<Duration>,
}

impl BreakerOpen {
    pub(super) const fn new(retry_after: Option<Duration>) -> Self {
        Self { retry_after }
    }

    /// When the breaker will admit a probe: the rest of the break while it is open; `None`
    /// when it is half-open with every probe slot taken, since that ends when a probe
    /// finishes, which nobody can predict.
    #[must_use]
    pub const fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for BreakerOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry_after {
            Some(after) => write!(f, "circuit breaker is open, retry after {after:?}"),
            None => f.write_str("circuit breaker is half-open and every probe slot is taken"),
        }
    }
}

impl Error for BreakerOpen {}
