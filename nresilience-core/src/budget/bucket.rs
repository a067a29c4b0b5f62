use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{BudgetOptions, InvalidBudget};
use crate::Criticality;

/// Fixed-point units per token. Balances are whole nano-tokens, so ten deposits of `0.1`
/// are exactly one token: in `f64` they would sum to `0.9999999999999999` and fund nothing.
const UNIT: u64 = 1_000_000_000;
const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// The token bucket behind a retry budget (SPEC B1–B9, B11).
///
/// Successful attempts deposit `fraction` tokens, a floor rate refills it regardless of
/// traffic, and each retry withdraws one token. A new bucket starts full (B4). Every method
/// takes the current time from the caller, read *before* the call, so the lock inside holds
/// arithmetic only: no clock read, no allocation, no logging (B6).
///
/// # Example
///
/// ```
/// use std::time::Instant;
/// use nresilience_core::{BudgetOptions, Criticality, TokenBucket};
///
/// let now = Instant::now();
/// let options = BudgetOptions::default().minimum_per_second(0.0); // capacity 1
/// let bucket = TokenBucket::new(options, now)?;
///
/// assert!(bucket.try_withdraw(now, Criticality::Normal)); // the banked token
/// assert!(!bucket.try_withdraw(now, Criticality::Normal));
/// for _ in 0..10 {
///     bucket.deposit(now); // ten successes at 0.1 ...
/// }
/// assert!(bucket.try_withdraw(now, Criticality::Normal)); // ... fund exactly one retry
/// assert_eq!(bucket.retry_after(now), None); // no floor: no honest hint
/// # Ok::<(), nresilience_core::InvalidBudget>(())
/// ```
pub struct TokenBucket {
    /// Nano-tokens per successful attempt.
    deposit: u64,
    /// Nano-tokens accrued per second by the floor (equivalently, per nanosecond ×10⁹).
    rate: u64,
    capacity: u64,
    /// The balance a sheddable retry needs: one token plus half the bucket (B9).
    sheddable_threshold: u64,
    /// Elapsed nanoseconds after which the floor alone refills an empty bucket; longer gaps
    /// fill it without multiplying, which keeps the arithmetic far from overflow.
    fill_nanos: u128,
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    balance: u64,
    /// Floor accrual below one nano-token, carried so the floor rate is exact over time.
    remainder: u64,
    refilled_at: Instant,
}

impl TokenBucket {
    /// A full bucket (B4) with the given options, or the reason they cannot work.
    pub fn new(options: BudgetOptions, now: Instant) -> Result<Self, InvalidBudget> {
        options.validate()?;
        let to_units = |tokens: f64| (tokens * UNIT as f64).round() as u64;
        let capacity = to_units(options.effective_capacity());
        let rate = to_units(options.get_minimum_per_second());
        let fill_nanos = if rate == 0 {
            u128::MAX
        } else {
            u128::from(capacity) * u128::from(NANOS_PER_SECOND) / u128::from(rate) + 1
        };
        Ok(Self {
            deposit: to_units(options.get_fraction()),
            rate,
            capacity,
            sheddable_threshold: UNIT + capacity / 2,
            fill_nanos,
            state: Mutex::new(State {
                balance: capacity,
                remainder: 0,
                refilled_at: now,
            }),
        })
    }

    /// Adds `fraction` tokens for a successful attempt, up to the capacity (B1).
    pub fn deposit(&self, now: Instant) {
        let mut state = self.lock();
        self.refill(&mut state, now);
        state.balance = (state.balance + self.deposit).min(self.capacity);
    }

    /// Takes one token for a retry if the criticality allows it (B5, B9).
    ///
    /// `Normal` and `Critical` need one whole token; `Sheddable` needs one token plus half
    /// the capacity, so it always leaves half the bucket for work someone is waiting on.
    /// First attempts never come here: only retries are charged.
    pub fn try_withdraw(&self, now: Instant, criticality: Criticality) -> bool {
        let needed = self.needed(criticality);
        let mut state = self.lock();
        self.refill(&mut state, now);
        if state.balance >= needed {
            state.balance -= UNIT;
            true
        } else {
            false
        }
    }

    /// How long the floor needs to accrue the token a `Normal` retry is missing (B7).
    ///
    /// Refills first, so the hint is as of `now`. `Some(Duration::ZERO)` when a token is
    /// already there; `None` with a zero floor, where only successes refill the bucket and
    /// nobody can say when the next one comes.
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        self.retry_after_for(now, Criticality::Normal)
    }

    /// Like [`retry_after`](Self::retry_after), for a retry of the given criticality.
    pub fn retry_after_for(&self, now: Instant, criticality: Criticality) -> Option<Duration> {
        let needed = self.needed(criticality);
        let state = {
            let mut state = self.lock();
            self.refill(&mut state, now);
            *state
        };
        if state.balance >= needed {
            return Some(Duration::ZERO);
        }
        if self.rate == 0 {
            return None;
        }
        let missing = u128::from(needed - state.balance) * u128::from(NANOS_PER_SECOND);
        let missing = missing.saturating_sub(u128::from(state.remainder));
        let nanos = missing.div_ceil(u128::from(self.rate));
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// The share of the bucket that is spent, from `0.0` (full) to `1.0` (empty: retries
    /// are being refused) (B11).
    pub fn utilization(&self, now: Instant) -> f64 {
        1.0 - self.balance_units(now) as f64 / self.capacity as f64
    }

    /// The tokens in the bucket at `now`.
    pub fn balance(&self, now: Instant) -> f64 {
        self.balance_units(now) as f64 / UNIT as f64
    }

    /// The bucket's capacity in tokens.
    pub fn capacity(&self) -> f64 {
        self.capacity as f64 / UNIT as f64
    }

    fn balance_units(&self, now: Instant) -> u64 {
        let mut state = self.lock();
        self.refill(&mut state, now);
        state.balance
    }

    fn needed(&self, criticality: Criticality) -> u64 {
        match criticality {
            Criticality::Sheddable => self.sheddable_threshold,
            Criticality::Critical | Criticality::Normal => UNIT,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The critical section is arithmetic that cannot panic, so a poisoned lock still
        // guards a consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Accrues the floor since the last refill point (B2, B6).
    ///
    /// A `now` at or before that point accrues nothing and leaves it where it is: a thread
    /// that read the clock just before another one refilled loses a sub-microsecond of
    /// accrual, which no per-second rate can observe, instead of rewinding the bucket.
    fn refill(&self, state: &mut State, now: Instant) {
        let elapsed = match now.checked_duration_since(state.refilled_at) {
            Some(elapsed) if !elapsed.is_zero() => elapsed.as_nanos(),
            _ => return,
        };
        state.refilled_at = now;
        if self.rate == 0 {
            return;
        }
        if elapsed >= self.fill_nanos {
            state.balance = self.capacity;
            state.remainder = 0;
            return;
        }
        let accrued = elapsed * u128::from(self.rate) + u128::from(state.remainder);
        // `elapsed < fill_nanos` bounds `accrued` by capacity × 10⁹ plus one second of rate.
        let (whole, remainder) = match u64::try_from(accrued) {
            Ok(accrued) => (accrued / NANOS_PER_SECOND, accrued % NANOS_PER_SECOND),
            Err(_) => {
                let per_second = u128::from(NANOS_PER_SECOND);
                let whole = u64::try_from(accrued / per_second).unwrap_or(u64::MAX);
                (whole, (accrued % per_second) as u64)
            }
        };
        let balance = state.balance.saturating_add(whole);
        if balance >= self.capacity {
            state.balance = self.capacity;
            state.remainder = 0;
        } else {
            state.balance = balance;
            state.remainder = remainder;
        }
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = *self.lock();
        f.debug_struct("TokenBucket")
            .field("balance", &(state.balance as f64 / UNIT as f64))
            .field("capacity", &self.capacity())
            .field("fraction", &(self.deposit as f64 / UNIT as f64))
            .field("minimum_per_second", &(self.rate as f64 / UNIT as f64))
            .finish()
    }
}

#[cfg(test)]
#[path = "bucket_tests.rs"]
mod tests;
