use std::{error::Error, fmt};

use super::BackoffKind;

/// A [`Backoff`](super::Backoff) or [`MeasuredBase`](super::MeasuredBase) term that no curve
/// can use, reported by their `validate` methods.
///
/// The setters accept any value so that a curve can be derived one term at a time; validation
/// happens once the value is complete.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidBackoff {
    reason: Reason,
}

#[derive(Clone, Debug, PartialEq)]
enum Reason {
    Factor(f64),
    Multiple(f64),
    Quantile(f64),
    Spread(f64),
    ZeroWindow,
    MeasuredOnNonExponential(BackoffKind),
}

impl InvalidBackoff {
    pub(super) const fn factor(factor: f64) -> Self {
        Self::new(Reason::Factor(factor))
    }

    pub(super) const fn multiple(multiple: f64) -> Self {
        Self::new(Reason::Multiple(multiple))
    }

    pub(super) const fn quantile(quantile: f64) -> Self {
        Self::new(Reason::Quantile(quantile))
    }

    pub(super) const fn spread(spread: f64) -> Self {
        Self::new(Reason::Spread(spread))
    }

    pub(super) const fn zero_window() -> Self {
        Self::new(Reason::ZeroWindow)
    }

    pub(super) const fn measured_on(kind: BackoffKind) -> Self {
        Self::new(Reason::MeasuredOnNonExponential(kind))
    }

    const fn new(reason: Reason) -> Self {
        Self { reason }
    }
}

impl fmt::Display for InvalidBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Factor(v) => write!(f, "backoff factor must be a finite number >= 1, got {v}"),
            Reason::Multiple(v) => {
                write!(
                    f,
                    "measured base multiple must be a finite number > 0, got {v}"
                )
            }
            Reason::Quantile(v) => write!(f, "measured base quantile must be in (0, 0.5], got {v}"),
            Reason::Spread(v) => write!(
                f,
                "measured base spread must be a finite number > 1, got {v}"
            ),
            Reason::ZeroWindow => f.write_str("measured base window must be longer than zero"),
            Reason::MeasuredOnNonExponential(kind) => write!(
                f,
                "a measured base needs an exponential backoff, this one is {}",
                kind.name()
            ),
        }
    }
}

impl Error for InvalidBackoff {}
