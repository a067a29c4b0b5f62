//! What one attempt's outcome means for the call.

use std::time::Duration;

/// The classification of one attempt.
///
/// `Transient` waits on the backoff's transient base, `Throttled` on its throttled base;
/// a server `retry_after` on either replaces the curve verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// The attempt succeeded: the call is done and the budget gets a deposit.
    Success,
    /// A failure that is likely to pass: a reset, a timeout, a 5xx.
    Transient {
        /// Server pushback: how long the server asked the caller to wait.
        retry_after: Option<Duration>,
    },
    /// The attempt never reached the dependency: its connection was refused, nothing listens
    /// there. A transient failure that says the dependency is unavailable rather than slow or
    /// failing: the call spreads the attempts it has left over the time it has left (O7), so
    /// that one lands after the dependency is back. A retry answered so gets its budget's
    /// token back: it was never sent (B13).
    Unreachable,
    /// A refusal by something that refills at its own pace: a 429, a limiter.
    Throttled {
        /// `true` when this process's own limiter or breaker refused the attempt: the
        /// dependency never saw it, so it neither spends nor funds the budget.
        self_imposed: bool,
        /// Server pushback: how long the server asked the caller to wait.
        retry_after: Option<Duration>,
    },
    /// A failure that another attempt cannot fix: stop now.
    Permanent,
    /// The dependency is shedding load: its own call was refused by its retry budget or
    /// circuit breaker, and it said so (`x-nresilience-overloaded: 1`). Retrying would pile
    /// onto an overload another layer has already measured, so the call ends at once with
    /// this answer; it spends and deposits nothing, and it is no evidence for a breaker.
    Overloaded {
        /// How long the dependency asked its callers to stay away (`Retry-After`): the
        /// request being served passes it on with its own overload signal (C7).
        retry_after: Option<Duration>,
    },
    /// The dependency failed after it had retried itself (`x-nresilience-retried: N`): the
    /// layer nearest the failure has retried already, and retrying above it multiplies the
    /// load at the bottom. The call ends with this answer; a breaker counts it as a failure.
    RetriedBelow,
}

impl Verdict {
    /// A transient failure without pushback.
    pub const TRANSIENT: Self = Self::Transient { retry_after: None };

    /// A throttle by the dependency (not self-imposed), without pushback.
    pub const THROTTLED: Self = Self::Throttled {
        self_imposed: false,
        retry_after: None,
    };

    /// The dependency's overload signal, without a hint.
    pub const OVERLOADED: Self = Self::Overloaded { retry_after: None };

    /// A refusal by this process's own limiter or breaker.
    pub const SELF_IMPOSED: Self = Self::Throttled {
        self_imposed: true,
        retry_after: None,
    };

    /// The server's pushback, if the verdict carries one.
    #[must_use]
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Transient { retry_after }
            | Self::Throttled { retry_after, .. }
            | Self::Overloaded { retry_after } => *retry_after,
            Self::Success | Self::Unreachable | Self::Permanent | Self::RetriedBelow => None,
        }
    }

    /// Whether another attempt could help.
    #[must_use]
    pub const fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Transient { .. } | Self::Unreachable | Self::Throttled { .. }
        )
    }

    /// Whether this process refused the attempt itself (its own rate limiter or circuit
    /// breaker), so the dependency never saw it.
    #[must_use]
    pub const fn is_self_imposed(&self) -> bool {
        matches!(
            self,
            Self::Throttled {
                self_imposed: true,
                ..
            }
        )
    }

    /// The `nresilience.verdict` metric tag: `ok`, `transient`, `unreachable`, `throttled`,
    /// `permanent`, `overloaded` or `retried_below`.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Success => "ok",
            Self::Transient { .. } => "transient",
            Self::Unreachable => "unreachable",
            Self::Throttled { .. } => "throttled",
            Self::Permanent => "permanent",
            Self::Overloaded { .. } => "overloaded",
            Self::RetriedBelow => "retried_below",
        }
    }
}

/// Classifies an attempt's result.
///
/// Implemented for closures `Fn(&R) -> Verdict`, so a caller can write its own in one line.
///
/// # Example
///
/// ```
/// use nresilience_core::{Classify, DefaultClassifier, Verdict};
///
/// let by_status = |status: &u16| match status {
///     200..=299 => Verdict::Success,
///     429 => Verdict::THROTTLED,
///     500..=599 => Verdict::TRANSIENT,
///     _ => Verdict::Permanent,
/// };
/// assert_eq!(by_status.classify(&503), Verdict::TRANSIENT);
/// assert_eq!(DefaultClassifier.classify(&Err::<(), _>("reset")), Verdict::TRANSIENT);
/// ```
pub trait Classify<R> {
    /// The verdict on one attempt's result.
    fn classify(&self, result: &R) -> Verdict;
}

impl<R, F> Classify<R> for F
where
    F: Fn(&R) -> Verdict,
{
    fn classify(&self, result: &R) -> Verdict {
        self(result)
    }
}

/// `Ok` is a success, every `Err` a transient failure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefaultClassifier;

impl<T, E> Classify<Result<T, E>> for DefaultClassifier {
    fn classify(&self, result: &Result<T, E>) -> Verdict {
        match result {
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::TRANSIENT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e1_default_classifier_maps_ok_and_err() {
        assert_eq!(
            DefaultClassifier.classify(&Ok::<_, ()>(1)),
            Verdict::Success
        );
        assert_eq!(
            DefaultClassifier.classify(&Err::<(), _>(())),
            Verdict::TRANSIENT
        );
    }

    #[test]
    fn e1_verdict_tags_and_pushback() {
        let pushed = Verdict::Throttled {
            self_imposed: false,
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(pushed.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(pushed.as_str(), "throttled");
        assert!(!pushed.is_self_imposed());
        assert!(Verdict::SELF_IMPOSED.is_self_imposed());
        assert!(!Verdict::Permanent.is_retryable());
        assert_eq!(Verdict::Success.as_str(), "ok");
    }
}
