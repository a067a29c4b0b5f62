//! The adaptive concurrency limit (O2): how each algorithm moves it after a slot.

use std::time::Duration;

use super::options::{LimitAlgorithm, OverloadControl};
use super::window::Slot;

/// Latency up to this many times its long-run average is "near" it: the spread of a healthy
/// dependency, not a queue (Gradient2's default `rttTolerance`).
const TOLERANCE: f64 = 1.5;

/// How much of each new estimate the Gradient limit takes: it moves a fifth of the way per
/// slot, so one noisy slot does not swing it (Gradient2's smoothing).
const SMOOTHING: f64 = 0.2;

/// The slots the long-run latency averages over (ten seconds at the default window).
const LONG_SLOTS: f64 = 100.0;

/// What AIMD multiplies the limit by when an attempt is cut (concurrency-limits' default).
const BACKOFF_RATIO: f64 = 0.9;

/// The limit, between the floor and the maximum, moved by one algorithm.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limit {
    value: f64,
    floor: f64,
    max: f64,
    algorithm: LimitAlgorithm,
    /// Gradient's long-run latency, in seconds: an exponential average of the slots' means.
    long: Option<f64>,
}

impl Limit {
    pub(super) fn new(control: &OverloadControl) -> Self {
        Self {
            value: f64::from(control.initial),
            floor: f64::from(control.floor),
            max: f64::from(control.max),
            algorithm: control.algorithm,
            long: None,
        }
    }

    /// The attempts in flight allowed now.
    pub(super) fn value(&self) -> u32 {
        // In [floor, max], both u32: the cast is exact.
        self.value.floor() as u32
    }

    /// Adapts to a finished slot, given the lowest latency seen lately (`no_load`). A slot
    /// with no latency sample says nothing and changes nothing; one whose peak did not reach
    /// half the limit says nothing about the limit (the traffic did not use it).
    pub(super) fn adapt(&mut self, slot: &Slot, no_load: Option<Duration>) {
        let Some(measured) = slot.mean() else {
            return;
        };
        let measured = measured.as_secs_f64().max(f64::MIN_POSITIVE);
        let used = f64::from(slot.peak) >= self.value / 2.0;
        let long = *self.long.get_or_insert(measured);
        let mut next_long = long + (measured - long) / LONG_SLOTS;
        // After a spell of overload the average sits high: let it come back down.
        if next_long / measured > 2.0 {
            next_long *= 0.95;
        }
        self.long = Some(next_long);
        let next = match self.algorithm {
            // A limit the traffic did not half use says nothing about the right one: it
            // stays (Gradient2's rule for an application-limited client).
            LimitAlgorithm::Gradient if !used => return,
            LimitAlgorithm::Gradient => {
                let gradient = if slot.cuts > 0 {
                    0.5
                } else {
                    (TOLERANCE * long / measured).clamp(0.5, 1.0)
                };
                let estimate = self.value * gradient + self.value.sqrt();
                self.value * (1.0 - SMOOTHING) + estimate * SMOOTHING
            }
            LimitAlgorithm::Aimd if slot.cuts > 0 => self.value * BACKOFF_RATIO,
            LimitAlgorithm::Aimd if used => self.value + 1.0,
            LimitAlgorithm::Aimd => return,
            LimitAlgorithm::Vegas => {
                let Some(no_load) = no_load else {
                    return;
                };
                let step = self.value.log10().max(1.0);
                let queue = self.value * (1.0 - no_load.as_secs_f64() / measured).max(0.0);
                if slot.cuts > 0 || queue > 6.0 * step {
                    self.value - step
                } else if !used {
                    return;
                } else if queue <= step {
                    self.value + 6.0 * step
                } else if queue < 3.0 * step {
                    self.value + step
                } else {
                    return;
                }
            }
        };
        self.value = next.clamp(self.floor, self.max);
    }
}
