//! How much of its own retry budget a client may use, as its dependency advises (F3).

use std::fmt;

/// Parts per million of a whole allowance: fine enough that no step of the advice is lost,
/// coarse enough that the arithmetic on a bucket's nano-tokens cannot overflow.
pub(crate) const PARTS: u32 = 1_000_000;

/// The share of its own retry budget a client may use, from `0` to `1` (the whole budget,
/// and what a client uses when its dependency advises nothing).
///
/// The floor goes first (F3): the budget's floor is what lets a small client retry far more
/// than the budget's fraction of its traffic, so as the allowance falls from `1` to `0.5` the
/// floor, and the banked tokens above the fraction's own, fall from whole to nothing; below
/// `0.5` the fraction itself falls, to nothing at `0`. A first attempt is never refused,
/// whatever the allowance.
///
/// ```
/// use nresilience_core::fleet::Allowance;
///
/// let half = Allowance::new(0.5);
/// assert_eq!(half.floor_share(), 0.0); // the floor is gone first
/// assert_eq!(half.fraction_share(), 1.0); // the fraction is whole
/// assert_eq!(Allowance::new(0.25).fraction_share(), 0.5);
/// assert_eq!(Allowance::new(7.0), Allowance::WHOLE); // clamped
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Allowance(u32);

impl Allowance {
    /// The whole budget: what a client uses when its dependency advises nothing.
    pub const WHOLE: Self = Self(PARTS);

    /// No retries at all beyond what the fraction's deposits made before.
    pub const NONE: Self = Self(0);

    /// An allowance of `share` of the budget, clamped to `0..=1` (`NaN` is the whole budget:
    /// advice that says nothing changes nothing).
    #[must_use]
    pub fn new(share: f64) -> Self {
        if share.is_nan() {
            return Self::WHOLE;
        }
        // Clamped first, so the cast is exact and in range.
        Self((share.clamp(0.0, 1.0) * f64::from(PARTS)).round() as u32)
    }

    /// The allowance that leaves `fraction` of the budget's fraction and `floor` of its
    /// floor, each clamped to `0..=1`: the floor goes first, so any of it leaves the fraction
    /// whole.
    #[must_use]
    pub(crate) fn of_shares(fraction: f64, floor: f64) -> Self {
        if floor > 0.0 {
            Self::new((1.0 + floor) / 2.0)
        } else {
            Self::new(fraction / 2.0)
        }
    }

    /// The allowance in parts per million.
    #[must_use]
    pub(crate) const fn from_parts(parts: u32) -> Self {
        Self(if parts > PARTS { PARTS } else { parts })
    }

    /// The allowance in parts per million, `0..=1_000_000`.
    #[must_use]
    pub const fn parts(self) -> u32 {
        self.0
    }

    /// The allowance as a share, `0.0..=1.0`.
    #[must_use]
    pub fn share(self) -> f64 {
        f64::from(self.0) / f64::from(PARTS)
    }

    /// Whether this is the whole budget.
    #[must_use]
    pub const fn is_whole(self) -> bool {
        self.0 == PARTS
    }

    /// The share of the budget's floor (and of its banked tokens) left: `0` from an
    /// allowance of `0.5` down.
    #[must_use]
    pub fn floor_share(self) -> f64 {
        f64::from(self.floor_parts()) / f64::from(PARTS)
    }

    /// The share of the budget's fraction left: whole down to an allowance of `0.5`.
    #[must_use]
    pub fn fraction_share(self) -> f64 {
        f64::from(self.fraction_parts()) / f64::from(PARTS)
    }

    pub(crate) const fn floor_parts(self) -> u32 {
        (2 * self.0).saturating_sub(PARTS)
    }

    pub(crate) const fn fraction_parts(self) -> u32 {
        let doubled = 2 * self.0;
        if doubled > PARTS {
            PARTS
        } else {
            doubled
        }
    }
}

impl Default for Allowance {
    fn default() -> Self {
        Self::WHOLE
    }
}

impl fmt::Display for Allowance {
    /// Three decimals, as the wire carries it: `0.420`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}", self.share())
    }
}
