//! The future of one call through [`RetryMiddleware`](super::RetryMiddleware): its attempts
//! sent on through the rest of the chain as the call's steps say.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::SystemTime;

use ::reqwest::{Request, Response};
use http::Extensions;
use nresilience_core::call::{Attempt, Call, FlightEvent, Flights, Step};
use nresilience_core::{clock, nesting, Verdict};
use pin_project_lite::pin_project;
use reqwest_middleware::Next;
use tracing::Span;

use crate::classify::HttpClassifier;
use crate::reopen::{self, Reopen};
use crate::request;

/// What an attempt answers.
type MiddlewareResult = reqwest_middleware::Result<Response>;

/// Sends one attempt on through the rest of the chain with `extensions` of its own, which come
/// back with its answer: several attempts of a call may be in flight at once (HG1), and only
/// the answering one's are the caller's afterwards.
pub(super) async fn attempt(
    next: Next<'_>,
    request: Request,
    mut extensions: Extensions,
) -> (MiddlewareResult, Extensions) {
    let answer = next.run(request, &mut extensions).await;
    (answer, extensions)
}

pin_project! {
    /// One call's attempts, each made by `S` ([`attempt`]; a parameter only so that its
    /// future, `F`, can be named and held without a box).
    ///
    /// Every attempt starts from a copy of the caller's extensions as they were: they are
    /// left alone until the call ends, and then are those of the attempt whose response is
    /// returned.
    #[project = AttemptsProj]
    pub(super) struct Attempts<'a, F, S> {
        #[pin]
        flights: Flights<F, Span>,
        call: Call<reqwest_middleware::Error>,
        classifier: HttpClassifier,
        started: bool,
        // What every attempt of a call that may retry is copied from; otherwise the one
        // request, until it is sent.
        request: Option<Request>,
        // What makes every attempt's body, when the caller can make it again (H7).
        reopen: Option<Reopen>,
        extensions: &'a mut Extensions,
        next: Next<'a>,
        send: S,
    }
}

impl<'a, F, S> Attempts<'a, F, S>
where
    F: Future<Output = (MiddlewareResult, Extensions)>,
    S: Fn(Next<'a>, Request, Extensions) -> F,
{
    /// The attempts of `call`, made from `request` (each attempt's body made by `reopen`, when
    /// there is one) by `send`.
    #[inline(always)]
    pub(super) fn new(
        call: Call<reqwest_middleware::Error>,
        classifier: HttpClassifier,
        (request, reopen): (Request, Option<Reopen>),
        extensions: &'a mut Extensions,
        next: Next<'a>,
        send: S,
    ) -> Self {
        Self {
            flights: Flights::new(),
            call,
            classifier,
            started: false,
            request: Some(request),
            reopen,
            extensions,
            next,
            send,
        }
    }
}

impl<'a, F, S> Future for Attempts<'a, F, S>
where
    F: Future<Output = (MiddlewareResult, Extensions)>,
    S: Fn(Next<'a>, Request, Extensions) -> F,
{
    type Output = MiddlewareResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The whole retrying call is a retrying context: a retrying call made while serving
        // it is nested (N5).
        let retrying = self.call.may_retry();
        nesting::retrying_scope(retrying, move || poll_steps(self.project(), cx))
    }
}

fn poll_steps<'a, F, S>(
    mut this: AttemptsProj<'_, 'a, F, S>,
    cx: &mut Context<'_>,
) -> Poll<MiddlewareResult>
where
    F: Future<Output = (MiddlewareResult, Extensions)>,
    S: Fn(Next<'a>, Request, Extensions) -> F,
{
    loop {
        // A response stays where it landed until the call is done with it: the call decides
        // on its verdict and status alone, and is handed only whether the attempt failed.
        let mut answered = None;
        let step = if *this.started {
            let hedge_at = this.call.hedge_at();
            match ready!(this.flights.as_mut().poll_landed(cx, hedge_at)) {
                FlightEvent::Answered {
                    attempt,
                    scope,
                    output: (answer, own),
                } => {
                    let verdict = classify(*this.classifier, &answer);
                    let (status, outcome) = match answer {
                        Ok(response) => {
                            request::heard(this.call, response.headers());
                            let status = response.status();
                            answered = Some((response, own));
                            (Some(status), Ok(()))
                        }
                        Err(error) => (None, Err(error)),
                    };
                    request::answered(this.call, attempt, &scope, status, verdict, outcome)
                }
                FlightEvent::Cut { attempt, scope } => request::cut(this.call, attempt, &scope),
                FlightEvent::HedgeDue(at) => this.call.next(at),
                FlightEvent::Woke => this.call.next(clock::now()),
            }
        } else {
            *this.started = true;
            this.call.next(clock::now())
        };
        match step {
            Step::Run(attempt) => send(&mut this, attempt, false),
            Step::Hedge(attempt) => send(&mut this, attempt, true),
            Step::KeepWaiting => {}
            // A retried attempt's response was dropped unread: its connection is closed
            // rather than returned half-read to the pool.
            Step::Sleep(until) => this.flights.as_mut().sleep(until),
            Step::Done(output) => {
                // The attempts still in flight lost: dropped now.
                this.flights.as_mut().clear();
                return Poll::Ready(match output {
                    Ok(()) => {
                        // Only an attempt that answered with a response ends the call with one.
                        let Some((mut response, own)) = answered else {
                            unreachable!("a call ends with a response only as one lands")
                        };
                        **this.extensions = own;
                        if let Some(attempts) = this.call.answered_after() {
                            response.extensions_mut().insert(attempts);
                        }
                        Ok(response)
                    }
                    Err(error) => Err(reqwest_middleware::Error::Middleware(anyhow::Error::new(
                        error,
                    ))),
                });
            }
        }
    }
}

/// Sends `attempt` on, inside its span, beside the attempts in flight when it is a `hedge`:
/// a copy of the template, or the one request of a call that makes one attempt.
#[inline(always)]
fn send<'a, F, S>(this: &mut AttemptsProj<'_, 'a, F, S>, attempt: Attempt, hedge: bool)
where
    F: Future<Output = (MiddlewareResult, Extensions)>,
    S: Fn(Next<'a>, Request, Extensions) -> F,
{
    let (span, mut request) = match this.request.as_mut() {
        // The first attempt sends the request as built, with its room for the headers still
        // to be written (the client's defaults among them); the template is a copy of it.
        Some(template) if this.call.may_retry() && attempt.number() == 1 => {
            let copy = copy(template);
            let mut request = std::mem::replace(template, copy);
            (prepare(this.call, &attempt, &mut request), request)
        }
        // What changes from attempt to attempt is written into the template before it is
        // copied, so the copy is made at its final size.
        Some(template) if this.call.may_retry() => {
            (prepare(this.call, &attempt, template), copy(template))
        }
        _ => {
            let Some(mut request) = this.request.take() else {
                unreachable!("a call that makes one attempt sends its request once")
            };
            (prepare(this.call, &attempt, &mut request), request)
        }
    };
    if let Some(reopen) = this.reopen {
        *request.body_mut() = Some(reopen::reqwest_body(reopen.body()));
    }
    let sent = (this.send)(this.next.clone(), request, this.extensions.clone());
    if hedge {
        this.flights.as_mut().hedge(attempt, span, sent);
    } else {
        this.flights.as_mut().run(attempt, span, sent);
    }
}

/// A copy of `template`, whose body is bytes or none (a streamed body makes a call of one
/// attempt, a [`Reopen`] one with no body of its own).
#[inline]
fn copy(template: &Request) -> Request {
    match template.try_clone() {
        Some(request) => request,
        None => unreachable!("a call that may retry has a body that clones"),
    }
}

/// The span of `attempt`, with its request made ready for it.
fn prepare(
    call: &Call<reqwest_middleware::Error>,
    attempt: &Attempt,
    request: &mut Request,
) -> Span {
    let span = request::attempt_span(call, attempt, request.method().as_str(), request.url());
    request::stamp_attempt(request.headers_mut(), attempt, &span);
    span
}

/// The verdict on an attempt: a response by its status, an error by what it is.
///
/// A request reqwest could not build and a redirect loop are `Permanent`: sending it again
/// cannot fix them. Every other error — connect, I/O, timeout, or an error from a middleware
/// behind this one — is transient, as in the tower layer.
fn classify(classifier: HttpClassifier, answer: &MiddlewareResult) -> Verdict {
    match answer {
        // The wall clock is read only for a retryable status, never on the success path.
        Ok(response) => {
            classifier.classify_response(response.status(), response.headers(), SystemTime::now)
        }
        Err(reqwest_middleware::Error::Reqwest(error))
            if error.is_builder() || error.is_redirect() =>
        {
            Verdict::Permanent
        }
        Err(reqwest_middleware::Error::Reqwest(error)) => crate::classify::classify_error(error),
        Err(_) => Verdict::TRANSIENT,
    }
}
