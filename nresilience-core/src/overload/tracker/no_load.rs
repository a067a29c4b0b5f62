//! The lowest latency a dependency answered with lately: its latency with no load, the
//! no-load latency Vegas reads and a refusal's hint when no wait can be told.

use std::time::{Duration, Instant};

/// How long the no-load latency remembers its lowest sample: the lowest of this period and
/// the one before, so a fault shorter than a period does not become the new normal.
const NO_LOAD_PERIOD: Duration = Duration::from_secs(30);

/// The lowest latency answered, over this period and the last, in nanoseconds (`u64::MAX`:
/// none).
#[derive(Debug, Clone, Copy)]
pub(super) struct NoLoad {
    /// When the period ends.
    pub(super) until: Instant,
    current: u64,
    previous: u64,
}

impl NoLoad {
    /// None yet, the first period starting at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            until: now.checked_add(NO_LOAD_PERIOD).unwrap_or(now),
            current: u64::MAX,
            previous: u64::MAX,
        }
    }

    pub(super) fn get(&self) -> Option<Duration> {
        let lowest = self.current.min(self.previous);
        (lowest != u64::MAX).then(|| Duration::from_nanos(lowest))
    }

    #[inline]
    pub(super) fn sample(&mut self, latency: u64) {
        self.current = self.current.min(latency);
    }

    pub(super) fn roll(&mut self, now: Instant) {
        if now >= self.until {
            self.previous = std::mem::replace(&mut self.current, u64::MAX);
            self.until = now.checked_add(NO_LOAD_PERIOD).unwrap_or(now);
        }
    }
}
