//! What a call's answer says of the attempts behind it (H8): a driver puts it on the response
//! it returns, so a caller can log "after 2 retries" on a success too.

use std::time::{Duration, Instant};

use super::Call;
use crate::outcome::StopReason;

/// The attempts behind a call's answer (H8): how many were made, which one answered, how
/// many were hedges, and how long the call waited between them.
///
/// `nresilience-client` puts it on every response its clients return, as an extension.
///
/// ```
/// use std::time::{Duration, Instant};
/// use nresilience_core::call::{Call, CallOptions, Step};
/// use nresilience_core::{Backoff, Jitter, RetryPolicy, StopReason, Verdict};
///
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::default().with_jitter(Jitter::None))
///     .build()?;
/// let now = Instant::now();
/// let mut call = Call::start(&policy, now, CallOptions::new());
/// let Step::Run(first) = call.next::<u32>(now) else { unreachable!() };
/// let Step::Sleep(until) = call.attempted::<u32>(first, Err("reset"), Verdict::TRANSIENT, now)
/// else {
///     unreachable!()
/// };
/// let Step::Run(second) = call.next::<u32>(until) else { unreachable!() };
/// let Step::Done(Ok(_)) = call.attempted(second, Ok(7), Verdict::Success, until) else {
///     unreachable!()
/// };
///
/// let attempts = call.answered_after().unwrap();
/// assert_eq!(attempts.made(), 2);
/// assert_eq!(attempts.retries(), 1);
/// assert_eq!(attempts.answered_by(), 2);
/// assert_eq!(attempts.waited(), Duration::from_millis(100));
/// assert_eq!(attempts.reason(), StopReason::Succeeded);
/// # Ok::<(), nresilience_core::InvalidPolicy>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts {
    made: u32,
    answered_by: u32,
    hedges: u32,
    waited: Duration,
    reason: StopReason,
}

impl Attempts {
    /// The attempts the call made, hedges included (and one this process's rate limiter
    /// refused before it went out).
    #[must_use]
    pub fn made(&self) -> u32 {
        self.made
    }

    /// The attempts after the first: retries and hedges.
    #[must_use]
    pub fn retries(&self) -> u32 {
        self.made.saturating_sub(1)
    }

    /// The number of the attempt whose answer this is: 1 for the first. A hedge that
    /// answered before the attempt it copied has its own number.
    #[must_use]
    pub fn answered_by(&self) -> u32 {
        self.answered_by
    }

    /// The hedges the call started beside attempts still in flight (HG1).
    #[must_use]
    pub fn hedges(&self) -> u32 {
        self.hedges
    }

    /// The time the call spent with no attempt in flight before the answering one: its
    /// backoffs and pushback, and any wait for room under the dependency's limit (O7).
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Why the call stopped on this answer: [`StopReason::Succeeded`] when the classifier
    /// accepted it; [`StopReason::AttemptsExhausted`], say, when it was a retryable status
    /// and the attempts ran out (H4): the answer is the caller's, but the call failed.
    #[must_use]
    pub fn reason(&self) -> StopReason {
        self.reason
    }

    /// Whether the call stopped on an answer its classifier did not accept as a success.
    #[must_use]
    pub fn failed(&self) -> bool {
        self.reason != StopReason::Succeeded
    }
}

/// What a call counts for its [`Attempts`] beside what it keeps anyway.
#[derive(Debug, Default)]
pub(super) struct Tally {
    hedges: u32,
    waited: Duration,
    /// Since when nothing has been in flight, while the call sleeps before an attempt.
    asleep_since: Option<Instant>,
    /// The attempt that answered, and why the call stopped on it.
    answer: Option<(u32, StopReason)>,
}

impl Tally {
    /// The call sleeps from `now` before its next attempt.
    pub(super) fn sleeps(&mut self, now: Instant) {
        self.asleep_since.get_or_insert(now);
    }

    /// An attempt starts at `now`: a sleep before it is over.
    #[inline]
    pub(super) fn wakes(&mut self, now: Instant) {
        if let Some(since) = self.asleep_since.take() {
            self.waited = self
                .waited
                .saturating_add(now.saturating_duration_since(since));
        }
    }

    pub(super) fn hedged(&mut self) {
        self.hedges += 1;
    }

    #[inline]
    pub(super) fn answered(&mut self, number: u32, reason: StopReason) {
        self.answer = Some((number, reason));
    }
}

impl<E> Call<E> {
    /// The hedges the call has started so far (HG1), whatever it ends with.
    #[must_use]
    pub fn hedges(&self) -> u32 {
        self.tally.hedges
    }

    /// The time the call has spent so far with no attempt in flight, whatever it ends with:
    /// its backoffs and pushback, and any wait for room under the dependency's limit (O7).
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.tally.waited
    }

    /// The attempts behind the answer the call returned (H8), once it has returned one
    /// (a [`Step::Done`](super::Step::Done) with `Ok`); `None` before, and when it ended in
    /// an error (whose [`RetryError::attempts`](crate::RetryError::attempts) says as much).
    #[must_use]
    pub fn answered_after(&self) -> Option<Attempts> {
        let (answered_by, reason) = self.tally.answer?;
        Some(Attempts {
            made: self.attempts,
            answered_by,
            hedges: self.tally.hedges,
            waited: self.tally.waited,
            reason,
        })
    }
}
