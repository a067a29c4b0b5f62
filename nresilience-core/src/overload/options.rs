//! The settings of overload control, checked when a policy is built.

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// How the concurrency limit adapts (O2). The default binds only where work accumulates
/// (O5); the other three are the classic latency-based ones of Netflix's
/// `concurrency-limits`. See the [module docs](super) for the evidence behind the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LimitAlgorithm {
    /// No limit until, for two windows, what is sent (and what the expected wait turned away from
    /// callers who could have waited longer than the dependency's attempts took) outruns what the
    /// dependency answers, or callers give up on more than a fifth of the attempts that end (a
    /// queue), then the work held at that moment, lower while work still accumulates: a dependency
    /// that is slower but keeps pace is not limited, however high its latency. While its attempts
    /// in flight ramp up to a latency of seconds, what is sent outruns what is answered too, but a
    /// ramp finishes more window after window where a queue finishes the same: those windows, and
    /// those before the dependency is first seen to finish anything, do not count. A bound limit is
    /// raised now and then and keeps the raise only if the dependency then finishes more. The
    /// default (O5).
    #[default]
    Accumulation,
    /// Scales the limit by the ratio of the no-load latency to the latency measured, plus a
    /// queue allowance of √limit (Gradient2).
    Gradient,
    /// Adds one while latency stays near its no-load value and the limit is used; multiplies
    /// by 0.9 when it does not, or when an attempt is cut (additive increase, multiplicative
    /// decrease).
    Aimd,
    /// Estimates the queue as `limit × (1 − no-load / measured)` and moves the limit by
    /// `log10(limit)` steps to keep it between 3 and 6 of those (TCP Vegas).
    Vegas,
}

impl LimitAlgorithm {
    /// Every algorithm, the default first.
    pub const ALL: [Self; 4] = [Self::Accumulation, Self::Gradient, Self::Aimd, Self::Vegas];

    /// Its name: `accumulation`, `gradient`, `aimd` or `vegas`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Accumulation => "accumulation",
            Self::Gradient => "gradient",
            Self::Aimd => "aimd",
            Self::Vegas => "vegas",
        }
    }
}

/// Overload control for a policy's dependencies (O1, O2): an attempt nobody will wait for is
/// not sent, and attempts in flight are held to a limit that adapts to the latency measured.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::overload::{LimitAlgorithm, OverloadControl};
/// use nresilience_core::RetryPolicy;
///
/// let control = OverloadControl::new().floor(10).algorithm(LimitAlgorithm::Aimd);
/// let policy = RetryPolicy::builder().overload_control(Some(control)).build()?;
/// assert_eq!(policy.overload_control().map(|c| c.floor_value()), Some(10));
///
/// // Invalid settings are refused when the policy is built, with the reason.
/// let error = RetryPolicy::builder()
///     .overload_control(Some(OverloadControl::new().floor(0)))
///     .build()
///     .unwrap_err();
/// assert!(error.to_string().contains("floor"));
/// # Ok::<(), nresilience_core::InvalidPolicy>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverloadControl {
    pub(super) floor: u32,
    pub(super) initial: Option<u32>,
    pub(super) max: u32,
    pub(super) window: Duration,
    pub(super) algorithm: LimitAlgorithm,
}

impl Default for OverloadControl {
    fn default() -> Self {
        Self::new()
    }
}

impl OverloadControl {
    /// The defaults: a floor of 20 attempts in flight (Gradient2's), at most 1,000, completions
    /// counted over the last second, the [`Accumulation`](LimitAlgorithm::Accumulation)
    /// algorithm, which starts unbound.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            floor: 20,
            initial: None,
            max: 1_000,
            window: Duration::from_secs(1),
            algorithm: LimitAlgorithm::Accumulation,
        }
    }

    /// The fewest attempts in flight the limit allows, however slow the dependency: enough
    /// that its recovery is seen. At least 1.
    #[must_use]
    pub const fn floor(mut self, attempts: u32) -> Self {
        self.floor = attempts;
        self
    }

    /// The limit a dependency starts with, from the floor to the maximum. Defaults to the
    /// algorithm's own start: the maximum for [`Accumulation`](LimitAlgorithm::Accumulation),
    /// which binds only once work accumulates, the floor for the latency-based ones.
    #[must_use]
    pub const fn initial(mut self, attempts: u32) -> Self {
        self.initial = Some(attempts);
        self
    }

    /// The most attempts in flight the limit ever allows.
    #[must_use]
    pub const fn max(mut self, attempts: u32) -> Self {
        self.max = attempts;
        self
    }

    /// How far back completions are counted for the completion rate, and latency for the
    /// limit: from 100 ms to a minute. The limit adapts ten times per window.
    #[must_use]
    pub const fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// How the limit adapts.
    #[must_use]
    pub const fn algorithm(mut self, algorithm: LimitAlgorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The floor.
    #[must_use]
    pub const fn floor_value(&self) -> u32 {
        self.floor
    }

    /// The starting limit.
    #[must_use]
    pub const fn initial_value(&self) -> u32 {
        match (self.initial, self.algorithm) {
            (Some(initial), _) => initial,
            (None, LimitAlgorithm::Accumulation) => self.max,
            (None, _) => self.floor,
        }
    }

    /// The maximum limit.
    #[must_use]
    pub const fn max_value(&self) -> u32 {
        self.max
    }

    /// The window.
    #[must_use]
    pub const fn window_value(&self) -> Duration {
        self.window
    }

    /// The algorithm.
    #[must_use]
    pub const fn algorithm_value(&self) -> LimitAlgorithm {
        self.algorithm
    }

    /// Checks the settings: a floor of at least 1, `floor ≤ initial ≤ max`, a window from
    /// 100 ms to a minute.
    pub fn validate(&self) -> Result<(), InvalidOverload> {
        let reason = if self.floor == 0 {
            format!(
                "floor must be at least 1 attempt in flight, got {}",
                self.floor
            )
        } else if self.floor > self.max {
            format!("floor {} is above the maximum {}", self.floor, self.max)
        } else if !(self.floor..=self.max).contains(&self.initial_value()) {
            format!(
                "initial limit {} must be from the floor {} to the maximum {}",
                self.initial_value(),
                self.floor,
                self.max
            )
        } else if !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&self.window) {
            format!("window must be from 100 ms to 60 s, got {:?}", self.window)
        } else {
            return Ok(());
        };
        Err(InvalidOverload(reason))
    }
}

/// Overload control settings that cannot work, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidOverload(String);

impl fmt::Display for InvalidOverload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid overload control: {}", self.0)
    }
}

impl Error for InvalidOverload {}
