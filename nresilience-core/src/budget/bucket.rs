use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{BudgetOptions, InvalidBudget};
use crate::criticality::Criticality;
use crate::fleet::allowance::{Allowance, PARTS};

/// Fixed-point units per token. Balances are whole nano-tokens, so ten deposits of `0.1`
/// are exactly one token: in `f64` they would sum to `0.9999999999999999` and fund nothing.
const UNIT: u64 = 1_000_000_000;
const NANOS_PER_SECOND: u64 = 1_000_000_000;
/// How long a dependency's advice holds without being heard again (F3): a dependency that
/// stops advising, or a client that stops calling it, is back to its whole budget.
pub const ADVICE_LAPSES_AFTER: Duration = Duration::from_secs(10);

/// The token bucket behind a retry budget.
///
/// Successful attempts deposit `fraction` tokens, a floor rate refills it regardless of
/// traffic, and each retry withdraws one token. A new bucket starts full. Every method
/// takes the current time from the caller, read *before* the call, so the bucket itself is
/// arithmetic only: no clock read, no allocation, no logging.
///
/// # Why lock-free
///
/// `deposit` runs on every successful attempt of every call sharing the bucket. The state
/// is two atomics: the balance and the refill point. A refill claims the span from the
/// refill point to `now` by moving the point forward with one compare-and-swap, so each
/// instant is accrued once, by one thread, and a late timestamp accrues nothing; the
/// balance then changes by one compare-and-swap that never exceeds the capacity nor goes
/// below zero. Two threads on one bucket never wait for each other.
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
    /// The dependency's advice (F3), in parts per million of the whole budget.
    allowance: AtomicU32,
    /// Nanoseconds from `origin` at which the advice was last heard.
    advised_at: AtomicU64,
    /// Nano-tokens the floor accrues per second.
    rate: u64,
    capacity: u64,
    /// Elapsed nanoseconds after which the floor alone refills an empty bucket; longer gaps
    /// fill it without multiplying, which keeps the arithmetic far from overflow.
    fill_nanos: u64,
    /// The instant the refill point is counted from.
    origin: Instant,
    balance: AtomicU64,
    /// Nanoseconds from `origin` up to which the floor has been accrued.
    refilled_to: AtomicU64,
}

impl TokenBucket {
    /// A full bucket with the given options, or the reason they cannot work.
    pub fn new(options: BudgetOptions, now: Instant) -> Result<Self, InvalidBudget> {
        options.validate()?;
        Ok(Self::new_unchecked(options, now))
    }

    /// A full bucket from options already validated.
    pub(crate) fn new_unchecked(options: BudgetOptions, now: Instant) -> Self {
        let to_units = |tokens: f64| (tokens * UNIT as f64).round() as u64;
        let capacity = to_units(options.effective_capacity());
        let rate = to_units(options.minimum_per_second);
        let fill_nanos = if rate == 0 {
            u64::MAX
        } else {
            let nanos = u128::from(capacity) * u128::from(NANOS_PER_SECOND) / u128::from(rate);
            u64::try_from(nanos + 1).unwrap_or(u64::MAX)
        };
        Self {
            deposit: to_units(options.fraction),
            allowance: AtomicU32::new(PARTS),
            advised_at: AtomicU64::new(0),
            rate,
            capacity,
            fill_nanos,
            origin: now,
            balance: AtomicU64::new(capacity),
            refilled_to: AtomicU64::new(0),
        }
    }

    /// Adds `fraction` tokens for a successful attempt, up to the capacity; `true` when the
    /// bucket was short of full before, so that its level changed.
    pub fn deposit(&self, now: Instant) -> bool {
        // A full bucket stays full, and nothing is lost by leaving the floor unaccrued: the
        // next withdrawal accrues the whole span, capped at the capacity the bucket already
        // holds, and only a withdrawal lowers the balance.
        let limits = self.limits(now);
        if self.balance.load(Ordering::Acquire) >= limits.capacity {
            return false;
        }
        let add = self.accrue(now, &limits) + limits.deposit;
        let capacity = limits.capacity;
        let _ = self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                Some(balance.saturating_add(add).min(capacity))
            });
        true
    }

    /// Takes one token for a retry if the criticality allows it.
    ///
    /// `Normal` and `Critical` need one whole token; `Sheddable` needs one token plus half
    /// the capacity, so it always leaves half the bucket for work someone is waiting on.
    /// First attempts never come here: only retries are charged.
    pub fn try_withdraw(&self, now: Instant, criticality: Criticality) -> bool {
        let limits = self.limits(now);
        let needed = limits.needed(criticality);
        let accrued = self.accrue(now, &limits);
        let capacity = limits.capacity;
        let mut granted = false;
        let _ = self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                let balance = balance.saturating_add(accrued).min(capacity);
                granted = balance >= needed;
                Some(if granted { balance - UNIT } else { balance })
            });
        granted
    }

    /// Gives back the token withdrawn for a retry that was then not sent: its delay
    /// would have passed the deadline, its caller cancelled it, a breaker refused it, the
    /// dependency refused its connection. A token pays for a retry that is sent, never for
    /// one that is not. Up to the capacity.
    pub fn refund(&self) {
        let capacity = self.capacity;
        let _ = self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                Some(balance.saturating_add(UNIT).min(capacity))
            });
    }

    /// How long the floor needs to accrue the token a `Normal` retry is missing.
    ///
    /// Refills first, so the hint is as of `now`. `Some(Duration::ZERO)` when a token is
    /// already there; `None` with a zero floor, where only successes refill the bucket and
    /// nobody can say when the next one comes, and `None` for a retry this bucket can never
    /// fund (a sheddable one, when the capacity is under two tokens).
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        self.retry_after_for(now, Criticality::Normal)
    }

    /// Like [`retry_after`](Self::retry_after), for a retry of the given criticality.
    pub fn retry_after_for(&self, now: Instant, criticality: Criticality) -> Option<Duration> {
        let limits = self.limits(now);
        let needed = limits.needed(criticality);
        // A bucket of under two tokens never holds what a sheddable retry needs: no wait
        // funds it, so there is no honest hint.
        if needed > limits.capacity {
            return None;
        }
        let balance = self.balance_units(now);
        if balance >= needed {
            return Some(Duration::ZERO);
        }
        let rate = of_parts(self.rate, limits.floor);
        if rate == 0 {
            return None;
        }
        let missing = u128::from(needed - balance) * u128::from(NANOS_PER_SECOND);
        let nanos = missing.div_ceil(u128::from(rate));
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// The share of the bucket that is spent, from `0.0` (full) to `1.0` (empty: retries
    /// are being refused).
    pub fn utilization(&self, now: Instant) -> f64 {
        let capacity = self.limits(now).capacity;
        1.0 - self.balance_units(now) as f64 / capacity as f64
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
        let limits = self.limits(now);
        let accrued = self.accrue(now, &limits);
        let capacity = limits.capacity;
        match self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                Some(balance.saturating_add(accrued).min(capacity))
            }) {
            Ok(before) | Err(before) => before.saturating_add(accrued).min(capacity),
        }
    }

    /// Follows the dependency's advice (F3), heard at `now`: from then until it lapses
    /// ([`ADVICE_LAPSES_AFTER`] without being heard again), the bucket's floor, capacity and
    /// fraction are those of `allowance`, and it banks at most one second of its advised
    /// floor (or one token). Tokens banked above that are gone at the next withdrawal; they do
    /// not come back with the allowance, which refills the bucket at its floor as before.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use nresilience_core::fleet::Allowance;
    /// use nresilience_core::{BudgetOptions, Criticality, TokenBucket};
    ///
    /// let now = Instant::now();
    /// let bucket = TokenBucket::new(BudgetOptions::default(), now)?; // 30 tokens, 3 a second
    /// bucket.follow(Allowance::new(0.5), now); // no floor, no banked tokens beyond one
    /// assert_eq!(bucket.balance(now), 1.0);
    /// assert!(bucket.try_withdraw(now, Criticality::Normal));
    /// assert!(!bucket.try_withdraw(now + Duration::from_secs(5), Criticality::Normal));
    /// // Unheard for longer than the advice holds, the bucket is whole again.
    /// assert_eq!(bucket.allowance(now + Duration::from_secs(11)), Allowance::WHOLE);
    /// # Ok::<(), nresilience_core::InvalidBudget>(())
    /// ```
    pub fn follow(&self, allowance: Allowance, now: Instant) {
        let now = self.nanos(now);
        // The instant first, so a reader that sees the new allowance sees it as fresh.
        self.advised_at.fetch_max(now, Ordering::AcqRel);
        self.allowance.store(allowance.parts(), Ordering::Release);
    }

    /// The allowance the bucket follows at `now`: the dependency's last advice while it
    /// holds, the whole budget otherwise.
    pub fn allowance(&self, now: Instant) -> Allowance {
        Allowance::from_parts(self.allowance_parts(now))
    }

    #[inline]
    fn allowance_parts(&self, now: Instant) -> u32 {
        let parts = self.allowance.load(Ordering::Acquire);
        if parts >= PARTS {
            return PARTS;
        }
        let heard = self.advised_at.load(Ordering::Acquire);
        if self.nanos(now).saturating_sub(heard) > ADVICE_LAPSES_NANOS {
            PARTS
        } else {
            parts
        }
    }

    /// What the bucket may hold and take in at `now`, under the advice it follows.
    #[inline]
    fn limits(&self, now: Instant) -> Limits {
        let parts = self.allowance_parts(now);
        if parts >= PARTS {
            return Limits {
                capacity: self.capacity,
                deposit: self.deposit,
                floor: PARTS,
            };
        }
        let allowance = Allowance::from_parts(parts);
        let floor = allowance.floor_parts();
        Limits {
            // Under advice a bucket banks at most a second of its advised floor: a fleet's
            // banked tokens, spent together, are a burst no advice would bound. At least the
            // one token the fraction alone can bank (B2, B3).
            capacity: of_parts(self.capacity.min(self.rate), floor).max(UNIT.min(self.capacity)),
            deposit: of_parts(self.deposit, allowance.fraction_parts()),
            floor,
        }
    }

    fn nanos(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Claims the floor's accrual since the refill point, in nano-tokens (B2, B6).
    ///
    /// A `now` at or before the refill point accrues nothing and leaves it where it is: a
    /// thread that read the clock just before another one refilled forgoes a sub-microsecond
    /// of accrual, which no per-second rate can observe, instead of rewinding the bucket.
    /// Below a nano-token the accrual is truncated.
    fn accrue(&self, now: Instant, limits: &Limits) -> u64 {
        if self.rate == 0 {
            return 0;
        }
        let now = self.nanos(now);
        let from = self.refilled_to.load(Ordering::Acquire);
        if now <= from {
            return 0;
        }
        if self
            .refilled_to
            .compare_exchange(from, now, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another thread claimed a span ending at or before `now`; what it left
            // unclaimed accrues on the next refill.
            return 0;
        }
        let elapsed = now - from;
        let accrued = if elapsed >= self.fill_nanos {
            self.capacity
        } else if let Some(product) = elapsed.checked_mul(self.rate) {
            product / NANOS_PER_SECOND
        } else {
            // `elapsed < fill_nanos` bounds the product by capacity × 10⁹ plus one second
            // of rate, far inside `u128`.
            let product = u128::from(elapsed) * u128::from(self.rate);
            u64::try_from(product / u128::from(NANOS_PER_SECOND)).unwrap_or(self.capacity)
        };
        of_parts(accrued, limits.floor)
    }
}

const ADVICE_LAPSES_NANOS: u64 = ADVICE_LAPSES_AFTER.as_nanos() as u64;

/// What a bucket may hold and take in, under the advice it follows.
struct Limits {
    capacity: u64,
    deposit: u64,
    /// The share of the floor's accrual kept, in parts per million.
    floor: u32,
}

impl Limits {
    /// The balance a retry of `criticality` needs: one token, or for a sheddable one a
    /// token plus half the bucket, so it always leaves half for work someone waits on (B9).
    fn needed(&self, criticality: Criticality) -> u64 {
        match criticality {
            Criticality::Sheddable => UNIT + self.capacity / 2,
            Criticality::Critical | Criticality::Normal => UNIT,
        }
    }
}

/// `parts` per million of `units`, rounded down.
#[inline]
fn of_parts(units: u64, parts: u32) -> u64 {
    if parts >= PARTS {
        return units;
    }
    // Under `units` and so within `u64`.
    (u128::from(units) * u128::from(parts) / u128::from(PARTS)) as u64
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let balance = self.balance.load(Ordering::Acquire);
        f.debug_struct("TokenBucket")
            .field("balance", &(balance as f64 / UNIT as f64))
            .field("capacity", &self.capacity())
            .field("fraction", &(self.deposit as f64 / UNIT as f64))
            .field("minimum_per_second", &(self.rate as f64 / UNIT as f64))
            .finish()
    }
}

#[cfg(test)]
#[path = "bucket_tests.rs"]
mod tests;
