//! What a dependency did over the last window, in ten slots: completions, for its completion
//! rate; latency and the work held, for its limit.

use std::time::{Duration, Instant};

/// Slots per window: the limit adapts once per slot.
pub(super) const SLOTS: u32 = 10;

/// The slots the recent completion rate counts: a third of the window.
const RECENT_SLOTS: u64 = 3;

/// One slot's tally.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Slot {
    /// Which slot of the run this is, counted from the window's origin.
    index: u64,
    /// Attempts the dependency finished: answered, or known finished because a later one was.
    pub(super) completions: u32,
    /// Attempts admitted to it, and those of them never sent, superseded by another
    /// attempt's answer (a hedge that lost) or cut by the caller's measured ceiling: their
    /// going unanswered says nothing of its pace. An attempt its call gave up on, or that its
    /// timeout or deadline cut, counts: a caller gives up on what is too slow for it.
    sent: u32,
    dropped: u32,
    /// Attempts it answered, with the work or without: what left its hands.
    answers: u32,
    /// Latency of the attempts answered or cut in this slot, summed, and how many.
    latency_nanos: u64,
    pub(super) samples: u32,
    /// Attempts cut before an answer: their latency is at least what they waited.
    pub(super) cuts: u32,
    /// The most attempts in flight at once.
    pub(super) peak: u32,
    /// How long the dependency held at least one attempt: the time its completions took.
    busy_nanos: u64,
    /// The attempts held, integrated over the slot's time (attempt-nanoseconds).
    held_nanos: u64,
    /// Attempts refused by the limit.
    pub(super) refused: u32,
    /// Requests a service's handlers held when their callers left, unanswered (F4).
    left: u32,
}

impl Slot {
    /// The mean latency of the slot's samples, cut attempts counted at what they waited.
    pub(super) fn mean(&self) -> Option<Duration> {
        (self.samples > 0)
            .then(|| Duration::from_nanos(self.latency_nanos / u64::from(self.samples)))
    }

    /// The attempts held on average over `slot`, the slot's length.
    pub(super) fn mean_held(&self, slot: Duration) -> f64 {
        self.held_nanos as f64 / slot.as_nanos().max(1) as f64
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
}

/// The last [`SLOTS`] slots, oldest overwritten first.
#[derive(Debug)]
pub(super) struct Window {
    origin: Instant,
    slot: Duration,
    slots: [Slot; SLOTS as usize],
    /// The slot being filled, its place in `slots`, and when it ends.
    current: u64,
    at: usize,
    end: Instant,
    /// The pace over the window's slots before the current one, and over the recent ones
    /// before it: they change only when a slot ends, and every admission reads them.
    earlier: Pace,
    recent_earlier: Pace,
}

impl Window {
    pub(super) fn new(window: Duration, origin: Instant) -> Self {
        let slot = window / SLOTS;
        Self {
            origin,
            slot,
            slots: [Slot::default(); SLOTS as usize],
            current: 0,
            at: 0,
            end: origin.checked_add(slot).unwrap_or(origin),
            earlier: Pace::default(),
            recent_earlier: Pace::default(),
        }
    }

    fn index_at(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(since / self.slot.as_nanos().max(1)).unwrap_or(u64::MAX)
    }

    /// Moves to the slot of `now`; returns the slot just finished when `now` starts a new one
    /// (`None` when the clock has not left the current slot, or went back).
    #[inline]
    pub(super) fn advance(&mut self, now: Instant) -> Option<Slot> {
        // Most events fall in the slot being filled: one comparison, no division.
        if now < self.end {
            return None;
        }
        self.move_to(now)
    }

    #[cold]
    fn move_to(&mut self, now: Instant) -> Option<Slot> {
        let index = self.index_at(now);
        if index <= self.current {
            return None;
        }
        let finished = self.slots[self.at];
        self.current = index;
        self.at = (index % u64::from(SLOTS)) as usize;
        let slot = u64::try_from(self.slot.as_nanos()).unwrap_or(u64::MAX);
        self.end = (self.origin)
            .checked_add(Duration::from_nanos(slot.saturating_mul(index + 1)))
            .unwrap_or(now);
        self.slots[self.at] = Slot {
            index,
            ..Slot::default()
        };
        self.earlier = self.pace_before(u64::from(SLOTS));
        self.recent_earlier = self.pace_before(RECENT_SLOTS);
        Some(finished)
    }

    /// The pace over the `count` - 1 slots before the current one.
    fn pace_before(&self, count: u64) -> Pace {
        let oldest = self.current.saturating_sub(count - 1);
        self.slots
            .iter()
            .filter(|slot| (oldest..self.current).contains(&slot.index))
            .fold(Pace::default(), Pace::and)
    }

    /// The pace over the current slot and the `earlier` ones.
    fn pace(&self, earlier: Pace) -> Pace {
        earlier.and(&self.slots[self.at])
    }

    fn current_mut(&mut self) -> &mut Slot {
        &mut self.slots[self.at]
    }

    pub(super) fn completed(&mut self, count: u32) {
        let slot = self.current_mut();
        slot.completions = slot.completions.saturating_add(count);
    }

    /// An attempt was sent.
    pub(super) fn sent(&mut self) {
        let slot = self.current_mut();
        slot.sent = slot.sent.saturating_add(1);
    }

    /// An attempt was superseded by another's answer, cut by the caller's ceiling, or
    /// withdrawn before it was sent.
    pub(super) fn dropped(&mut self) {
        let slot = self.current_mut();
        slot.dropped = slot.dropped.saturating_add(1);
    }

    /// An attempt was answered, with the work or without.
    pub(super) fn answered(&mut self) {
        let slot = self.current_mut();
        slot.answers = slot.answers.saturating_add(1);
    }

    pub(super) fn latency(&mut self, latency: Duration, cut: bool) {
        let slot = self.current_mut();
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        slot.latency_nanos = slot.latency_nanos.saturating_add(nanos);
        slot.samples = slot.samples.saturating_add(1);
        slot.cuts = slot.cuts.saturating_add(u32::from(cut));
    }

    pub(super) fn busy(&mut self, busy: Duration) {
        let slot = self.current_mut();
        let nanos = u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX);
        slot.busy_nanos = slot.busy_nanos.saturating_add(nanos);
    }

    /// `held` attempts were held for `time`.
    pub(super) fn held_for(&mut self, held: u32, time: Duration) {
        let slot = self.current_mut();
        let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        slot.held_nanos = slot
            .held_nanos
            .saturating_add(nanos.saturating_mul(u64::from(held)));
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

    /// An attempt was refused by the limit.
    pub(super) fn refused(&mut self) {
        let slot = self.current_mut();
        slot.refused = slot.refused.saturating_add(1);
    }

    pub(super) fn occupied(&mut self, occupied: u32) {
        let slot = self.current_mut();
        slot.peak = slot.peak.max(occupied);
    }

    /// The slots of the window ending at the current one.
    fn live(&self) -> impl Iterator<Item = &Slot> {
        let oldest = self.current.saturating_sub(u64::from(SLOTS) - 1);
        self.slots
            .iter()
            .filter(move |slot| (oldest..=self.current).contains(&slot.index))
    }

    /// Completions per second of busy time over the window — the time the dependency held
    /// at least one attempt — and whether it finished none in a window that was busy
    /// throughout. `None` while the window has seen less than one slot of busy time: too
    /// little to say. Counting busy time only, a lightly loaded dependency's rate is what it
    /// serves while it works, not the rate its callers happen to send.
    pub(super) fn rate(&self) -> Option<f64> {
        self.rate_of(self.pace(self.earlier))
    }

    fn rate_of(&self, pace: Pace) -> Option<f64> {
        let slot = u64::try_from(self.slot.as_nanos()).unwrap_or(u64::MAX);
        (pace.busy_nanos >= slot)
            .then(|| pace.completions as f64 / Duration::from_nanos(pace.busy_nanos).as_secs_f64())
    }

    /// How far what was sent outran what the dependency answered, over the window, leaving
    /// out what was superseded, never sent or cut by a ceiling: about 1 when what is sent leaves as fast
    /// as it comes, however slowly each attempt is served; above it while work accumulates, as
    /// it does in a queue, where attempts wait until their timeouts cut them; infinite when
    /// attempts were awaited for a slot and more and nothing was answered. `None` when nothing
    /// was answered in a window not yet busy for a slot: too little to say. Counts, not
    /// latencies: a heavy tail that takes seconds to settle moves neither.
    pub(super) fn accumulation(&self) -> Option<f64> {
        let (sent, dropped, answers, busy) =
            self.live()
                .fold((0u64, 0u64, 0u64, 0u64), |(s, d, a, b), slot| {
                    (
                        s + u64::from(slot.sent),
                        d + u64::from(slot.dropped),
                        a + u64::from(slot.answers),
                        b.saturating_add(slot.busy_nanos),
                    )
                });
        let sent = sent.saturating_sub(dropped);
        let slot = u64::try_from(self.slot.as_nanos()).unwrap_or(u64::MAX);
        match answers {
            0 if busy < slot => None,
            0 => Some(f64::INFINITY),
            answers => Some(sent as f64 / answers as f64),
        }
    }

    /// Whether attempts were held for a slot and more of the window and none left: nothing
    /// finished, nothing was even answered. A stall; a dependency answering errors is not one.
    pub(super) fn stalled(&self) -> bool {
        let pace = self.pace(self.earlier);
        let slot = u64::try_from(self.slot.as_nanos()).unwrap_or(u64::MAX);
        pace.busy_nanos >= slot && pace.answers == 0 && pace.completions == 0
    }

    /// The completions per second of busy time over the window, or none counted yet: see
    /// [`rate`](Self::rate).
    pub(super) fn completion_rate(&self) -> f64 {
        self.rate().unwrap_or(0.0)
    }

    /// How long one slot lasts.
    pub(super) fn slot(&self) -> Duration {
        self.slot
    }

    /// Completions per second of busy time over the last [`RECENT_SLOTS`], like
    /// [`rate`](Self::rate) but quicker to see a dependency that has started finishing work
    /// again after a stall.
    pub(super) fn recent_rate(&self) -> Option<f64> {
        self.rate_of(self.pace(self.recent_earlier))
    }

    /// How long the window covers when full.
    pub(super) fn span(&self) -> Duration {
        self.slot * SLOTS
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
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The pace summed afresh over the window's live slots, ending with the current one.
    fn summed(window: &Window, count: u64) -> Pace {
        let oldest = window.current.saturating_sub(count - 1);
        window
            .slots
            .iter()
            .filter(|slot| (oldest..=window.current).contains(&slot.index))
            .fold(Pace::default(), Pace::and)
    }

    proptest! {
        /// O5: the pace kept from slot to slot is the pace summed over the slots, whatever
        /// the events and however the clock moves between them.
        #[test]
        fn o5_the_kept_pace_is_the_pace_summed_over_the_slots(
            events in prop::collection::vec((0u64..400, 0u8..4, 0u64..50), 1..300),
        ) {
            let origin = Instant::now();
            let mut window = Window::new(Duration::from_secs(1), origin);
            let mut now = origin;
            for (step, kind, amount) in events {
                now += Duration::from_millis(step);
                window.advance(now);
                match kind {
                    0 => window.completed(u32::try_from(amount).unwrap()),
                    1 => window.answered(),
                    2 => window.busy(Duration::from_millis(amount)),
                    _ => window.sent(),
                }
                prop_assert_eq!(window.pace(window.earlier), summed(&window, u64::from(SLOTS)));
                prop_assert_eq!(window.pace(window.recent_earlier), summed(&window, RECENT_SLOTS));
            }
        }
    }
}
