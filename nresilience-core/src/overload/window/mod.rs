//! What a dependency did over the last window, in ten slots: completions and the time it was
//! busy, for its completion rate; what it was sent and answered, for its limit.

use std::time::{Duration, Instant};

/// Slots per window: the limit adapts once per slot.
pub(super) const SLOTS: u32 = 10;

/// Work is no longer accumulating below this [`Window::accumulation`]: the dependency answers
/// what it is sent, within a tenth.
pub(super) const KEEPING_PACE: f64 = 1.1;

/// Work accumulates when what is sent, or what ends answered or given up on, outruns what
/// the dependency answers by this much (see [`Window::accumulation`]): a quarter more.
pub(super) const ACCUMULATING: f64 = 1.25;

/// The slots the recent completion rate counts: a third of the window.
const RECENT_SLOTS: u64 = 3;

mod survivors;

/// One slot's tally. Its counts are of one slot's events and its busy time at most the slot:
/// none of them can overflow.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Slot {
    /// Which slot of the run this is, counted from the window's origin.
    index: u64,
    /// Attempts the dependency finished: answered, or known finished because a later one was.
    pub(super) completions: u32,
    /// Attempts admitted to it, and those of them never sent, superseded by another
    /// attempt's answer (a hedge that lost) or cut by the caller's measured ceiling: their
    /// going unanswered says nothing of its pace.
    sent: u32,
    dropped: u32,
    /// Attempts its callers gave up on before an answer: abandoned, or cut by a timeout or
    /// a deadline. A caller gives up on what is too slow for it.
    given_up: u32,
    /// Attempts it answered, with the work or without: what left its hands.
    answers: u32,
    /// Latency of the attempts answered or cut in this slot, summed, and how many.
    latency_nanos: u64,
    pub(super) samples: u32,
    /// The longest of those latencies.
    longest_nanos: u64,
    /// Attempts cut before an answer: their latency is at least what they waited.
    pub(super) cuts: u32,
    /// The most attempts held at once.
    pub(super) peak: u32,
    /// How long the dependency had at least one attempt awaited: the time its completions
    /// took.
    busy_nanos: u64,
    /// Attempts refused by the limit.
    pub(super) refused: u32,
    /// Attempts refused by their expected wait (O1) though their callers would have waited
    /// longer than the window's attempts took: turned away by the work held ahead of them.
    turned_away: u32,
    /// Requests a service's handlers held when their callers left, unanswered (F4).
    left: u32,
}

impl Slot {
    /// An empty slot of `index`, busy for `busy_nanos`.
    fn new(index: u64, busy_nanos: u64) -> Self {
        Self {
            index,
            busy_nanos,
            ..Self::default()
        }
    }

    /// The mean latency of the slot's samples, cut attempts counted at what they waited.
    pub(super) fn mean(&self) -> Option<Duration> {
        (self.samples > 0)
            .then(|| Duration::from_nanos(self.latency_nanos / u64::from(self.samples)))
    }
}

/// What the dependency finished and answered over some slots, and the busy time it took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Pace {
    completions: u64,
    answers: u64,
    busy_nanos: u64,
}

impl Pace {
    fn and(self, slot: &Slot) -> Self {
        Self {
            completions: self.completions + u64::from(slot.completions),
            answers: self.answers + u64::from(slot.answers),
            busy_nanos: self.busy_nanos.saturating_add(slot.busy_nanos),
        }
    }

    /// The busy time each completion took, once the slots were busy for `slot` nanoseconds
    /// and finished something: `None` while they cannot tell.
    fn nanos_per_completion(self, slot: u64) -> Option<u64> {
        (self.busy_nanos >= slot && self.completions > 0)
            .then(|| self.busy_nanos / self.completions)
    }

    /// The busy time per completion over a `window`'s slots, or over its `recent` ones when
    /// that is shorter, slots of `slot` nanoseconds: `None` while the window cannot tell.
    fn shorter_per_completion(window: Self, recent: Self, slot: u64) -> Option<u64> {
        let whole = window.nanos_per_completion(slot)?;
        let recent = recent.nanos_per_completion(slot);
        Some(recent.map_or(whole, |recent| recent.min(whole)))
    }
}

/// What the window was sent, dropped, gave up on and answered, and its busy time.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    sent: u64,
    turned_away: u64,
    dropped: u64,
    given_up: u64,
    answers: u64,
    busy_nanos: u64,
}

impl Tally {
    /// The tally with `slot`'s counts added.
    fn and(self, slot: &Slot) -> Self {
        Self {
            sent: self.sent + u64::from(slot.sent),
            turned_away: self.turned_away + u64::from(slot.turned_away),
            dropped: self.dropped + u64::from(slot.dropped),
            given_up: self.given_up + u64::from(slot.given_up),
            answers: self.answers + u64::from(slot.answers),
            busy_nanos: self.busy_nanos.saturating_add(slot.busy_nanos),
        }
    }

    /// What was sent, leaving out what was superseded, never sent or cut by a ceiling: its
    /// going unanswered says nothing of the dependency's pace.
    fn paced_sent(self) -> u64 {
        self.sent.saturating_sub(self.dropped)
    }
}

/// A spell of busy time not yet counted: since when, and the attempt that began it.
#[derive(Debug, Clone, Copy)]
struct Busy {
    since: Instant,
    /// The ticket of the attempt whose admission began it, `0` once a slot's end has cut it:
    /// when that attempt ends it, the spell lasted exactly that attempt's latency.
    by: u64,
}

/// The last [`SLOTS`] slots: the one being filled, and the finished ones before it, oldest
/// overwritten first.
#[derive(Debug)]
pub(super) struct Window {
    origin: Instant,
    slot: Duration,
    slot_nanos: u64,
    /// The slot being filled, and when it ends.
    filling: Slot,
    end: Instant,
    /// The finished slots, each at its index modulo [`SLOTS`].
    slots: [Slot; SLOTS as usize],
    /// The pace over the last window's finished slots, and over the last [`RECENT_SLOTS`]
    /// of them: they change when a slot ends or an answer reveals completions in slots past,
    /// and every admission reads the pace per completion worked out from them. The slot
    /// being filled is left out: its busy time under way is counted only when it ends.
    finished: Pace,
    recent: Pace,
    /// The busy nanoseconds per completion the two paces give: see
    /// [`nanos_per_completion`](Self::nanos_per_completion).
    per_completion: Option<u64>,
    /// Busy time under way, counted when it ends or its slot does.
    busy: Option<Busy>,
    /// The completions of the window that ended as each slot began, by the slot's index.
    earlier: [(u64, u64); SLOTS as usize],
    /// Whether the last window finished more than the one before it, by more than chance.
    finishing_more: bool,
    /// Whether a finished slot has counted a completion yet.
    finished_any: bool,
    /// Whether the dependency has been seen done ramping up since it last went a window
    /// without work.
    settled: bool,
    /// The latest finished slot that answered anything.
    answered_in: Option<u64>,
    /// Whether the window's answers are a ramp's survivors, as the slot being filled began,
    /// and the slot until which the pace is no expected wait for it: see
    /// [`answers_are_survivors`](Self::answers_are_survivors).
    survivors: bool,
    survivors_until: u64,
    /// The slot from which every window has had work.
    working_from: u64,
}

/// The place in the ring of the slot of `index`.
fn place(index: u64) -> usize {
    (index % u64::from(SLOTS)) as usize
}

/// A duration in nanoseconds, saturating.
pub(crate) fn nanos(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(duration.subsec_nanos()))
}

impl Window {
    pub(super) fn new(window: Duration, origin: Instant) -> Self {
        let slot = window / SLOTS;
        Self {
            origin,
            slot,
            slot_nanos: nanos(slot),
            filling: Slot::new(0, 0),
            slots: [Slot::new(0, 0); SLOTS as usize],
            end: origin.checked_add(slot).unwrap_or(origin),
            finished: Pace::default(),
            recent: Pace::default(),
            per_completion: None,
            busy: None,
            earlier: [(u64::MAX, 0); SLOTS as usize],
            finishing_more: false,
            finished_any: false,
            settled: false,
            answered_in: None,
            survivors: false,
            survivors_until: 0,
            working_from: 0,
        }
    }

    fn index_at(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(since / self.slot.as_nanos().max(1)).unwrap_or(u64::MAX)
    }

    /// When the current slot ends: [`advance`](Self::advance) has work to do from then.
    pub(super) fn end(&self) -> Instant {
        self.end
    }

    /// Moves to the slot of `now`; returns the slot just finished when `now` starts a new one
    /// (`None` when the clock has not left the current slot, or went back). Busy time under
    /// way is counted in each slot it spans, the ones no event fell in included.
    pub(super) fn advance(&mut self, now: Instant) -> Option<Slot> {
        if now < self.end {
            return None;
        }
        let index = self.index_at(now);
        let current = self.filling.index;
        if index <= current {
            return None;
        }
        if let Some(busy) = &mut self.busy {
            let spent = self
                .end
                .saturating_duration_since(busy.since)
                .min(self.slot);
            self.filling.busy_nanos = self.filling.busy_nanos.saturating_add(nanos(spent));
            busy.by = 0;
        }
        let finished = self.filling;
        self.slots[place(current)] = finished;
        // The slots no event fell in: busy throughout while an attempt was awaited.
        if self.busy.is_some() {
            let skipped = (current + 1).max(index.saturating_sub(u64::from(SLOTS)));
            for index in skipped..index {
                self.slots[place(index)] = Slot::new(index, self.slot_nanos);
            }
        }
        let start = (self.origin)
            .checked_add(Duration::from_nanos(self.slot_nanos.saturating_mul(index)))
            .unwrap_or(now);
        self.end = start.checked_add(self.slot).unwrap_or(now);
        if let Some(busy) = &mut self.busy {
            busy.since = start;
        }
        self.filling = Slot::new(index, 0);
        self.repace();
        // The window before this one ended a window ago, its completions recorded then. Only
        // whole windows compare: the first ones of a tracker hold fewer slots.
        let before = &mut self.earlier[place(index)];
        let then = index.wrapping_sub(u64::from(SLOTS));
        let previous = (index >= 2 * u64::from(SLOTS) && before.0 == then).then_some(before.1);
        *before = (index, self.finished.completions);
        self.finished_any |= self.finished.completions > 0;
        self.finishing_more = previous.is_some_and(|previous| {
            let latest = self.finished.completions as f64;
            let previous = previous as f64;
            latest > previous + 2.0 * (latest + previous).sqrt()
        });
        // Settled until a window without work: what comes after ramps up again.
        let working = self.finished.busy_nanos > 0;
        if !working {
            self.working_from = index;
        }
        self.settled = working && (self.settled || self.done_ramping(index, previous.is_some()));
        if finished.answers > 0 {
            self.answered_in = Some(current);
        }
        Some(finished)
    }

    /// Whether the window, now at `index` and `compared` with the whole one before it, shows
    /// the dependency done ramping up: see [`settled`](Self::settled).
    fn done_ramping(&self, index: u64, compared: bool) -> bool {
        if self.finished.completions == 0 {
            return false;
        }
        // A dependency answering within a slot ramps up within one: its pace is near enough.
        if self.mean().is_some_and(|mean| mean <= self.slot) {
            return true;
        }
        // Two whole windows of work: no more finished than a window ago, and what is sent
        // answered.
        compared
            && index >= self.working_from.saturating_add(2 * u64::from(SLOTS))
            && !self.finishing_more
            && self.accumulation().is_some_and(|a| a <= KEEPING_PACE)
    }

    /// Sums the paces again after the finished slots changed.
    fn repace(&mut self) {
        self.finished = self.pace_before(u64::from(SLOTS));
        self.recent = self.pace_before(RECENT_SLOTS);
        self.per_completion =
            Pace::shorter_per_completion(self.finished, self.recent, self.slot_nanos);
    }

    /// The pace over the `count` finished slots before the current one.
    fn pace_before(&self, count: u64) -> Pace {
        let current = self.filling.index;
        let oldest = current.saturating_sub(count);
        self.slots
            .iter()
            .filter(|slot| (oldest..current).contains(&slot.index))
            .fold(Pace::default(), Pace::and)
    }

    fn current_mut(&mut self) -> &mut Slot {
        &mut self.filling
    }

    /// The dependency was idle and the attempt of ticket `by` was sent to it at `now`: busy
    /// time begins.
    #[inline]
    pub(super) fn busy_from(&mut self, now: Instant, by: u64) {
        self.busy = Some(Busy { since: now, by });
    }

    /// The last attempt awaited, of ticket `by`, ended at `now` after `latency` nanoseconds
    /// (when that is the time since its admission): busy time ends. When that attempt began
    /// it, the spell lasted its latency, with no clock arithmetic.
    #[inline]
    pub(super) fn idle(&mut self, now: Instant, by: u64, latency: Option<u64>) {
        let Some(busy) = self.busy.take() else {
            return;
        };
        let spent = match latency {
            Some(latency) if busy.by == by => latency,
            _ => nanos(now.saturating_duration_since(busy.since)),
        };
        self.filling.busy_nanos += spent.min(self.slot_nanos);
    }

    #[inline]
    pub(super) fn completed(&mut self, count: u32) {
        let slot = self.current_mut();
        slot.completions += count;
    }

    /// An attempt was sent, with `held` attempts held.
    #[inline]
    pub(super) fn sent(&mut self, held: u32) {
        let slot = self.current_mut();
        slot.sent += 1;
        slot.peak = slot.peak.max(held);
    }

    /// An attempt was superseded by another's answer, cut by the caller's ceiling, or
    /// withdrawn before it was sent.
    pub(super) fn dropped(&mut self) {
        let slot = self.current_mut();
        slot.dropped = slot.dropped.saturating_add(1);
    }

    /// An attempt was given up on before an answer.
    pub(super) fn given_up(&mut self) {
        let slot = self.current_mut();
        slot.given_up = slot.given_up.saturating_add(1);
    }

    /// An attempt was answered, with the work or without.
    #[inline]
    pub(super) fn answered(&mut self) {
        let slot = self.current_mut();
        slot.answers += 1;
    }

    /// An attempt was answered or `cut` after `latency` nanoseconds.
    #[inline]
    pub(super) fn latency(&mut self, latency: u64, cut: bool) {
        let slot = self.current_mut();
        slot.latency_nanos = slot.latency_nanos.saturating_add(latency);
        slot.longest_nanos = slot.longest_nanos.max(latency);
        slot.samples += 1;
        slot.cuts = slot.cuts.saturating_add(u32::from(cut));
    }

    /// `count` attempts finished at the latest at `now`, known only now because an attempt
    /// sent after them was answered after `over` nanoseconds (first in, first out): they were
    /// finished while it waited, so each slot of that wait counts its share of them — the slots
    /// in which this process awaited nothing, and those before the window, none, as they count
    /// no busy time either — and the slot being filled the rest. Counted all in the slot of
    /// the answer that revealed them, a queue that drained over a second would look, for a
    /// window, like a dependency several times as fast.
    #[cold]
    pub(super) fn completed_over(&mut self, count: u32, over: u64, now: Instant) {
        let start = self.end.checked_sub(self.slot).unwrap_or(self.end);
        // How far into the slot being filled `now` is, and how far the wait reaches before it.
        let into = nanos(now.saturating_duration_since(start)).min(self.slot_nanos);
        let before = over.saturating_sub(into);
        let current = self.filling.index;
        let mut counted = 0;
        let mut changed = false;
        for back in 1..=u64::from(SLOTS) {
            let (newer, older) = (
                self.slot_nanos.saturating_mul(back - 1),
                self.slot_nanos.saturating_mul(back),
            );
            if before <= newer {
                break;
            }
            let overlap = before.min(older) - newer;
            let share = u64::from(count) * overlap / over.max(1);
            let share = u32::try_from(share).unwrap_or(count).min(count - counted);
            counted += share;
            let index = current.wrapping_sub(back);
            let slot = &mut self.slots[place(index)];
            if slot.index == index && slot.busy_nanos > 0 && share > 0 {
                slot.completions += share;
                changed = true;
            }
        }
        // What the wait spent before the window counts nowhere.
        let beyond = before.saturating_sub(self.slot_nanos.saturating_mul(u64::from(SLOTS)));
        let beyond = u32::try_from(u64::from(count) * beyond / over.max(1)).unwrap_or(count);
        counted = (counted + beyond).min(count);
        self.filling.completions += count - counted;
        if changed {
            self.repace();
        }
    }

    /// A service's request ended unanswered: its caller left (F4).
    pub(super) fn caller_left(&mut self) {
        let slot = self.current_mut();
        slot.left = slot.left.saturating_add(1);
    }

    /// Whether, over the window, more than a fifth of the requests a service's handlers
    /// ended were left by their callers before an answer: work accumulating in the handlers
    /// (O5's evidence as a service sees it, F4).
    pub(super) fn callers_leaving(&self) -> bool {
        let (left, answers) = self.live().fold((0u64, 0u64), |(l, a), slot| {
            (l + u64::from(slot.left), a + u64::from(slot.answers))
        });
        left * 4 > answers
    }

    /// An attempt was refused by its expected wait (O1) though its caller would have waited
    /// longer than the window's attempts took.
    pub(super) fn turned_away(&mut self) {
        let slot = self.current_mut();
        slot.turned_away = slot.turned_away.saturating_add(1);
    }

    /// An attempt was refused by the limit.
    pub(super) fn refused(&mut self) {
        let slot = self.current_mut();
        slot.refused = slot.refused.saturating_add(1);
    }

    /// The slots of the window ending at the current one.
    fn live(&self) -> impl Iterator<Item = &Slot> {
        let current = self.filling.index;
        let oldest = current.saturating_sub(u64::from(SLOTS) - 1);
        self.slots
            .iter()
            .filter(move |slot| (oldest..current).contains(&slot.index))
            .chain(std::iter::once(&self.filling))
    }

    /// The busy time per completion over the last window's finished slots — the time the
    /// dependency had at least one attempt awaited — or over its last [`RECENT_SLOTS`] when
    /// that is shorter: a dependency finishing work again after a stall is seen within a few
    /// slots. `None` while they have seen less than a slot of busy time, too little to say,
    /// and when the dependency finished nothing in them. Counting busy time only, a lightly
    /// loaded dependency's pace is what it serves while it works, not the rate its callers
    /// happen to send. Whole nanoseconds, read from slots that are over and worked out as
    /// they change: every admission asks.
    #[inline]
    pub(super) fn nanos_per_completion(&self) -> Option<u64> {
        self.per_completion
    }

    /// How far the work of the window outran what the dependency answered: the larger of what
    /// was sent (leaving out what was superseded, never sent or cut by a ceiling) and what
    /// ended, answered or given up on, over what was answered. The first grows while a queue
    /// fills, before anyone gives up; the second while a queue its callers' patience holds
    /// full — the expected wait (O1) sending no more than leaves it — leaves a share of its
    /// work unanswered. About 1 when what is sent is answered as fast as it comes, however
    /// slowly each attempt is served; infinite when attempts were awaited for a slot and more
    /// and nothing was answered. `None` when nothing was answered in a window not yet busy for
    /// a slot: too little to say. Counts, not latencies: a heavy tail that takes seconds to
    /// settle moves neither.
    pub(super) fn accumulation(&self) -> Option<f64> {
        let tally = self.tally();
        self.outran(tally, tally.paced_sent())
    }

    /// [`accumulation`](Self::accumulation) with the attempts [turned
    /// away](Self::turned_away) counted as sent: the work offered. Once a queue holds its
    /// callers' patience, the expected wait sends no more than leaves it, and what it turns
    /// away is the work piling up; the answers show it only when the callers give up on the
    /// attempts sent at the queue's edge, after that patience. The tracker counts only the
    /// attempts turned away though their callers could have waited longer than the window's
    /// attempts took, queueing included: a dependency slower than some callers can wait turns
    /// those away with no queue behind it.
    pub(super) fn offered_accumulation(&self) -> Option<f64> {
        let tally = self.tally();
        self.outran(tally, tally.paced_sent() + tally.turned_away)
    }

    /// How far `sent`, or what ended, outran what the window answered.
    fn outran(&self, tally: Tally, sent: u64) -> Option<f64> {
        let outran = sent.max(tally.answers + tally.given_up);
        match tally.answers {
            0 if tally.busy_nanos < self.slot_nanos => None,
            0 => Some(f64::INFINITY),
            answers => Some(outran as f64 / answers as f64),
        }
    }

    /// The window's counts, summed.
    fn tally(&self) -> Tally {
        self.live().fold(Tally::default(), Tally::and)
    }

    /// Whether the dependency finished more over the last window than over the window before
    /// it, by more than chance (two standard deviations of the two counts): work that looks
    /// like accumulating is then still on its way back — the attempts in flight ramping up to
    /// a latency of the order of the window — where a queue finishes the same, window after
    /// window, whatever it is sent.
    pub(super) fn finishing_more(&self) -> bool {
        self.finishing_more
    }

    /// Whether the dependency has been seen done ramping up, with work in every window since:
    /// its attempts answered within a slot on average (a ramp as short as that biases nothing),
    /// or two whole windows of work compared, the latest finishing something, no more than the
    /// one before beyond chance, and answering what it was sent (within a tenth). Until then what
    /// it finishes lags what it was sent by up to a latency, and its pace undercounts how fast it
    /// works: the work ahead at that pace is no expected wait. A window without work starts the
    /// next ramp.
    pub(super) fn settled(&self) -> bool {
        self.settled
    }

    /// Whether the dependency has been seen to finish anything: before, nothing tells work
    /// accumulating from attempts that take longer than the time they have had.
    pub(super) fn finished_any(&self) -> bool {
        self.finished_any
    }

    /// Whether attempts were awaited for a slot and more of the last window and none left:
    /// nothing finished, nothing was even answered, in it or since. A stall; a dependency
    /// answering errors is not one.
    #[inline]
    pub(super) fn stalled(&self) -> bool {
        self.finishing_nothing() && self.finished.answers == 0 && self.filling.answers == 0
    }

    /// Whether attempts were awaited for a slot and more of the last window and none was
    /// finished, in it or since: a stall, or a dependency answering nothing but errors — a
    /// full queue's refusals among them. How long its served attempts took before says
    /// nothing of how long the next one takes.
    #[inline]
    pub(super) fn finishing_nothing(&self) -> bool {
        self.finished.busy_nanos >= self.slot_nanos
            && self.finished.completions == 0
            && self.filling.completions == 0
    }

    /// Completions per second of busy time over the last window's finished slots, as
    /// [`nanos_per_completion`](Self::nanos_per_completion) counts them but over the whole
    /// window only; `0` when it finished none, or while it has seen less than a slot of busy
    /// time, too little to say.
    pub(super) fn completion_rate(&self) -> f64 {
        let pace = self.finished;
        if pace.busy_nanos < self.slot_nanos {
            return 0.0;
        }
        pace.completions as f64 / Duration::from_nanos(pace.busy_nanos).as_secs_f64()
    }

    /// How long one slot lasts.
    pub(super) fn slot(&self) -> Duration {
        self.slot
    }

    /// The mean latency over the window, cut attempts counted at what they waited.
    pub(super) fn mean(&self) -> Option<Duration> {
        let (nanos, samples) = self.live().fold((0u128, 0u64), |(n, s), slot| {
            (
                n + u128::from(slot.latency_nanos),
                s + u64::from(slot.samples),
            )
        });
        (samples > 0).then(|| {
            Duration::from_nanos(u64::try_from(nanos / u128::from(samples)).unwrap_or(u64::MAX))
        })
    }
}

#[cfg(test)]
mod tests;
