//! Running a call under a policy with async attempts: the [`Call`] loop for closures.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tracing::Instrument;

use crate::clock;
use crate::executor::call::{Attempt, Call, CallOptions, Step};
use crate::executor::error::RetryError;
use crate::executor::policy::RetryPolicy;
use crate::executor::verdict::{Classify, DefaultClassifier};
use crate::nesting::{self, NestingSource};

impl RetryPolicy {
    /// Runs `attempt` until it succeeds or the policy stops it; `Ok` is a success and every
    /// `Err` is a transient failure.
    ///
    /// The first attempt always runs. A call is cancelled by dropping the future.
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
    /// the caller gets the last answer, not an error.
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
        let started = clock::now();
        let call = Call::start(self, started, CallOptions::new());
        let span = call.span().clone();
        if call.may_retry() {
            // The whole call is a retrying context: a retrying call inside it is nested.
            let drive = drive(call, started, classifier, attempt).instrument(span);
            nesting::scope(NestingSource::InProcess, drive).await
        } else {
            drive(call, started, classifier, attempt)
                .instrument(span)
                .await
        }
    }
}

async fn drive<C, F, Fut, T, E>(
    mut call: Call<E>,
    started: Instant,
    classifier: &C,
    mut attempt: F,
) -> Result<T, RetryError<E>>
where
    C: Classify<Result<T, E>>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    // The first attempt starts when the call does: one clock read serves both.
    let mut step = call.next(started);
    loop {
        step = match step {
            Step::Run(admitted) => match CutAt::new(attempt(admitted), admitted.cut_at()).await {
                Some(result) => {
                    let verdict = classifier.classify(&result);
                    call.attempted(result, verdict, clock::now())
                }
                None => call.timed_out(clock::now()),
            },
            Step::Sleep(until) => {
                tokio::time::sleep_until(until.into()).await;
                call.next(clock::now())
            }
            Step::Done(result) => return result,
        };
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
        deadline: Option<Instant>,
    }
}

impl<F> CutAt<F> {
    fn new(future: F, deadline: Option<Instant>) -> Self {
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
            this.timer
                .set(Some(tokio::time::sleep_until(deadline.into())));
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
