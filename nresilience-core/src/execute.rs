//! Running a call under a policy with async attempts.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tracing::Instrument;

use crate::call::{instant_after, now, outcome, Admission, Call, CallOptions, Decision};
use crate::nesting::{self, NestingSource};
use crate::{
    CallRejected, Classify, DefaultClassifier, LastAttempt, RetryError, RetryPolicy, StopReason,
    Verdict,
};

/// What the closure learns about the attempt it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
    timeout: Option<Duration>,
}

impl Attempt {
    /// The attempt's number: 1 for the first, 2 for the first retry.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Whether this attempt is a retry.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// The time limit the executor puts on this attempt, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

/// The full account of a call: why it stopped, how many attempts ran, and the last result.
#[derive(Debug)]
#[non_exhaustive]
pub struct Report<R> {
    /// Why the call stopped.
    pub stop: StopReason,
    /// How many attempts ran (refused ones included).
    pub attempts: u32,
    /// The last attempt's result; `None` when it was cut by a timeout or refused by this
    /// process's limiter or breaker.
    pub last: Option<R>,
    /// Whether the last attempt was cut by a timeout.
    pub timed_out: bool,
    /// The budget's refusal, when `stop` is [`StopReason::BudgetExhausted`].
    pub rejected: Option<CallRejected>,
}

impl RetryPolicy {
    /// Runs `attempt` until it succeeds or the policy stops it; `Ok` is a success and every
    /// `Err` is a transient failure.
    ///
    /// The first attempt always runs (B5). A call is cancelled by dropping the future.
    pub async fn execute<F, Fut, T, E>(&self, attempt: F) -> Result<T, RetryError<E>>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.execute_with(&DefaultClassifier, attempt).await
    }

    /// Like [`execute`](Self::execute), with a classifier of your own.
    ///
    /// When the attempts run out, or a permanent verdict stops the call, on an `Ok` value
    /// the classifier did not accept (a 503 response, say), that value is returned as `Ok`:
    /// the caller gets the last answer, not an error (H4).
    pub async fn execute_with<C, F, Fut, T, E>(
        &self,
        classifier: &C,
        attempt: F,
    ) -> Result<T, RetryError<E>>
    where
        C: Classify<Result<T, E>>,
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let report = self.run(classifier, attempt).await;
        if let Some(rejected) = report.rejected {
            let last = match report.last {
                Some(Ok(_)) => LastAttempt::Rejected,
                Some(Err(error)) => LastAttempt::Error(error),
                None if report.timed_out => LastAttempt::TimedOut,
                None => LastAttempt::Refused,
            };
            return Err(RetryError::new(
                report.stop,
                report.attempts,
                last,
                Some(rejected),
            ));
        }
        let last = if report.timed_out {
            LastAttempt::TimedOut
        } else {
            LastAttempt::Refused
        };
        outcome(report.stop, report.attempts, report.last, last)
    }

    /// Runs `attempt` under the policy and reports everything about the call.
    pub async fn run<C, F, Fut, R>(&self, classifier: &C, attempt: F) -> Report<R>
    where
        C: Classify<R>,
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = R>,
    {
        let started = now();
        let call = Call::start(self, started, CallOptions::new());
        let span = call.span().clone();
        if call.may_retry() {
            // The whole call is a retrying context: a retrying call inside it is nested (N5).
            let drive = drive(call, started, classifier, attempt).instrument(span);
            nesting::scope(NestingSource::InProcess, drive).await
        } else {
            drive(call, started, classifier, attempt)
                .instrument(span)
                .await
        }
    }
}

async fn drive<C, F, Fut, R>(
    mut call: Call,
    started: Instant,
    classifier: &C,
    mut attempt: F,
) -> Report<R>
where
    C: Classify<R>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = R>,
{
    // The first attempt starts when the call does: one clock read serves both.
    let mut at = Some(started);
    loop {
        let begun = at.take().unwrap_or_else(now);
        let (last, verdict, timed_out) = match call.begin_attempt(begun) {
            Admission::Refused { verdict } => (None, verdict, false),
            Admission::Run { timeout } => {
                let future = attempt(Attempt {
                    number: call.attempts(),
                    timeout,
                });
                let result =
                    CutAt::new(future, timeout.map(|limit| instant_after(begun, limit))).await;
                match result {
                    Some(result) => {
                        let verdict = classifier.classify(&result);
                        (Some(result), verdict, false)
                    }
                    None => (None, Verdict::TRANSIENT, true),
                }
            }
        };
        match call.end_attempt(verdict, now()) {
            Decision::Stop(stop) => {
                return Report {
                    stop,
                    attempts: call.attempts(),
                    last,
                    timed_out,
                    rejected: None,
                }
            }
            Decision::Retry(delay) => tokio::time::sleep(delay).await,
            Decision::Reject(pause) => {
                tokio::time::sleep(pause).await;
                let rejected = call.reject(now());
                return Report {
                    stop: StopReason::BudgetExhausted,
                    attempts: call.attempts(),
                    last,
                    timed_out,
                    rejected: Some(rejected),
                };
            }
        }
    }
}

pin_project! {
    /// An attempt cut at a deadline. The timer is made only once the attempt is pending, so
    /// an attempt that completes on its first poll never touches the timer wheel.
    struct CutAt<F> {
        #[pin]
        future: F,
        #[pin]
        timer: Option<Sleep>,
        deadline: Option<tokio::time::Instant>,
    }
}

impl<F> CutAt<F> {
    fn new(future: F, deadline: Option<tokio::time::Instant>) -> Self {
        Self {
            future,
            timer: None,
            deadline,
        }
    }
}

impl<F: Future> Future for CutAt<F> {
    /// `None` when the deadline cut the attempt.
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Some(output));
        }
        let Some(deadline) = *this.deadline else {
            return Poll::Pending;
        };
        if this.timer.is_none() {
            this.timer.set(Some(tokio::time::sleep_until(deadline)));
        }
        match this.timer.as_pin_mut() {
            Some(timer) => {
                ready!(timer.poll(cx));
                Poll::Ready(None)
            }
            None => Poll::Pending,
        }
    }
}
