//! Why a call stopped, and the error a failed call returns.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::backoff::InvalidBackoff;
use crate::budget::InvalidBudget;
use crate::outcome::{RejectReason, StopReason};

/// A call refused by the retry budget or a circuit breaker, after the rejection pause.
///
/// `retry_after` is read after the pause: for the budget, the time its floor needs to fund
/// the missing token (`None` when the floor is zero and only successes refill it); for a
/// breaker, the rest of its break (`None` when it is half-open and every probe slot is
/// taken: nobody can say when a probe will finish).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallRejected {
    /// What refused the call.
    pub reason: RejectReason,
    /// When to come back, if anyone can honestly say.
    pub retry_after: Option<Duration>,
}

impl CallRejected {
    /// A refusal for `reason` with its hint.
    #[must_use]
    pub const fn new(reason: RejectReason, retry_after: Option<Duration>) -> Self {
        Self {
            reason,
            retry_after,
        }
    }
}

impl fmt::Display for CallRejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call refused: {}", self.reason.as_str())?;
        if let Some(after) = self.retry_after {
            write!(f, ", retry after {after:?}")?;
        }
        Ok(())
    }
}

impl Error for CallRejected {}

/// What the last attempt of a failed call ended with.
#[derive(Debug)]
#[non_exhaustive]
pub enum LastAttempt<E> {
    /// It returned this error.
    Error(E),
    /// It was cut by the attempt timeout, the attempt ceiling or the deadline.
    TimedOut,
    /// This process's own limiter or breaker refused it: it never ran.
    Refused,
    /// It answered with a value the classifier did not accept as a success (a `503`, say);
    /// the value itself went back to nobody.
    Unsuccessful,
}

/// A call that did not succeed: why it stopped, how many attempts ran, and what the last
/// one ended with.
pub struct RetryError<E> {
    reason: StopReason,
    attempts: u32,
    last: LastAttempt<E>,
    rejected: Option<CallRejected>,
}

impl<E> RetryError<E> {
    pub(crate) fn new(
        reason: StopReason,
        attempts: u32,
        last: LastAttempt<E>,
        rejected: Option<CallRejected>,
    ) -> Self {
        Self {
            reason,
            attempts,
            last,
            rejected,
        }
    }

    /// A call that failed with `error` before its first attempt (a request that could not be
    /// built or read): [`StopReason::Permanent`] after no attempts.
    pub fn not_attempted(error: E) -> Self {
        Self::new(StopReason::Permanent, 0, LastAttempt::Error(error), None)
    }

    /// Why the call stopped.
    pub fn reason(&self) -> StopReason {
        self.reason
    }

    /// How many attempts ran, counting the first.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// What the last attempt ended with.
    pub fn last_attempt(&self) -> &LastAttempt<E> {
        &self.last
    }

    /// The last attempt's error, if it returned one.
    pub fn last_error(&self) -> Option<&E> {
        match &self.last {
            LastAttempt::Error(error) => Some(error),
            _ => None,
        }
    }

    /// The last attempt's error, by value.
    pub fn into_last_error(self) -> Option<E> {
        match self.last {
            LastAttempt::Error(error) => Some(error),
            _ => None,
        }
    }

    /// Whether the last attempt was cut by a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self.last, LastAttempt::TimedOut)
    }

    /// The refusal, when the call stopped with [`StopReason::BudgetExhausted`],
    /// [`StopReason::BreakerOpen`] or [`StopReason::Saturated`].
    pub fn rejection(&self) -> Option<&CallRejected> {
        self.rejected.as_ref()
    }
}

impl<E: fmt::Debug> fmt::Debug for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryError")
            .field("reason", &self.reason)
            .field("attempts", &self.attempts)
            .field("last", &self.last)
            .field("rejected", &self.rejected)
            .finish()
    }
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "call stopped: {} after {} attempt",
            self.reason, self.attempts
        )?;
        if self.attempts != 1 {
            f.write_str("s")?;
        }
        match &self.last {
            LastAttempt::Error(error) => write!(f, ": {error}"),
            LastAttempt::TimedOut => f.write_str(": the last attempt timed out"),
            LastAttempt::Refused => f.write_str(": the last attempt was refused by this process"),
            LastAttempt::Unsuccessful => {
                f.write_str(": the last attempt's answer was not a success")
            }
        }
    }
}

impl<E: Error + 'static> Error for RetryError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match (&self.last, &self.rejected) {
            (_, Some(rejected)) => Some(rejected),
            (LastAttempt::Error(error), None) => Some(error),
            _ => None,
        }
    }
}

/// A policy configuration that cannot work, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPolicy {
    reason: String,
}

impl InvalidPolicy {
    pub(crate) fn new(reason: String) -> Self {
        Self { reason }
    }

    /// Why the configuration was rejected.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for InvalidPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid retry policy: {}", self.reason)
    }
}

impl Error for InvalidPolicy {}

impl From<InvalidBudget> for InvalidPolicy {
    fn from(error: InvalidBudget) -> Self {
        Self::new(error.reason().to_owned())
    }
}

impl From<InvalidBackoff> for InvalidPolicy {
    fn from(error: InvalidBackoff) -> Self {
        Self::new(error.to_string())
    }
}
