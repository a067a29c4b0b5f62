//! What the retrying calls made while serving one request learned about their dependencies.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::num::NonZeroU64;
use std::thread::LocalKey;
use std::time::Duration;

use super::signal::Signal;
use crate::outcome::StopReason;
use crate::scope::{self, sealed, Scoped};

thread_local! {
    static LEARNED: Cell<Option<Learned>> = const { Cell::new(None) };
}

impl sealed::Sealed for Learned {
    fn slot() -> &'static LocalKey<Cell<Option<Self>>> {
        &LEARNED
    }
}

/// How the calls made while serving one request ended, as far as the request's caller
/// should know: whether one was refused for overload (and the longest hint), and whether one
/// failed after retrying (and the most attempts it made).
///
/// A server layer runs each request's handler inside [`learning`], and when the handler
/// answers with a `5xx`, stamps the signal this says on the answer. Calls record into it
/// through the task-local; a call in a task spawned off the handler does not, unless that
/// task runs inside a `learning` scope of its own.
///
/// A hint is kept to the nanosecond up to 584 years, and reads as 584 years beyond.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    // Copied in and out of a thread-local around every poll of a request's handler: as two
    // words without padding, with a niche that keeps `Option<Learned>` as small, it moves in
    // one instruction each way.
    //
    // One more than the longest hint in nanoseconds, saturating.
    retry_after: Option<NonZeroU64>,
    // The most attempts in the upper half, `OVERLOADED`, and the lowest bit, always set.
    bits: NonZeroU64,
}

/// The bit of [`Learned::bits`] set once a call was refused for overload.
const OVERLOADED: u64 = 2;

impl Default for Learned {
    fn default() -> Self {
        Self {
            retry_after: None,
            bits: NonZeroU64::MIN,
        }
    }
}

impl Learned {
    /// Whether a call was refused by its retry budget or circuit breaker, or was answered
    /// with a dependency's overload signal.
    #[must_use]
    pub fn overloaded(&self) -> bool {
        self.bits.get() & OVERLOADED != 0
    }

    /// The longest wait a refusal's hint asked for, when an overload was learned with one.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
            .map(|nanos| Duration::from_nanos(nanos.get() - 1))
    }

    /// The most attempts a call made that failed after retrying, or that a dependency
    /// answered as already retried; `None` when no call did.
    #[must_use]
    pub fn retried(&self) -> Option<u32> {
        Some(self.attempts()).filter(|&attempts| attempts > 0)
    }

    fn attempts(&self) -> u32 {
        (self.bits.get() >> 32) as u32
    }

    fn record(&mut self, reason: StopReason, attempts: u32, retry_after: Option<Duration>) {
        match reason.signal(attempts) {
            Some(Signal::Overloaded) => {
                self.bits |= OVERLOADED;
                let retry_after = retry_after.map(|wait| {
                    let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
                    NonZeroU64::MIN.saturating_add(nanos)
                });
                self.retry_after = self.retry_after.max(retry_after);
            }
            Some(Signal::Retried { attempts }) => self.note_retried(attempts),
            None => {}
        }
    }

    fn note_retried(&mut self, attempts: u32) {
        let attempts = self.attempts().max(attempts);
        self.bits = NonZeroU64::MIN | (u64::from(attempts) << 32) | (self.bits.get() & OVERLOADED);
    }
}

impl fmt::Debug for Learned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Learned")
            .field("overloaded", &self.overloaded())
            .field("retry_after", &self.retry_after())
            .field("retried", &self.attempts())
            .finish()
    }
}

/// A future run by [`learning`]; [`value`](Scoped::value) on it, once it is done, gives
/// the [`Learned`].
pub type LearningFuture<F> = Scoped<Learned, F>;

/// Runs `future` recording how the calls made inside it end.
///
/// ```
/// use std::pin::pin;
/// use nresilience_core::{chain, RetryBudget, RetryPolicy, StopReason};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = RetryPolicy::builder().budget(RetryBudget::None).build().unwrap();
/// let mut serving = pin!(chain::learning(async {
///     policy.execute(|_| async { Err::<(), _>("reset") }).await
/// }));
/// let error = serving.as_mut().await.unwrap_err();
/// assert_eq!(error.reason(), StopReason::AttemptsExhausted);
/// let learned = *serving.value();
/// assert_eq!(learned.retried(), Some(3));
/// assert!(!learned.overloaded());
/// # }
/// ```
pub fn learning<F: Future>(future: F) -> LearningFuture<F> {
    Scoped::new(Learned::default(), future)
}

/// Runs `f` — one poll of the future that serves a request — recording into `learned` how
/// the calls made inside it end: [`learning`] for a future that keeps its [`Learned`] beside
/// other state.
///
/// ```
/// use std::future::{poll_fn, Future};
/// use std::pin::pin;
/// use nresilience_core::chain::{self, Learned};
/// use nresilience_core::{RetryBudget, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = RetryPolicy::builder().budget(RetryBudget::None).build().unwrap();
/// let mut handler = pin!(policy.execute(|_| async { Err::<(), _>("reset") }));
/// let mut learned = Learned::default();
/// // One poll of the handler, as a server's response future makes it.
/// let result = poll_fn(|cx| {
///     chain::learning_sync(&mut learned, || handler.as_mut().poll(cx))
/// })
/// .await;
/// assert!(result.is_err());
/// assert_eq!(learned.retried(), Some(3));
/// # }
/// ```
#[inline]
pub fn learning_sync<R>(learned: &mut Learned, f: impl FnOnce() -> R) -> R {
    scope::sync_scope_mut(learned, f)
}

/// Records how a call that did not succeed ended, into the request being served, if any.
pub(crate) fn call_ended(reason: StopReason, attempts: u32, retry_after: Option<Duration>) {
    // Outside a `learning` scope there is no request to tell.
    scope::update(|learned: &mut Learned| learned.record(reason, attempts, retry_after));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c1_refusals_and_overloaded_answers_are_learned_with_the_longest_hint() {
        let mut learned = Learned::default();
        learned.record(
            StopReason::BudgetExhausted,
            1,
            Some(Duration::from_millis(300)),
        );
        learned.record(StopReason::BreakerOpen, 0, Some(Duration::from_secs(9)));
        learned.record(StopReason::Overloaded, 1, None);
        assert!(learned.overloaded());
        assert_eq!(learned.retry_after(), Some(Duration::from_secs(9)));
        assert_eq!(learned.retried(), None);
    }

    #[test]
    fn c1_c6_a_hint_is_kept_to_the_nanosecond_past_584_years_saturated_and_all_attempts() {
        let mut learned = Learned::default();
        learned.record(StopReason::BudgetExhausted, 1, Some(Duration::ZERO));
        assert_eq!(learned.retry_after(), Some(Duration::ZERO));
        learned.record(StopReason::BreakerOpen, 0, None);
        assert_eq!(learned.retry_after(), Some(Duration::ZERO));
        let hint = Duration::new(14, 900_000_001);
        learned.record(StopReason::BreakerOpen, 0, Some(hint));
        assert_eq!(learned.retry_after(), Some(hint));
        learned.record(StopReason::BudgetExhausted, 1, Some(Duration::MAX));
        assert_eq!(
            learned.retry_after(),
            Some(Duration::from_nanos(u64::MAX - 1))
        );
        assert_eq!(size_of::<Option<Learned>>(), 16);
        assert!(learned.overloaded());
        assert_eq!(learned.retried(), None);
        learned.record(StopReason::RetriedBelow, u32::MAX, None);
        assert_eq!(learned.retried(), Some(u32::MAX));
        assert!(learned.overloaded());
    }

    #[test]
    fn c6_only_a_call_that_retried_or_was_retried_below_counts() {
        let mut learned = Learned::default();
        learned.record(StopReason::AttemptsExhausted, 1, None);
        learned.record(StopReason::Permanent, 4, None);
        learned.record(StopReason::DeadlineExceeded, 3, None);
        assert_eq!(learned.retried(), None);
        learned.record(StopReason::AttemptsExhausted, 4, None);
        learned.record(StopReason::RetriedBelow, 1, None);
        assert_eq!(learned.retried(), Some(4));
        assert!(!learned.overloaded());
    }

    #[test]
    fn c7_outside_a_scope_nothing_is_recorded_and_nothing_fails() {
        call_ended(StopReason::BudgetExhausted, 1, None);
        assert_eq!(scope::current::<Learned>(), None);
    }
}
