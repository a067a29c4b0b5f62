//! A curve's delays as an iterator, for retry loops that take one: backon's `Backoff` is any
//! `Iterator<Item = Duration> + Send + Sync + Unpin`, tokio-retry's strategies are iterators
//! of delays too.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::{Backoff, NextAttempt, RetryKind};

/// The delays before the first retry, the second, and so on, of a [`Backoff`] for one kind of
/// failure: endless, so bound it (`.take(2)` for three attempts in all). Each is jittered as
/// the curve says, from a random source of the iterator's own.
///
/// A curve with a [`MeasuredBase`](super::MeasuredBase) uses its configured base here: the
/// measurement lives in the executor. Server pushback is the executor's too: an iterator has
/// no answer to read it from.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::{Backoff, Jitter, RetryKind};
///
/// let curve = Backoff::default().with_jitter(Jitter::None);
/// let delays: Vec<Duration> = curve.delays(RetryKind::Transient).take(3).collect();
/// assert_eq!(delays, [100, 200, 400].map(Duration::from_millis));
/// let throttled = curve.delays(RetryKind::Throttled).next();
/// assert_eq!(throttled, Some(Duration::from_secs(1)));
/// ```
#[derive(Clone)]
pub struct Delays {
    backoff: Backoff,
    kind: RetryKind,
    /// The attempt the next delay comes before: the first retry is attempt 2.
    attempt: u32,
    rng: StdRng,
}

impl Backoff {
    /// This curve's delays for failures of `kind`, as an iterator.
    #[must_use]
    pub fn delays(&self, kind: RetryKind) -> Delays {
        Delays {
            backoff: self.clone(),
            kind,
            attempt: 2,
            rng: StdRng::from_rng(&mut rand::rng()),
        }
    }
}

impl Delays {
    /// The same delays jittered from a seeded source, for tests and simulations that replay.
    #[must_use]
    pub fn seeded(mut self, seed: u64) -> Self {
        self.rng = StdRng::seed_from_u64(seed);
        self
    }
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let next = NextAttempt::new(self.attempt, self.kind);
        self.attempt = self.attempt.saturating_add(1);
        Some(self.backoff.compute_with(&next, &mut self.rng))
    }
}

impl std::fmt::Debug for Delays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delays")
            .field("backoff", &self.backoff)
            .field("kind", &self.kind)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}
