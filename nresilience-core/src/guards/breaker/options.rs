//! A breaker's parameters, and the reason a set of them cannot work.

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// The parameters of a [`CircuitBreaker`](super::CircuitBreaker).
///
/// Defaults (the original library's): open on `5` consecutive transient failures, no
/// failure-ratio trip, a `minimum_throughput` of `20` and a `sampling_window` of 30 s for the
/// ratio when one is set, a `break_duration` of 15 s doubling on each consecutive open up to
/// a `max_break_duration` of 2 minutes, one half-open probe at a time, `2` successful probes
/// to close, no slow-call threshold.
///
/// Read a term by its field (`options.break_duration`); set it with the method of the same
/// name. The setters only record values; [`CircuitBreaker::new`](super::CircuitBreaker::new) and
/// [`BreakerOptions::validate`] reject invalid ones with a reason.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct BreakerOptions {
    /// Transient failures in a row that open the breaker; `None` for no such trip.
    pub consecutive_failures: Option<u32>,
    /// The share of failures in the sampling window that opens the breaker; `None` for no
    /// such trip.
    pub failure_ratio: Option<f64>,
    /// The outcomes the sampling window must hold before the ratio can open the breaker.
    pub minimum_throughput: u32,
    /// How long outcomes are counted for the ratio before the count starts over.
    pub sampling_window: Duration,
    /// How long the breaker stays open the first time.
    pub break_duration: Duration,
    /// The longest break, however many times in a row the breaker has opened.
    pub max_break_duration: Duration,
    /// How many probes a half-open breaker lets through at once.
    pub half_open_probes: u32,
    /// How many probes must succeed before a half-open breaker closes.
    pub probes_to_close: u32,
    /// A probe that takes longer than this is no recovery: it opens the breaker again.
    pub slow_call_threshold: Option<Duration>,
}

impl BreakerOptions {
    /// The options with every default.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            consecutive_failures: Some(5),
            failure_ratio: None,
            minimum_throughput: 20,
            sampling_window: Duration::from_secs(30),
            break_duration: Duration::from_secs(15),
            max_break_duration: Duration::from_secs(120),
            half_open_probes: 1,
            probes_to_close: 2,
            slow_call_threshold: None,
        }
    }

    /// Transient failures in a row that open the breaker, `>= 1`; `None` turns this trip
    /// off. A success resets the count; an ignored outcome leaves it. Defaults to `Some(5)`.
    #[must_use]
    pub const fn consecutive_failures(mut self, consecutive_failures: Option<u32>) -> Self {
        self.consecutive_failures = consecutive_failures;
        self
    }

    /// The share of failures in the sampling window that opens the breaker, in `(0, 1]`;
    /// `None` turns this trip off. Defaults to `None`.
    #[must_use]
    pub const fn failure_ratio(mut self, failure_ratio: Option<f64>) -> Self {
        self.failure_ratio = failure_ratio;
        self
    }

    /// The outcomes the sampling window must hold before the ratio can open the breaker,
    /// `>= 1`, so a couple of early failures do not cut a dependency off. Defaults to `20`.
    #[must_use]
    pub const fn minimum_throughput(mut self, minimum_throughput: u32) -> Self {
        self.minimum_throughput = minimum_throughput;
        self
    }

    /// How long outcomes are counted for the ratio before the count starts over, longer
    /// than zero. Defaults to 30 s.
    #[must_use]
    pub const fn sampling_window(mut self, sampling_window: Duration) -> Self {
        self.sampling_window = sampling_window;
        self
    }

    /// How long the breaker refuses every call the first time it opens, longer than zero.
    /// Defaults to 15 s.
    #[must_use]
    pub const fn break_duration(mut self, break_duration: Duration) -> Self {
        self.break_duration = break_duration;
        self
    }

    /// The longest break, `>= break_duration`: each consecutive open doubles the break up
    /// to it, so a dependency that stays down is probed less and less often, instead of on a
    /// fixed cadence forever. Defaults to 2 minutes.
    #[must_use]
    pub const fn max_break_duration(mut self, max_break_duration: Duration) -> Self {
        self.max_break_duration = max_break_duration;
        self
    }

    /// How many probes a half-open breaker lets through at once, `>= 1`: a trickle, not a
    /// surge. Defaults to `1`.
    #[must_use]
    pub const fn half_open_probes(mut self, half_open_probes: u32) -> Self {
        self.half_open_probes = half_open_probes;
        self
    }

    /// How many probes must succeed before a half-open breaker closes, `>= 1`. May exceed
    /// `half_open_probes`: a recorded probe frees its slot for the next one. Defaults to `2`.
    #[must_use]
    pub const fn probes_to_close(mut self, probes_to_close: u32) -> Self {
        self.probes_to_close = probes_to_close;
        self
    }

    /// A successful probe that took longer than this opens the breaker again: a dependency
    /// that answers that slowly has not recovered. Longer than zero; `None` for none.
    /// Defaults to `None`.
    #[must_use]
    pub const fn slow_call_threshold(mut self, slow_call_threshold: Option<Duration>) -> Self {
        self.slow_call_threshold = slow_call_threshold;
        self
    }

    /// Checks every term, returning the first that is out of range.
    pub fn validate(&self) -> Result<(), InvalidBreaker> {
        if let Some(ratio) = self.failure_ratio {
            if !(ratio.is_finite() && ratio > 0.0 && ratio <= 1.0) {
                return Err(InvalidBreaker::new(Reason::FailureRatio(ratio)));
            }
        }
        if self.consecutive_failures == Some(0) {
            return Err(InvalidBreaker::new(Reason::ZeroConsecutiveFailures));
        }
        if self.consecutive_failures.is_none() && self.failure_ratio.is_none() {
            return Err(InvalidBreaker::new(Reason::NoTrip));
        }
        if self.minimum_throughput == 0 {
            return Err(InvalidBreaker::new(Reason::ZeroMinimumThroughput));
        }
        if self.sampling_window.is_zero() {
            return Err(InvalidBreaker::new(Reason::ZeroSamplingWindow));
        }
        if self.break_duration.is_zero() {
            return Err(InvalidBreaker::new(Reason::ZeroBreakDuration));
        }
        if self.max_break_duration < self.break_duration {
            return Err(InvalidBreaker::new(Reason::MaximumBelowBreak));
        }
        if self.half_open_probes == 0 {
            return Err(InvalidBreaker::new(Reason::ZeroHalfOpenProbes));
        }
        if self.probes_to_close == 0 {
            return Err(InvalidBreaker::new(Reason::ZeroProbesToClose));
        }
        if self.slow_call_threshold.is_some_and(|t| t.is_zero()) {
            return Err(InvalidBreaker::new(Reason::ZeroSlowCallThreshold));
        }
        Ok(())
    }
}

impl Default for BreakerOptions {
    /// See [`BreakerOptions`] for the values.
    fn default() -> Self {
        Self::new()
    }
}

/// A circuit breaker configuration that cannot work, with the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidBreaker {
    reason: Reason,
}

#[derive(Clone, Debug, PartialEq)]
enum Reason {
    FailureRatio(f64),
    ZeroConsecutiveFailures,
    NoTrip,
    ZeroMinimumThroughput,
    ZeroSamplingWindow,
    ZeroBreakDuration,
    MaximumBelowBreak,
    ZeroHalfOpenProbes,
    ZeroProbesToClose,
    ZeroSlowCallThreshold,
}

impl InvalidBreaker {
    const fn new(reason: Reason) -> Self {
        Self { reason }
    }
}

impl fmt::Display for InvalidBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            Reason::FailureRatio(ratio) => {
                write!(f, "failure_ratio must be in (0, 1], got {ratio}")
            }
            Reason::ZeroConsecutiveFailures => {
                f.write_str("consecutive_failures must be at least 1; use None to turn it off")
            }
            Reason::NoTrip => f.write_str(
                "a breaker needs consecutive_failures or a failure_ratio, or it never opens",
            ),
            Reason::ZeroMinimumThroughput => f.write_str("minimum_throughput must be at least 1"),
            Reason::ZeroSamplingWindow => f.write_str("sampling_window must be longer than zero"),
            Reason::ZeroBreakDuration => f.write_str("break_duration must be longer than zero"),
            Reason::MaximumBelowBreak => {
                f.write_str("max_break_duration must be at least break_duration")
            }
            Reason::ZeroHalfOpenProbes => f.write_str("half_open_probes must be at least 1"),
            Reason::ZeroProbesToClose => f.write_str("probes_to_close must be at least 1"),
            Reason::ZeroSlowCallThreshold => {
                f.write_str("slow_call_threshold must be longer than zero; use None for none")
            }
        }
    }
}

impl Error for InvalidBreaker {}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::breaker::CircuitBreaker;

    #[test]
    fn g3_defaults_are_the_original_librarys() {
        let options = BreakerOptions::default();
        assert_eq!(options, BreakerOptions::new());
        assert_eq!(options.consecutive_failures, Some(5));
        assert_eq!(options.failure_ratio, None);
        assert_eq!(options.minimum_throughput, 20);
        assert_eq!(options.sampling_window, Duration::from_secs(30));
        assert_eq!(options.break_duration, Duration::from_secs(15));
        assert_eq!(options.max_break_duration, Duration::from_secs(120));
        assert_eq!(options.half_open_probes, 1);
        assert_eq!(options.probes_to_close, 2);
        assert_eq!(options.slow_call_threshold, None);
    }

    #[test]
    fn invalid_options_are_rejected_with_a_reason() {
        let now = Instant::now();
        let cases = [
            (
                BreakerOptions::default().failure_ratio(Some(0.0)),
                "failure_ratio must be in (0, 1], got 0",
            ),
            (
                BreakerOptions::default().failure_ratio(Some(1.5)),
                "failure_ratio must be in (0, 1], got 1.5",
            ),
            (
                BreakerOptions::default().failure_ratio(Some(f64::NAN)),
                "failure_ratio must be in (0, 1], got NaN",
            ),
            (
                BreakerOptions::default().consecutive_failures(Some(0)),
                "consecutive_failures must be at least 1; use None to turn it off",
            ),
            (
                BreakerOptions::default().consecutive_failures(None),
                "a breaker needs consecutive_failures or a failure_ratio, or it never opens",
            ),
            (
                BreakerOptions::default().minimum_throughput(0),
                "minimum_throughput must be at least 1",
            ),
            (
                BreakerOptions::default().sampling_window(Duration::ZERO),
                "sampling_window must be longer than zero",
            ),
            (
                BreakerOptions::default().break_duration(Duration::ZERO),
                "break_duration must be longer than zero",
            ),
            (
                BreakerOptions::default().max_break_duration(Duration::from_secs(1)),
                "max_break_duration must be at least break_duration",
            ),
            (
                BreakerOptions::default().half_open_probes(0),
                "half_open_probes must be at least 1",
            ),
            (
                BreakerOptions::default().probes_to_close(0),
                "probes_to_close must be at least 1",
            ),
            (
                BreakerOptions::default().slow_call_threshold(Some(Duration::ZERO)),
                "slow_call_threshold must be longer than zero; use None for none",
            ),
        ];
        for (options, reason) in cases {
            assert_eq!(options.validate().expect_err(reason).to_string(), reason);
            let err = CircuitBreaker::new(options, now).expect_err(reason);
            assert_eq!(err.to_string(), reason);
        }
        let smallest = BreakerOptions::default()
            .consecutive_failures(None)
            .failure_ratio(Some(1e-12));
        assert!(CircuitBreaker::new(smallest, now).is_ok());
    }
}
