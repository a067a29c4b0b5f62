//! A circuit breaker that stops calling a dependency that keeps failing, then probes it back.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use nresilience_core::breaker::{BreakerOptions, BreakerOutcome, BreakerState, CircuitBreaker};
//!
//! let start = Instant::now();
//! let breaker = CircuitBreaker::new(BreakerOptions::default().minimum_throughput(4), start)?;
//! for _ in 0..4 {
//!     let permit = breaker.try_acquire(start).expect("closed");
//!     breaker.record(permit, BreakerOutcome::Failure, start);
//! }
//! assert_eq!(breaker.state(start), BreakerState::Open);
//! let refused = breaker.try_acquire(start).unwrap_err();
//! assert_eq!(refused.retry_after(), Some(Duration::from_secs(5)));
//!
//! // After the break, one probe slot. The limiter refused the probe before it went out:
//! // recording that returns the slot without counting it either way (SPEC B8).
//! let later = start + Duration::from_secs(5);
//! let probe = breaker.try_acquire(later).expect("half-open probe");
//! breaker.record(probe, BreakerOutcome::SelfImposed, later);
//! let probe = breaker.try_acquire(later).expect("the slot came back");
//! breaker.record(probe, BreakerOutcome::Success, later);
//! assert_eq!(breaker.state(later), BreakerState::Closed);
//! # Ok::<(), nresilience_core::breaker::InvalidBreaker>(())
//! ```
//!
//! # States
//!
//! *Closed* admits every call and counts outcomes over a sampling window; once the window
//! holds at least `minimum_throughput` outcomes and failures make up `failure_ratio` of
//! them, a failure opens the breaker. *Open* refuses every call for `break_duration`, with
//! the time left as a hint. *Half-open* admits `half_open_probes` calls at once; when
//! `probes_to_close` of them have succeeded the breaker closes, and the first probe that
//! fails opens it again.
//!
//! # Why a self-imposed refusal is still recorded
//!
//! A half-open breaker has a fixed number of probe slots, and a permit holds one until its
//! outcome is recorded. An attempt that this process's own limiter refused after the breaker
//! admitted it never reached the dependency, so it is no evidence either way — but it still
//! holds a slot. Skip the recording and every such refusal leaks a slot, until a half-open
//! breaker has none left to give and never recovers. [`BreakerOutcome::SelfImposed`]
//! returns the slot and records nothing; so does dropping a [`BreakerPermit`] unrecorded.

use std::error::Error;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Fixed-point parts per whole for the failure ratio, so `0.3` trips at exactly 3 failures
/// in 10 calls rather than wherever `0.3 × 10` happens to round in `f64`.
const RATIO_UNIT: u64 = 1_000_000_000;

// ===== BreakerOptions =====

/// The parameters of a [`CircuitBreaker`].
///
/// Defaults to a `failure_ratio` of `0.5`, a `minimum_throughput` of `10` calls, a
/// `sampling_window` of 30 s, a `break_duration` of 5 s and one half-open probe, which
/// must succeed to close the breaker.
///
/// The setters only record values; [`CircuitBreaker::new`] and [`BreakerOptions::validate`]
/// reject invalid ones with a reason.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerOptions {
    failure_ratio: f64,
    minimum_throughput: u32,
    sampling_window: Duration,
    break_duration: Duration,
    half_open_probes: u32,
    probes_to_close: Option<u32>,
}

impl BreakerOptions {
    /// The options with every default.
    pub const fn new() -> Self {
        Self {
            failure_ratio: 0.5,
            minimum_throughput: 10,
            sampling_window: Duration::from_secs(30),
            break_duration: Duration::from_secs(5),
            half_open_probes: 1,
            probes_to_close: None,
        }
    }

    /// The share of failures in the sampling window that opens the breaker, in `(0, 1]`.
    ///
    /// Defaults to `0.5`.
    pub const fn failure_ratio(mut self, failure_ratio: f64) -> Self {
        self.failure_ratio = failure_ratio;
        self
    }

    /// The outcomes the sampling window must hold before the ratio can open the breaker,
    /// `>= 1`, so a couple of early failures do not cut a dependency off.
    ///
    /// Defaults to `10`.
    pub const fn minimum_throughput(mut self, minimum_throughput: u32) -> Self {
        self.minimum_throughput = minimum_throughput;
        self
    }

    /// How long outcomes are counted before the count starts over, longer than zero.
    ///
    /// Defaults to 30 s.
    pub const fn sampling_window(mut self, sampling_window: Duration) -> Self {
        self.sampling_window = sampling_window;
        self
    }

    /// How long an open breaker refuses every call before it probes, longer than zero.
    ///
    /// Defaults to 5 s.
    pub const fn break_duration(mut self, break_duration: Duration) -> Self {
        self.break_duration = break_duration;
        self
    }

    /// How many probes a half-open breaker lets through at once, `>= 1`.
    ///
    /// Defaults to `1`.
    pub const fn half_open_probes(mut self, half_open_probes: u32) -> Self {
        self.half_open_probes = half_open_probes;
        self
    }

    /// How many probes must succeed before a half-open breaker closes, `>= 1`.
    ///
    /// May exceed `half_open_probes`: a recorded probe frees its slot for the next one.
    /// Defaults to `half_open_probes`.
    pub const fn probes_to_close(mut self, probes_to_close: u32) -> Self {
        self.probes_to_close = Some(probes_to_close);
        self
    }

    /// The configured failure ratio.
    pub const fn get_failure_ratio(&self) -> f64 {
        self.failure_ratio
    }

    /// The configured minimum throughput.
    pub const fn get_minimum_throughput(&self) -> u32 {
        self.minimum_throughput
    }

    /// The configured sampling window.
    pub const fn get_sampling_window(&self) -> Duration {
        self.sampling_window
    }

    /// The configured break duration.
    pub const fn get_break_duration(&self) -> Duration {
        self.break_duration
    }

    /// The configured number of half-open probe slots.
    pub const fn get_half_open_probes(&self) -> u32 {
        self.half_open_probes
    }

    /// The successful probes that close the breaker: the explicit value, or
    /// `half_open_probes`.
    pub const fn get_probes_to_close(&self) -> u32 {
        match self.probes_to_close {
            Some(probes) => probes,
            None => self.half_open_probes,
        }
    }

    /// Checks every term, returning the first that is out of range.
    pub fn validate(&self) -> Result<(), InvalidBreaker> {
        let ratio = self.failure_ratio;
        if !(ratio.is_finite() && ratio > 0.0 && ratio <= 1.0) {
            return Err(InvalidBreaker::new(Reason::FailureRatio(ratio)));
        }
        if self.minimum_throughput == 0 {
            return Err(InvalidBreaker::new(Reason::ZeroMinimumThroughput));
        }
        if self.sampling_window.is_zero() {
            return Err(InvalidBreaker::new(Reason::ZeroSamplingWindow));
        }
        if self.break_duration.is_zero() {
            return Err(InvalidBreaker::new(Reason::ZeroBreakDuration));
        }
        if self.half_open_probes == 0 {
            return Err(InvalidBreaker::new(Reason::ZeroHalfOpenProbes));
        }
        if self.get_probes_to_close() == 0 {
            return Err(InvalidBreaker::new(Reason::ZeroProbesToClose));
        }
        Ok(())
    }
}

impl Default for BreakerOptions {
    /// Ratio `0.5`, throughput `10`, window 30 s, break 5 s, one probe.
    fn default() -> Self {
        Self::new()
    }
}

// ===== CircuitBreaker =====

/// A circuit breaker: Closed → Open on a failure ratio → Half-open probes → Closed or Open.
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
    /// `failure_ratio` in parts per [`RATIO_UNIT`], at least 1.
    failure_ratio: u64,
    probes_to_close: u32,
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    /// Bumped on every transition. A permit remembers the generation that issued it, so an
    /// outcome from a phase that has ended can neither count nor free a slot it never held.
    generation: u64,
    phase: Phase,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Closed {
        /// A tumbling window: the counts start over once it is `sampling_window` old.
        window_start: Instant,
        successes: u64,
        failures: u64,
    },
    Open {
        since: Instant,
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
        let failure_ratio = ((options.failure_ratio * RATIO_UNIT as f64).round() as u64).max(1);
        Ok(Self {
            core: Arc::new(Core {
                options,
                failure_ratio,
                probes_to_close: options.get_probes_to_close(),
                state: Mutex::new(State {
                    generation: 0,
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
        core.advance(&mut state, now);
        let generation = state.generation;
        let probe = match &mut state.phase {
            Phase::Closed { .. } => false,
            Phase::Open { since } => {
                let left = core
                    .options
                    .break_duration
                    .saturating_sub(elapsed(*since, now));
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
        })
    }

    /// Records the outcome of a call admitted by `permit`, consuming it.
    ///
    /// A probe's slot is returned whatever the outcome. [`BreakerOutcome::SelfImposed`]
    /// records nothing else (SPEC B8). An outcome counts only in the phase that issued the
    /// permit: once the breaker has moved on (opened, or closed again), a late permit is
    /// ignored. A permit always settles with the breaker that issued it, even when it is
    /// handed to another one.
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
            } => {
                if outcome == BreakerOutcome::SelfImposed {
                    return;
                }
                if elapsed(*window_start, now) >= core.options.sampling_window {
                    *window_start = now;
                    *successes = 0;
                    *failures = 0;
                }
                if outcome == BreakerOutcome::Success {
                    *successes += 1;
                    None
                } else {
                    *failures += 1;
                    core.trips(*successes, *failures)
                        .then_some(Phase::Open { since: now })
                }
            }
            Phase::HalfOpen {
                in_flight,
                succeeded,
            } => {
                *in_flight = in_flight.saturating_sub(1);
                match outcome {
                    BreakerOutcome::SelfImposed => None,
                    BreakerOutcome::Failure => Some(Phase::Open { since: now }),
                    BreakerOutcome::Success => {
                        *succeeded += 1;
                        (*succeeded >= core.probes_to_close).then(|| Phase::closed(now))
                    }
                }
            }
            // Open issues no permits, so no permit of this generation exists.
            Phase::Open { .. } => None,
        };
        if let Some(phase) = next {
            state.transition(phase);
        }
    }

    /// The state at `now`: an open breaker whose break has passed is half-open.
    pub fn state(&self, now: Instant) -> BreakerState {
        let mut state = self.core.lock();
        self.core.advance(&mut state, now);
        state.phase.state()
    }

    /// The options this breaker was built with.
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

    /// Turns an open breaker half-open once the break has passed. A `now` before the
    /// breaker opened counts as no time at all, never as a break served.
    fn advance(&self, state: &mut State, now: Instant) {
        if let Phase::Open { since } = state.phase {
            if elapsed(since, now) >= self.options.break_duration {
                state.transition(Phase::HalfOpen {
                    in_flight: 0,
                    succeeded: 0,
                });
            }
        }
    }

    /// Whether the window's counts open the breaker, compared exactly.
    fn trips(&self, successes: u64, failures: u64) -> bool {
        let total = successes + failures;
        total >= u64::from(self.options.minimum_throughput)
            && u128::from(failures) * u128::from(RATIO_UNIT)
                >= u128::from(self.failure_ratio) * u128::from(total)
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
    fn transition(&mut self, phase: Phase) {
        self.generation = self.generation.wrapping_add(1);
        self.phase = phase;
    }
}

impl Phase {
    const fn closed(now: Instant) -> Self {
        Phase::Closed {
            window_start: now,
            successes: 0,
            failures: 0,
        }
    }

    const fn state(&self) -> BreakerState {
        match self {
            Phase::Closed { .. } => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
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
                ..
            } => {
                debug
                    .field("successes", &successes)
                    .field("failures", &failures);
            }
            Phase::Open { .. } => {}
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

// ===== BreakerPermit =====

/// Leave to make one call, from [`CircuitBreaker::try_acquire`]; hand it back to
/// [`CircuitBreaker::record`] with the outcome.
///
/// A permit issued while the breaker is half-open holds a probe slot until then. Dropping
/// it unrecorded counts as [`BreakerOutcome::SelfImposed`]: the slot is returned and
/// nothing is recorded, so an early return or a cancelled call cannot leak a slot. The
/// permit owns a handle to its breaker (no lifetime), so it can live in a call's state
/// next to the policy that holds the breaker.
#[must_use = "record the call's outcome with CircuitBreaker::record"]
pub struct BreakerPermit {
    core: Arc<Core>,
    generation: u64,
    /// Holds a half-open probe slot that has not been returned yet.
    probe: bool,
}

impl BreakerPermit {
    /// Whether this permit holds a half-open probe slot.
    pub const fn is_probe(&self) -> bool {
        self.probe
    }
}

impl Drop for BreakerPermit {
    fn drop(&mut self) {
        if self.probe {
            self.core.release(self.generation);
        }
    }
}

impl fmt::Debug for BreakerPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerPermit")
            .field("generation", &self.generation)
            .field("probe", &self.probe)
            .finish()
    }
}

// ===== BreakerOutcome, BreakerState, BreakerOpen =====

/// What became of a call a [`BreakerPermit`] admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerOutcome {
    /// The dependency answered: a success, or an answer the caller does not hold against it.
    Success,
    /// The dependency failed the call.
    Failure,
    /// This process's own limiter refused the call after the breaker admitted it, so the
    /// dependency was never contacted: no evidence either way, but the probe slot is
    /// returned (SPEC B8).
    SelfImposed,
}

/// The state of a [`CircuitBreaker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go through and their outcomes are counted.
    Closed,
    /// Calls are refused until the break duration has passed.
    Open,
    /// A limited number of probe calls go through to test the dependency.
    HalfOpen,
}

/// A call refused by the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen {
    retry_after: Option<Duration>,
}

impl BreakerOpen {
    const fn new(retry_after: Option<Duration>) -> Self {
        Self { retry_after }
    }

    /// When the breaker will admit a probe: the rest of the break while it is open; `None`
    /// when it is half-open with every probe slot taken, since that ends when a probe
    /// finishes, which nobody can predict.
    pub const fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for BreakerOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry_after {
            Some(after) => write!(f, "circuit breaker is open, retry after {after:?}"),
            None => f.write_str("circuit breaker is half-open and every probe slot is taken"),
        }
    }
}

impl Error for BreakerOpen {}

// ===== InvalidBreaker =====

/// A circuit breaker configuration that cannot work, with the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidBreaker {
    reason: Reason,
}

#[derive(Clone, Debug, PartialEq)]
enum Reason {
    FailureRatio(f64),
    ZeroMinimumThroughput,
    ZeroSamplingWindow,
    ZeroBreakDuration,
    ZeroHalfOpenProbes,
    ZeroProbesToClose,
}

impl InvalidBreaker {
    const fn new(reason: Reason) -> Self {
        Self { reason }
    }
}

impl fmt::Display for InvalidBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            Reason::FailureRatio(ratio) => {
                write!(f, "failure_ratio must be in (0, 1], got {ratio}")
            }
            Reason::ZeroMinimumThroughput => f.write_str("minimum_throughput must be at least 1"),
            Reason::ZeroSamplingWindow => f.write_str("sampling_window must be longer than zero"),
            Reason::ZeroBreakDuration => f.write_str("break_duration must be longer than zero"),
            Reason::ZeroHalfOpenProbes => f.write_str("half_open_probes must be at least 1"),
            Reason::ZeroProbesToClose => f.write_str("probes_to_close must be at least 1"),
        }
    }
}

impl Error for InvalidBreaker {}

#[cfg(test)]
mod tests {
    use super::*;

    use BreakerOutcome::{Failure, SelfImposed, Success};

    fn breaker(options: BreakerOptions, now: Instant) -> CircuitBreaker {
        CircuitBreaker::new(options, now).expect("valid options")
    }

    /// Acquires a permit and records `outcome` for it at once.
    fn call(breaker: &CircuitBreaker, outcome: BreakerOutcome, now: Instant) {
        let permit = breaker.try_acquire(now).expect("admitted");
        breaker.record(permit, outcome, now);
    }

    /// A breaker that opened at `now` with the given options.
    fn opened(options: BreakerOptions, now: Instant) -> CircuitBreaker {
        let breaker = breaker(options.minimum_throughput(1).failure_ratio(1.0), now);
        call(&breaker, Failure, now);
        assert_eq!(breaker.state(now), BreakerState::Open);
        breaker
    }

    const BREAK: Duration = Duration::from_secs(5);

    #[test]
    fn defaults_are_half_ten_thirty_seconds_five_seconds_one_probe() {
        let options = BreakerOptions::default();
        assert_eq!(options, BreakerOptions::new());
        assert_eq!(options.get_failure_ratio(), 0.5);
        assert_eq!(options.get_minimum_throughput(), 10);
        assert_eq!(options.get_sampling_window(), Duration::from_secs(30));
        assert_eq!(options.get_break_duration(), BREAK);
        assert_eq!(options.get_half_open_probes(), 1);
        assert_eq!(options.get_probes_to_close(), 1);
        assert_eq!(options.half_open_probes(3).get_probes_to_close(), 3);
        assert_eq!(
            options
                .half_open_probes(3)
                .probes_to_close(2)
                .get_probes_to_close(),
            2
        );
    }

    #[test]
    fn opens_on_failure_ratio_only_after_minimum_throughput() {
        let now = Instant::now();
        let breaker = breaker(BreakerOptions::default(), now);
        for _ in 0..9 {
            call(&breaker, Failure, now);
        }
        assert_eq!(
            breaker.state(now),
            BreakerState::Closed,
            "nine failures are below the minimum throughput of ten"
        );
        call(&breaker, Failure, now);
        assert_eq!(breaker.state(now), BreakerState::Open);
    }

    #[test]
    fn stays_closed_below_the_failure_ratio_and_opens_at_it_exactly() {
        let now = Instant::now();
        let breaker = breaker(BreakerOptions::default().failure_ratio(0.3), now);
        for _ in 0..8 {
            call(&breaker, Success, now);
        }
        call(&breaker, Failure, now);
        call(&breaker, Failure, now);
        assert_eq!(breaker.state(now), BreakerState::Closed, "2 in 10 < 0.3");
        call(&breaker, Success, now);
        call(&breaker, Success, now);
        call(&breaker, Failure, now);
        assert_eq!(breaker.state(now), BreakerState::Closed, "3 in 13 < 0.3");
        for _ in 0..4 {
            call(&breaker, Success, now);
        }
        assert_eq!(
            breaker.state(now),
            BreakerState::Closed,
            "a success never opens"
        );
        // 3 in 17, then 4 in 18, 5 in 19, 6 in 20: the ratio is reached exactly at 6/20.
        for _ in 0..2 {
            call(&breaker, Failure, now);
        }
        assert_eq!(breaker.state(now), BreakerState::Closed, "5 in 19 < 0.3");
        call(&breaker, Failure, now);
        assert_eq!(breaker.state(now), BreakerState::Open, "6 in 20 = 0.3");
    }

    #[test]
    fn window_resets_after_the_sampling_window() {
        let start = Instant::now();
        let breaker = breaker(BreakerOptions::default(), start);
        for _ in 0..9 {
            call(&breaker, Failure, start);
        }
        // The window is 30 s old: the tenth failure starts a fresh count of one.
        let later = start + Duration::from_secs(30);
        call(&breaker, Failure, later);
        assert_eq!(breaker.state(later), BreakerState::Closed);
        for _ in 0..8 {
            call(&breaker, Failure, later);
        }
        assert_eq!(
            breaker.state(later),
            BreakerState::Closed,
            "nine in the new window"
        );
        call(&breaker, Failure, later + Duration::from_secs(29));
        assert_eq!(breaker.state(later), BreakerState::Open);
    }

    #[test]
    fn earlier_now_does_not_reset_the_window() {
        let start = Instant::now();
        let later = start + Duration::from_secs(20);
        let breaker = breaker(BreakerOptions::default(), later);
        for _ in 0..9 {
            call(&breaker, Failure, later);
        }
        // A timestamp before the window began is no time at all, not a window elapsed.
        call(&breaker, Failure, start);
        assert_eq!(breaker.state(start), BreakerState::Open);
    }

    #[test]
    fn stays_open_for_the_break_duration_with_a_retry_after_hint() {
        let start = Instant::now();
        let breaker = opened(BreakerOptions::default(), start);
        assert_eq!(
            breaker.try_acquire(start).expect_err("open"),
            BreakerOpen::new(Some(BREAK))
        );
        let almost = start + BREAK - Duration::from_millis(1);
        assert_eq!(breaker.state(almost), BreakerState::Open);
        assert_eq!(
            breaker
                .try_acquire(almost)
                .expect_err("still open")
                .retry_after(),
            Some(Duration::from_millis(1))
        );
        // A timestamp from before the breaker opened is refused with the whole break.
        let earlier = start - Duration::from_secs(1);
        assert_eq!(
            breaker
                .try_acquire(earlier)
                .expect_err("open")
                .retry_after(),
            Some(BREAK)
        );
        assert_eq!(breaker.state(start + BREAK), BreakerState::HalfOpen);
        // Once half-open, an earlier timestamp does not reopen it.
        assert_eq!(breaker.state(start), BreakerState::HalfOpen);
    }

    #[test]
    fn half_open_admits_exactly_half_open_probes_at_once() {
        let start = Instant::now();
        let breaker = opened(BreakerOptions::default().half_open_probes(3), start);
        let now = start + BREAK;
        let probes: Vec<_> = (0..3)
            .map(|_| breaker.try_acquire(now).expect("probe slot"))
            .collect();
        assert!(probes.iter().all(BreakerPermit::is_probe));
        let refused = breaker.try_acquire(now).expect_err("every slot taken");
        assert_eq!(
            refused.retry_after(),
            None,
            "nobody knows when a probe ends"
        );
        assert_eq!(
            refused.to_string(),
            "circuit breaker is half-open and every probe slot is taken"
        );
        assert_eq!(breaker.state(now), BreakerState::HalfOpen);
        let mut probes = probes.into_iter();
        let first = probes.next().expect("three probes");
        breaker.record(first, Success, now);
        let again = breaker
            .try_acquire(now)
            .expect("a recorded probe frees its slot");
        assert!(breaker.try_acquire(now).is_err());
        drop((again, probes));
    }

    #[test]
    fn probe_success_closes_and_starts_a_fresh_window() {
        let start = Instant::now();
        let breaker = breaker(BreakerOptions::default(), start);
        for _ in 0..10 {
            call(&breaker, Failure, start);
        }
        let now = start + BREAK;
        let probe = breaker.try_acquire(now).expect("probe");
        breaker.record(probe, Success, now);
        assert_eq!(breaker.state(now), BreakerState::Closed);
        let permit = breaker.try_acquire(now).expect("closed");
        assert!(!permit.is_probe());
        breaker.record(permit, Failure, now);
        assert_eq!(
            breaker.state(now),
            BreakerState::Closed,
            "one failure in a fresh window is below the minimum throughput"
        );
    }

    #[test]
    fn probe_failure_reopens_for_another_break() {
        let start = Instant::now();
        let breaker = opened(BreakerOptions::default(), start);
        let now = start + BREAK;
        let probe = breaker.try_acquire(now).expect("probe");
        breaker.record(probe, Failure, now);
        assert_eq!(breaker.state(now), BreakerState::Open);
        assert_eq!(
            breaker
                .try_acquire(now)
                .expect_err("reopened")
                .retry_after(),
            Some(BREAK)
        );
        assert_eq!(breaker.state(now + BREAK), BreakerState::HalfOpen);
    }

    #[test]
    fn probes_to_close_counts_successes_across_slots() {
        let start = Instant::now();
        let options = BreakerOptions::default().probes_to_close(3);
        let breaker = opened(options, start);
        let now = start + BREAK;
        for _ in 0..2 {
            call(&breaker, Success, now);
            assert_eq!(breaker.state(now), BreakerState::HalfOpen);
        }
        call(&breaker, Success, now);
        assert_eq!(breaker.state(now), BreakerState::Closed);
    }

    #[test]
    fn half_open_breaker_still_recovers_after_a_burst_of_self_imposed_refusals() {
        // B8: the limiter refused each probe after the breaker admitted it.
        let start = Instant::now();
        let breaker = opened(BreakerOptions::default(), start);
        let now = start + BREAK;
        for _ in 0..100 {
            let probe = breaker
                .try_acquire(now)
                .expect("the slot is back every time");
            assert!(probe.is_probe());
            breaker.record(probe, SelfImposed, now);
            assert_eq!(breaker.state(now), BreakerState::HalfOpen, "no evidence");
        }
        let probe = breaker.try_acquire(now).expect("a real probe");
        breaker.record(probe, Success, now);
        assert_eq!(breaker.state(now), BreakerState::Closed);
    }

    #[test]
    fn probe_slot_is_held_until_the_permit_is_recorded() {
        let start = Instant::now();
        let breaker = opened(BreakerOptions::default(), start);
        let now = start + BREAK;
        let probe = breaker.try_acquire(now).expect("probe");
        for later in [now, now + BREAK, now + Duration::from_secs(3600)] {
            assert_eq!(
                breaker
                    .try_acquire(later)
                    .expect_err("slot held")
                    .retry_after(),
                None
            );
        }
        breaker.record(probe, SelfImposed, now);
        assert!(breaker.try_acquire(now).is_ok());
    }

    #[test]
    fn dropped_probe_permit_returns_its_slot_and_records_nothing() {
        let start = Instant::now();
        let breaker = opened(BreakerOptions::default().probes_to_close(2), start);
        let now = start + BREAK;
        call(&breaker, Success, now);
        for _ in 0..10 {
            drop(breaker.try_acquire(now).expect("probe"));
        }
        assert_eq!(breaker.state(now), BreakerState::HalfOpen);
        call(&breaker, Success, now);
        assert_eq!(
            breaker.state(now),
            BreakerState::Closed,
            "the drops counted neither way"
        );
    }

    #[test]
    fn self_imposed_records_nothing_while_closed() {
        let now = Instant::now();
        let breaker = breaker(BreakerOptions::default().minimum_throughput(2), now);
        for _ in 0..100 {
            call(&breaker, SelfImposed, now);
        }
        call(&breaker, Failure, now);
        assert_eq!(
            breaker.state(now),
            BreakerState::Closed,
            "self-imposed refusals are no throughput (B8)"
        );
        call(&breaker, Failure, now);
        assert_eq!(breaker.state(now), BreakerState::Open);
    }

    #[test]
    fn stale_closed_permits_neither_count_nor_free_half_open_slots() {
        let start = Instant::now();
        let options = BreakerOptions::default()
            .minimum_throughput(1)
            .failure_ratio(1.0)
            .half_open_probes(1);
        let breaker = breaker(options, start);
        let stale: Vec<_> = (0..4)
            .map(|_| breaker.try_acquire(start).expect("closed"))
            .collect();
        call(&breaker, Failure, start);
        let now = start + BREAK;
        let probe = breaker.try_acquire(now).expect("probe");

        let mut stale = stale.into_iter();
        let mut next = || stale.next().expect("four stale permits");
        breaker.record(next(), SelfImposed, now);
        breaker.record(next(), Success, now);
        breaker.record(next(), Failure, now);
        drop(next());
        assert_eq!(
            breaker.state(now),
            BreakerState::HalfOpen,
            "neither closed nor reopened"
        );
        assert!(
            breaker.try_acquire(now).is_err(),
            "the probe still holds the only slot"
        );

        breaker.record(probe, Success, now);
        assert_eq!(breaker.state(now), BreakerState::Closed);
    }

    #[test]
    fn stale_probes_from_an_earlier_half_open_phase_are_ignored() {
        let start = Instant::now();
        let breaker = opened(BreakerOptions::default().half_open_probes(2), start);
        let first = start + BREAK;
        let late = breaker.try_acquire(first).expect("probe");
        let failing = breaker.try_acquire(first).expect("probe");
        breaker.record(failing, Failure, first);
        assert_eq!(breaker.state(first), BreakerState::Open);

        let second = first + BREAK;
        let current = [
            breaker.try_acquire(second).expect("probe"),
            breaker.try_acquire(second).expect("probe"),
        ];
        breaker.record(late, Success, second);
        assert_eq!(
            breaker.state(second),
            BreakerState::HalfOpen,
            "not closed by a stale probe"
        );
        assert!(
            breaker.try_acquire(second).is_err(),
            "a stale probe frees no slot of this phase"
        );
        for probe in current {
            breaker.record(probe, Success, second);
        }
        assert_eq!(breaker.state(second), BreakerState::Closed);
    }

    #[test]
    fn permit_settles_with_the_breaker_that_issued_it() {
        let start = Instant::now();
        let issuer = opened(BreakerOptions::default(), start);
        let other = breaker(BreakerOptions::default(), start);
        let now = start + BREAK;
        let probe = issuer.try_acquire(now).expect("probe");
        other.record(probe, Success, now);
        assert_eq!(issuer.state(now), BreakerState::Closed);
        assert!(format!("{other:?}").contains("successes: 0, failures: 0"));
    }

    #[test]
    fn permit_outlives_the_borrow_of_its_breaker() {
        // A call's state stores the permit next to the policy that owns the breaker.
        fn assert_static<T: 'static>(_: &T) {}
        let start = Instant::now();
        let breaker = std::sync::Arc::new(opened(BreakerOptions::default(), start));
        let now = start + BREAK;
        let probe = breaker.try_acquire(now).expect("probe");
        assert_static(&probe);
        let shared = std::sync::Arc::clone(&breaker);
        let probe = std::thread::spawn(move || {
            assert!(shared.try_acquire(now).is_err(), "slot held across threads");
            probe
        })
        .join()
        .unwrap();
        breaker.record(probe, Success, now);
        assert_eq!(breaker.state(now), BreakerState::Closed);
    }

    #[test]
    fn invalid_options_are_rejected_with_a_reason() {
        let now = Instant::now();
        let cases = [
            (
                BreakerOptions::default().failure_ratio(0.0),
                "failure_ratio must be in (0, 1], got 0",
            ),
            (
                BreakerOptions::default().failure_ratio(1.5),
                "failure_ratio must be in (0, 1], got 1.5",
            ),
            (
                BreakerOptions::default().failure_ratio(f64::NAN),
                "failure_ratio must be in (0, 1], got NaN",
            ),
            (
                BreakerOptions::default().minimum_throughput(0),
                "minimum_throughput must be at least 1",
            ),
            (
                BreakerOptions::default().sampling_window(Duration::ZERO),
                "sampling_window must be longer than zero",
            ),
            (
                BreakerOptions::default().break_duration(Duration::ZERO),
                "break_duration must be longer than zero",
            ),
            (
                BreakerOptions::default().half_open_probes(0),
                "half_open_probes must be at least 1",
            ),
            (
                BreakerOptions::default().probes_to_close(0),
                "probes_to_close must be at least 1",
            ),
        ];
        for (options, reason) in cases {
            assert_eq!(options.validate().expect_err(reason).to_string(), reason);
            let err = CircuitBreaker::new(options, now).expect_err(reason);
            assert_eq!(err.to_string(), reason);
        }
        assert!(CircuitBreaker::new(BreakerOptions::default().failure_ratio(1e-12), now).is_ok());
    }

    #[test]
    fn debug_shows_state_counts_and_options() {
        let now = Instant::now();
        let breaker = breaker(BreakerOptions::default(), now);
        call(&breaker, Failure, now);
        call(&breaker, Success, now);
        let debug = format!("{breaker:?}");
        assert!(
            debug.starts_with("CircuitBreaker { state: Closed, successes: 1, failures: 1, options: BreakerOptions {"),
            "{debug}"
        );
        let permit = breaker.try_acquire(now).expect("closed");
        assert_eq!(
            format!("{permit:?}"),
            "BreakerPermit { generation: 0, probe: false }"
        );
        breaker.record(permit, Success, now);

        let breaker = opened(BreakerOptions::default(), now);
        assert!(format!("{breaker:?}").starts_with("CircuitBreaker { state: Open, options:"));
        let _probe = breaker.try_acquire(now + BREAK).expect("probe");
        assert!(format!("{breaker:?}").starts_with(
            "CircuitBreaker { state: HalfOpen, probes_in_flight: 1, probes_succeeded: 0,"
        ),);
        assert_eq!(
            BreakerOpen::new(Some(Duration::from_millis(1500))).to_string(),
            "circuit breaker is open, retry after 1.5s"
        );
    }

    #[test]
    fn breaker_and_permit_can_cross_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CircuitBreaker>();
        assert_send_sync::<BreakerPermit>();
        assert_send_sync::<BreakerOpen>();
        assert_send_sync::<InvalidBreaker>();
    }
}
