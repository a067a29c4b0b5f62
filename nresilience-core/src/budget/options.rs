use std::fmt;

/// The parameters of a retry budget's token bucket.
///
/// Defaults to a `fraction` of `0.1` (ten successes fund one retry), a floor of `3.0`
/// tokens per second and a capacity of ten seconds of the floor (`30`).
///
/// Read a term by its field (`options.fraction`); set it with the method of the same name.
/// The setters only record values; [`TokenBucket::new`](super::TokenBucket::new) and
/// [`BudgetOptions::validate`] reject invalid ones with a reason.
///
/// # Example
///
/// ```
/// use nresilience_core::BudgetOptions;
///
/// let options = BudgetOptions::default().minimum_per_second(0.0);
/// // A zero floor leaves a bucket of one token: at most one retry can be banked.
/// assert_eq!(options.effective_capacity(), 1.0);
/// assert_eq!(options.fraction, 0.1);
/// assert!(BudgetOptions::default().fraction(0.0).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct BudgetOptions {
    /// Tokens each successful attempt deposits; see [`fraction`](Self::fraction()).
    pub fraction: f64,
    /// Tokens per second the bucket refills regardless of traffic; see
    /// [`minimum_per_second`](Self::minimum_per_second()).
    pub minimum_per_second: f64,
    /// The explicit capacity, if any; see [`effective_capacity`](Self::effective_capacity).
    pub capacity: Option<f64>,
}

/// The largest floor rate accepted, in tokens per second.
///
/// Far above any sensible retry rate; it keeps the bucket's fixed-point arithmetic exact.
pub const MAX_MINIMUM_PER_SECOND: f64 = 1_000_000.0;

/// The largest capacity accepted, in tokens.
pub const MAX_CAPACITY: f64 = 1_000_000_000.0;

impl BudgetOptions {
    /// The options with every default: fraction `0.1`, floor `3.0`/s, capacity `30`.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            fraction: 0.1,
            minimum_per_second: 3.0,
            capacity: None,
        }
    }

    /// Tokens each successful attempt deposits, in `(0, 1]`.
    ///
    /// There is no zero fraction: a budget that is off is
    /// [`RetryBudget::None`](super::RetryBudget::None). Defaults to `0.1`.
    #[must_use]
    pub const fn fraction(mut self, fraction: f64) -> Self {
        self.fraction = fraction;
        self
    }

    /// Tokens per second the bucket refills regardless of traffic, `>= 0`.
    ///
    /// With `0`, successful attempts are the only source of tokens. Defaults to `3.0`.
    #[must_use]
    pub const fn minimum_per_second(mut self, minimum_per_second: f64) -> Self {
        self.minimum_per_second = minimum_per_second;
        self
    }

    /// The most tokens the bucket can hold, `>= 1`.
    ///
    /// Defaults to ten seconds of the floor, never below one token.
    #[must_use]
    pub const fn capacity(mut self, capacity: f64) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The capacity the bucket will have: the explicit one, or `max(10 × floor, 1)`.
    #[must_use]
    pub fn effective_capacity(&self) -> f64 {
        self.capacity
            .unwrap_or_else(|| (10.0 * self.minimum_per_second).max(1.0))
    }

    /// Checks every term, returning the first that is out of range.
    pub fn validate(&self) -> Result<(), InvalidBudget> {
        let fraction = self.fraction;
        if !(fraction.is_finite() && fraction > 0.0 && fraction <= 1.0) {
            return Err(InvalidBudget::new(format!(
                "fraction must be in (0, 1], got {fraction}; use RetryBudget::None to turn the budget off"
            )));
        }
        let floor = self.minimum_per_second;
        if !(floor.is_finite() && (0.0..=MAX_MINIMUM_PER_SECOND).contains(&floor)) {
            return Err(InvalidBudget::new(format!(
                "minimum_per_second must be in [0, {MAX_MINIMUM_PER_SECOND}], got {floor}"
            )));
        }
        let capacity = self.effective_capacity();
        if !(capacity.is_finite() && (1.0..=MAX_CAPACITY).contains(&capacity)) {
            return Err(InvalidBudget::new(format!(
                "capacity must be in [1, {MAX_CAPACITY}] tokens, got {capacity}"
            )));
        }
        Ok(())
    }
}

impl Default for BudgetOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// A budget configuration that cannot work, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBudget {
    reason: String,
}

impl InvalidBudget {
    fn new(reason: String) -> Self {
        Self { reason }
    }

    /// Why the configuration was rejected.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for InvalidBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid retry budget: {}", self.reason)
    }
}

impl std::error::Error for InvalidBudget {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_b1_b2_b3() {
        let options = BudgetOptions::default();
        assert_eq!(options.fraction, 0.1);
        assert_eq!(options.minimum_per_second, 3.0);
        assert_eq!(options.effective_capacity(), 30.0);
        assert!(options.validate().is_ok());
    }

    #[test]
    fn b3_capacity_is_ten_seconds_of_floor_never_below_one() {
        assert_eq!(
            BudgetOptions::default()
                .minimum_per_second(0.0)
                .effective_capacity(),
            1.0
        );
        assert_eq!(
            BudgetOptions::default()
                .minimum_per_second(0.05)
                .effective_capacity(),
            1.0
        );
        assert_eq!(
            BudgetOptions::default()
                .minimum_per_second(7.0)
                .effective_capacity(),
            70.0
        );
        assert_eq!(
            BudgetOptions::default().capacity(5.0).effective_capacity(),
            5.0
        );
    }

    #[test]
    fn b1_zero_fraction_points_to_retry_budget_none() {
        let err = BudgetOptions::default()
            .fraction(0.0)
            .validate()
            .unwrap_err();
        assert!(err.reason().contains("RetryBudget::None"), "{err}");
        assert!(err
            .to_string()
            .starts_with("invalid retry budget: fraction"));
    }

    #[test]
    fn invalid_terms_are_rejected_with_a_reason() {
        let bad = [
            BudgetOptions::default().fraction(1.5),
            BudgetOptions::default().fraction(-0.1),
            BudgetOptions::default().fraction(f64::NAN),
            BudgetOptions::default().fraction(f64::INFINITY),
            BudgetOptions::default().minimum_per_second(-1.0),
            BudgetOptions::default().minimum_per_second(f64::NAN),
            BudgetOptions::default().minimum_per_second(f64::INFINITY),
            BudgetOptions::default().capacity(0.5),
            BudgetOptions::default().capacity(f64::NAN),
            BudgetOptions::default().capacity(f64::INFINITY),
        ];
        for options in bad {
            let err = options.validate().expect_err("must be rejected");
            assert!(!err.reason().is_empty());
        }
        assert!(BudgetOptions::default().fraction(1.0).validate().is_ok());
    }
}
