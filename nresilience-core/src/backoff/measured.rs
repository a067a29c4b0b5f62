use std::time::Duration;

use super::{duration_from_nanos_f64, InvalidBackoff};

/// Measures the transient base of a curve from the dependency's own recent latency.
///
/// A fixed transient base is a guess about how slow the dependency normally is. A measured one
/// waits `multiple` normal calls before the first retry, where "normal" is the
/// [`quantile`](Self::quantile) of recent successful latency, so the curve follows a dependency
/// that answers in 2 ms as well as one that answers in 2 s. The measurement is clamped to
/// [`spread`](Self::spread) either way of the configured base, so a skewed estimate cannot run
/// away, and it moves only the transient base: throttling is answered by the throttled base or
/// the server's pushback, never by how fast a rate limiter said no.
///
/// The estimate itself belongs to the executor, which keeps a latency window per dependency;
/// this value is only its configuration.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::MeasuredBase;
///
/// let measured = MeasuredBase::times(2.0);
/// let configured = Duration::from_millis(100);
/// // Normal calls take 30 ms: the first retry waits two of them.
/// assert_eq!(measured.base_for(configured, Duration::from_millis(30)), Duration::from_millis(60));
/// // A dependency taking 5 s is clamped to ten times the configured base.
/// assert_eq!(measured.base_for(configured, Duration::from_secs(5)), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredBase {
    multiple: f64,
    quantile: f64,
    window: Duration,
    minimum_samples: u32,
    spread: f64,
}

impl MeasuredBase {
    /// A measured base that waits `multiple` normal calls, with the default quantile (0.5),
    /// window (5 min), minimum samples (20) and spread (10).
    ///
    /// `multiple` must be finite and greater than zero; [`validate`](Self::validate) says so.
    #[must_use]
    pub const fn times(multiple: f64) -> Self {
        Self {
            multiple,
            quantile: 0.5,
            window: Duration::from_secs(5 * 60),
            minimum_samples: 20,
            spread: 10.0,
        }
    }

    /// The quantile of recent successful latency that counts as a normal call, in `(0, 0.5]`:
    /// above the median the estimate would chase the tail that retries are meant to wait out.
    /// Defaults to 0.5.
    #[must_use]
    pub const fn with_quantile(mut self, quantile: f64) -> Self {
        self.quantile = quantile;
        self
    }

    /// How much recent history the estimate covers. Defaults to 5 minutes.
    #[must_use]
    pub const fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// How many successful calls the window must hold before the estimate moves anything;
    /// until then the configured base applies. Defaults to 20.
    #[must_use]
    pub const fn with_minimum_samples(mut self, minimum_samples: u32) -> Self {
        self.minimum_samples = minimum_samples;
        self
    }

    /// How far the measured base may move from the configured one, as a factor either way;
    /// must be greater than 1. Defaults to 10.
    #[must_use]
    pub const fn with_spread(mut self, spread: f64) -> Self {
        self.spread = spread;
        self
    }

    /// How many normal calls the first retry waits.
    #[must_use]
    pub const fn multiple(&self) -> f64 {
        self.multiple
    }

    /// The quantile of recent successful latency that counts as normal.
    #[must_use]
    pub const fn quantile(&self) -> f64 {
        self.quantile
    }

    /// How much recent history the estimate covers.
    #[must_use]
    pub const fn window(&self) -> Duration {
        self.window
    }

    /// How many samples the estimate needs before it applies.
    #[must_use]
    pub const fn minimum_samples(&self) -> u32 {
        self.minimum_samples
    }

    /// How far the measured base may move from the configured one, either way.
    #[must_use]
    pub const fn spread(&self) -> f64 {
        self.spread
    }

    /// Checks every term: `multiple` finite and `> 0`, `quantile` in `(0, 0.5]`, `spread`
    /// finite and `> 1`, `window` longer than zero.
    pub fn validate(&self) -> Result<(), InvalidBackoff> {
        if !(self.multiple.is_finite() && self.multiple > 0.0) {
            return Err(InvalidBackoff::multiple(self.multiple));
        }
        if !(self.quantile > 0.0 && self.quantile <= 0.5) {
            return Err(InvalidBackoff::quantile(self.quantile));
        }
        if !(self.spread.is_finite() && self.spread > 1.0) {
            return Err(InvalidBackoff::spread(self.spread));
        }
        if self.window.is_zero() {
            return Err(InvalidBackoff::zero_window());
        }
        Ok(())
    }

    /// The transient base to use when a normal call recently took `observed`: `observed ×
    /// multiple`, clamped to `[configured / spread, configured × spread]`.
    ///
    /// A value that [`validate`](Self::validate) rejects leaves `configured` alone rather than
    /// panicking or inventing a delay.
    #[must_use]
    pub fn base_for(&self, configured: Duration, observed: Duration) -> Duration {
        if self.validate().is_err() {
            return configured;
        }
        let configured_nanos = configured.as_nanos() as f64;
        let wanted = observed.as_nanos() as f64 * self.multiple;
        let clamped = wanted
            .max(configured_nanos / self.spread)
            .min(configured_nanos * self.spread);
        duration_from_nanos_f64(clamped)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const BASE: Duration = Duration::from_millis(100);

    #[test]
    fn defaults_match_the_original_library() {
        // K4
        let m = MeasuredBase::times(1.0);
        assert_eq!(m.multiple(), 1.0);
        assert_eq!(m.quantile(), 0.5);
        assert_eq!(m.window(), Duration::from_secs(300));
        assert_eq!(m.minimum_samples(), 20);
        assert_eq!(m.spread(), 10.0);
        assert_eq!(m.validate(), Ok(()));
    }

    #[test]
    fn setters_change_one_term_and_keep_the_others() {
        let m = MeasuredBase::times(3.0)
            .with_quantile(0.25)
            .with_window(Duration::from_secs(60))
            .with_minimum_samples(5)
            .with_spread(4.0);
        assert_eq!(m.multiple(), 3.0);
        assert_eq!(m.quantile(), 0.25);
        assert_eq!(m.window(), Duration::from_secs(60));
        assert_eq!(m.minimum_samples(), 5);
        assert_eq!(m.spread(), 4.0);
        assert_eq!(m.validate(), Ok(()));
    }

    #[test]
    fn validation_rejects_a_zero_multiple() {
        // K4: multiple > 0
        let err = MeasuredBase::times(0.0)
            .validate()
            .expect_err("zero multiple");
        assert_eq!(
            err.to_string(),
            "measured base multiple must be a finite number > 0, got 0"
        );
        assert!(MeasuredBase::times(f64::NAN).validate().is_err());
        assert!(MeasuredBase::times(f64::INFINITY).validate().is_err());
        assert!(MeasuredBase::times(-1.0).validate().is_err());
    }

    #[test]
    fn validation_rejects_a_quantile_above_the_median() {
        // K4: quantile in (0, 0.5]
        let err = MeasuredBase::times(1.0)
            .with_quantile(0.6)
            .validate()
            .expect_err("quantile 0.6");
        assert_eq!(
            err.to_string(),
            "measured base quantile must be in (0, 0.5], got 0.6"
        );
        assert!(MeasuredBase::times(1.0)
            .with_quantile(0.0)
            .validate()
            .is_err());
        assert!(MeasuredBase::times(1.0)
            .with_quantile(f64::NAN)
            .validate()
            .is_err());
        assert_eq!(
            MeasuredBase::times(1.0).with_quantile(0.5).validate(),
            Ok(())
        );
    }

    #[test]
    fn validation_rejects_a_spread_of_one() {
        // K4: spread > 1
        let err = MeasuredBase::times(1.0)
            .with_spread(1.0)
            .validate()
            .expect_err("spread 1");
        assert_eq!(
            err.to_string(),
            "measured base spread must be a finite number > 1, got 1"
        );
        assert!(MeasuredBase::times(1.0)
            .with_spread(f64::INFINITY)
            .validate()
            .is_err());
    }

    #[test]
    fn validation_rejects_a_zero_window() {
        let m = MeasuredBase::times(1.0).with_window(Duration::ZERO);
        assert!(m.validate().is_err());
    }

    #[test]
    fn measured_base_is_clamped_to_ten_times_the_configured_base() {
        // K4: spread 10 either way
        let m = MeasuredBase::times(1.0);
        assert_eq!(
            m.base_for(BASE, Duration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(
            m.base_for(BASE, Duration::from_micros(1)),
            Duration::from_millis(10)
        );
        assert_eq!(m.base_for(BASE, Duration::ZERO), Duration::from_millis(10));
        assert_eq!(
            m.base_for(BASE, Duration::from_millis(40)),
            Duration::from_millis(40)
        );
    }

    #[test]
    fn invalid_terms_leave_the_configured_base_alone() {
        for m in [
            MeasuredBase::times(f64::NAN),
            MeasuredBase::times(-2.0),
            MeasuredBase::times(1.0).with_spread(f64::NAN),
            MeasuredBase::times(1.0).with_spread(0.5),
            MeasuredBase::times(1.0).with_quantile(0.9),
        ] {
            assert_eq!(m.base_for(BASE, Duration::from_millis(40)), BASE, "{m:?}");
        }
    }

    proptest! {
        #[test]
        fn measured_base_never_leaves_the_spread(
            configured_ms in 0u64..100_000,
            observed_ns in any::<u64>(),
            multiple in 0.001f64..1_000.0,
            spread in 1.001f64..100.0,
        ) {
            let configured = Duration::from_millis(configured_ms);
            let m = MeasuredBase::times(multiple).with_spread(spread);
            let base = m.base_for(configured, Duration::from_nanos(observed_ns)).as_secs_f64();
            let c = configured.as_secs_f64();
            // One nanosecond of slack for rounding to whole nanoseconds.
            prop_assert!(base >= c / spread - 1e-9);
            prop_assert!(base <= c * spread + 1e-9);
        }
    }
}
