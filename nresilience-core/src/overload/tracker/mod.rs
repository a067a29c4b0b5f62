//! One dependency's load as this process sees it: the attempts it holds, how fast it
//! finishes them, and the limit on them (O1, O2).

// Public items for the `test-support` feature's re-exports; without it they reach no user.
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

mod no_load;
mod service;

pub(crate) use service::RequestRefused;

use super::admission::{Admission, Answer, Saturated, SaturatedBy, Ticket, UNKNOWN_WAIT};
use super::limit::Limit;
use super::options::OverloadControl;
use super::waiting::{WaitTicket, WaitingRoom};
use super::window::{nanos, Window};
use crate::clock;
use crate::criticality::Criticality;
use crate::telemetry::LimitGauge;
use no_load::NoLoad;

/// The longest an abandoned attempt is counted as still held by the dependency: past it,
/// a dependency has finished or dropped it. Also the longest wait the tracker expects.
const LONGEST_HOLD: Duration = Duration::from_secs(60);
const LONGEST_HOLD_NANOS: u64 = LONGEST_HOLD.as_secs() * 1_000_000_000;

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
/// Every method takes the time from the caller; the lock inside holds arithmetic only. An
/// attempt's admission and its answer, the success path, compare instants and count: the
/// clock's arithmetic waits for a slot's end, or for an abandoned attempt's hold to run out.
pub struct LoadTracker {
    control: OverloadControl,
    /// The dependency's key, when the tracker is one of a [`KeyedTrackers`](super::KeyedTrackers).
    dependency: Option<Arc<str>>,
    state: Mutex<State>,
    /// Where the limit is recorded when it moves (O4).
    gauge: Option<LimitGauge>,
}

struct State {
    in_flight: u32,
    /// Attempts whose caller left while the dependency may still work on them, by ticket.
    abandoned: VecDeque<Abandoned>,
    next: u64,
    /// When the state next needs bringing up to the clock: the window's slot ends, the
    /// no-load period ends, or the oldest abandoned attempt's hold runs out.
    due: Instant,
    /// A service's latest refusal of a first attempt for its load, and the most critical
    /// such refusal within a slot of it (F4).
    pressed: Option<(Instant, Criticality)>,
    window: Window,
    limit: Limit,
    /// The limit last recorded in the gauge.
    recorded: u32,
    no_load: NoLoad,
    waiting: WaitingRoom,
}

#[derive(Debug, Clone, Copy)]
struct Abandoned {
    ticket: u64,
    until: Instant,
}

impl LoadTracker {
    /// A tracker with nothing held, at `now`; `control` must be valid (a policy checks it).
    #[must_use]
    pub fn new(control: OverloadControl, now: Instant) -> Self {
        Self::of(control, None, now)
    }

    /// A tracker of the dependency `key`, recording its limit in `gauge`'s series of that key.
    pub(super) fn keyed(
        control: OverloadControl,
        key: &str,
        gauge: Option<&LimitGauge>,
        now: Instant,
    ) -> Self {
        let key = Arc::<str>::from(key);
        let tracker = Self::of(control, Some(Arc::clone(&key)), now);
        match gauge {
            Some(gauge) => tracker.reporting_to(gauge.of_dependency(&key)),
            None => tracker,
        }
    }

    fn of(control: OverloadControl, dependency: Option<Arc<str>>, now: Instant) -> Self {
        let limit = Limit::new(&control);
        Self {
            control,
            dependency,
            state: Mutex::new(State {
                in_flight: 0,
                abandoned: VecDeque::new(),
                next: 1,
                due: now,
                pressed: None,
                window: Window::new(control.window, now),
                recorded: limit.value(),
                limit,
                no_load: NoLoad::new(now),
                waiting: WaitingRoom::default(),
            }),
            gauge: None,
        }
    }

    /// The tracker, recording its limit in `gauge` from now on, and whenever it moves (O4).
    pub(crate) fn reporting_to(mut self, gauge: LimitGauge) -> Self {
        gauge.record(self.lock().limit.value());
        self.gauge = Some(gauge);
        self
    }

    /// Admits an attempt at `now` whose call has `left` (`None`: no deadline) and whose caller
    /// waits on it as `criticality` says, or refuses it. Under the limit, a sheddable attempt
    /// may fill half of it and a normal one all but a tenth, which critical attempts keep
    /// (O6). A new attempt goes before the calls waiting for room, but after those that
    /// began waiting while the dependency finished nothing (O7) unless it has no deadline, and
    /// so cannot wait, or they are less critical.
    #[inline(always)]
    pub fn admit(
        &self,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
    ) -> Result<Admission, Saturated> {
        self.at(now)
            .admit::<false>(now, left, criticality, None, false)
    }

    /// [`admit`](Self::admit) for a hedge. Turned away by its expected wait, a hedge is no work
    /// offered: the attempt it copies was sent (O5).
    pub fn admit_hedge(
        &self,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
    ) -> Result<Admission, Saturated> {
        self.at(now)
            .admit::<true>(now, left, criticality, None, false)
    }

    /// Makes a call of `criticality` the limit refused wait for room until `until` (O7), or
    /// `None` when too many wait already: it asks again with
    /// [`admit_waiting`](Self::admit_waiting). A call that begins waiting while the dependency
    /// finishes nothing waits for the stall: it goes before the others, and before new calls,
    /// once the dependency serves again. No waiter goes before a more critical call (O6).
    pub fn wait(&self, until: Instant, criticality: Criticality) -> Option<WaitTicket> {
        let bound = 2 * self.control.max as usize;
        let mut state = self.lock();
        let stalled = state.window.finishing_nothing();
        state.waiting.join(until, criticality, bound, stalled)
    }

    /// Admits the waiting call of `ticket` once there is room for it and for every waiter that
    /// goes before it — the older of those that waited through a stall, or all of those and
    /// the newer of the others, when they are at least as critical — or refuses it again;
    /// [`Saturated::room_in`] says when to ask next. A call whose waiting time is up is judged
    /// as a new attempt would be. `criticality` is the one the call waited with.
    pub fn admit_waiting(
        &self,
        ticket: WaitTicket,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
    ) -> Result<Admission, Saturated> {
        let mut state = self.at(now);
        let admitted = state.admit::<false>(now, left, criticality, Some(ticket), false);
        if admitted.is_ok() {
            state.waiting.leave(ticket);
        }
        admitted
    }

    /// The call of `ticket` waits no more: it gave up, or went away.
    pub fn stop_waiting(&self, ticket: WaitTicket) {
        self.lock().waiting.leave(ticket);
    }

    /// The calls waiting for room at `now`: those whose waiting time is up are not counted.
    #[cfg(any(test, feature = "test-support"))]
    pub fn waiting(&self, now: Instant) -> usize {
        self.lock().waiting.len_at(now)
    }

    /// The attempt of `ticket` was answered after `latency` (the time since its admission),
    /// at `now`. When [`Served`](Answer::Served), the dependency finished it, and every
    /// attempt abandoned before it was sent; an answer without the work frees its place and
    /// says nothing of how fast the dependency works.
    #[inline(always)]
    pub fn answered(&self, ticket: Ticket, latency: Duration, answer: Answer, now: Instant) {
        let latency = nanos(latency);
        let mut state = self.at(now);
        state.end(ticket, now, Some(latency));
        state.window.answered();
        if answer == Answer::Unserved {
            return;
        }
        state.window.completed(1);
        if !state.abandoned.is_empty() {
            state.finish_abandoned(ticket, latency, now);
        }
        state.window.latency(latency, false);
        state.no_load.sample(latency);
    }

    /// The caller stopped waiting for the attempt of `ticket` after `waited`, at `now`: it was
    /// `cut` by its timeout or deadline (a sign of queueing), or cancelled with its call. It
    /// counts as given up on (O5). The dependency may still be working on it: it stays held
    /// until a later attempt is answered or its expected answer time has passed. A hedge that
    /// lost is [`superseded`](Self::superseded) instead.
    pub fn abandoned(&self, ticket: Ticket, waited: Duration, cut: bool, now: Instant) {
        self.stop_holding(ticket, waited, cut, false, now);
    }

    /// `abandoned`, given up on; with `unpaced` the attempt leaves the window's count of
    /// attempts sent instead: its going unanswered says nothing of whether the dependency keeps
    /// pace (O5).
    fn stop_holding(
        &self,
        ticket: Ticket,
        waited: Duration,
        cut: bool,
        unpaced: bool,
        now: Instant,
    ) {
        let mut state = self.at(now);
        if unpaced {
            state.window.dropped();
        } else {
            state.window.given_up();
        }
        state.end(ticket, now, None);
        if cut {
            state.window.latency(nanos(waited), true);
        }
        // Its own place counts: it finishes after the attempts ahead of it and itself. A
        // dependency that finishes nothing gives no time to count on: the attempt is held for
        // the latency seen lately, not for the stall's length, or the stall's end would find
        // the tracker full of work the dependency has long finished.
        let held = state.held() + 1;
        let remaining = state
            .queue_wait(held)
            .or(state.window.mean())
            .unwrap_or_default()
            .min(LONGEST_HOLD);
        let bound = 2 * self.control.max as usize;
        if state.abandoned.len() >= bound {
            state.abandoned.pop_front();
        }
        state.abandoned.push_back(Abandoned {
            ticket: ticket.seq,
            until: clock::after(now, remaining),
        });
        state.schedule();
    }

    /// The attempt of `ticket` lost to another attempt of its call, answered first (a hedge),
    /// at `now`: dropped, like an abandoned one, but its going unanswered says nothing of the
    /// dependency's pace, which the answer that superseded it kept.
    pub fn superseded(&self, ticket: Ticket, now: Instant) {
        self.stop_holding(ticket, Duration::ZERO, false, true, now);
    }

    /// The attempt of `ticket` was cut after `waited` by the caller's measured ceiling, at
    /// `now`: cut, like [`abandoned`](Self::abandoned) with `cut`, but a ceiling is the
    /// caller's guess about one attempt — fitted to healthy latency, it cuts every attempt of
    /// a dependency that is merely slower — and its cut says nothing of whether the
    /// dependency keeps pace with what it is sent (O5).
    pub fn cut_by_ceiling(&self, ticket: Ticket, waited: Duration, now: Instant) {
        self.stop_holding(ticket, waited, true, true, now);
    }

    /// The attempt of `ticket` was never sent (something after the admission refused it, or
    /// its call went away before it could go out), at `now`: it holds nothing.
    pub fn withdraw(&self, ticket: Ticket, now: Instant) {
        let mut state = self.at(now);
        state.end(ticket, now, Some(0));
        state.window.dropped();
    }

    /// Attempts the dependency holds at `now`, as far as this process knows: those in flight,
    /// and those abandoned while it may still work on them.
    #[cfg(any(test, feature = "test-support"))]
    pub fn held(&self, now: Instant) -> u32 {
        self.at(now).held()
    }

    /// Whether the dependency finishes nothing: attempts were held for a slot and more of
    /// the window, and none was finished or even answered (O7). A stall, not a queue, nor a
    /// dependency answering errors.
    pub fn stalled(&self, now: Instant) -> bool {
        self.at(now).window.stalled()
    }

    /// The adaptive limit on attempts held, at `now`.
    pub fn limit(&self, now: Instant) -> u32 {
        self.at(now).limit.value()
    }

    /// The dependency's key, when it has one (a host: H5).
    pub fn dependency(&self) -> Option<&Arc<str>> {
        self.dependency.as_ref()
    }

    /// The state, brought up to `now`. A slot's end moves the limit: it is recorded then.
    #[inline]
    fn at(&self, now: Instant) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if state.roll(now) && state.limit.value() != state.recorded {
            self.record_limit(&mut state);
        }
        state
    }

    /// Records the limit at `now` in the gauge, moved or not: a refusal's, so that a limit
    /// that binds and then holds still is in every export, delta ones included, while it
    /// refuses.
    pub(crate) fn record_limit_at(&self, now: Instant) {
        let mut state = self.lock();
        state.roll(now);
        self.record_limit(&mut state);
    }

    #[cold]
    fn record_limit(&self, state: &mut State) {
        state.recorded = state.limit.value();
        if let Some(gauge) = &self.gauge {
            gauge.record(state.recorded);
        }
    }

    /// A lock without poisoning: nothing under it can leave the state inconsistent if it
    /// panics, and every attempt takes it twice, where std's lock checks the panic count on
    /// each visit (about 30 instructions a call: BENCHMARKS.md).
    #[inline]
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }
}

impl State {
    /// [`LoadTracker::admit`] for a new call, or for the call `waiting` with that ticket, on
    /// a state brought up to `now`; a `retry` a service received fills half its
    /// criticality's share; a `HEDGE` turned away by its expected wait is no work offered.
    #[inline(always)]
    fn admit<const HEDGE: bool>(
        &mut self,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
        waiting: Option<WaitTicket>,
        retry: bool,
    ) -> Result<Admission, Saturated> {
        let held = self.held();
        // With nothing awaited, an attempt is the only way to see the dependency again: it
        // goes, whatever the attempts abandoned earlier suggest.
        if self.in_flight > 0 {
            // A dependency that finishes nothing gives no wait to judge by: a stall is bounded
            // by the limit, once work has accumulated long enough to engage it, not by O1.
            let wait = self.queue_wait(held);
            // Nobody waits for an attempt that cannot be served in time, limit or none (O1),
            // once the pace says how long that is: not while the dependency ramps up.
            if left.zip(wait).is_some_and(|(left, wait)| wait > left)
                && self.window.pace_tells_wait()
            {
                // Turned away with longer than the window's attempts took, queueing included,
                // by the work ahead of it: work accumulating (O5). With less, the dependency
                // was slower than the caller can wait, queue or none; and a hedge copies an
                // attempt already sent.
                if !HEDGE
                    && left
                        .zip(self.window.mean())
                        .is_some_and(|(left, mean)| left > mean)
                {
                    self.window.turned_away();
                }
                return Err(self.refuse(wait, SaturatedBy::Wait, 0));
            }
            // A call that cannot wait (no deadline) is not among the waiters: it goes before
            // them all, as a new call does when no stall's waiter waits.
            let waiters = match waiting {
                None if left.is_none() || !self.waiting.holds_stalled() => 0,
                _ => self.waiting.ahead_of(waiting, criticality, now),
            };
            let ahead = held.saturating_add(u32::try_from(waiters).unwrap_or(u32::MAX));
            let share = share(self.limit.value(), criticality);
            let share = if retry { (share / 2).max(1) } else { share };
            if ahead >= share {
                return Err(self.refuse(wait, SaturatedBy::Limit, ahead - share + 1));
            }
        }
        self.in_flight += 1;
        let held = held.saturating_add(1);
        let seq = self.next;
        self.next += 1;
        if self.in_flight == 1 {
            self.window.busy_from(now, seq);
        }
        self.window.sent(held);
        Ok(Admission {
            ticket: Ticket { seq },
            wait: self.queue_wait_nanos(held),
            finishing_nothing: self.in_flight > 1 && self.window.finishing_nothing(),
        })
    }

    /// The refusal of an attempt whose expected `wait` was that, by `cause`; refused by the
    /// limit, room comes once `to_finish` attempts ahead of it have finished.
    #[cold]
    fn refuse(&mut self, wait: Option<Duration>, cause: SaturatedBy, to_finish: u32) -> Saturated {
        let retry_after = wait.or(self.no_load.get()).unwrap_or_default();
        // At the pace the expected wait counts on: a dependency finishing work again after
        // a stall makes room at its pace of the last slots, not at the window's, which the
        // stall still weighs down; told the window's, a waiting call would sleep past the
        // room, or give up on it (O7). Once the dependency serves the stall's waiters, the
        // pace was measured with few attempts in flight, the waiters asleep: room comes as
        // fast as the limit's attempts finish at the latency seen lately, when that is sooner.
        let room_in = (cause == SaturatedBy::Limit).then(|| {
            self.window.refused();
            let serving_again = self.waiting.holds_stalled() && !self.window.finishing_nothing();
            let at_limit = serving_again
                .then(|| self.room_at_limit(to_finish))
                .flatten();
            self.queue_wait(to_finish)
                .into_iter()
                .chain(at_limit)
                .min()
                .or(self.no_load.get())
                .unwrap_or(self.window.slot())
        });
        Saturated {
            retry_after,
            cause,
            room_in,
        }
    }

    /// How long `to_finish` attempts take with the limit's attempts in flight, each at the
    /// lowest latency seen lately: `None` before any was seen.
    fn room_at_limit(&self, to_finish: u32) -> Option<Duration> {
        let fastest = self.no_load.get()?;
        let each = fastest / self.limit.value().max(1);
        Some(each.saturating_mul(to_finish).min(LONGEST_HOLD))
    }

    /// The attempt of `ticket` is over at `now`, after `latency` nanoseconds when that is the
    /// time since its admission: its place is free, and with nothing left awaited, the
    /// dependency's busy time ends.
    #[inline]
    fn end(&mut self, ticket: Ticket, now: Instant, latency: Option<u64>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 {
            self.window.idle(now, ticket.seq, latency);
        }
    }

    /// The attempts abandoned before `ticket` was sent, answered after `latency` nanoseconds
    /// at `now`: the dependency finished them first, while it waited.
    #[cold]
    fn finish_abandoned(&mut self, ticket: Ticket, latency: u64, now: Instant) {
        let mut finished = 0;
        while self
            .abandoned
            .front()
            .is_some_and(|a| a.ticket < ticket.seq)
        {
            self.abandoned.pop_front();
            finished += 1;
        }
        if finished > 0 {
            self.window.completed_over(finished, latency, now);
            self.schedule();
        }
    }

    #[inline]
    fn held(&self) -> u32 {
        let abandoned = u32::try_from(self.abandoned.len()).unwrap_or(u32::MAX);
        self.in_flight.saturating_add(abandoned)
    }

    /// Brings the window, the limit and the held attempts up to `now`; whether a slot ended,
    /// and the limit may have moved. Most events come before anything is due: one comparison.
    #[inline]
    fn roll(&mut self, now: Instant) -> bool {
        now >= self.due && self.roll_due(now)
    }

    #[cold]
    fn roll_due(&mut self, now: Instant) -> bool {
        // Expired entries are mostly at the front; one behind a later one waits for it.
        while self.abandoned.front().is_some_and(|a| a.until <= now) {
            self.abandoned.pop_front();
        }
        let finished = self.window.advance(now);
        if let Some(finished) = &finished {
            self.window.weigh(self.held());
            self.limit
                .adapt(finished, &self.window, self.held(), self.no_load.get());
        }
        self.no_load.roll(now);
        self.schedule();
        finished.is_some()
    }

    /// When the state next needs bringing up to the clock.
    fn schedule(&mut self) {
        let due = self.window.end().min(self.no_load.until);
        self.due = match self.abandoned.front() {
            Some(oldest) => due.min(oldest.until),
            None => due,
        };
    }

    /// How long the `held` attempts take to finish at the pace the dependency finished them
    /// while busy — over the window, or over its last slots when that is faster: a dependency
    /// finishing work again after a stall is seen within a few slots. `None` while the window
    /// cannot tell, and when the dependency finished none over it: stalled, not queueing. What
    /// an admitted attempt waits for then is a hung dependency, or a stuck connection, which
    /// the measured ceiling cuts when nothing else is awaited ([`Admission::outlasts`]).
    #[inline]
    fn queue_wait(&self, held: u32) -> Option<Duration> {
        let wait = self.queue_wait_nanos(held);
        (wait != UNKNOWN_WAIT).then(|| Duration::from_nanos(wait))
    }

    /// [`queue_wait`](Self::queue_wait) in nanoseconds, as an [`Admission`] holds it.
    #[inline]
    fn queue_wait_nanos(&self, held: u32) -> u64 {
        let Some(each) = self.window.nanos_per_completion() else {
            return UNKNOWN_WAIT;
        };
        u64::from(held)
            .checked_mul(each)
            .map_or(LONGEST_HOLD_NANOS, |wait| wait.min(LONGEST_HOLD_NANOS))
    }
}

/// The attempts held that an attempt of `criticality` may find and still be admitted under
/// `limit` (O6): half of it for a sheddable one, all but a tenth for a normal one, all of it
/// for a critical one.
fn share(limit: u32, criticality: Criticality) -> u32 {
    match criticality {
        Criticality::Sheddable => (limit / 2).max(1),
        Criticality::Normal => limit - limit / 10,
        Criticality::Critical => limit,
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
