//! The latest fit of a policy's estimates, which every attempt reads, readable without the
//! lock its windows are kept under: a fit holds for its refresh interval, and only the
//! attempt that finds it due takes the lock and fits again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use super::estimates::{Estimate, Estimates, Nanos};
use super::nanos_since;

/// The estimates of one policy and the copy of their latest fit.
#[derive(Debug)]
pub(crate) struct Latest {
    estimates: Mutex<Estimates>,
    /// When the windows started: set once, by the first fit.
    origin: OnceLock<Instant>,
    /// Until when, in nanoseconds after `origin`, the copy holds; `0` when every read must
    /// look at the windows.
    until: AtomicU64,
    ceiling: AtomicU64,
    measured: AtomicU64,
    typical: AtomicU64,
    hedge: AtomicU64,
}

impl Latest {
    pub(crate) fn new(estimates: Estimates) -> Self {
        Self {
            estimates: Mutex::new(estimates),
            origin: OnceLock::new(),
            until: AtomicU64::new(0),
            ceiling: AtomicU64::new(Nanos::NONE.0),
            measured: AtomicU64::new(Nanos::NONE.0),
            typical: AtomicU64::new(Nanos::NONE.0),
            hedge: AtomicU64::new(Nanos::NONE.0),
        }
    }

    /// The estimate as of `now`, as [`Estimates::estimate`] gives it.
    ///
    /// A reader racing a refit may take fields from both fits, each an estimate of its own
    /// interval's latency; the copy is whole again once the refit is published.
    #[inline]
    pub(crate) fn estimate(&self, now: Instant) -> Estimate {
        if let Some(origin) = self.origin.get() {
            if nanos_since(*origin, now) < self.until.load(Ordering::Acquire) {
                return Estimate {
                    ceiling: read(&self.ceiling),
                    measured: read(&self.measured),
                    typical: read(&self.typical),
                    hedge: read(&self.hedge),
                };
            }
        }
        self.fit(now)
    }

    #[cold]
    fn fit(&self, now: Instant) -> Estimate {
        let mut estimates = self.estimates();
        let estimate = estimates.estimate(now);
        if let Some(origin) = estimates.origin() {
            self.origin.get_or_init(|| origin);
            // Closed first, so no reader takes the old interval for the new fields.
            self.until.store(0, Ordering::Release);
            write(&self.ceiling, estimate.ceiling);
            write(&self.measured, estimate.measured);
            write(&self.typical, estimate.typical);
            write(&self.hedge, estimate.hedge);
            self.until.store(estimates.kept_until(), Ordering::Release);
        }
        estimate
    }

    /// The windows, to record into.
    pub(crate) fn estimates(&self) -> MutexGuard<'_, Estimates> {
        self.estimates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn read(field: &AtomicU64) -> Nanos {
    Nanos(field.load(Ordering::Relaxed))
}

fn write(field: &AtomicU64, value: Nanos) {
    field.store(value.0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::backoff::MeasuredBase;
    use crate::executor::latency::ceiling::AttemptCeiling;

    fn estimates() -> Estimates {
        Estimates::new(
            Some(AttemptCeiling::new().minimum_samples(5)),
            Some(MeasuredBase::times(2.0).with_minimum_samples(5)),
            Some(0.9),
        )
        .expect("configured")
    }

    proptest! {
        /// E5, K4, HG1: the copy read without the lock is what the windows would give, at
        /// every step of any history: records, cuts and reads, across refresh intervals and
        /// before the minimum of samples.
        #[test]
        fn e5_the_copy_reads_what_the_windows_fit(
            steps in prop::collection::vec((0u8..3, 0u64..400, 1u64..2_000), 1..200),
        ) {
            let start = Instant::now();
            let latest = Latest::new(estimates());
            let mut twin = estimates();
            let mut at = start;
            for (op, advance_ms, duration_ms) in steps {
                at += Duration::from_millis(advance_ms);
                let duration = Duration::from_millis(duration_ms);
                match op {
                    0 => {
                        latest.estimates().record(duration, at);
                        twin.record(duration, at);
                    }
                    1 => {
                        latest.estimates().record_cut(duration, at);
                        twin.record_cut(duration, at);
                    }
                    _ => prop_assert_eq!(latest.estimate(at), twin.estimate(at)),
                }
            }
        }
    }

    /// Readers and recorders on several threads, time moving across refresh intervals:
    /// every read is an estimate some fit made (here, 3 × a latency between 10 and 20 ms,
    /// with the ceiling's 50 ms floor, within the windows' 4.4 % resolution), and none is
    /// lost to a race.
    #[test]
    fn e5_concurrent_reads_and_refits_read_whole_estimates() {
        let start = Instant::now();
        let latest = Arc::new(Latest::new(estimates()));
        let (threads, steps) = if cfg!(miri) { (2, 40) } else { (4, 2_000) };
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let latest = Arc::clone(&latest);
                std::thread::spawn(move || {
                    for step in 0..steps {
                        let at = start + Duration::from_millis(step * 7);
                        let latency = Duration::from_millis(10 + (step + thread) % 11);
                        latest.estimates().record(latency, at);
                        let estimate = latest.estimate(at);
                        if let Some(ceiling) = estimate.ceiling() {
                            let millis = ceiling.as_millis();
                            assert!((50..=63).contains(&millis), "{ceiling:?}");
                        }
                        if let Some(typical) = estimate.typical() {
                            let millis = typical.as_millis();
                            assert!((9..=21).contains(&millis), "{typical:?}");
                        }
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("no reader or recorder panicked");
        }
        let end = start + Duration::from_millis(steps * 7);
        let read = latest.estimate(end);
        assert_eq!(read, latest.estimates().estimate(end));
        assert!(read.ceiling().is_some());
    }
}
