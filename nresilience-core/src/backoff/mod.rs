//! Backoff curves: how long to wait before each retry.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use nresilience_core::{Backoff, Jitter, NextAttempt, RetryKind};
//!
//! let backoff = Backoff::default().with_jitter(Jitter::None);
//! // The first retry is attempt 2 and waits the base; each later one doubles it.
//! assert_eq!(
//!     backoff.compute(&NextAttempt::new(3, RetryKind::Transient)),
//!     Duration::from_millis(200),
//! );
//! // A server that says when to come back is obeyed, up to the cap.
//! let pushed = NextAttempt::new(2, RetryKind::Throttled).with_retry_after(Duration::from_secs(5));
//! assert_eq!(Backoff::default().compute(&pushed), Duration::from_secs(5));
//! ```
//!
//! # Why two bases
//!
//! A transient failure (a reset, a timeout) is usually over in a moment, so its curve starts at
//! 100 ms. A throttled attempt was refused by something that refills at its own pace, and
//! coming back after 100 ms only spends another attempt on a refusal, so its curve starts at
//! 1 s. When the server says when to come back, that beats both guesses.

mod delays;
mod error;
mod jitter;
mod measured;
mod next_attempt;

use std::{fmt, sync::Arc, time::Duration};

use rand::Rng;

pub use self::{
    delays::Delays,
    error::InvalidBackoff,
    jitter::Jitter,
    measured::MeasuredBase,
    next_attempt::{NextAttempt, RetryKind},
};

const DEFAULT_TRANSIENT_BASE: Duration = Duration::from_millis(100);
const DEFAULT_THROTTLED_BASE: Duration = Duration::from_secs(1);
const DEFAULT_FACTOR: f64 = 2.0;
const DEFAULT_MAXIMUM_DELAY: Duration = Duration::from_secs(30);

/// Which curve a [`Backoff`] follows. Only the constructors choose it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackoffKind {
    /// The delay grows by [`Backoff::factor`] each attempt: [`Backoff::default`],
    /// [`Backoff::exponential`], [`Backoff::measured`].
    Exponential,
    /// The same delay every attempt: [`Backoff::constant`], [`Backoff::none`].
    Constant,
    /// A caller-supplied function computes the delay: [`Backoff::custom`].
    Custom,
}

impl BackoffKind {
    const fn name(self) -> &'static str {
        match self {
            Self::Exponential => "exponential",
            Self::Constant => "constant",
            Self::Custom => "custom",
        }
    }
}

type CustomFn = Arc<dyn Fn(&NextAttempt) -> Duration + Send + Sync + 'static>;

#[derive(Clone)]
enum Curve {
    Exponential,
    Constant,
    Custom(CustomFn),
}

/// The delay before each retry.
///
/// A constructor chooses the curve and each `with_*` method changes one term of it, keeping
/// the others. The getters report the terms [`compute`](Self::compute) actually uses, and
/// equality is over those, so a value that spells a default out equals one that left it alone.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::Backoff;
///
/// let slower = Backoff::default().with_maximum_delay(Some(Duration::from_secs(120)));
/// assert_eq!(slower.maximum_delay(), Some(Duration::from_secs(120)));
/// assert_eq!(slower.transient_base(), Duration::from_millis(100));
/// assert_eq!(slower.factor(), 2.0);
/// ```
#[derive(Clone)]
pub struct Backoff {
    curve: Curve,
    transient_base: Duration,
    throttled_base: Duration,
    factor: f64,
    maximum_delay: Option<Duration>,
    jitter: Jitter,
    measured_base: Option<MeasuredBase>,
    pushback_margin: Option<Duration>,
}

// ===== constructors =====

impl Backoff {
    /// Retries immediately: a [`Constant`](BackoffKind::Constant) curve of zero, cap included.
    ///
    /// Only right when the dependency is not shared; a retry storm against a shared one is
    /// exactly what backoff exists to prevent. The zero cap also caps server pushback;
    /// give it a cap with [`with_maximum_delay`](Self::with_maximum_delay) to honour one.
    #[must_use]
    pub const fn none() -> Self {
        Self::constant(Duration::ZERO)
    }

    /// An exponential curve with the default terms, to change one `with_*` at a time.
    ///
    /// Transient base 100 ms, throttled base 1 s, factor 2, cap 30 s, [`Jitter::Full`].
    #[must_use]
    pub const fn exponential() -> Self {
        Self {
            curve: Curve::Exponential,
            transient_base: DEFAULT_TRANSIENT_BASE,
            throttled_base: DEFAULT_THROTTLED_BASE,
            factor: DEFAULT_FACTOR,
            maximum_delay: Some(DEFAULT_MAXIMUM_DELAY),
            jitter: Jitter::Full,
            measured_base: None,
            pushback_margin: None,
        }
    }

    /// The exponential defaults with a transient base measured from recent latency:
    /// the first retry after a transient failure waits `multiple` normal calls.
    ///
    /// An invalid `multiple` is reported by [`validate`](Self::validate); use
    /// [`try_measured`](Self::try_measured) to be told at once.
    #[must_use]
    pub const fn measured(multiple: f64) -> Self {
        Self::exponential().with_measured_base(Some(MeasuredBase::times(multiple)))
    }

    /// [`measured`](Self::measured), refusing a `multiple` that is not finite and above zero.
    pub fn try_measured(multiple: f64) -> Result<Self, InvalidBackoff> {
        let backoff = Self::measured(multiple);
        backoff.validate()?;
        Ok(backoff)
    }

    /// The same delay before every retry.
    ///
    /// `delay` is both bases and the cap, so a base later raised above it without raising the
    /// cap is clamped back to `delay`. Jitter still applies; add
    /// `.with_jitter(Jitter::None)` for exactly `delay`.
    #[must_use]
    pub const fn constant(delay: Duration) -> Self {
        Self {
            curve: Curve::Constant,
            transient_base: delay,
            throttled_base: delay,
            factor: 1.0,
            maximum_delay: Some(delay),
            jitter: Jitter::Full,
            measured_base: None,
            pushback_margin: None,
        }
    }

    /// A curve computed by `f`.
    ///
    /// The delay is `f(next)` as returned: no cap, no jitter. The getters report zero bases,
    /// factor 1, no cap and no jitter, and the `with_*` methods change nothing, because none of
    /// those terms is used. Server pushback still wins. Two custom curves are equal only
    /// when they share the same function (a clone of one value).
    pub fn custom<F>(f: F) -> Self
    where
        F: Fn(&NextAttempt) -> Duration + Send + Sync + 'static,
    {
        Self {
            curve: Curve::Custom(Arc::new(f)),
            ..Self::exponential()
        }
    }
}

/// [`Backoff::exponential`]: transient base 100 ms, throttled base 1 s, factor 2, cap 30 s,
/// full jitter.
impl Default for Backoff {
    fn default() -> Self {
        Self::exponential()
    }
}

// ===== terms =====

impl Backoff {
    /// The base delay after a [`RetryKind::Transient`] failure: the first retry waits this long.
    /// Defaults to 100 ms.
    #[must_use]
    pub const fn with_transient_base(mut self, base: Duration) -> Self {
        self.transient_base = base;
        self
    }

    /// The base delay after a [`RetryKind::Throttled`] refusal. Defaults to 1 s.
    #[must_use]
    pub const fn with_throttled_base(mut self, base: Duration) -> Self {
        self.throttled_base = base;
        self
    }

    /// The growth per attempt: 2 doubles the delay each time. Must be finite and at least 1
    /// ([`validate`](Self::validate)). Only an exponential curve grows. Defaults to 2.
    #[must_use]
    pub const fn with_factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// The longest single delay, server pushback included; `None` for no cap.
    /// Defaults to 30 s.
    #[must_use]
    pub const fn with_maximum_delay(mut self, maximum_delay: Option<Duration>) -> Self {
        self.maximum_delay = maximum_delay;
        self
    }

    /// The randomness applied to each computed delay. Defaults to [`Jitter::Full`].
    #[must_use]
    pub const fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Measures the transient base from recent latency, or `None` to keep it constant.
    /// Only an exponential curve may carry one ([`validate`](Self::validate)). Defaults to
    /// `None`, except for [`Backoff::measured`].
    #[must_use]
    pub const fn with_measured_base(mut self, measured_base: Option<MeasuredBase>) -> Self {
        self.measured_base = measured_base;
        self
    }

    /// Keeps a server's hint within [the curve's delay, the curve's delay + `margin`] rather
    /// than serving it verbatim (K16), or `None` to serve it verbatim, capped only by the cap
    /// (K13). Defaults to `None`.
    ///
    /// The 2026 AWS SDKs keep `x-amz-retry-after` within 5 s of their computed backoff, so
    /// that a hint a server sends by mistake (an hour instead of a second) or one that says
    /// "now" to every client at once cannot set the pace alone. The clamp costs what verbatim
    /// pushback exists for: a server that knows when it recovers is no longer obeyed past the
    /// margin, so leave it off for a dependency you trust to say.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nresilience_core::{Backoff, Jitter, NextAttempt, RetryKind};
    ///
    /// let clamped = Backoff::default()
    ///     .with_jitter(Jitter::None)
    ///     .with_pushback_margin(Some(Duration::from_secs(5)));
    /// // A throttled first retry computes 1 s: an hour's hint waits 1 s + 5 s.
    /// let hour = NextAttempt::new(2, RetryKind::Throttled).with_retry_after(Duration::from_secs(3_600));
    /// assert_eq!(clamped.compute(&hour), Duration::from_secs(6));
    /// // "Come back now" still waits the curve's 1 s.
    /// let now = NextAttempt::new(2, RetryKind::Throttled).with_retry_after(Duration::ZERO);
    /// assert_eq!(clamped.compute(&now), Duration::from_secs(1));
    /// ```
    #[must_use]
    pub const fn with_pushback_margin(mut self, margin: Option<Duration>) -> Self {
        self.pushback_margin = margin;
        self
    }

    /// Which curve this is.
    #[must_use]
    pub const fn kind(&self) -> BackoffKind {
        match self.curve {
            Curve::Exponential => BackoffKind::Exponential,
            Curve::Constant => BackoffKind::Constant,
            Curve::Custom(_) => BackoffKind::Custom,
        }
    }

    /// The base delay after a transient failure, as [`compute`](Self::compute) uses it: clamped
    /// to the cap on a constant curve, zero on a custom one.
    #[must_use]
    pub fn transient_base(&self) -> Duration {
        self.effective_base(self.transient_base)
    }

    /// The base delay after a throttled refusal, as [`compute`](Self::compute) uses it: clamped
    /// to the cap on a constant curve, zero on a custom one.
    #[must_use]
    pub fn throttled_base(&self) -> Duration {
        self.effective_base(self.throttled_base)
    }

    /// The growth per attempt; 1 on a constant or custom curve, which do not grow.
    #[must_use]
    pub const fn factor(&self) -> f64 {
        match self.curve {
            Curve::Exponential => self.factor,
            Curve::Constant | Curve::Custom(_) => 1.0,
        }
    }

    /// The cap on any single delay; `None` when there is none, as on a custom curve.
    #[must_use]
    pub const fn maximum_delay(&self) -> Option<Duration> {
        match self.curve {
            Curve::Custom(_) => None,
            Curve::Exponential | Curve::Constant => self.maximum_delay,
        }
    }

    /// The randomness applied to each delay; [`Jitter::None`] on a custom curve.
    #[must_use]
    pub const fn jitter(&self) -> Jitter {
        match self.curve {
            Curve::Custom(_) => Jitter::None,
            Curve::Exponential | Curve::Constant => self.jitter,
        }
    }

    /// The measured-base configuration, if any; `None` on a custom curve.
    #[must_use]
    pub const fn measured_base(&self) -> Option<MeasuredBase> {
        match self.curve {
            Curve::Custom(_) => None,
            Curve::Exponential | Curve::Constant => self.measured_base,
        }
    }

    /// The margin a server's hint is kept within (K16), `None` when it is served verbatim,
    /// as on a custom curve.
    #[must_use]
    pub const fn pushback_margin(&self) -> Option<Duration> {
        match self.curve {
            Curve::Custom(_) => None,
            Curve::Exponential | Curve::Constant => self.pushback_margin,
        }
    }

    /// Checks the terms no curve can use: a factor that is not finite or below 1 on an
    /// exponential curve, a [`MeasuredBase`] with bad terms, or one on a curve that is not
    /// exponential (a constant's delay is also its cap, so measuring it would serve a value the
    /// caller cannot predict).
    pub fn validate(&self) -> Result<(), InvalidBackoff> {
        let kind = self.kind();
        let factor = self.factor();
        if kind == BackoffKind::Exponential && !(factor.is_finite() && factor >= 1.0) {
            return Err(InvalidBackoff::factor(factor));
        }
        if let Some(measured) = self.measured_base() {
            if kind != BackoffKind::Exponential {
                return Err(InvalidBackoff::measured_on(kind));
            }
            measured.validate()?;
        }
        Ok(())
    }

    fn effective_base(&self, base: Duration) -> Duration {
        match (&self.curve, self.maximum_delay) {
            (Curve::Custom(_), _) => Duration::ZERO,
            (Curve::Constant, Some(cap)) => base.min(cap),
            (Curve::Constant, None) | (Curve::Exponential, _) => base,
        }
    }
}

// ===== compute =====

impl Backoff {
    /// The delay before `next`, jittered from the thread's random generator.
    ///
    /// A curve with a [`MeasuredBase`] answers with its configured, unmeasured base here: the
    /// estimate lives in the executor, which calls [`compute_with_base`](Self::compute_with_base).
    #[must_use]
    pub fn compute(&self, next: &NextAttempt) -> Duration {
        self.compute_with_base(next, None, &mut rand::rng())
    }

    /// The delay before `next`, jittered from `rng`.
    ///
    /// For attempt `n` (the first retry is 2) the delay is `base × factor^(n−2)`, the base
    /// chosen by [`NextAttempt::kind`], then capped, then jittered. It is never negative and
    /// never overflows: a huge `n` saturates at the cap, or at [`Duration::MAX`] without one.
    /// Server pushback replaces the curve: served verbatim, capped only by the cap, never
    /// jittered; with a [`pushback_margin`](Self::with_pushback_margin), kept within the margin
    /// above the curve's delay.
    pub fn compute_with<R: Rng + ?Sized>(&self, next: &NextAttempt, rng: &mut R) -> Duration {
        self.compute_with_base(next, None, rng)
    }

    /// [`compute_with`](Self::compute_with), given the latency of a normal call to this
    /// dependency as the executor measured it.
    ///
    /// `observed` is the latency at the [`MeasuredBase::quantile`] over its window, or `None`
    /// while the estimate has fewer than [`MeasuredBase::minimum_samples`]. When both it and a
    /// [`MeasuredBase`] are present on an exponential curve, a transient retry's base becomes
    /// [`MeasuredBase::base_for`]; the throttled base and pushback are never measured.
    pub fn compute_with_base<R: Rng + ?Sized>(
        &self,
        next: &NextAttempt,
        observed: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        if let Curve::Custom(f) = &self.curve {
            return next.retry_after().unwrap_or_else(|| f(next));
        }
        let Some(pushback) = next.retry_after() else {
            return self.curve_delay(next, observed, rng);
        };
        let pushback = match self.pushback_margin {
            None => pushback,
            Some(margin) => {
                let computed = self.curve_delay(next, observed, rng);
                pushback.clamp(computed, computed.saturating_add(margin))
            }
        };
        self.maximum_delay.map_or(pushback, |cap| pushback.min(cap))
    }

    /// The curve's own delay before `next`, capped and jittered, pushback aside.
    fn curve_delay<R: Rng + ?Sized>(
        &self,
        next: &NextAttempt,
        observed: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        let cap = self.maximum_delay;
        let base = match next.kind() {
            RetryKind::Throttled => self.throttled_base(),
            RetryKind::Transient => match (&self.curve, self.measured_base, observed) {
                (Curve::Exponential, Some(measured), Some(observed)) => {
                    measured.base_for(self.transient_base, observed)
                }
                _ => self.transient_base(),
            },
        };
        let delay = match self.curve {
            Curve::Exponential => grow(base, self.factor, next.attempt().saturating_sub(2)),
            Curve::Constant | Curve::Custom(_) => base,
        };
        let capped = cap.map_or(delay, |cap| delay.min(cap));
        self.jitter.apply(capped, rng)
    }
}

/// `base × factor^exponent`, saturating at [`Duration::MAX`].
///
/// Computed in `f64` nanoseconds, which is exact for an integer factor while the result stays
/// below 2^53 ns (104 days), so `Jitter::None` sequences come out to the nanosecond.
fn grow(base: Duration, factor: f64, exponent: u32) -> Duration {
    if base.is_zero() || exponent == 0 {
        return base;
    }
    let growth = match i32::try_from(exponent) {
        Ok(exponent) => factor.powi(exponent),
        Err(_) => factor.powf(f64::from(exponent)),
    };
    let nanos = base.as_nanos() as f64 * growth;
    // Only a NaN factor gets here with NaN, and `validate` rejects it; serving the base
    // keeps the retry paced rather than immediate.
    if nanos.is_nan() {
        return base;
    }
    duration_from_nanos_f64(nanos)
}

/// Whole nanoseconds to a `Duration`, saturating at [`Duration::MAX`].
fn duration_from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let nanos = nanos.min(Duration::MAX.as_nanos());
    // Both casts are lossless: seconds fit `u64` below `Duration::MAX`, the remainder `u32`.
    Duration::new(
        (nanos / NANOS_PER_SEC) as u64,
        (nanos % NANOS_PER_SEC) as u32,
    )
}

/// Nanoseconds as `f64` to a `Duration`, rounded; negative or NaN is zero, too large is
/// [`Duration::MAX`].
fn duration_from_nanos_f64(nanos: f64) -> Duration {
    if nanos.is_nan() || nanos <= 0.0 {
        return Duration::ZERO;
    }
    // The float-to-int cast saturates, and `duration_from_nanos` clamps what is left.
    duration_from_nanos(nanos.round() as u128)
}

// ===== traits =====

impl PartialEq for Backoff {
    fn eq(&self, other: &Self) -> bool {
        match (&self.curve, &other.curve) {
            (Curve::Custom(a), Curve::Custom(b)) => Arc::ptr_eq(a, b),
            (Curve::Custom(_), _) | (_, Curve::Custom(_)) => false,
            _ => {
                self.kind() == other.kind()
                    && self.transient_base() == other.transient_base()
                    && self.throttled_base() == other.throttled_base()
                    && same_factor(self.factor(), other.factor())
                    && self.maximum_delay() == other.maximum_delay()
                    && self.jitter() == other.jitter()
                    && self.measured_base() == other.measured_base()
                    && self.pushback_margin() == other.pushback_margin()
            }
        }
    }
}

// A NaN factor is invalid, but a value holding one should still equal its own clone.
fn same_factor(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Backoff");
        out.field("kind", &self.kind());
        if let Curve::Custom(_) = self.curve {
            return out.finish_non_exhaustive();
        }
        out.field("transient_base", &self.transient_base())
            .field("throttled_base", &self.throttled_base())
            .field("factor", &self.factor())
            .field("maximum_delay", &self.maximum_delay())
            .field("jitter", &self.jitter());
        if let Some(measured) = &self.measured_base {
            out.field("measured_base", measured);
        }
        if let Some(margin) = &self.pushback_margin {
            out.field("pushback_margin", margin);
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests;
