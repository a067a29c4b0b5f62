//! The clock the library reads: tokio's, as a [`std::time::Instant`].
//!
//! Under a runtime started with paused time (`#[tokio::test(start_paused = true)]`, the storm
//! simulator) it is virtual time, which jumps to the next timer whenever every task waits;
//! otherwise it is real time. Everything else in this crate takes the time as an argument, so a
//! test can drive a bucket, a breaker or a [`Call`](crate::call::Call) with instants read here
//! and the library's own timers agree with them.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use nresilience_core::clock;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let before = clock::now();
//! tokio::time::sleep(Duration::from_secs(60)).await; // virtual: returns at once
//! assert_eq!(clock::now() - before, Duration::from_secs(60));
//! # }
//! ```

use std::time::{Duration, Instant};

/// The current time on tokio's clock: virtual time under a paused runtime, real time
/// otherwise (and outside any runtime).
#[must_use]
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// `at + delay`, saturating far in the future instead of overflowing: a server may ask for
/// any wait, and an uncapped curve may grow without bound.
#[inline]
pub(crate) fn after(at: Instant, delay: Duration) -> Instant {
    // Thirty years: past any deadline, and far from the end of `Instant`'s range.
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    at.checked_add(delay)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_saturates_instead_of_overflowing() {
        let at = Instant::now();
        assert_eq!(
            after(at, Duration::from_millis(5)),
            at + Duration::from_millis(5)
        );
        assert!(after(at, Duration::MAX) > at + Duration::from_secs(86_400 * 365));
    }
}
