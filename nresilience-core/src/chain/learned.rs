//! What the retrying calls made while serving one request learned about their dependencies.

use std::cell::Cell;
use std::future::Future;
use std::thread::LocalKey;
use std::time::Duration;

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
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    overloaded: bool,
    retry_after: Option<Duration>,
    retried: u32,
}

impl Learned {
    /// Whether a call was refused by its retry budget or circuit breaker, or was answered
    /// with a dependency's overload signal.
    pub fn overloaded(&self) -> bool {
        self.overloaded
    }

    /// The longest wait a refusal's hint asked for, when an overload was learned with one.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The most attempts a call made that failed after retrying, or that a dependency
    /// answered as already retried; `None` when no call did.
    pub fn retried(&self) -> Option<u32> {
        Some(self.retried).filter(|&attempts| attempts > 0)
    }

    fn record(&mut self, reason: StopReason, attempts: u32, retry_after: Option<Duration>) {
        match reason {
            StopReason::BudgetExhausted
            | StopReason::BreakerOpen
            | StopReason::Saturated
            | StopReason::Overloaded => {
                self.overloaded = true;
                self.retry_after = self.retry_after.max(retry_after);
            }
            StopReason::AttemptsExhausted if attempts > 1 => self.note_retried(attempts),
            StopReason::RetriedBelow => self.note_retried(attempts),
            _ => {}
        }
    }

    fn note_retried(&mut self, attempts: u32) {
        self.retried = self.retried.max(attempts);
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
