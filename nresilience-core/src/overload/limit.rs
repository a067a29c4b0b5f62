//! The adaptive concurrency limit (O2): how each algorithm moves it after a slot.

use std::time::Duration;

use super::options::{LimitAlgorithm, OverloadControl};
use super::window::{Slot, Window, ACCUMULATING, KEEPING_PACE, SLOTS};

/// Latency up to this many times its long-run average is "near" it: the spread of a healthy
/// dependency, not a queue (Gradient2's default `rttTolerance`).
const TOLERANCE: f64 = 1.5;

/// How much of each new estimate the Gradient limit takes: it moves a fifth of the way per
/// slot, so one noisy slot does not swing it (Gradient2's smoothing).
const SMOOTHING: f64 = 0.2;

/// The slots the long-run latency averages over (ten seconds at the default window).
const LONG_SLOTS: f64 = 100.0;

/// What AIMD multiplies the limit by when an attempt is cut (concurrency-limits' default), and
/// the accumulation limit each slot work still accumulates under it.
const BACKOFF_RATIO: f64 = 0.9;

/// How many slots in a row work must accumulate before the limit binds: two windows. A
/// slowdown with no queue behind it accumulates only until the attempts in flight match the
/// new latency, for about that latency and one window; while that is longer, the dependency
/// finishes more window after window, and those slots do not count.
const ENGAGE_SLOTS: u32 = 2 * SLOTS;

/// How long the limit must go unneeded — nothing refused, nothing accumulating — before it
/// lets go: one window.
const CALM_SLOTS: u32 = SLOTS;

/// How often a binding limit is raised to see whether the dependency keeps pace with more.
const PROBE_SLOTS: u32 = 2 * SLOTS;

/// How much a probe raises the limit, a [`SLOTS`]th of it each slot of its first window: raised
/// at once, the room would go at once to the calls waiting for it (O7), a burst of attempts
/// at a dependency that has just shown it finishes no more than it is given.
const PROBE_GAIN: f64 = 1.25;

/// How much more the dependency must finish under a raised limit for the raise to stay.
const PROBE_KEPT: f64 = 1.1;

/// The limit, between the floor and the maximum, moved by one algorithm.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limit {
    value: f64,
    floor: f64,
    max: f64,
    algorithm: LimitAlgorithm,
    /// Gradient's long-run latency, in seconds: an exponential average of the slots' means.
    long: Option<f64>,
    /// The accumulation algorithm's state.
    accumulation: Accumulation,
}

/// Where the accumulation limit stands (O5).
#[derive(Debug, Clone, Copy, Default)]
struct Accumulation {
    /// Whether the limit binds; while it does not, it is the maximum.
    engaged: bool,
    /// Slots in a row in which work accumulated, while not engaged.
    growing: u32,
    /// Slots in a row in which the engaged limit refused nothing and work kept pace.
    calm: u32,
    /// Slots in a row in which the engaged limit refused attempts, since it last moved.
    binding: u32,
    /// A raise under way, to see whether the dependency finishes more with it.
    probe: Option<Probe>,
}

/// A raise of the limit under test.
#[derive(Debug, Clone, Copy)]
struct Probe {
    /// The limit before it.
    base: f64,
    /// The limit it raises to, a step each slot of its first window.
    raised: f64,
    /// The completions a second before it.
    rate: f64,
    /// The slots it has run, and the slots it runs: the latency of an attempt and a window,
    /// so that what the raise let in has had time to finish.
    slots: u32,
    lasts: u32,
}

impl Limit {
    pub(super) fn new(control: &OverloadControl) -> Self {
        let value = control.initial_value();
        Self {
            value: f64::from(value),
            floor: f64::from(control.floor),
            max: f64::from(control.max),
            algorithm: control.algorithm,
            long: None,
            // Started below the maximum, the accumulation limit binds from the start and lets
            // go as it would after any spell of accumulation: once it goes a window unneeded.
            accumulation: Accumulation {
                engaged: value < control.max,
                ..Accumulation::default()
            },
        }
    }

    /// The attempts in flight allowed now.
    pub(super) fn value(&self) -> u32 {
        // In [floor, max], both u32: the cast is exact.
        self.value.floor() as u32
    }

    /// Adapts to a finished slot, given the window it ends, the attempts held as it ends and the
    /// lowest latency seen lately (`no_load`). For the latency-based algorithms, a slot with no latency sample says
    /// nothing and changes nothing; one whose peak did not reach half the limit says nothing
    /// about the limit (the traffic did not use it).
    pub(super) fn adapt(
        &mut self,
        slot: &Slot,
        window: &Window,
        held: u32,
        no_load: Option<Duration>,
    ) {
        if self.algorithm == LimitAlgorithm::Accumulation {
            self.accumulate(slot, window, held);
            return;
        }
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
            // Accumulation's limit moved above, on the window's counts.
            LimitAlgorithm::Aimd | LimitAlgorithm::Accumulation => return,
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

    /// The accumulation limit (O5): the maximum until work has accumulated for two windows (what
    /// was sent, and what the expected wait turned away from callers who could have waited longer
    /// than the window's attempts took, outrunning what was answered, or the callers giving up on a
    /// share of what ended), then the work held at that moment, so that it stops growing, and lower
    /// by a tenth each slot in which work still accumulates under it (attempts admitted and given
    /// up on before an answer). Bound and keeping pace, it is raised now and then, over a window,
    /// and the raise stays only if the dependency then finishes more: a dependency that is slower
    /// but keeps pace with what it is sent finishes more with more in flight, a queue does not.
    /// Unneeded for a window, it lets go.
    fn accumulate(&mut self, slot: &Slot, window: &Window, held: u32) {
        let state = &mut self.accumulation;
        if !state.engaged {
            // The work offered, what the expected wait turned away included: it is what piles
            // up once a queue holds the callers' patience. Bound, the limit moves on what is
            // sent, as what the expected wait refuses is not sent whatever the limit.
            let growing = window
                .offered_accumulation()
                .is_some_and(|a| a > ACCUMULATING);
            // A ramp — finishing more than a window before, not yet seen to finish anything, or
            // answering its fast share while the rest is due — is not a queue, nor proof
            // against one: it neither counts nor resets.
            let ramp =
                window.finishing_more() || !window.finished_any() || window.answers_are_survivors();
            if growing && ramp {
                return;
            }
            state.growing = if growing { state.growing + 1 } else { 0 };
            if state.growing >= ENGAGE_SLOTS {
                *state = Accumulation {
                    engaged: true,
                    ..Accumulation::default()
                };
                self.value = f64::from(held).clamp(self.floor, self.max);
            }
            return;
        }
        let accumulation = window.accumulation();
        let refused = slot.refused > 0;
        let calm = !refused && accumulation.is_none_or(|a| a <= KEEPING_PACE);
        state.calm = if calm { state.calm + 1 } else { 0 };
        if state.calm >= CALM_SLOTS {
            *state = Accumulation::default();
            self.value = self.max;
            return;
        }
        if let Some(mut probe) = state.probe {
            probe.slots += 1;
            state.probe = Some(probe);
            if probe.slots < SLOTS {
                self.value = probe.step(probe.slots);
            } else if probe.slots >= probe.lasts {
                if window.completion_rate() < probe.rate * PROBE_KEPT {
                    self.value = probe.base;
                }
                state.probe = None;
                state.binding = 0;
            }
            return;
        }
        // Still accumulating under the limit: what it admits is cut or abandoned before it is
        // answered, work the dependency does for nobody. Lower it until that stops — not while
        // the dependency finishes more than a window ago: the answers of a ramp are still due.
        if accumulation.is_some_and(|a| a > KEEPING_PACE) && !window.finishing_more() {
            self.value = (self.value * BACKOFF_RATIO).clamp(self.floor, self.max);
            state.binding = 0;
            return;
        }
        state.binding = if refused { state.binding + 1 } else { 0 };
        if state.binding >= PROBE_SLOTS {
            let latency = window.mean().unwrap_or_default();
            let slots = (latency.as_secs_f64() / window.slot().as_secs_f64()).ceil();
            let probe = Probe {
                base: self.value,
                raised: (self.value * PROBE_GAIN).clamp(self.floor, self.max),
                rate: window.completion_rate(),
                slots: 0,
                lasts: SLOTS + slots.min(f64::from(u32::MAX - SLOTS)) as u32,
            };
            state.probe = Some(probe);
            self.value = probe.step(0);
        }
    }
}

impl Probe {
    /// The limit in the slot numbered `slot` of the probe, from `0`: a [`SLOTS`]th of the raise
    /// more each slot, all of it from the window's last slot.
    fn step(&self, slot: u32) -> f64 {
        let done = f64::from(slot.min(SLOTS - 1) + 1) / f64::from(SLOTS);
        self.base + (self.raised - self.base) * done
    }
}
