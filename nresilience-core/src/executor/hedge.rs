//! When a call hedges: another attempt beside the one in flight (HG1).

use std::time::Duration;

use crate::executor::error::InvalidPolicy;

/// When a call starts another attempt beside the one in flight (HG1): after a fixed delay,
/// or after a quantile of recent successful attempt durations, measured over the window the
/// attempt ceiling uses (E5: 5 minutes, at least 20 samples before it applies).
///
/// The first acceptable answer wins and the other attempts are dropped. Every hedge is
/// charged to the budget like a retry (HG2), a `Sheddable` call never hedges, and
/// `max_attempts` bounds the attempts in flight and in all. The default is the 95th
/// percentile, as in *The Tail at Scale*.
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::{Hedge, RetryPolicy};
///
/// let after_p95 = RetryPolicy::builder().hedge(Some(Hedge::default())).build()?;
/// assert_eq!(after_p95.hedge().and_then(|h| h.quantile()), Some(0.95));
///
/// let fixed = Hedge::after(Duration::from_millis(50));
/// assert_eq!(fixed.delay(), Some(Duration::from_millis(50)));
/// assert!(RetryPolicy::builder().hedge(Some(Hedge::at_quantile(1.5))).build().is_err());
/// # Ok::<(), nresilience_core::InvalidPolicy>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedge {
    trigger: Trigger,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Trigger {
    After(Duration),
    Quantile(f64),
}

impl Hedge {
    /// Hedges an attempt that has not answered after `delay`.
    #[must_use]
    pub const fn after(delay: Duration) -> Self {
        Self {
            trigger: Trigger::After(delay),
        }
    }

    /// Hedges an attempt that has taken longer than the `quantile` (in `(0, 1)`) of recent
    /// successful attempts; no hedge until the window holds its samples.
    #[must_use]
    pub const fn at_quantile(quantile: f64) -> Self {
        Self {
            trigger: Trigger::Quantile(quantile),
        }
    }

    /// The fixed delay, when the trigger is one.
    #[must_use]
    pub const fn delay(&self) -> Option<Duration> {
        match self.trigger {
            Trigger::After(delay) => Some(delay),
            Trigger::Quantile(_) => None,
        }
    }

    /// The quantile of recent latency, when the trigger is one.
    #[must_use]
    pub const fn quantile(&self) -> Option<f64> {
        match self.trigger {
            Trigger::After(_) => None,
            Trigger::Quantile(quantile) => Some(quantile),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), InvalidPolicy> {
        match self.trigger {
            Trigger::After(delay) if delay.is_zero() => Err(InvalidPolicy::new(
                "hedge delay must be longer than zero: every call would send two attempts at once"
                    .to_owned(),
            )),
            Trigger::Quantile(q) if !(q > 0.0 && q < 1.0) => Err(InvalidPolicy::new(format!(
                "hedge quantile must be between 0 and 1 (exclusive), got {q}"
            ))),
            _ => Ok(()),
        }
    }
}

impl Default for Hedge {
    /// After the 95th percentile of recent successful attempts.
    fn default() -> Self {
        Self::at_quantile(0.95)
    }
}
