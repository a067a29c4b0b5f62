//! A `throttle` fault's admission: at most R queries in each second of db's clock; the rest
//! are told to come back when the next one starts.

use std::sync::Mutex;
use std::time::Duration;

/// What a refused query is told to wait: the rest of the current second, which `Retry-After`'s
/// whole seconds round up to one.
pub(super) const RETRY_AFTER: &str = "1";

/// The queries admitted in the current second.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    /// The second, and the queries admitted in it.
    second: Mutex<(u64, u64)>,
}

impl Throttle {
    /// Whether a query arriving `now` (from db's start) is within `rate` queries a second;
    /// counts it if so.
    pub(super) fn admit(&self, now: Duration, rate: f64) -> bool {
        let mut second = self.second.lock().unwrap_or_else(|e| e.into_inner());
        let this = now.as_secs();
        if second.0 != this {
            *second = (this, 0);
        }
        let admitted = (second.1 as f64) < rate;
        if admitted {
            second.1 += 1;
        }
        admitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p3_a_throttle_admits_its_rate_in_each_second() {
        let throttle = Throttle::default();
        let at = |ms| Duration::from_millis(ms);
        assert!(throttle.admit(at(0), 2.0));
        assert!(throttle.admit(at(500), 2.0));
        assert!(!throttle.admit(at(999), 2.0), "the third in one second");
        assert!(throttle.admit(at(1_000), 2.0), "a new second");
    }
}
