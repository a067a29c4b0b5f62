//! How long attempts take: quantiles of recent latency in a fixed amount of memory (this
//! file's [`LatencyWindow`]), and what the executor builds on them — the measured attempt
//! ceiling (`ceiling.rs`, [`AttemptCeiling`](crate::AttemptCeiling)), a policy's estimates
//! per dependency (`estimates.rs`) and the copy every attempt reads without a lock
//! (`latest.rs`).
//!
//! # Why a histogram
//!
//! The executor asks for a quantile on every attempt and records one on every success, under
//! its own lock. Keeping the samples themselves would cost memory in proportion to traffic and
//! a sort per question; a log-scale histogram per time slice costs the same few kilobytes at
//! 1 call a minute or 100,000 a second, records in constant time, and answers with a bounded
//! relative error, which is all a ceiling of "3 × p95" or a backoff base of "2 × p50" needs.

// Public items for the `test-support` feature's re-exports; without it they reach no user.
#![cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]

use std::{
    fmt,
    sync::LazyLock,
    time::{Duration, Instant},
};

/// How many time slices the window is divided into: the window forgets in steps of a tenth.
const SLICES: usize = 10;
/// Log-scale buckets per slice, eight per doubling from 1 µs to 2^32 µs (about 71.6 min).
const BUCKETS: usize = 256;
const BUCKETS_PER_DOUBLING: f64 = 8.0;
const SMALLEST_NANOS: f64 = 1_000.0;
const DEFAULT_MINIMUM_SAMPLES: u32 = 20;

/// Quantiles of the latencies recorded over a sliding time window, in bounded memory.
///
/// # Accuracy
///
/// Latencies are counted in log-scale buckets eight to a doubling, from 1 µs to 2^32 µs
/// (about 71.6 minutes), and a quantile is answered with the geometric middle of the bucket that holds the
/// sample at that rank (nearest rank). Within that range the answer is within a factor of
/// `2^(1/16)` of the sample, a relative error of at most about 4.4 %. Latencies below 1 µs are
/// reported as about 1 µs, and those above the range as about 68.5 minutes.
///
/// # Window
///
/// The window is split into ten slices of a tenth of it each. A sample is forgotten when its
/// slice falls out of the window, so it counts for between nine tenths of the window and the
/// whole of it, never longer.
///
/// # Cost
///
/// All memory is allocated by [`new`](Self::new): ten slices of 256 `u32` counters plus two
/// `u64`s, 10 × 1,040 = 10,400 bytes (about 10 KiB) on the heap, however much is recorded;
/// every window shares one table of the buckets' edges (3 KiB).
/// [`record`](Self::record) is constant time (at worst it clears the 1 KiB slice it reuses);
/// [`quantile`](Self::quantile) reads the 2,560 counters. Neither reads the clock: time is
/// always passed in, and a `now` earlier than the latest one seen is taken as the latest one
/// seen. There is no internal lock; share it behind your own.
#[derive(Clone)]
pub struct LatencyWindow {
    slices: Box<[Slice]>,
    window: Duration,
    slice_nanos: u64,
    origin: Instant,
    latest: Instant,
    /// The slice `latest` falls in, and when that slice ends: a record inside it needs no
    /// division.
    current: u64,
    current_ends: Instant,
    minimum_samples: u32,
}

#[derive(Clone)]
struct Slice {
    /// Which tenth of time since `origin` these counts belong to.
    epoch: u64,
    total: u64,
    counts: [u32; BUCKETS],
}

impl Slice {
    const EMPTY: Self = Self {
        epoch: 0,
        total: 0,
        counts: [0; BUCKETS],
    };

    fn is_live(&self, current: u64) -> bool {
        self.epoch <= current && current - self.epoch < SLICES as u64
    }
}

impl LatencyWindow {
    /// An empty window covering the last `window` of time, starting at `now`.
    ///
    /// Answers need at least 20 samples in the window; see
    /// [`with_minimum_samples`](Self::with_minimum_samples).
    #[must_use]
    pub fn new(window: Duration, now: Instant) -> Self {
        // A zero slice would divide by zero; one nanosecond makes a zero window forget
        // everything at once instead.
        let slice_nanos = u64::try_from(window.as_nanos() / SLICES as u128)
            .unwrap_or(u64::MAX)
            .max(1);
        Self {
            slices: vec![Slice::EMPTY; SLICES].into_boxed_slice(),
            window,
            slice_nanos,
            origin: now,
            latest: now,
            current: 0,
            current_ends: period_end(now, slice_nanos, 0),
            minimum_samples: DEFAULT_MINIMUM_SAMPLES,
        }
    }

    /// How many samples the window must hold before [`quantile`](Self::quantile) answers; a
    /// quantile of a handful of calls is noise. Defaults to 20.
    #[must_use]
    pub fn with_minimum_samples(mut self, minimum_samples: u32) -> Self {
        self.minimum_samples = minimum_samples;
        self
    }

    /// How many samples [`quantile`](Self::quantile) needs before it answers.
    #[must_use]
    pub fn minimum_samples(&self) -> u32 {
        self.minimum_samples
    }

    /// Counts one `latency` observed at `now`.
    pub fn record(&mut self, latency: Duration, now: Instant) {
        if now > self.latest {
            self.latest = now;
            if now >= self.current_ends {
                self.current = self.epoch(now);
                self.current_ends = period_end(self.origin, self.slice_nanos, self.current);
            }
        }
        let epoch = self.current;
        let slice = &mut self.slices[slot(epoch)];
        if slice.epoch != epoch {
            slice.epoch = epoch;
            slice.total = 0;
            slice.counts.fill(0);
        }
        let bucket = &mut slice.counts[bucket_of(latency)];
        *bucket = bucket.saturating_add(1);
        slice.total = slice.total.saturating_add(1);
    }

    /// The latency at quantile `q` (0.95 for p95) of the samples in the window at `now`, or
    /// `None` while it holds fewer than [`minimum_samples`](Self::minimum_samples), or if `q`
    /// is NaN. `q` is clamped to `[0, 1]`.
    #[must_use]
    pub fn quantile(&self, q: f64, now: Instant) -> Option<Duration> {
        if q.is_nan() {
            return None;
        }
        let current = self.epoch(self.latest.max(now));
        let live = || self.slices.iter().filter(move |s| s.is_live(current));
        let total: u64 = live()
            .flat_map(|s| s.counts.iter())
            .map(|&c| u64::from(c))
            .sum();
        if total == 0 || total < u64::from(self.minimum_samples) {
            return None;
        }
        // Nearest rank: the smallest sample with at least `q` of all samples at or below it.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for bucket in 0..BUCKETS {
            seen += live().map(|s| u64::from(s.counts[bucket])).sum::<u64>();
            if seen >= rank {
                return Some(representative(bucket));
            }
        }
        Some(representative(BUCKETS - 1))
    }

    /// How many samples the window holds at `now`.
    #[must_use]
    pub fn count(&self, now: Instant) -> u64 {
        let current = self.epoch(self.latest.max(now));
        self.slices
            .iter()
            .filter(|s| s.is_live(current))
            .map(|s| s.total)
            .sum()
    }

    fn epoch(&self, now: Instant) -> u64 {
        nanos_since(self.origin, now) / self.slice_nanos
    }
}

impl fmt::Debug for LatencyWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyWindow")
            .field("window", &self.window)
            .field("minimum_samples", &self.minimum_samples)
            .field("count", &self.count(self.latest))
            .finish_non_exhaustive()
    }
}

fn slot(epoch: u64) -> usize {
    // Lossless: the remainder is below `SLICES`.
    (epoch % SLICES as u64) as usize
}

/// The bucket of `latency`: `floor(8 × log2(nanos / 1,000))`, within `[0, 255]`.
///
/// A `log2` per sample cost more than the rest of the record, so the bucket is looked up:
/// the sample's doubling and its next four bits name one of sixteen slices of that doubling,
/// each narrower than a bucket, so at most one bucket edge falls inside it.
fn bucket_of(latency: Duration) -> usize {
    let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
    let first = EDGES.first_of_slice[slice_of(nanos)];
    let next_edge = EDGES.lower[usize::from(first)];
    (usize::from(first) + usize::from(nanos >= next_edge)).min(BUCKETS - 1)
}

/// Sixteen slices per doubling of nanoseconds: at most one bucket edge (eight per doubling)
/// falls inside each.
const SLICES_PER_DOUBLING: usize = 16;

/// Which sixteenth of which doubling `nanos` falls in.
fn slice_of(nanos: u64) -> usize {
    let doubling = (nanos | 1).ilog2();
    let sixteenth = if doubling >= 4 {
        (nanos >> (doubling - 4)) & 0xF
    } else {
        // Below 16 ns every value has a slice of its own, all in bucket 0.
        nanos & 0xF
    };
    doubling as usize * SLICES_PER_DOUBLING + sixteenth as usize
}

/// The buckets' lower edges in whole nanoseconds, and the bucket of each slice's first value.
struct Edges {
    /// The lower edge of bucket `b + 1` at index `b`; `u64::MAX` past the last bucket.
    lower: [u64; BUCKETS],
    first_of_slice: [u8; 64 * SLICES_PER_DOUBLING],
}

static EDGES: LazyLock<Edges> = LazyLock::new(|| {
    let mut lower = [u64::MAX; BUCKETS];
    for (i, edge) in lower.iter_mut().take(BUCKETS - 1).enumerate() {
        let bucket = i + 1;
        let exact = SMALLEST_NANOS * (bucket as f64 / BUCKETS_PER_DOUBLING).exp2();
        // Float rounding may put the exact edge a nanosecond either side of the one the
        // definition gives: settle it by the definition itself.
        let mut nanos = exact.ceil() as u64;
        while nanos > 0 && bucket_by_log2(nanos - 1) >= bucket {
            nanos -= 1;
        }
        while bucket_by_log2(nanos) < bucket {
            nanos += 1;
        }
        *edge = nanos;
    }
    let mut first_of_slice = [0; 64 * SLICES_PER_DOUBLING];
    for (slice, first) in first_of_slice.iter_mut().enumerate() {
        let (doubling, sixteenth) = (slice / SLICES_PER_DOUBLING, slice % SLICES_PER_DOUBLING);
        let start = if doubling >= 4 {
            (1u64 << doubling) | ((sixteenth as u64) << (doubling - 4))
        } else {
            sixteenth as u64
        };
        // Lossless: buckets are below 256.
        *first = bucket_by_log2(start) as u8;
    }
    Edges {
        lower,
        first_of_slice,
    }
});

/// The definition of a sample's bucket.
fn bucket_by_log2(nanos: u64) -> usize {
    let nanos = nanos as f64;
    if nanos < SMALLEST_NANOS {
        return 0;
    }
    let index = ((nanos / SMALLEST_NANOS).log2() * BUCKETS_PER_DOUBLING).floor();
    // The float-to-int cast saturates, so only the upper edge needs clamping.
    (index as usize).min(BUCKETS - 1)
}

/// The geometric middle of `bucket`: no more than `2^(1/16)` from any value inside it.
fn representative(bucket: usize) -> Duration {
    let exponent = (bucket as f64 + 0.5) / BUCKETS_PER_DOUBLING;
    Duration::from_nanos((SMALLEST_NANOS * exponent.exp2()).round() as u64)
}

/// Nanoseconds from `origin` to `now`, zero if `now` is earlier; `u64` lasts 584 years and
/// keeps the division on the hot path a 64-bit one.
pub(crate) fn nanos_since(origin: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

/// When period `index` of `period_nanos` each, counted from `origin`, ends.
pub(crate) fn period_end(origin: Instant, period_nanos: u64, index: u64) -> Instant {
    let nanos = index.saturating_add(1).saturating_mul(period_nanos);
    crate::clock::after(origin, Duration::from_nanos(nanos))
}

pub(crate) mod ceiling;
pub(crate) mod estimates;
pub(crate) mod latest;
#[cfg(test)]
mod tests;
