//! Whether a window's answers are the survivors of a ramp (O1, O5): the share of its attempts
//! a dependency answers fast, while the rest, still due, are held.

use std::time::Duration;

use super::{Slot, Tally, Window, ACCUMULATING, RECENT_SLOTS, SLOTS};

/// A window without an answer for this many of its usual gaps between answers is silent.
const SILENT_GAPS: u64 = 5;

/// Work held beyond this many times what was sent over the window's longest latency makes its
/// answers survivors: Little's law would have them about equal.
const SURVIVOR_RATIO: f64 = 2.0;

impl Window {
    /// Weighs the window's answers against the `held` attempts, as the slot being filled
    /// begins: see [`answers_are_survivors`](Self::answers_are_survivors).
    pub(in crate::overload) fn weigh(&mut self, held: u32) {
        self.survivors = !self.silent()
            && !self.giving_up()
            && self.accumulation().is_some_and(|a| a > ACCUMULATING)
            && self.longest().is_some_and(|longest| {
                f64::from(held) > SURVIVOR_RATIO * self.sent_over(longest).max(1.0)
            });
        if self.survivors {
            self.survivors_until = self.filling.index.saturating_add(RECENT_SLOTS);
        }
    }

    /// Whether the window's answers were the survivors of a ramp as the slot being filled
    /// began: work accumulates, its callers give up on no more than a fifth of the attempts
    /// that end, the dependency is not silent, and it holds more than twice what it was sent
    /// over the longest latency it served an attempt after, or a caller cut one, over the
    /// window. A dependency holds what it was sent over the time that work spends with it
    /// (Little's law). In a queue the attempt answered is the oldest and everything sent after
    /// it is held, so its latency spans the work held, the queue filling or not, and whatever
    /// share of the answers bypasses it. A ramp whose slower attempts are still due answers
    /// only its fast share and holds everything sent since it began: the answers say nothing of
    /// the work held, and the pace counts the busy time of every attempt over the fast share.
    pub(in crate::overload) fn answers_are_survivors(&self) -> bool {
        self.survivors
    }

    /// Whether the pace tells how long the work held takes: the window is
    /// [`settled`](Self::settled), and its answers were not
    /// [survivors](Self::answers_are_survivors) as any of the last [`RECENT_SLOTS`] slots
    /// began, this one included: once a ramp's slower share lands, the recent pace counts it
    /// after as many slots.
    pub(in crate::overload) fn pace_tells_wait(&self) -> bool {
        self.settled() && self.filling.index >= self.survivors_until
    }

    /// Whether the window has gone without an answer for longer than [`SILENT_GAPS`] of its
    /// usual gaps between answers: a stall, not a lull between the answers of a dependency
    /// that answers few.
    pub(super) fn silent(&self) -> bool {
        let Some(answered_in) = self.answered_in else {
            return true;
        };
        let slots = self
            .filling
            .index
            .saturating_sub(answered_in.saturating_add(1));
        self.finished.answers == 0
            || slots.saturating_mul(self.finished.answers) > SILENT_GAPS * u64::from(SLOTS)
    }

    /// Whether the window's callers give up on more than a fifth of the attempts that end:
    /// work done for nobody, a queue's mark (O5), whatever the answers.
    fn giving_up(&self) -> bool {
        let tally = self.tally();
        tally.given_up * 4 > tally.answers
    }

    /// The longest latency over the window's finished slots, if they have any.
    fn longest(&self) -> Option<Duration> {
        self.finished_newest_first()
            .filter(|slot| slot.samples > 0)
            .map(|slot| slot.longest_nanos)
            .max()
            .map(Duration::from_nanos)
    }

    /// What was sent over `span`, at the rate the window's finished slots were sent attempts
    /// (leaving out what was superseded, never sent or cut by a ceiling).
    fn sent_over(&self, span: Duration) -> f64 {
        let (tally, slots) = self
            .finished_newest_first()
            .fold((Tally::default(), 0u32), |(tally, slots), slot| {
                (tally.and(slot), slots + 1)
            });
        if slots == 0 {
            return 0.0;
        }
        let per_slot = tally.paced_sent() as f64 / f64::from(slots);
        per_slot * (span.as_secs_f64() / self.slot.as_secs_f64())
    }

    /// The window's finished slots, the latest first, leaving out those no event fell in while
    /// nothing was awaited.
    fn finished_newest_first(&self) -> impl Iterator<Item = &Slot> {
        let current = self.filling.index;
        (current.saturating_sub(u64::from(SLOTS))..current)
            .rev()
            .filter_map(move |index| {
                let slot = &self.slots[super::place(index)];
                (slot.index == index).then_some(slot)
            })
    }
}
