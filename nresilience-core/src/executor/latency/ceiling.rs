//! The measured attempt ceiling: each attempt bounded by a multiple of recent healthy
//! latency.
//!
//! A dependency that turns slow without failing produces no errors, so without a ceiling it
//! produces no retries either, only queued callers. The ceiling cuts an attempt that takes far
//! longer than recent successes did, and the cut attempt is a transient failure.

use std::time::Duration;

use crate::executor::error::InvalidPolicy;

/// How the measured attempt ceiling is computed.
///
/// Defaults to 3 × the p95 of successful attempts over a 5-minute window, applied once 20
/// samples are in it, never below 50 ms, refreshed at least once a second, learning from the
/// attempts it cuts (E7). It only ever tightens the configured attempt timeout. Read a term by
/// its field (`ceiling.multiple`); set it with the method of the same name.
/// [`AttemptCeiling::original`] is the original library's: refitted once per 75-second slice,
/// blind to what it cuts.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::AttemptCeiling;
///
/// let ceiling = AttemptCeiling::default();
/// assert_eq!(ceiling.ceiling_for(Duration::from_millis(40)), Duration::from_millis(120));
/// assert_eq!(ceiling.ceiling_for(Duration::from_millis(5)), Duration::from_millis(50));
/// // The original library refits the ceiling once per 75-second slice.
/// let frozen = AttemptCeiling::original();
/// assert!(frozen.validate().is_ok());
/// assert_eq!(frozen.refresh, Duration::from_secs(75));
/// assert!(!frozen.learn_from_cuts);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct AttemptCeiling {
    /// How many times the measured latency an attempt may take.
    pub multiple: f64,
    /// The quantile of successful attempt durations measured.
    pub quantile: f64,
    /// How much history the estimate covers.
    pub window: Duration,
    /// Successful attempts in the window before the ceiling applies.
    pub minimum_samples: u32,
    /// The lowest ceiling ever applied.
    pub floor: Duration,
    /// How long a fitted ceiling is kept before it is fitted again.
    pub refresh: Duration,
    /// Whether an attempt the ceiling cuts counts as a sample of at least its duration (E7).
    pub learn_from_cuts: bool,
}

impl AttemptCeiling {
    /// The defaults: 3 × p95 over 5 minutes, ≥ 20 samples, ≥ 50 ms, refreshed every second.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            multiple: 3.0,
            quantile: 0.95,
            window: Duration::from_secs(300),
            minimum_samples: 20,
            floor: Duration::from_millis(50),
            refresh: Duration::from_secs(1),
            learn_from_cuts: true,
        }
    }

    /// The original library's ceiling: the same terms, refitted once per 75-second slice, and
    /// fed by successful attempts only. A brownout meets a ceiling fitted to healthy latency;
    /// once every attempt outlasts it, none succeeds and the ceiling never rises.
    #[must_use]
    pub const fn original() -> Self {
        Self::new()
            .refresh(Duration::from_secs(75))
            .learn_from_cuts(false)
    }

    /// How many times the measured latency an attempt may take. Defaults to `3`.
    #[must_use]
    pub const fn multiple(mut self, multiple: f64) -> Self {
        self.multiple = multiple;
        self
    }

    /// The quantile of successful attempt durations measured, in `(0, 1)`. Defaults to `0.95`.
    #[must_use]
    pub const fn quantile(mut self, quantile: f64) -> Self {
        self.quantile = quantile;
        self
    }

    /// How much history the estimate covers. Defaults to 5 minutes.
    #[must_use]
    pub const fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Successful attempts in the window before the ceiling applies. Defaults to `20`.
    #[must_use]
    pub const fn minimum_samples(mut self, minimum_samples: u32) -> Self {
        self.minimum_samples = minimum_samples;
        self
    }

    /// The lowest ceiling ever applied. Defaults to 50 ms.
    #[must_use]
    pub const fn floor(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// How long a fitted ceiling is kept before it is fitted again. Defaults to 1 second.
    ///
    /// A long refresh freezes the ceiling fitted to healthy latency while a brownout starts,
    /// which cuts many of the brownout's attempts; a short one follows the latency up.
    #[must_use]
    pub const fn refresh(mut self, refresh: Duration) -> Self {
        self.refresh = refresh;
        self
    }

    /// Whether an attempt the ceiling cuts counts as a latency sample of at least its
    /// duration: a censored observation, not a missing one (E7). Defaults to `true`.
    ///
    /// Fed by successes alone, the ceiling cannot follow a dependency that turns slower than
    /// it: every attempt is cut, none succeeds, and the ceiling stays where healthy latency
    /// put it for as long as the slowdown lasts — a queue in front of a slowed dependency
    /// does that. With the cut attempts counted, it climbs, at most tripling per refresh and
    /// never past the attempt timeout, until attempts complete again.
    #[must_use]
    pub const fn learn_from_cuts(mut self, learn: bool) -> Self {
        self.learn_from_cuts = learn;
        self
    }

    /// The ceiling for a measured quantile latency: `multiple × measured`, at least the floor.
    #[must_use]
    pub fn ceiling_for(&self, measured: Duration) -> Duration {
        let scaled = measured.as_secs_f64() * self.multiple;
        let scaled = Duration::try_from_secs_f64(scaled).unwrap_or(Duration::MAX);
        scaled.max(self.floor)
    }

    /// Checks every term.
    pub fn validate(&self) -> Result<(), InvalidPolicy> {
        if !(self.multiple.is_finite() && self.multiple >= 1.0) {
            return Err(InvalidPolicy::new(format!(
                "attempt ceiling multiple must be a finite number >= 1, got {}",
                self.multiple
            )));
        }
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            return Err(InvalidPolicy::new(format!(
                "attempt ceiling quantile must be in (0, 1), got {}",
                self.quantile
            )));
        }
        if self.window.is_zero() || self.refresh.is_zero() {
            return Err(InvalidPolicy::new(
                "attempt ceiling window and refresh must be longer than zero".to_owned(),
            ));
        }
        Ok(())
    }
}

impl Default for AttemptCeiling {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e5_defaults() {
        let c = AttemptCeiling::default();
        assert_eq!(c.multiple, 3.0);
        assert_eq!(c.quantile, 0.95);
        assert_eq!(c.window, Duration::from_secs(300));
        assert_eq!(c.minimum_samples, 20);
        assert_eq!(c.refresh, Duration::from_secs(1));
        assert!(c.learn_from_cuts, "E7 is the default");
        assert_eq!(c.ceiling_for(Duration::ZERO), Duration::from_millis(50));
    }

    #[test]
    fn e5_invalid_terms_are_rejected() {
        assert!(AttemptCeiling::default().multiple(0.5).validate().is_err());
        assert!(AttemptCeiling::default()
            .multiple(f64::NAN)
            .validate()
            .is_err());
        assert!(AttemptCeiling::default().quantile(1.0).validate().is_err());
        assert!(AttemptCeiling::default()
            .refresh(Duration::ZERO)
            .validate()
            .is_err());
        assert!(AttemptCeiling::default()
            .window(Duration::ZERO)
            .validate()
            .is_err());
    }
}
