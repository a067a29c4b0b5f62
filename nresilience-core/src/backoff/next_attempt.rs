use std::time::Duration;

/// Why the previous attempt is being retried, which picks the base of the curve.
///
/// Throttling and transient failure wait on bases an order of magnitude apart: a delay tuned
/// for a connection reset is a hostile retry rate against a rate limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryKind {
    /// The dependency failed in a way that may not recur (reset, timeout, `5xx`): waits on
    /// [`Backoff::transient_base`](super::Backoff::transient_base).
    Transient,
    /// The dependency asked the caller to slow down (`429`, `RESOURCE_EXHAUSTED`): waits on
    /// [`Backoff::throttled_base`](super::Backoff::throttled_base).
    Throttled,
}

/// The attempt about to be made, as far as a backoff curve needs to know it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::{NextAttempt, RetryKind};
///
/// let next = NextAttempt::new(2, RetryKind::Throttled).with_retry_after(Duration::from_secs(3));
/// assert_eq!(next.attempt(), 2);
/// assert_eq!(next.retry_after(), Some(Duration::from_secs(3)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NextAttempt {
    attempt: u32,
    kind: RetryKind,
    retry_after: Option<Duration>,
}

impl NextAttempt {
    /// The `attempt`-th attempt of a call, retried because of `kind`.
    ///
    /// Attempts count from 1, so the first retry is attempt 2; 0 and 1 are served as 2.
    #[must_use]
    pub const fn new(attempt: u32, kind: RetryKind) -> Self {
        Self {
            attempt,
            kind,
            retry_after: None,
        }
    }

    /// The delay the server asked for (`Retry-After`, `grpc-retry-pushback-ms`), which replaces
    /// the curve. Defaults to none.
    #[must_use]
    pub const fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// The number of the attempt about to be made; the first retry is 2.
    #[must_use]
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Why the previous attempt is being retried.
    #[must_use]
    pub const fn kind(&self) -> RetryKind {
        self.kind
    }

    /// The server's pushback, if it sent one.
    #[must_use]
    pub const fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_attempt_carries_no_pushback_until_given_one() {
        let next = NextAttempt::new(3, RetryKind::Transient);
        assert_eq!(next.attempt(), 3);
        assert_eq!(next.kind(), RetryKind::Transient);
        assert_eq!(next.retry_after(), None);

        let pushed = next.with_retry_after(Duration::from_millis(250));
        assert_eq!(pushed.retry_after(), Some(Duration::from_millis(250)));
        assert_eq!(pushed.attempt(), 3);
    }
}
