//! A circuit breaker that stops calling a dependency that keeps failing, then probes it back.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use nresilience_core::breaker::{BreakerOptions, BreakerOutcome, BreakerState, CircuitBreaker};
//!
//! let start = Instant::now();
//! let breaker = CircuitBreaker::new(BreakerOptions::default(), start)?;
//! for _ in 0..5 {
//!     let permit = breaker.try_acquire(start).expect("closed");
//!     breaker.record(permit, BreakerOutcome::Failure, start);
//! }
//! // Five transient failures in a row open it for 15 s.
//! assert_eq!(breaker.state(start), BreakerState::Open);
//! assert_eq!(breaker.retry_after(start), Some(Duration::from_secs(15)));
//!
//! // After the break, one probe at a time; a throttled probe (429) is no evidence either
//! // way: it gives its slot back and counts for nothing.
//! let later = start + Duration::from_secs(15);
//! let probe = breaker.try_acquire(later).expect("half-open probe");
//! breaker.record(probe, BreakerOutcome::Ignored, later);
//! for _ in 0..2 {
//!     let probe = breaker.try_acquire(later).expect("the slot came back");
//!     breaker.record(probe, BreakerOutcome::Success, later);
//! }
//! assert_eq!(breaker.state(later), BreakerState::Closed); // two good probes close it
//! # Ok::<(), nresilience_core::breaker::InvalidBreaker>(())
//! ```
//!
//! # States
//!
//! *Closed* admits every call. It opens on `consecutive_failures` transient failures in a
//! row, or — when a `failure_ratio` is set — once the sampling window holds at least
//! `minimum_throughput` outcomes and failures make up that share of them. *Open* refuses
//! every call for the break, with the time left as a hint. *Half-open* admits
//! `half_open_probes` calls at once; `probes_to_close` successful probes close it, and a probe
//! that fails — or, with a `slow_call_threshold`, takes longer than it — opens it again.
//! Each consecutive open doubles the break, up to `max_break_duration`; a clean close starts
//! over from `break_duration`.
//!
//! # What counts
//!
//! Only a transient failure (an error, a timeout, the attempt ceiling) is evidence against
//! the dependency. A throttle (`429`, `RESOURCE_EXHAUSTED`) means it is working and defending
//! itself; a permanent failure (`404`) is the caller's own. Both are
//! [`BreakerOutcome::Ignored`], as is an attempt this process's own limiter refused.
//!
//! A policy's breaker counts attempts, not calls: each attempt of a retrying call records its
//! outcome. With the default 3 attempts, a call that fails every one is three failures, so
//! two such calls (six in a row) open the default breaker of five. Set `consecutive_failures`
//! with the policy's attempts in mind: five failed calls of three attempts are 15.
//!
//! # Why an ignored outcome is still recorded
//!
//! A half-open breaker has a fixed number of probe slots, and a permit holds one until its
//! outcome is recorded. Skip the recording of an attempt that proves nothing and every such
//! attempt leaks a slot, until a half-open breaker has none left to give and never recovers.
//! [`BreakerOutcome::Ignored`] returns the slot and counts nothing; so does dropping a
//! [`BreakerPermit`] unrecorded.
//!
//! # Reading the state
//!
//! [`state`](CircuitBreaker::state) and [`retry_after`](CircuitBreaker::retry_after) never take
//! a probe slot: a health check cannot use up the probe a real call needs.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

mod options;
mod permit;
#[cfg(test)]
mod tests;

pub use options::{BreakerOptions, InvalidBreaker};
pub use permit::{BreakerOpen, BreakerOutcome, BreakerPermit, BreakerState};

/// Fixed-point parts per whole for the failure ratio, so `0.3` trips at exactly 3 failures
/// in 10 calls rather than wherever `0.3 × 10` happens to round in `f64`.
const RATIO_UNIT: u64 = 1_000_000_000;

/// The most doublings computed: a break in `u64` nanoseconds shifted this far still fits a
/// `u128`, and is past any maximum long before.
const MAX_DOUBLINGS: u32 = 62;

/// A circuit breaker: Closed → Open on consecutive failures or a failure ratio → Half-open
/// probes → Closed, or Open again for a doubled break.
///
/// Every method takes the current time from the caller, read before the call, so the lock
/// inside holds arithmetic only: no clock read, no allocation, no logging. Share one across
/// policies with an `Arc`.
pub struct CircuitBreaker {
    /// Permits own a handle to this, so they can be stored next to the policy that issued
    /// them and still return their slot when dropped. Allocated once, in `new`.
    core: Arc<Core>,
}

struct Core {
    options: BreakerOptions,
    /// `failure_ratio` in parts per [`RATIO_UNIT`], at least 1, when that trip is on.
    failure_ratio: Option<u64>,
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    /// Bumped on every transition. A permit remembers the generation that issued it, so an
    /// outcome from a phase that has ended can neither count nor free a slot it never held.
    generation: u64,
    /// Opens since the last clean close: the next break is the base doubled this many times.
    consecutive_opens: u32,
    phase: Phase,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Closed {
        /// A tumbling window: the counts start over once it is `sampling_window` old.
        window_start: Instant,
        successes: u64,
        failures: u64,
        /// Transient failures since the last success.
        in_a_row: u32,
    },
    Open {
        since: Instant,
        length: Duration,
    },
    HalfOpen {
        /// Probe slots held by permits of this generation; never above `half_open_probes`.
        in_flight: u32,
        succeeded: u32,
    },
}

impl CircuitBreaker {
    /// A closed breaker with an empty window, or the reason the options cannot work.
    pub fn new(options: BreakerOptions, now: Instant) -> Result<Self, InvalidBreaker> {
        options.validate()?;
        let failure_ratio = options
            .failure_ratio
            .map(|ratio| ((ratio * RATIO_UNIT as f64).round() as u64).max(1));
        Ok(Self {
            core: Arc::new(Core {
                options,
                failure_ratio,
                state: Mutex::new(State {
                    generation: 0,
                    consecutive_opens: 0,
                    phase: Phase::closed(now),
                }),
            }),
        })
    }

    /// Asks to make one call.
    ///
    /// Closed: always a permit. Open: refused with the time left of the break, until the
    /// break has passed and the breaker turns half-open. Half-open: a permit while a probe
    /// slot is free, which the permit then holds; refused without a hint otherwise, since
    /// nobody can say when a probe will finish.
    ///
    /// Pass the permit to [`record`](Self::record) with the call's outcome.
    pub fn try_acquire(&self, now: Instant) -> Result<BreakerPermit, BreakerOpen> {
        let core = &*self.core;
        let mut state = core.lock();
        state.advance(now);
        let generation = state.generation;
        let probe = match &mut state.phase {
            Phase::Closed { .. } => false,
            Phase::Open { since, length } => {
                let left = length.saturating_sub(elapsed(*since, now));
                return Err(BreakerOpen::new(Some(left)));
            }
            Phase::HalfOpen { in_flight, .. } => {
                if *in_flight >= core.options.half_open_probes {
                    return Err(BreakerOpen::new(None));
                }
                *in_flight += 1;
                true
            }
        };
        drop(state);
        Ok(BreakerPermit {
            core: Arc::clone(&self.core),
            generation,
            probe,
            acquired: now,
        })
    }

    /// Records the outcome of a call admitted by `permit`, consuming it.
    ///
    /// A probe's slot is returned whatever the outcome. [`BreakerOutcome::Ignored`] records
    /// nothing else. An outcome counts only in the phase that issued the permit: once the
    /// breaker has moved on (opened, or closed again), a late permit is ignored. A permit
    /// always settles with the breaker that issued it, even when it is handed to another one.
    pub fn record(&self, mut permit: BreakerPermit, outcome: BreakerOutcome, now: Instant) {
        // Settled here: the drop must not return the slot a second time.
        permit.probe = false;
        let core = &*permit.core;
        let mut state = core.lock();
        if state.generation != permit.generation {
            return;
        }
        let next = match &mut state.phase {
            Phase::Closed {
                window_start,
                successes,
                failures,
                in_a_row,
            } => {
                if outcome == BreakerOutcome::Ignored {
                    return;
                }
                if elapsed(*window_start, now) >= core.options.sampling_window {
                    *window_start = now;
                    *successes = 0;
                    *failures = 0;
                }
                if outcome == BreakerOutcome::Success {
                    *successes += 1;
                    *in_a_row = 0;
                    false
                } else {
                    *failures += 1;
                    *in_a_row = in_a_row.saturating_add(1);
                    core.trips(*successes, *failures, *in_a_row)
                }
            }
            Phase::HalfOpen {
                in_flight,
                succeeded,
            } => {
                *in_flight = in_flight.saturating_sub(1);
                match outcome {
                    BreakerOutcome::Ignored => return,
                    BreakerOutcome::Failure => true,
                    BreakerOutcome::Success => {
                        let took = elapsed(permit.acquired, now);
                        if core.options.slow_call_threshold.is_some_and(|t| took > t) {
                            true
                        } else {
                            *succeeded += 1;
                            if *succeeded >= core.options.probes_to_close {
                                state.consecutive_opens = 0;
                                state.transition(Phase::closed(now));
                            }
                            return;
                        }
                    }
                }
            }
            // Open issues no permits, so no permit of this generation exists.
            Phase::Open { .. } => false,
        };
        if next {
            core.open(&mut state, now);
        }
    }

    /// The state at `now`: an open breaker whose break has passed is half-open. Takes no
    /// probe slot.
    #[must_use]
    pub fn state(&self, now: Instant) -> BreakerState {
        let mut state = self.core.lock();
        state.advance(now);
        state.phase.state()
    }

    /// The rest of the break at `now` while the breaker is open; `None` otherwise (closed,
    /// or half-open, where admission waits on probes nobody can time). Takes no probe slot.
    #[must_use]
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        let mut state = self.core.lock();
        state.advance(now);
        match state.phase {
            Phase::Open { since, length } => Some(length.saturating_sub(elapsed(since, now))),
            Phase::Closed { .. } | Phase::HalfOpen { .. } => None,
        }
    }

    /// The options this breaker was built with.
    #[must_use]
    pub fn options(&self) -> &BreakerOptions {
        &self.core.options
    }
}

impl Core {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The critical section is arithmetic that cannot panic, so a poisoned lock still
        // guards a consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens for the base break doubled once per open since the last clean close, capped.
    fn open(&self, state: &mut State, now: Instant) {
        let doublings = state.consecutive_opens.min(MAX_DOUBLINGS);
        let base =
            u128::from(u64::try_from(self.options.break_duration.as_nanos()).unwrap_or(u64::MAX));
        let grown = base << doublings;
        let cap = self.options.max_break_duration.as_nanos();
        let length = Duration::from_nanos(u64::try_from(grown.min(cap)).unwrap_or(u64::MAX));
        state.consecutive_opens = state.consecutive_opens.saturating_add(1);
        state.transition(Phase::Open { since: now, length });
    }

    /// Whether the closed window's counts open the breaker, compared exactly.
    fn trips(&self, successes: u64, failures: u64, in_a_row: u32) -> bool {
        if self
            .options
            .consecutive_failures
            .is_some_and(|limit| in_a_row >= limit)
        {
            return true;
        }
        let Some(ratio) = self.failure_ratio else {
            return false;
        };
        let total = successes + failures;
        total >= u64::from(self.options.minimum_throughput)
            && u128::from(failures) * u128::from(RATIO_UNIT)
                >= u128::from(ratio) * u128::from(total)
    }

    /// Returns the slot of a probe permit dropped without being recorded.
    fn release(&self, generation: u64) {
        let mut state = self.lock();
        if state.generation != generation {
            return;
        }
        if let Phase::HalfOpen { in_flight, .. } = &mut state.phase {
            *in_flight = in_flight.saturating_sub(1);
        }
    }
}

impl State {
    /// Turns an open breaker half-open once the break has passed. A `now` before the
    /// breaker opened counts as no time at all, never as a break served.
    fn advance(&mut self, now: Instant) {
        if let Phase::Open { since, length } = self.phase {
            if elapsed(since, now) >= length {
                self.transition(Phase::HalfOpen {
                    in_flight: 0,
                    succeeded: 0,
                });
            }
        }
    }

    fn transition(&mut self, phase: Phase) {
        self.generation = self.generation.wrapping_add(1);
        self.phase = phase;
    }
}

impl Phase {
    const fn closed(now: Instant) -> Self {
        Self::Closed {
            window_start: now,
            successes: 0,
            failures: 0,
            in_a_row: 0,
        }
    }

    const fn state(&self) -> BreakerState {
        match self {
            Self::Closed { .. } => BreakerState::Closed,
            Self::Open { .. } => BreakerState::Open,
            Self::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

/// Time from `earlier` to `now`, zero if `now` is not after it: a thread that read the
/// clock a moment before another one moved the breaker on must not move it back.
fn elapsed(earlier: Instant, now: Instant) -> Duration {
    now.saturating_duration_since(earlier)
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = *self.core.lock();
        let mut debug = f.debug_struct("CircuitBreaker");
        debug.field("state", &state.phase.state());
        match state.phase {
            Phase::Closed {
                successes,
                failures,
                in_a_row,
                ..
            } => {
                debug
                    .field("successes", &successes)
                    .field("failures", &failures)
                    .field("failures_in_a_row", &in_a_row);
            }
            Phase::Open { length, .. } => {
                debug.field("break", &length);
            }
            Phase::HalfOpen {
                in_flight,
                succeeded,
            } => {
                debug
                    .field("probes_in_flight", &in_flight)
                    .field("probes_succeeded", &succeeded);
            }
        }
        debug.field("options", &self.core.options).finish()
    }
}
