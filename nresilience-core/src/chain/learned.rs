//! What the retrying calls made while serving one request learned about their dependencies.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use tokio::task::futures::TaskLocalFuture;

use crate::executor::error::StopReason;

tokio::task_local! {
    static LEARNED: Learned;
}

/// How the calls made while serving one request ended, as far as the request's caller
/// should know: whether one was refused for overload (and the longest hint), and whether one
/// failed after retrying (and the most attempts it made).
///
/// A server layer runs each request's handler inside [`learning`], and when the handler
/// answers with a `5xx`, stamps the signal this says on the answer. Calls record into it
/// through the task-local; a call in a task spawned off the handler does not, unless that
/// task runs inside a `learning` scope of its own.
#[derive(Debug, Default)]
pub struct Learned {
    overloaded: Cell<bool>,
    retry_after: Cell<Option<Duration>>,
    retried: Cell<u32>,
}

impl Learned {
    /// Whether a call was refused by its retry budget or circuit breaker, or was answered
    /// with a dependency's overload signal.
    pub fn overloaded(&self) -> bool {
        self.overloaded.get()
    }

    /// The longest wait a refusal's hint asked for, when an overload was learned with one.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after.get()
    }

    /// The most attempts a call made that failed after retrying, or that a dependency
    /// answered as already retried; `None` when no call did.
    pub fn retried(&self) -> Option<u32> {
        Some(self.retried.get()).filter(|&attempts| attempts > 0)
    }

    fn record(&self, reason: StopReason, attempts: u32, retry_after: Option<Duration>) {
        match reason {
            StopReason::BudgetExhausted | StopReason::BreakerOpen | StopReason::Overloaded => {
                self.overloaded.set(true);
                self.retry_after
                    .set(self.retry_after.get().max(retry_after));
            }
            StopReason::AttemptsExhausted if attempts > 1 => self.note_retried(attempts),
            StopReason::RetriedBelow => self.note_retried(attempts),
            _ => {}
        }
    }

    fn note_retried(&self, attempts: u32) {
        self.retried.set(self.retried.get().max(attempts));
    }
}

/// A future run by [`learning`]; `take_value` on it, once it is done, gives the
/// [`Learned`].
pub type LearningFuture<F> = TaskLocalFuture<Learned, F>;

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
/// let learned = serving.take_value().unwrap();
/// assert_eq!(learned.retried(), Some(3));
/// assert!(!learned.overloaded());
/// # }
/// ```
pub fn learning<F: Future>(future: F) -> LearningFuture<F> {
    LEARNED.scope(Learned::default(), future)
}

/// Records how a call that did not succeed ended, into the request being served, if any.
pub(crate) fn call_ended(reason: StopReason, attempts: u32, retry_after: Option<Duration>) {
    // Outside a `learning` scope there is no request to tell.
    let _ = LEARNED.try_with(|learned| learned.record(reason, attempts, retry_after));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c1_refusals_and_overloaded_answers_are_learned_with_the_longest_hint() {
        let learned = Learned::default();
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
        let learned = Learned::default();
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
    fn outside_a_scope_nothing_is_recorded_and_nothing_fails() {
        call_ended(StopReason::BudgetExhausted, 1, None);
    }
}
