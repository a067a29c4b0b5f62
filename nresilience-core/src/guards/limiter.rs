//! A token-bucket rate limiter for this process's own outbound attempts.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use nresilience_core::limiter::RateLimiter;
//!
//! let start = Instant::now();
//! let limiter = RateLimiter::new(2.0, 2, start)?; // 2 permits/s, bursts of 2
//!
//! assert!(limiter.try_acquire(start)); // the bucket starts full ...
//! assert!(limiter.try_acquire(start));
//! assert!(!limiter.try_acquire(start)); // ... and a burst of two empties it
//! assert_eq!(limiter.retry_after(start), Duration::from_millis(500));
//!
//! let later = start + Duration::from_millis(500);
//! assert!(limiter.try_acquire(later)); // half a second at 2/s refills one permit
//! # Ok::<(), nresilience_core::limiter::InvalidLimiter>(())
//! ```
//!
//! # Why a refusal costs the retry budget nothing
//!
//! An attempt this limiter refuses never reached the dependency, so it says nothing about
//! the dependency's health. The executor classifies it `Throttled { self_imposed: true }`
//! and neither spends nor deposits budget for it: charging it would let a burst
//! of self-throttling drain the capacity real transient failures need, exactly when a
//! client is under load.
//!
//! Share one limiter across policies with an `Arc`; every method takes `&self`.

use std::error::Error;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Fixed-point units per permit, so a rate such as `0.1`/s accrues exactly one permit in
/// ten seconds instead of `0.9999999999999999`.
const UNIT: u64 = 1_000_000_000;
const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The lowest rate accepted, in permits per second (one permit in about eleven days).
///
/// Below it the fixed-point rate would lose precision.
pub const MIN_PERMITS_PER_SECOND: f64 = 0.000_001;

/// The highest rate accepted, in permits per second.
///
/// Far above any outbound rate; it keeps the fixed-point arithmetic exact.
pub const MAX_PERMITS_PER_SECOND: f64 = 1_000_000_000.0;

/// A token bucket that admits `burst` attempts at once and refills at `permits_per_second`.
///
/// Every method takes the current time from the caller, read before the call, so the lock
/// inside holds arithmetic only: no clock read, no allocation, no logging. A refusal is
/// the executor's `Throttled { self_imposed: true }`.
pub struct RateLimiter {
    /// Nano-permits accrued per second.
    rate: u64,
    capacity: u64,
    permits_per_second: f64,
    burst: u32,
    /// Elapsed nanoseconds after which an empty bucket is full again; longer gaps fill it
    /// without multiplying, which keeps the arithmetic far from overflow.
    fill_nanos: u128,
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    /// Nano-permits available.
    balance: u64,
    /// Accrual below one nano-permit, carried so the rate is exact over time.
    remainder: u64,
    refilled_at: Instant,
}

impl RateLimiter {
    /// A full limiter: `burst` permits now, then `permits_per_second`.
    ///
    /// The rate must be finite and in
    /// [[`MIN_PERMITS_PER_SECOND`], [`MAX_PERMITS_PER_SECOND`]]; `burst` must be at least 1.
    pub fn new(permits_per_second: f64, burst: u32, now: Instant) -> Result<Self, InvalidLimiter> {
        if !(permits_per_second.is_finite()
            && (MIN_PERMITS_PER_SECOND..=MAX_PERMITS_PER_SECOND).contains(&permits_per_second))
        {
            return Err(InvalidLimiter::new(Reason::Rate(permits_per_second)));
        }
        if burst == 0 {
            return Err(InvalidLimiter::new(Reason::ZeroBurst));
        }
        // In range by the check above: at least 1_000, at most 10^18.
        let rate = (permits_per_second * UNIT as f64).round() as u64;
        let capacity = u64::from(burst) * UNIT;
        let fill_nanos = u128::from(capacity) * NANOS_PER_SECOND / u128::from(rate) + 1;
        Ok(Self {
            rate,
            capacity,
            permits_per_second,
            burst,
            fill_nanos,
            state: Mutex::new(State {
                balance: capacity,
                remainder: 0,
                refilled_at: now,
            }),
        })
    }

    /// Takes one permit if there is one; `false` means the attempt must not go out.
    pub fn try_acquire(&self, now: Instant) -> bool {
        let mut state = self.lock();
        self.refill(&mut state, now);
        if state.balance >= UNIT {
            state.balance -= UNIT;
            true
        } else {
            false
        }
    }

    /// The permits available at `now`, fractions included.
    pub fn available(&self, now: Instant) -> f64 {
        let mut state = self.lock();
        self.refill(&mut state, now);
        state.balance as f64 / UNIT as f64
    }

    /// How long until the next permit accrues; zero when one is available at `now`.
    pub fn retry_after(&self, now: Instant) -> Duration {
        let state = {
            let mut state = self.lock();
            self.refill(&mut state, now);
            *state
        };
        if state.balance >= UNIT {
            return Duration::ZERO;
        }
        let missing = u128::from(UNIT - state.balance) * NANOS_PER_SECOND;
        let missing = missing.saturating_sub(u128::from(state.remainder));
        let nanos = missing.div_ceil(u128::from(self.rate));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The configured refill rate in permits per second.
    pub fn permits_per_second(&self) -> f64 {
        self.permits_per_second
    }

    /// The configured burst: the most permits the limiter holds.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The critical section is arithmetic that cannot panic, so a poisoned lock still
        // guards a consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Accrues the rate since the last refill point.
    ///
    /// A `now` at or before that point accrues nothing and leaves it where it is: a thread
    /// that read the clock just before another one refilled loses a sliver of accrual
    /// instead of rewinding the bucket and accruing the same interval twice.
    fn refill(&self, state: &mut State, now: Instant) {
        let elapsed = match now.checked_duration_since(state.refilled_at) {
            Some(elapsed) if !elapsed.is_zero() => elapsed.as_nanos(),
            _ => return,
        };
        state.refilled_at = now;
        if elapsed >= self.fill_nanos {
            state.balance = self.capacity;
            state.remainder = 0;
            return;
        }
        // `elapsed < fill_nanos` bounds this by capacity × 10⁹ plus a second of rate, which
        // u128 holds with room to spare.
        let accrued = elapsed * u128::from(self.rate) + u128::from(state.remainder);
        let balance = u128::from(state.balance) + accrued / NANOS_PER_SECOND;
        if balance >= u128::from(self.capacity) {
            state.balance = self.capacity;
            state.remainder = 0;
        } else {
            // Below the capacity, so both fit in u64.
            state.balance = balance as u64;
            state.remainder = (accrued % NANOS_PER_SECOND) as u64;
        }
    }
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = *self.lock();
        f.debug_struct("RateLimiter")
            .field("available", &(state.balance as f64 / UNIT as f64))
            .field("burst", &self.burst)
            .field("permits_per_second", &self.permits_per_second)
            .finish()
    }
}

// ===== InvalidLimiter =====

/// A rate limiter configuration that cannot work, with the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidLimiter {
    reason: Reason,
}

#[derive(Clone, Debug, PartialEq)]
enum Reason {
    Rate(f64),
    ZeroBurst,
}

impl InvalidLimiter {
    const fn new(reason: Reason) -> Self {
        Self { reason }
    }
}

impl fmt::Display for InvalidLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            Reason::Rate(rate) => write!(
                f,
                "permits_per_second must be in [{MIN_PERMITS_PER_SECOND}, {MAX_PERMITS_PER_SECOND}], got {rate}"
            ),
            Reason::ZeroBurst => f.write_str("burst must be at least 1"),
        }
    }
}

impl Error for InvalidLimiter {}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(permits_per_second: f64, burst: u32, now: Instant) -> RateLimiter {
        RateLimiter::new(permits_per_second, burst, now).expect("valid limiter")
    }

    fn drain(limiter: &RateLimiter, now: Instant) -> u32 {
        let mut granted = 0;
        while limiter.try_acquire(now) {
            granted += 1;
        }
        granted
    }

    #[test]
    fn starts_full_admits_the_burst_then_refuses() {
        let now = Instant::now();
        let limiter = limiter(1.0, 5, now);
        assert_eq!(limiter.available(now), 5.0);
        assert_eq!(drain(&limiter, now), 5);
        assert!(!limiter.try_acquire(now), "a refusal is self-imposed (B8)");
        assert_eq!(limiter.available(now), 0.0);
    }

    #[test]
    fn refills_at_the_rate_exactly() {
        let start = Instant::now();
        let limiter = limiter(0.1, 3, start);
        assert_eq!(drain(&limiter, start), 3);

        // In f64, ten steps of 0.1/s for a second each sum to less than one permit.
        let mut now = start;
        for _ in 0..9 {
            now += Duration::from_secs(1);
            assert!(!limiter.try_acquire(now));
        }
        now += Duration::from_secs(1);
        assert!(
            limiter.try_acquire(now),
            "ten seconds at 0.1/s is one permit"
        );
        assert!(!limiter.try_acquire(now));
    }

    #[test]
    fn refill_is_capped_at_the_burst() {
        let start = Instant::now();
        let limiter = limiter(100.0, 4, start);
        assert_eq!(drain(&limiter, start), 4);
        let later = start + Duration::from_secs(3600);
        assert_eq!(limiter.available(later), 4.0);
        assert_eq!(drain(&limiter, later), 4);
    }

    #[test]
    fn accrual_below_a_nano_permit_is_carried() {
        // At 0.3 permits/s a nanosecond accrues 0.3 nano-permits: dropped at each refill,
        // a limiter polled every nanosecond would never refill at all.
        let start = Instant::now();
        let polled = limiter(0.3, 1, start);
        let jumped = limiter(0.3, 1, start);
        assert!(polled.try_acquire(start) && jumped.try_acquire(start));
        let mut now = start;
        for _ in 0..1_000 {
            now += Duration::from_nanos(1);
            polled.available(now);
        }
        assert_eq!(polled.available(now), jumped.available(now));
        assert_eq!(polled.available(now), 300.0 / UNIT as f64);
    }

    #[test]
    fn earlier_now_accrues_nothing_and_does_not_rewind() {
        let start = Instant::now();
        let limiter = limiter(1.0, 2, start);
        assert_eq!(drain(&limiter, start), 2);

        let later = start + Duration::from_millis(1500);
        assert_eq!(limiter.available(later), 1.5);
        // A thread that read the clock before `later` sees the same balance ...
        assert_eq!(limiter.available(start + Duration::from_millis(200)), 1.5);
        // ... and the refill point stayed at `later`: half a second more is exactly 2.
        assert_eq!(limiter.available(later + Duration::from_millis(500)), 2.0);
    }

    #[test]
    fn retry_after_is_the_time_to_the_next_permit() {
        let start = Instant::now();
        let limiter = limiter(4.0, 1, start);
        assert_eq!(limiter.retry_after(start), Duration::ZERO);
        assert!(limiter.try_acquire(start));
        assert_eq!(limiter.retry_after(start), Duration::from_millis(250));
        let later = start + Duration::from_millis(100);
        assert_eq!(limiter.retry_after(later), Duration::from_millis(150));
        assert!(!limiter.try_acquire(later + Duration::from_millis(149)));
        assert!(limiter.try_acquire(later + Duration::from_millis(150)));
    }

    #[test]
    fn invalid_config_is_rejected_with_a_reason() {
        let now = Instant::now();
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9, 1e12] {
            let err = RateLimiter::new(rate, 1, now).expect_err("invalid rate");
            assert!(
                err.to_string().starts_with("permits_per_second must be in"),
                "{err}"
            );
        }
        let err = RateLimiter::new(1.0, 0, now).expect_err("zero burst");
        assert_eq!(err.to_string(), "burst must be at least 1");

        // The extremes of the range are usable.
        let fast = limiter(MAX_PERMITS_PER_SECOND, u32::MAX, now);
        assert!(fast.try_acquire(now + Duration::from_secs(1_000_000)));
        let slow = limiter(MIN_PERMITS_PER_SECOND, 1, now);
        assert!(slow.try_acquire(now));
        assert_eq!(slow.retry_after(now), Duration::from_secs(1_000_000));
    }

    #[test]
    fn debug_shows_available_burst_and_rate() {
        let now = Instant::now();
        let limiter = limiter(2.5, 3, now);
        assert!(limiter.try_acquire(now));
        assert_eq!(
            format!("{limiter:?}"),
            "RateLimiter { available: 2.0, burst: 3, permits_per_second: 2.5 }"
        );
    }

    #[test]
    fn shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RateLimiter>();

        let now = Instant::now();
        let limiter = std::sync::Arc::new(limiter(1.0, 1_000, now));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let limiter = std::sync::Arc::clone(&limiter);
                std::thread::spawn(move || drain(&limiter, now))
            })
            .collect();
        let granted: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(granted, 1_000, "every permit granted exactly once");
    }
}
