//! The share of retries among the attempts reaching a service, read by the service every 200
//! first attempts, and the allowance it advises its callers from it (F2).

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, TryLockError};
use std::time::{Duration, Instant};

use super::allowance::{Allowance, PARTS};

/// The share of retries a service accepts by default: the retry budget's own fraction, so a
/// fleet is held to what one client's budget holds it to (B1).
pub const DEFAULT_ACCEPTED: f64 = 0.1;

/// The first attempts a reading of the share counts: with a tenth as many retries, their
/// count is known to within about a fifth, and a busy service reads the fleet several times a
/// second, so its callers hear before their banked tokens are spent.
const ENOUGH_FIRSTS: u64 = 200;

/// The longest span one reading covers, for a service too quiet to see enough first attempts.
const LONGEST: Duration = Duration::from_secs(10);

/// The most a part of the budget rises in one reading. A fleet under its share may be under
/// it because its buckets are still refilling, not because it retries less: rising faster than
/// they refill winds the allowance up, and the fleet's refilled buckets then spend together.
const MOST_RISE: f64 = 1.1;

/// How much a part of the budget rises in a reading that saw no retry at all: the advice is
/// holding nothing back, so no refilled bucket waits to spend, and a fleet advised to nothing
/// is whole again in fourteen readings rather than the eighty-odd a tenth at a time takes.
const UNHELD_RISE: f64 = 2.0;

/// The least of a part of the budget a rise gives: from nothing, proportion alone would never
/// rise. Less of a part than this is none of it: a cut below it takes the floor away, so that
/// the next cut falls on the fraction, and the fraction to nothing.
const LEAST_PART: f64 = 0.02;

/// The retries and first attempts reaching a service, and the allowance it advises the
/// clients that sent them (F2).
///
/// Every 200 first attempts (or every 10 s, for a quiet service) the share of retries among
/// them is read against the share the service accepts, and the part of the budget the allowance
/// moves — the floor while any of it is left, the fraction below (F3) — follows the reading:
/// over the share it falls in proportion to the excess, under it it rises in proportion to the
/// shortfall, by at most a tenth a reading (twice, when no retry at all reached the service).
/// The step is taken on that part, not on the allowance, because the part is what a client's
/// retries follow: a client of 2 calls a second has a floor of 3 retries a second and a
/// fraction that funds 0.16 of one, so near an allowance of 0.5 a tenth more allowance is a
/// tenth of its floor, 0.3 retries a second where its share of what the service accepts is 0.2,
/// and a fleet of such clients swung between twice the accepted share and half of it. Counting
/// an attempt is one atomic addition and a comparison with the reading's end; closing a reading
/// takes a lock no other thread waits for (one that finds it taken leaves the closing to its
/// holder).
///
/// ```
/// use std::time::{Duration, Instant};
/// use nresilience_core::fleet::{Allowance, RetryShare};
///
/// let start = Instant::now();
/// let share = RetryShare::new(0.1, start).expect("a share between 0 and 1");
/// for i in 0..200 {
///     share.record(false, start); // a first attempt, and two retries in five
///     if i % 5 < 2 {
///         share.record(true, start);
///     }
/// }
/// // The 200th first attempt closed the reading: 80 retries, four times what is accepted.
/// let advice = share.advice(start);
/// assert_eq!(advice.retries(), 0.4);
/// // The floor goes first, cut to a quarter; the fraction is whole.
/// assert_eq!(advice.allowance().floor_share(), 0.25);
/// assert_eq!(advice.allowance().fraction_share(), 1.0);
/// ```
pub struct RetryShare {
    accepted: f64,
    origin: Instant,
    firsts: AtomicU64,
    retries: AtomicU64,
    /// Nanoseconds from `origin` at which the open reading closes, however few it counted.
    closes_at: AtomicU64,
    /// The advice as last read, for answers: the allowance in parts per million, the share
    /// seen in parts per million of first attempts.
    allowance: AtomicU32,
    seen: AtomicU32,
    /// Held by the thread closing a reading.
    closing: Mutex<()>,
}

impl RetryShare {
    /// A count that accepts `accepted` retries per first attempt, started at `now`; `None`
    /// unless `accepted` is in `0..=1`.
    #[must_use]
    pub fn new(accepted: f64, now: Instant) -> Option<Self> {
        (0.0..=1.0).contains(&accepted).then(|| Self {
            accepted,
            origin: now,
            firsts: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            closes_at: AtomicU64::new(nanos(LONGEST)),
            allowance: AtomicU32::new(PARTS),
            seen: AtomicU32::new(0),
            closing: Mutex::new(()),
        })
    }

    /// The share of retries accepted per first attempt.
    #[must_use]
    pub fn accepted(&self) -> f64 {
        self.accepted
    }

    /// Counts an attempt reaching the service at `now`: a first attempt, or a retry (a
    /// hedge is one: it is an attempt beyond the first).
    pub fn record(&self, retry: bool, now: Instant) {
        if retry {
            self.retries.fetch_add(1, Ordering::Relaxed);
            self.roll(now);
        } else if self.firsts.fetch_add(1, Ordering::Relaxed) + 1 >= ENOUGH_FIRSTS {
            self.close(self.nanos(now));
        } else {
            self.roll(now);
        }
    }

    /// What the service tells its callers at `now`.
    pub fn advice(&self, now: Instant) -> Advice {
        self.roll(now);
        Advice {
            retries: f64::from(self.seen.load(Ordering::Acquire)) / f64::from(PARTS),
            accepted: self.accepted,
            allowance: Allowance::from_parts(self.allowance.load(Ordering::Acquire)),
        }
    }

    /// Closes the open reading when `now` is past its longest span.
    #[inline]
    fn roll(&self, now: Instant) {
        let now = self.nanos(now);
        if now < self.closes_at.load(Ordering::Acquire) {
            return;
        }
        self.close(now);
    }

    #[cold]
    fn close(&self, now: u64) {
        let _closing = match self.closing.try_lock() {
            Ok(closing) => closing,
            // It guards no data: a panic cannot have left any half-written.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            // Another thread is closing it.
            Err(TryLockError::WouldBlock) => return,
        };
        // Another thread may have closed it since this one looked.
        if self.firsts.load(Ordering::Acquire) < ENOUGH_FIRSTS
            && now < self.closes_at.load(Ordering::Acquire)
        {
            return;
        }
        // Counts that land between the two swaps belong to one reading or the next: either
        // is right to within an attempt.
        let firsts = self.firsts.swap(0, Ordering::AcqRel);
        let retries = self.retries.swap(0, Ordering::AcqRel);
        self.closes_at
            .store(now.saturating_add(nanos(LONGEST)), Ordering::Release);
        if firsts > 0 {
            let seen = retries as f64 / firsts as f64;
            let before = Allowance::from_parts(self.allowance.load(Ordering::Acquire));
            let after = next_allowance(before, seen, self.accepted);
            self.allowance.store(after.parts(), Ordering::Release);
            // Capped at one retry per first attempt: past that the advice is the same.
            self.seen
                .store(Allowance::new(seen).parts(), Ordering::Release);
        }
    }

    fn nanos(&self, now: Instant) -> u64 {
        nanos(now.saturating_duration_since(self.origin))
    }
}

/// The allowance after a reading of `seen` retries per first attempt against `accepted`: the
/// floor moved while any of it is left, the fraction below; at the share, left as it is.
fn next_allowance(before: Allowance, seen: f64, accepted: f64) -> Allowance {
    let step = if seen > accepted {
        accepted / seen
    } else if seen > 0.0 {
        (accepted / seen).min(MOST_RISE)
    } else {
        UNHELD_RISE
    };
    let (fraction, floor) = (before.fraction_share(), before.floor_share());
    let risen = |part: f64| (part * step).clamp(LEAST_PART, 1.0);
    let cut = |part: f64| Some(part * step).filter(|&part| part >= LEAST_PART);
    if step < 1.0 {
        if floor > 0.0 {
            Allowance::of_shares(1.0, cut(floor).unwrap_or(0.0))
        } else {
            Allowance::of_shares(cut(fraction).unwrap_or(0.0), 0.0)
        }
    } else if step <= 1.0 {
        before
    } else if fraction < 1.0 {
        Allowance::of_shares(risen(fraction), 0.0)
    } else {
        Allowance::of_shares(1.0, risen(floor))
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

impl fmt::Debug for RetryShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryShare")
            .field("accepted", &self.accepted)
            .field("firsts", &self.firsts.load(Ordering::Relaxed))
            .field("retries", &self.retries.load(Ordering::Relaxed))
            .field(
                "allowance",
                &Allowance::from_parts(self.allowance.load(Ordering::Relaxed)),
            )
            .finish_non_exhaustive()
    }
}

/// What a service tells its callers about the fleet's retries (F2): the share of retries
/// among the first attempts it last read, the share it accepts, and the allowance it
/// advises each caller to keep to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Advice {
    retries: f64,
    accepted: f64,
    allowance: Allowance,
}

impl Advice {
    /// Advice from its three parts, as read off an answer.
    #[must_use]
    pub fn new(retries: f64, accepted: f64, allowance: Allowance) -> Self {
        Self {
            retries,
            accepted,
            allowance,
        }
    }

    /// Retries per first attempt reaching the service in its last reading (capped at `1`).
    #[must_use]
    pub fn retries(&self) -> f64 {
        self.retries
    }

    /// Retries per first attempt the service accepts.
    #[must_use]
    pub fn accepted(&self) -> f64 {
        self.accepted
    }

    /// The share of its own budget each caller is advised to use.
    #[must_use]
    pub fn allowance(&self) -> Allowance {
        self.allowance
    }
}
