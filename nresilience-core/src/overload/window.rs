//! What a dependency did over the last window, in ten slots: completions, for its completion
//! rate, and latency, for its limit.

use std::time::{Duration, Instant};

/// Slots per window: the limit adapts once per slot.
pub(super) const SLOTS: u32 = 10;

/// One slot's tally.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Slot {
    /// Which slot of the run this is, counted from the window's origin.
    index: u64,
    /// Attempts the dependency finished: answered, or known finished because a later one was.
    pub(super) completions: u32,
    /// Latency of the attempts answered or cut in this slot, summed, and how many.
    latency_nanos: u64,
    pub(super) samples: u32,
    /// Attempts cut before an answer: their latency is at least what they waited.
    pub(super) cuts: u32,
    /// The most attempts in flight at once.
    pub(super) peak: u32,
    /// How long the dependency held at least one attempt: the time its completions took.
    busy_nanos: u64,
}

impl Slot {
    /// The mean latency of the slot's samples, cut attempts counted at what they waited.
    pub(super) fn mean(&self) -> Option<Duration> {
        (self.samples > 0)
            .then(|| Duration::from_nanos(self.latency_nanos / u64::from(self.samples)))
    }
}

/// The last [`SLOTS`] slots, oldest overwritten first.
#[derive(Debug)]
pub(super) struct Window {
    origin: Instant,
    slot: Duration,
    slots: [Slot; SLOTS as usize],
    /// The slot being filled.
    current: u64,
}

impl Window {
    pub(super) fn new(window: Duration, origin: Instant) -> Self {
        Self {
            origin,
            slot: window / SLOTS,
            slots: [Slot::default(); SLOTS as usize],
            current: 0,
        }
    }

    fn index_at(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(since / self.slot.as_nanos().max(1)).unwrap_or(u64::MAX)
    }

    /// Moves to the slot of `now`; returns the slot just finished when `now` starts a new one
    /// (`None` when the clock has not left the current slot, or went back).
    pub(super) fn advance(&mut self, now: Instant) -> Option<Slot> {
        let index = self.index_at(now);
        if index <= self.current {
            return None;
        }
        let finished = self.slots[(self.current % u64::from(SLOTS)) as usize];
        self.current = index;
        let slot = &mut self.slots[(index % u64::from(SLOTS)) as usize];
        *slot = Slot {
            index,
            ..Slot::default()
        };
        Some(finished)
    }

    fn current_mut(&mut self) -> &mut Slot {
        let at = (self.current % u64::from(SLOTS)) as usize;
        let slot = &mut self.slots[at];
        slot.index = self.current;
        slot
    }

    pub(super) fn completed(&mut self, count: u32) {
        let slot = self.current_mut();
        slot.completions = slot.completions.saturating_add(count);
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
        let (completions, busy) = self.live().fold((0u64, 0u64), |(c, b), slot| {
            (
                c + u64::from(slot.completions),
                b.saturating_add(slot.busy_nanos),
            )
        });
        let slot = u64::try_from(self.slot.as_nanos()).unwrap_or(u64::MAX);
        if busy < slot {
            return None;
        }
        Some(completions as f64 / Duration::from_nanos(busy).as_secs_f64())
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
