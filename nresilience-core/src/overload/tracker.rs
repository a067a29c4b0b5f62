//! One dependency's load as this process sees it: the attempts it holds, how fast it
//! finishes them, and the limit on them (O1, O2).

// Public items for the `test-support` feature's re-exports; without it they reach no user.
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::admission::{Admission, Answer, Saturated, SaturatedBy, Ticket};
use super::limit::Limit;
use super::options::OverloadControl;
use super::waiting::{WaitTicket, WaitingRoom};
use super::window::Window;
use crate::criticality::Criticality;

/// How long the no-load latency remembers its lowest sample: the lowest of this period and
/// the one before, so a fault shorter than a period does not become the new normal.
const NO_LOAD_PERIOD: Duration = Duration::from_secs(30);

/// The longest an abandoned attempt is counted as still held by the dependency: past it,
/// a dependency has finished or dropped it.
const LONGEST_HOLD: Duration = Duration::from_secs(60);

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
pub struct LoadTracker {
    control: OverloadControl,
    /// The dependency's key, when the tracker is one of a [`KeyedTrackers`](super::KeyedTrackers).
    dependency: Option<Arc<str>>,
    state: Mutex<State>,
    /// The limit as the latest event left it, and the one last handed to a gauge (`0` before
    /// the first): read without the lock.
    limit: AtomicU32,
    reported: AtomicU32,
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
    /// A service's latest refusal of a first attempt for its load, and the most critical
    /// such refusal within a slot of it (F4).
    pressed: Option<(Instant, Criticality)>,
    window: Window,
    limit: Limit,
    no_load: NoLoad,
    waiting: WaitingRoom,
}

#[derive(Debug, Clone, Copy)]
struct Abandoned {
    ticket: u64,
    until: Instant,
}

/// The lowest latency answered, over this period and the last.
#[derive(Debug, Clone, Copy)]
struct NoLoad {
    /// When the period ends.
    until: Instant,
    current: Option<Duration>,
    previous: Option<Duration>,
}

impl LoadTracker {
    /// A tracker with nothing held, at `now`; `control` must be valid (a policy checks it).
    #[must_use]
    pub fn new(control: OverloadControl, now: Instant) -> Self {
        Self::of(control, None, now)
    }

    /// A tracker of the dependency `key`, for its gauge's tag.
    pub(super) fn keyed(control: OverloadControl, key: &str, now: Instant) -> Self {
        Self::of(control, Some(Arc::from(key)), now)
    }

    fn of(control: OverloadControl, dependency: Option<Arc<str>>, now: Instant) -> Self {
        let limit = Limit::new(&control);
        let published = AtomicU32::new(limit.value());
        Self {
            control,
            dependency,
            state: Mutex::new(State {
                in_flight: 0,
                abandoned: VecDeque::new(),
                next: 1,
                last: now,
                overloaded_at: None,
                pressed: None,
                window: Window::new(control.window, now),
                limit,
                no_load: NoLoad {
                    until: now.checked_add(NO_LOAD_PERIOD).unwrap_or(now),
                    current: None,
                    previous: None,
                },
                waiting: WaitingRoom::default(),
            }),
            limit: published,
            reported: AtomicU32::new(0),
        }
    }

    /// Admits an attempt at `now` whose call has `left` (`None`: no deadline) and whose caller
    /// waits on it as `criticality` says, or refuses it. Under the limit, a sheddable attempt
    /// may fill half of it and a normal one all but a tenth, which critical attempts keep
    /// (O6). A new attempt is the newest: room under the limit goes to it before any waiter.
    pub fn admit(
        &self,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
    ) -> Result<Admission, Saturated> {
        self.at(now).admit(now, left, criticality, 0, false)
    }

    /// Admits a request a service received at `now` (F4): as [`admit`](Self::admit) judges an
    /// attempt, with more refusals. A request whose call has less time `left` than the
    /// service's typical handling time is refused at once. While callers leave requests
    /// unanswered (more than a fifth of those ended over the window), every retry is
    /// refused; within a slot of
    /// the service refusing a first attempt for its load, every retry is refused, and every
    /// request less critical than that first attempt: the capacity that could not serve it
    /// goes to first attempts, the most critical first. Under the limit, a retry may fill
    /// half what a first attempt of its criticality may.
    pub(crate) fn admit_request(
        &self,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
        retry: bool,
    ) -> Result<Admission, RequestRefused> {
        let mut state = self.at(now);
        if let Some((left, typical)) = left.zip(state.window.mean()) {
            if left < typical {
                return Err(RequestRefused::Handling(typical));
            }
        }
        let slot = state.window.slot();
        let pressed = state
            .pressed
            .filter(|&(at, _)| now.saturating_duration_since(at) < slot);
        let gives_way =
            pressed.is_some_and(|(_, refused)| retry || rank(criticality) > rank(refused));
        // Callers leaving their requests unanswered are as sure a sign as a refusal that the
        // service is over its capacity. With nothing in the handlers, nothing gives way.
        if state.in_flight > 0 && (gives_way || (retry && state.window.callers_leaving())) {
            state.window.refused();
            let wait = state.queue_wait(state.held()).or(state.no_load.get());
            return Err(RequestRefused::Shed(wait.unwrap_or(slot)));
        }
        let admitted = state.admit(now, left, criticality, 0, retry);
        if admitted.is_err() && !retry {
            let most = match pressed {
                Some((_, refused)) if rank(refused) < rank(criticality) => refused,
                _ => criticality,
            };
            state.pressed = Some((now, most));
        }
        admitted.map_err(RequestRefused::Saturated)
    }

    /// Makes a call the limit refused wait for room until `until` (O7), or `None` when too
    /// many wait already: it asks again with [`admit_waiting`](Self::admit_waiting).
    pub fn wait(&self, until: Instant) -> Option<WaitTicket> {
        let bound = 2 * self.control.max as usize;
        self.lock().waiting.join(until, bound)
    }

    /// Admits the waiting call of `ticket` once there is room for it and for every waiter
    /// newer than it, or refuses it again; [`Saturated::room_in`] says when to ask next. A call
    /// whose waiting time is up is judged as a new attempt would be.
    pub fn admit_waiting(
        &self,
        ticket: WaitTicket,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
    ) -> Result<Admission, Saturated> {
        let mut state = self.at(now);
        let newer = state.waiting.newer_than(ticket, now).unwrap_or(0);
        let admitted = state.admit(now, left, criticality, newer, false);
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

    /// The attempt of `ticket` was answered after `latency`, at `now`. When
    /// [`Served`](Answer::Served), the dependency finished it, and every attempt abandoned
    /// before it was sent; an answer without the work frees its place and says nothing of how
    /// fast the dependency works.
    pub fn answered(&self, ticket: Ticket, latency: Duration, answer: Answer, now: Instant) {
        let mut state = self.at(now);
        state.in_flight = state.in_flight.saturating_sub(1);
        state.window.answered();
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
        self.stop_holding(ticket, waited, cut, false, now);
    }

    /// `abandoned`, and with `unpaced` the attempt leaves the window's count of attempts sent:
    /// its going unanswered says nothing of whether the dependency keeps pace (O5).
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
        }
        state.in_flight = state.in_flight.saturating_sub(1);
        if cut {
            state.window.latency(waited, true);
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
            until: now + remaining,
        });
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

    /// The request of `ticket` ended unanswered at `now`: a service's handler, dropped when
    /// its caller left (F4). Its place is free — the handler's work stopped with it — but it
    /// counts as work not answered: callers leaving before their answer is how requests
    /// accumulating in the handlers show (O5).
    pub(crate) fn left_unanswered(&self, ticket: Ticket, now: Instant) {
        let _ = ticket;
        let mut state = self.at(now);
        state.in_flight = state.in_flight.saturating_sub(1);
        state.window.caller_left();
    }

    /// The attempt of `ticket` was admitted but never sent (something after the admission
    /// refused it): it holds nothing.
    pub fn withdraw(&self, ticket: Ticket) {
        let _ = ticket;
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
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

    /// The limit as the latest event left it, when it differs from the one this returned last
    /// (the first time, always): what a gauge needs, recorded only when it moves (O4). Two
    /// atomic reads, no lock: every attempt's end asks.
    pub fn limit_moved(&self) -> Option<u32> {
        let limit = self.limit.load(Ordering::Relaxed);
        (self.reported.swap(limit, Ordering::Relaxed) != limit).then_some(limit)
    }

    /// The state, brought up to `now`, with the limit published for [`limit_moved`](Self::limit_moved).
    fn at(&self, now: Instant) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if state.roll(now) {
            self.limit.store(state.limit.value(), Ordering::Relaxed);
        }
        state
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under the lock can leave the state inconsistent if it panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// [`LoadTracker::admit`], for an attempt with `newer` waiters ahead of it, on a state
    /// brought up to `now`; a `retry` a service received fills half its criticality's share.
    fn admit(
        &mut self,
        now: Instant,
        left: Option<Duration>,
        criticality: Criticality,
        newer: usize,
        retry: bool,
    ) -> Result<Admission, Saturated> {
        let held = self.held();
        // With nothing awaited, an attempt is the only way to see the dependency again: it
        // goes, whatever the attempts abandoned earlier suggest.
        if self.in_flight > 0 {
            // A dependency that finishes nothing gives no wait to judge by: a stall is bounded
            // by the limit, once work has accumulated long enough to engage it, not by O1.
            let wait = self.queue_wait(held);
            let retry_after = wait.or(self.no_load.get()).unwrap_or_default();
            // Nobody waits for an attempt that cannot be served in time, limit or none (O1).
            if left.zip(wait).is_some_and(|(left, wait)| wait > left) {
                return Err(Saturated {
                    retry_after,
                    cause: SaturatedBy::Wait,
                    room_in: None,
                });
            }
            let ahead = held.saturating_add(u32::try_from(newer).unwrap_or(u32::MAX));
            let share = share(self.limit.value(), criticality);
            let share = if retry { (share / 2).max(1) } else { share };
            if ahead >= share {
                self.window.refused();
                let to_finish = f64::from(ahead - share + 1);
                let room_in = match self.window.rate() {
                    Some(rate) if rate > 0.0 => {
                        Duration::from_secs_f64((to_finish / rate).min(LONGEST_HOLD.as_secs_f64()))
                    }
                    _ => self.no_load.get().unwrap_or(self.window.slot()),
                };
                return Err(Saturated {
                    retry_after,
                    cause: SaturatedBy::Limit,
                    room_in: Some(room_in),
                });
            }
        }
        self.in_flight += 1;
        let held = self.held();
        self.window.occupied(held);
        self.window.sent();
        let seq = self.next;
        self.next += 1;
        let overloaded = self
            .overloaded_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.window.span());
        Ok(Admission {
            ticket: Ticket { seq },
            wait: self.queue_wait(held),
            overloaded,
            stalled: self.in_flight > 1 && self.window.stalled(),
        })
    }

    fn held(&self) -> u32 {
        let abandoned = u32::try_from(self.abandoned.len()).unwrap_or(u32::MAX);
        self.in_flight.saturating_add(abandoned)
    }

    /// Brings the window, the limit and the held attempts up to `now`; whether a slot ended,
    /// and the limit may have moved.
    fn roll(&mut self, now: Instant) -> bool {
        let finished = self.window.advance(now);
        if let Some(finished) = &finished {
            self.limit.adapt(finished, &self.window, self.no_load.get());
        }
        // Time with nothing held adds nothing: an idle dependency's events skip the clock's
        // arithmetic.
        let held = self.held();
        if held > 0 {
            let since = now.saturating_duration_since(self.last);
            // The work held since the last event, at most a slot of it: a long quiet spell
            // says nothing of a slot's load.
            self.window.held_for(held, since.min(self.window.slot()));
            // Only time with an attempt awaited can show a completion: time with abandoned
            // attempts alone is not counted, or a dependency no one waits on would look
            // stalled. Busy time since the last event counts in the window, at most a window.
            if self.in_flight > 0 {
                self.window.busy(since.min(self.window.span()));
            }
        }
        self.last = self.last.max(now);
        self.no_load.roll(now);
        // Expired entries are mostly at the front; one behind a later one waits for it.
        while self.abandoned.front().is_some_and(|a| a.until <= now) {
            self.abandoned.pop_front();
        }
        finished.is_some()
    }

    /// How long the `held` attempts take to finish at the rate the dependency finished them
    /// while busy — over the window, or over its last slots when that is faster: a dependency
    /// finishing work again after a stall is seen within a few slots. `None` while the window
    /// cannot tell, and when the dependency finished none over it: stalled, not queueing, and
    /// what an admitted attempt waits for then is a stuck connection or a hung dependency,
    /// which the measured ceiling exists to cut.
    fn queue_wait(&self, held: u32) -> Option<Duration> {
        let rate = match (self.window.rate()?, self.window.recent_rate()) {
            (window, Some(recent)) => window.max(recent),
            (window, None) => window,
        };
        (rate > 0.0).then(|| {
            Duration::from_secs_f64((f64::from(held) / rate).min(LONGEST_HOLD.as_secs_f64()))
        })
    }
}

/// Why a service refused a request (F4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestRefused {
    /// Its call had less time left than the service's typical handling time, this one.
    Handling(Duration),
    /// Its expected wait, or the limit, refused it.
    Saturated(Saturated),
    /// The service refused a first attempt as critical as it lately: its capacity goes to
    /// those; the hint is the wait of the requests ahead.
    Shed(Duration),
}

/// How little a caller waits on work of `criticality`: critical 0, sheddable 2.
fn rank(criticality: Criticality) -> u8 {
    criticality as u8
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
        if now >= self.until {
            self.previous = self.current.take();
            self.until = now.checked_add(NO_LOAD_PERIOD).unwrap_or(now);
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
