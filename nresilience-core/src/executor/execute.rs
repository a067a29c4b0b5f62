//! Running a call under a policy with async attempts: the [`Call`] loop for closures.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tracing::Span;

use crate::clock;
use crate::executor::call::{Attempt, Call, CallOptions, FlightEvent, Flights, Step};
use crate::executor::error::RetryError;
use crate::executor::policy::RetryPolicy;
use crate::nesting;
use crate::verdict::{Classify, DefaultClassifier};

impl RetryPolicy {
    /// Runs `attempt` until it succeeds or the policy stops it; `Ok` is a success and every
    /// `Err` is a transient failure.
    ///
    /// The first attempt always runs. A call is cancelled by dropping the future.
    pub fn execute<F, Fut, T, E>(&self, attempt: F) -> Execute<'_, DefaultClassifier, F, Fut, T, E>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.execute_with(&DefaultClassifier, attempt)
    }

    /// Like [`execute`](Self::execute), with a classifier of your own.
    ///
    /// When the attempts run out, or a permanent verdict stops the call, on an `Ok` value
    /// the classifier did not accept (a 503 response, say), that value is returned as `Ok`:
    /// the caller gets the last answer, not an error.
    pub fn execute_with<'a, C, F, Fut, T, E>(
        &'a self,
        classifier: &'a C,
        attempt: F,
    ) -> Execute<'a, C, F, Fut, T, E>
    where
        C: Classify<Result<T, E>>,
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        Execute {
            policy: self,
            classifier,
            attempt,
            call: None,
            span: Span::none(),
            flights: Flights::new(),
            output: PhantomData,
        }
    }
}

pin_project! {
    /// The future of [`RetryPolicy::execute`] and [`RetryPolicy::execute_with`]: one call,
    /// started when first polled. Dropping it cancels the call.
    ///
    /// The call's span is entered while it is polled, and a call that may retry is a
    /// retrying context for the attempts it runs: a retrying call inside them is nested.
    #[must_use = "futures do nothing unless polled"]
    pub struct Execute<'a, C, F, Fut, T, E> {
        policy: &'a RetryPolicy,
        classifier: &'a C,
        attempt: F,
        call: Option<Call<E>>,
        span: Span,
        #[pin]
        flights: Flights<Fut>,
        output: PhantomData<fn() -> T>,
    }
}

impl<C, F, Fut, T, E> Future for Execute<'_, C, F, Fut, T, E>
where
    C: Classify<Result<T, E>>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, RetryError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (call, first) = if let Some(call) = this.call {
            (call, None)
        } else {
            // The first attempt starts when the call does: one clock read serves both.
            let started = clock::now();
            let call = this
                .call
                .insert(Call::start(this.policy, started, CallOptions::new()));
            *this.span = call.span().clone();
            let first = call.next(started);
            (call, Some(first))
        };
        let _entered = this.span.enter();
        let (classifier, attempt, flights) = (*this.classifier, this.attempt, this.flights);
        // The whole call is a retrying context: a retrying call inside it is nested.
        nesting::retrying_scope(call.may_retry(), || {
            drive(call, classifier, attempt, flights, first, cx)
        })
    }
}

/// Runs the call's steps until one has to wait.
fn drive<C, F, Fut, T, E>(
    call: &mut Call<E>,
    classifier: &C,
    make_attempt: &mut F,
    mut flights: Pin<&mut Flights<Fut>>,
    mut step: Option<Step<T, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, RetryError<E>>>
where
    C: Classify<Result<T, E>>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    loop {
        match step {
            Some(Step::Run(attempt)) => flights.as_mut().run(attempt, (), make_attempt(attempt)),
            Some(Step::Hedge(attempt)) => {
                flights.as_mut().hedge(attempt, (), make_attempt(attempt));
            }
            Some(Step::KeepWaiting) | None => {}
            Some(Step::Sleep(until)) => flights.as_mut().sleep(until),
            Some(Step::Done(result)) => {
                // The attempts still in flight lost: dropped now, not when the call is.
                flights.clear();
                return Poll::Ready(result);
            }
        }
        step = Some(
            match ready!(flights.as_mut().poll_landed(cx, call.hedge_at())) {
                FlightEvent::Answered {
                    attempt, output, ..
                } => {
                    let verdict = classifier.classify(&output);
                    call.attempted(attempt, output, verdict, clock::now())
                }
                FlightEvent::Cut { attempt, .. } => call.timed_out(attempt, clock::now()),
                FlightEvent::HedgeDue(at) => call.next(at),
                FlightEvent::Woke => call.next(clock::now()),
            },
        );
    }
}

impl<C, F, Fut, T, E> std::fmt::Debug for Execute<'_, C, F, Fut, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execute")
            .field("policy", &self.policy.name())
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}
