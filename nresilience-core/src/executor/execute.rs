//! Running a call under a policy with async attempts: the [`Call`] loop for closures.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use pin_project_lite::pin_project;
use tracing::Span;

use crate::clock;
use crate::executor::call::{Attempt, Call, CallOptions, Step, Timer};
use crate::executor::error::RetryError;
use crate::executor::policy::RetryPolicy;
use crate::nesting::{self, NestingSource};
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
            running: Running {
                attempt: None,
                admitted: None,
                hedges: None,
                timer: Timer::new(),
            },
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
        running: Running<Fut>,
        output: PhantomData<fn() -> T>,
    }
}

/// Hedges in flight, each with its attempt.
type Hedges<Fut> = Vec<(Attempt, Pin<Box<Fut>>)>;

pin_project! {
    /// The attempts in flight and the call's one timer.
    #[project = RunningProj]
    struct Running<Fut> {
        // The attempt that opened the ones in flight: no allocation for a call that never
        // hedges.
        #[pin]
        attempt: Option<Fut>,
        admitted: Option<Attempt>,
        // Hedges beside it (HG1), out of line: most calls never hedge.
        hedges: Option<Box<Hedges<Fut>>>,
        #[pin]
        timer: Timer,
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
        let (call, first) = match this.call {
            Some(call) => (call, None),
            None => {
                // The first attempt starts when the call does: one clock read serves both.
                let started = clock::now();
                let call = this
                    .call
                    .insert(Call::start(this.policy, started, CallOptions::new()));
                *this.span = call.span().clone();
                let first = call.next(started);
                (call, Some(first))
            }
        };
        let _entered = this.span.enter();
        let (classifier, attempt, running) = (*this.classifier, this.attempt, this.running);
        if call.may_retry() {
            // The whole call is a retrying context: a retrying call inside it is nested.
            nesting::sync_scope(NestingSource::InProcess, || {
                drive(call, classifier, attempt, running, first, cx)
            })
        } else {
            drive(call, classifier, attempt, running, first, cx)
        }
    }
}

/// Runs the call's steps until one has to wait.
fn drive<C, F, Fut, T, E>(
    call: &mut Call<E>,
    classifier: &C,
    make_attempt: &mut F,
    running: Pin<&mut Running<Fut>>,
    first: Option<Step<T, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, RetryError<E>>>
where
    C: Classify<Result<T, E>>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let RunningProj {
        mut attempt,
        admitted,
        hedges,
        mut timer,
    } = running.project();
    let mut step = first;
    loop {
        if let Some(next) = step.take() {
            match next {
                Step::Run(run) => {
                    attempt.set(Some(make_attempt(run)));
                    *admitted = Some(run);
                    timer.as_mut().set(run.cut_at());
                }
                Step::Hedge(hedge) => {
                    let future = Box::pin(make_attempt(hedge));
                    hedges
                        .get_or_insert_with(Box::default)
                        .push((hedge, future));
                }
                Step::InFlight => {}
                Step::Sleep(until) => {
                    timer.as_mut().set(Some(until));
                    ready!(timer.as_mut().poll(cx));
                    step = Some(call.next(clock::now()));
                    continue;
                }
                Step::Done(result) => {
                    // The attempts still in flight lost: dropped now, not when the call is.
                    attempt.set(None);
                    *hedges = None;
                    return Poll::Ready(result);
                }
            }
            if call.may_hedge() {
                // The timer serves every attempt in flight and the next hedge.
                let cut = earliest_cut(admitted, hedges).map(|(_, cut)| cut);
                let wake = match call.hedge_at() {
                    Some(hedge_at) => Some(cut.map_or(hedge_at, |cut| cut.min(hedge_at))),
                    None => cut,
                };
                timer.as_mut().set(wake);
            }
        }
        if let Some(running) = attempt.as_mut().as_pin_mut() {
            if let Poll::Ready(result) = running.poll(cx) {
                attempt.set(None);
                let Some(run) = admitted.take() else {
                    unreachable!("a running attempt was admitted")
                };
                let verdict = classifier.classify(&result);
                step = Some(call.attempted(run, result, verdict, clock::now()));
                continue;
            }
        }
        if let Some(in_flight) = hedges.as_deref_mut() {
            if let Some((at, result)) = poll_hedges(in_flight, cx) {
                let (hedge, _) = in_flight.swap_remove(at);
                let verdict = classifier.classify(&result);
                step = Some(call.attempted(hedge, result, verdict, clock::now()));
                continue;
            }
        }
        let hedging = hedges.as_deref().is_some_and(|h| !h.is_empty());
        if attempt.is_none() && !hedging {
            // Between attempts: the backoff or the rejection pause.
            ready!(timer.as_mut().poll(cx));
            step = Some(call.next(clock::now()));
            continue;
        }
        ready!(timer.as_mut().poll(cx));
        let now = clock::now();
        // The timer was set to the earliest of the cuts and the hedge: that one is due.
        let hedge_at = call.hedge_at();
        step = Some(match earliest_cut(admitted, hedges) {
            Some((which, cut)) if hedge_at.is_none_or(|h| cut <= h) => match which {
                None => {
                    attempt.set(None);
                    let Some(run) = admitted.take() else {
                        unreachable!("a running attempt was admitted")
                    };
                    call.timed_out(run, now)
                }
                Some(at) => {
                    let Some(in_flight) = hedges.as_deref_mut() else {
                        unreachable!("the earliest cut is a hedge's")
                    };
                    let (hedge, _) = in_flight.swap_remove(at);
                    call.timed_out(hedge, now)
                }
            },
            _ => match hedge_at {
                Some(hedge_at) => call.next(now.max(hedge_at)),
                None => Step::InFlight,
            },
        });
    }
}

/// The attempt in flight cut first, and when: `None` for the attempt the hedges run beside
/// (admitted until it ends), a hedge by its place.
#[inline]
fn earliest_cut<Fut>(
    admitted: &Option<Attempt>,
    hedges: &Option<Box<Hedges<Fut>>>,
) -> Option<(Option<usize>, Instant)> {
    let mut earliest = admitted.and_then(|a| a.cut_at()).map(|cut| (None, cut));
    for (at, (hedge, _)) in hedges.iter().flat_map(|hedges| hedges.iter().enumerate()) {
        if let Some(cut) = hedge.cut_at() {
            if earliest.is_none_or(|(_, first)| cut < first) {
                earliest = Some((Some(at), cut));
            }
        }
    }
    earliest
}

/// The first hedge that answered, and its answer.
fn poll_hedges<Fut: Future>(
    hedges: &mut [(Attempt, Pin<Box<Fut>>)],
    cx: &mut Context<'_>,
) -> Option<(usize, Fut::Output)> {
    hedges
        .iter_mut()
        .enumerate()
        .find_map(|(at, (_, future))| match future.as_mut().poll(cx) {
            Poll::Ready(output) => Some((at, output)),
            Poll::Pending => None,
        })
}

impl<C, F, Fut, T, E> std::fmt::Debug for Execute<'_, C, F, Fut, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execute")
            .field("policy", &self.policy.name())
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}
