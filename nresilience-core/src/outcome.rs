//! How a call ended: why it stopped, and what refused it. A leaf every layer imports downward:
//! the executor decides these, the chain and the telemetry read them.

use std::fmt;

/// Why a call stopped.
///
/// A caller cancels a call by dropping its future: nothing runs after that, so there is no
/// error to read; its metrics and span carry the outcome `cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// An attempt succeeded.
    Succeeded,
    /// An attempt failed in a way no retry can fix.
    Permanent,
    /// The attempts allowed were used up (or the call may not be retried at all).
    AttemptsExhausted,
    /// The retry budget refused a retry.
    BudgetExhausted,
    /// A circuit breaker in front of the dependency is open: the call was refused before its
    /// next attempt.
    BreakerOpen,
    /// The deadline passed, or the next delay would have passed it.
    DeadlineExceeded,
    /// The dependency answered with the overload signal: its own call was refused by its
    /// budget or breaker, so this call does not retry onto it.
    Overloaded,
    /// The dependency answered that it failed after retrying itself, so this call does not
    /// retry it again.
    RetriedBelow,
    /// This process did not send the attempt: the dependency already holds more than it can
    /// serve in the time the call has left, or as many attempts as its adaptive limit allows
    /// (O1, O2).
    Saturated,
    /// The call's one attempt failed in a way a retry could fix, but its request could not
    /// be sent again: its body was a stream read once, too large to keep and with no way to
    /// make it again (H7).
    NotReplayable,
}

impl StopReason {
    /// The `nresilience.outcome` metric tag, e.g. `budget_exhausted`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Permanent => "permanent",
            Self::AttemptsExhausted => "attempts_exhausted",
            Self::BudgetExhausted => "budget_exhausted",
            Self::BreakerOpen => "breaker_open",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::Overloaded => "overloaded",
            Self::RetriedBelow => "retried_below",
            Self::Saturated => "saturated",
            Self::NotReplayable => "not_replayable",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The retry budget had no token for a retry.
    BudgetExhausted,
    /// A circuit breaker was open (or half-open with every probe slot taken).
    BreakerOpen,
    /// Overload control: the dependency holds more than it can serve in time (O1, O2).
    Saturated,
}

impl RejectReason {
    /// The `nresilience.reason` metric tag: `budget_exhausted`, `breaker_open` or
    /// `saturated`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BudgetExhausted => "budget_exhausted",
            Self::BreakerOpen => "breaker_open",
            Self::Saturated => "saturated",
        }
    }

    pub(crate) const fn stop_reason(self) -> StopReason {
        match self {
            Self::BudgetExhausted => StopReason::BudgetExhausted,
            Self::BreakerOpen => StopReason::BreakerOpen,
            Self::Saturated => StopReason::Saturated,
        }
    }
}
