//! One dependency's load as this process sees it: the attempts it holds, how fast it
//! finishes them, and the limit on them (O1, O2).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::limit::Limit;
use super::options::OverloadControl;
use super::window::Window;

/// How long the no-load latency remembers its lowest sample: the lowest of this period and
/// the one before, so a fault shorter than a period does not become the new normal.
const NO_LOAD_PERIOD: Duration = Duration::from_secs(30);

/// The longest an abandoned attempt is counted as still held by the dependency: past it,
/// a dependency has finished or dropped it.
const LONGEST_HOLD: Duration = Duration::from_secs(60);

/// An attempt's place in a [`LoadTracker`]: hand it back when the attempt ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticket {
    seq: u64,
}

/// An attempt a [`LoadTracker`] admitted, and what it knew of the dependency then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Its place: hand it back when the attempt ends.
    pub ticket: Ticket,
    wait: Option<Duration>,
    overloaded: bool,
}

impl Admission {
    /// The attempt's expected wait when it was admitted, once the tracker can tell: the
    /// attempts ahead over the rate the dependency finishes them. `None` while it cannot, and
    /// while the dependency finishes none (a stall is not a queue).
    pub fn expected_wait(&self) -> Option<Duration> {
        self.wait
    }

    /// Whether the dependency had answered with an overload signal or a throttle within the
    /// last window when the attempt was admitted.
    pub fn overloaded(&self) -> bool {
        self.overloaded
    }

    /// Whether the dependency's load, not the attempt, would be what makes it slower than
    /// `ceiling`: it was signalling overload, or the attempts ahead take longer than that to
    /// finish. A measured attempt ceiling then cuts work the dependency will do anyway, and
    /// its retry queues behind it (E5 meets O1).
    pub fn outlasts(&self, ceiling: Duration) -> bool {
        self.overloaded || self.wait.is_some_and(|wait| wait > ceiling)
    }
}

/// What an answer says of the dependency's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// It did the work: a success, or an answer no retry changes.
    Served,
    /// It answered without the work, or with an error: nothing about how fast it works.
    Unserved,
    /// It said it is overloaded or asked for less (a throttle, the overload signal).
    Overloaded,
}

/// Why an attempt was not sent, and when the dependency should have room again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saturated {
    /// How long the attempts ahead are expected to take to finish: the hint for callers.
    pub retry_after: Duration,
    /// What refused it.
    pub cause: SaturatedBy,
}

/// What refused an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SaturatedBy {
    /// Its expected wait was longer than the time its call had left (O1).
    Wait,
    /// The attempts in flight had reached the adaptive limit (O2).
    Limit,
}

/// One dependency's load as this process sees it (O1, O2).
///
/// It counts the attempts sent and not yet over — an attempt whose caller gave up on it is
/// still being worked on by the dependency (a database does not see its client leave), so
/// it counts until a later attempt is answered or its expected answer time has passed — and
/// the attempts the dependency finished over the last window. Their ratio is the expected wait
/// of the next attempt. An attempt is refused when that wait is longer than the time its call
/// has left, or when the attempts held reach the adaptive limit. With no attempt awaited,
/// nothing is refused: the next attempt is how the dependency is seen again.
///
/// Every method takes the time from the caller; the lock inside holds arithmetic only.
///
/// # Example
///
/// ```
/// use std::time::{Duration, Instant};
/// use nresilience_core::overload::{Answer, LoadTracker, OverloadControl, SaturatedBy};
///
/// let ms = Duration::from_millis;
/// let mut now = Instant::now();
/// let tracker = LoadTracker::new(OverloadControl::new(), now);
/// // A second in which the dependency finishes 10 attempts every 100 ms: 100 a second.
/// for _ in 0..10 {
///     let sent: Vec<_> = (0..10).map(|_| tracker.admit(now, None).unwrap().ticket).collect();
///     now += ms(100);
///     for ticket in sent {
///         tracker.answered(ticket, ms(99), Answer::Served, now - ms(1));
///     }
/// }
/// // Fifteen attempts held take about 150 ms to finish: a call with 100 ms left is not sent
/// // one, and learns how long the wait is.
/// let held: Vec<_> = (0..15).map(|_| tracker.admit(now, None).unwrap()).collect();
/// let refused = tracker.admit(now, Some(ms(100))).unwrap_err();
/// assert_eq!(refused.cause, SaturatedBy::Wait);
/// assert!((ms(140)..ms(160)).contains(&refused.retry_after), "{refused:?}");
/// // A call with time enough is.
/// assert!(tracker.admit(now, Some(ms(500))).is_ok());
/// # drop(held);
/// ```
pub struct LoadTracker {
    control: OverloadControl,
    /// The dependency's key, when the tracker is one of a [`KeyedTrackers`](super::KeyedTrackers).
    dependency: Option<Arc<str>>,
    state: Mutex<State>,
}

struct State {
    in_flight: u32,
    /// Attempts whose caller left while the dependency may still work on them, by ticket.
    abandoned: VecDeque<Abandoned>,
    next: u64,
    /// The latest event: busy time runs from it while anything is held.
    last: Instant,
    /// When the dependency last answered with an overload signal or a throttle.
    overloaded_at: Option<Instant>,
    /// The limit last handed to a gauge: `0` before the first.
    reported: u32,
    window: Window,
    limit: Limit,
    no_load: NoLoad,
}

#[derive(Debug, Clone, Copy)]
struct Abandoned {
    ticket: u64,
    until: Instant,
}

/// The lowest latency answered, over this period and the last.
#[derive(Debug, Clone, Copy)]
struct NoLoad {
    since: Instant,
    current: Option<Duration>,
    previous: Option<Duration>,
}

impl LoadTracker {
    /// A tracker with nothing held, at `now`; `control` must be valid (a policy checks it).
    pub fn new(control: OverloadControl, now: Instant) -> Self {
        Self::of(control, None, now)
    }

    /// A tracker of the dependency `key`, for its gauge's tag.
    pub(super) fn keyed(control: OverloadControl, key: &str, now: Instant) -> Self {
        Self::of(control, Some(Arc::from(key)), now)
    }

    fn of(control: OverloadControl, dependency: Option<Arc<str>>, now: Instant) -> Self {
        Self {
            control,
            dependency,
            state: Mutex::new(State {
                in_flight: 0,
                abandoned: VecDeque::new(),
                next: 1,
                last: now,
                overloaded_at: None,
                reported: 0,
                window: Window::new(control.window, now),
                limit: Limit::new(&control),
                no_load: NoLoad {
                    since: now,
                    current: None,
                    previous: None,
                },
            }),
        }
    }

    /// Admits an attempt at `now` whose call has `left` (`None`: no deadline), or refuses it.
    pub fn admit(&self, now: Instant, left: Option<Duration>) -> Result<Admission, Saturated> {
        let mut state = self.lock();
        state.roll(now);
        let held = state.held();
        // With nothing awaited, an attempt is the only way to see the dependency again: it
        // goes, whatever the attempts abandoned earlier suggest.
        if state.in_flight > 0 {
            let wait = state.drain(held);
            let refused = if held >= state.limit.value() {
                Some(SaturatedBy::Limit)
            } else {
                let too_long = left.zip(wait).is_some_and(|(left, wait)| wait > left);
                too_long.then_some(SaturatedBy::Wait)
            };
            if let Some(cause) = refused {
                let retry_after = wait.or(state.no_load.get()).unwrap_or_default();
                return Err(Saturated { retry_after, cause });
            }
        }
        state.in_flight += 1;
        let held = state.held();
        state.window.occupied(held);
        let seq = state.next;
        state.next += 1;
        let overloaded = state
            .overloaded_at
            .is_some_and(|at| now.saturating_duration_since(at) < state.window.span());
        Ok(Admission {
            ticket: Ticket { seq },
            wait: state.queue_wait(held),
            overloaded,
        })
    }

    /// The attempt of `ticket` was answered after `latency`, at `now`. When
    /// [`Served`](Answer::Served), the dependency finished it, and every attempt abandoned
    /// before it was sent; an answer without the work frees its place and says nothing of how
    /// fast the dependency works.
    pub fn answered(&self, ticket: Ticket, latency: Duration, answer: Answer, now: Instant) {
        let mut state = self.lock();
        state.roll(now);
        state.in_flight = state.in_flight.saturating_sub(1);
        match answer {
            Answer::Served => {}
            Answer::Unserved => return,
            Answer::Overloaded => {
                state.overloaded_at = Some(now);
                return;
            }
        }
        let mut finished = 1;
        while state
            .abandoned
            .front()
            .is_some_and(|a| a.ticket < ticket.seq)
        {
            state.abandoned.pop_front();
            finished += 1;
        }
        state.window.completed(finished);
        state.window.latency(latency, false);
        state.no_load.sample(latency);
    }

    /// The caller stopped waiting for the attempt of `ticket` after `waited`, at `now`: it was
    /// `cut` by its timeout (a sign of queueing), or dropped (cancelled, or a hedge that lost).
    /// The dependency may still be working on it: it stays held until a later attempt is
    /// answered or its expected answer time has passed.
    pub fn abandoned(&self, ticket: Ticket, waited: Duration, cut: bool, now: Instant) {
        let mut state = self.lock();
        state.roll(now);
        state.in_flight = state.in_flight.saturating_sub(1);
        if cut {
            state.window.latency(waited, true);
        }
        // Its own place counts: it finishes after the attempts ahead of it and itself.
        let held = state.held() + 1;
        let remaining = state
            .drain(held)
            .or(state.window.mean())
            .unwrap_or_default()
            .min(LONGEST_HOLD);
        let bound = 2 * self.control.max as usize;
        if state.abandoned.len() >= bound {
            state.abandoned.pop_front();
        }
        state.abandoned.push_back(Abandoned {
            ticket: ticket.seq,
            until: now + remaining,
        });
    }

    /// The attempt of `ticket` was admitted but never sent (something after the admission
    /// refused it): it holds nothing.
    pub fn withdraw(&self, ticket: Ticket) {
        let _ = ticket;
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
    }

    /// Attempts the dependency holds at `now`, as far as this process knows: those in flight,
    /// and those abandoned while it may still work on them.
    pub fn held(&self, now: Instant) -> u32 {
        let mut state = self.lock();
        state.roll(now);
        state.held()
    }

    /// The adaptive limit on attempts held, at `now`.
    pub fn limit(&self, now: Instant) -> u32 {
        let mut state = self.lock();
        state.roll(now);
        state.limit.value()
    }

    /// The settings.
    pub fn control(&self) -> &OverloadControl {
        &self.control
    }

    /// The dependency's key, when it has one (a host: H5).
    pub fn dependency(&self) -> Option<&Arc<str>> {
        self.dependency.as_ref()
    }

    /// The limit at `now` when it differs from the one this returned last (the first time,
    /// always): what a gauge needs, recorded only when it moves (O4).
    pub fn limit_moved(&self, now: Instant) -> Option<u32> {
        let mut state = self.lock();
        state.roll(now);
        let limit = state.limit.value();
        (std::mem::replace(&mut state.reported, limit) != limit).then_some(limit)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under the lock can leave the state inconsistent if it panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn held(&self) -> u32 {
        let abandoned = u32::try_from(self.abandoned.len()).unwrap_or(u32::MAX);
        self.in_flight.saturating_add(abandoned)
    }

    /// Brings the window, the limit and the held attempts up to `now`.
    fn roll(&mut self, now: Instant) {
        if let Some(finished) = self.window.advance(now) {
            self.limit.adapt(&finished, self.no_load.get());
        }
        // Only time with an attempt awaited can show a completion: time with abandoned
        // attempts alone is not counted, or a dependency no one waits on would look stalled.
        // Busy time since the last event counts in the window, at most a window of it.
        if self.in_flight > 0 {
            let busy = now.saturating_duration_since(self.last);
            self.window.busy(busy.min(self.window.span()));
        }
        self.last = self.last.max(now);
        self.no_load.roll(now);
        // Expired entries are mostly at the front; one behind a later one waits for it.
        while self.abandoned.front().is_some_and(|a| a.until <= now) {
            self.abandoned.pop_front();
        }
    }

    /// How long the `held` attempts take to finish at the rate the dependency finished them
    /// while busy over the window; with none finished in a window busy throughout, at least a
    /// window each.
    fn drain(&self, held: u32) -> Option<Duration> {
        let rate = self.window.rate()?;
        let seconds = if rate > 0.0 {
            f64::from(held) / rate
        } else {
            self.window.span().as_secs_f64() * f64::from(held)
        };
        Some(Duration::from_secs_f64(
            seconds.min(LONGEST_HOLD.as_secs_f64()),
        ))
    }

    /// [`drain`](Self::drain) when the dependency is finishing attempts: a queue, which it
    /// works through. A dependency that finished none over the window is stalled, not
    /// queueing, and this is `None`: what an admitted attempt waits for then is a stuck
    /// connection or a hung dependency, which the measured ceiling exists to cut.
    fn queue_wait(&self, held: u32) -> Option<Duration> {
        self.window
            .rate()
            .filter(|&rate| rate > 0.0)
            .and_then(|_| self.drain(held))
    }
}

impl NoLoad {
    fn get(&self) -> Option<Duration> {
        match (self.current, self.previous) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn sample(&mut self, latency: Duration) {
        self.current = Some(self.current.map_or(latency, |c| c.min(latency)));
    }

    fn roll(&mut self, now: Instant) {
        if now.saturating_duration_since(self.since) >= NO_LOAD_PERIOD {
            self.previous = self.current.take();
            self.since = now;
        }
    }
}

impl fmt::Debug for LoadTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("LoadTracker")
            .field("control", &self.control)
            .field("in_flight", &state.in_flight)
            .field("abandoned", &state.abandoned.len())
            .field("limit", &state.limit.value())
            .finish_non_exhaustive()
    }
}
