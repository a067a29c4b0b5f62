//! The response future of [`Retry`](crate::Retry): the call's steps over a tower service.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use nresilience_core::call::{Attempt, Call, FlightEvent, Flights, Step};
use nresilience_core::{clock, nesting, Classify, RetryError, Verdict};
use pin_project_lite::pin_project;
use tower::Service;
use tracing::Span;

use crate::body::{BoxError, Prefixed, RetryBody, TransportError};
use crate::reopen::Reopen;
use crate::replay::{buffer_ready, Buffered, Replay, Source, Template};
use crate::request;

/// Where the call is.
enum State<B> {
    /// Buffering the request body's ready frames, up to the cap, so it can be sent again.
    Collecting {
        body: Option<B>,
        buffered: Buffered,
    },
    /// Asking the call for its first step.
    Starting,
    /// The request has a body of its own beside a [`Reopen`]: refused unsent.
    BodyBesideReopen,
    /// The attempt a `Step::Run` admitted waits for the service to be ready.
    Ready(Attempt),
    /// Attempts in flight, or a sleep. A hedge that is due is held back until the service is
    /// ready for it: it is asked of the call (and paid for) only once the service can take it
    /// at once.
    Running {
        held_hedge: Option<Instant>,
    },
    Done,
}

pin_project! {
    /// The response future of [`Retry`](crate::Retry).
    #[must_use = "futures do nothing unless polled"]
    #[project = ResponseFutureProj]
    pub struct ResponseFuture<S, C, B>
    where
        S: Service<Request<RetryBody>>,
    {
        state: State<B>,
        #[pin]
        flights: Flights<S::Future, Span>,
        service: S,
        classifier: C,
        source: Source,
        call: Call<TransportError>,
    }

    /// A future dropped while a retry waits for the service to be ready never sent it: the
    /// retry gives back its token and its place in the dependency's load (B13, O1).
    impl<S, C, B> PinnedDrop for ResponseFuture<S, C, B>
    where
        S: Service<Request<RetryBody>>,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let State::Ready(attempt) = this.state {
                this.call.unsent(*attempt, clock::now());
            }
        }
    }
}

impl<S, C, B> ResponseFuture<S, C, B>
where
    S: Service<Request<RetryBody>>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    pub(crate) fn new(
        request: Request<B>,
        service: S,
        classifier: C,
        call: Call<TransportError>,
        (max_buffered, reopen): (usize, Option<Reopen>),
    ) -> Self {
        let (mut parts, body) = request.into_parts();
        let (state, source) = match reopen {
            // The bodies it makes are every attempt's: the request's own could not go out too.
            Some(reopen) => {
                let state = if body.is_end_stream() {
                    State::Starting
                } else {
                    State::BodyBesideReopen
                };
                request::stamp(&call, &mut parts.headers);
                let source = if call.may_retry() {
                    Source::Template(Box::new(Template::new(parts, Replay::Reopen(reopen))))
                } else {
                    Source::Once(Box::new((parts, reopen.body())))
                };
                (state, source)
            }
            None if call.may_retry() => {
                let template = Template::new(parts, Replay::Buffered(Bytes::new()));
                let state = State::Collecting {
                    body: Some(body),
                    buffered: Buffered::new(max_buffered),
                };
                (state, Source::Template(Box::new(template)))
            }
            None => {
                let body = if body.is_end_stream() {
                    RetryBody::empty()
                } else {
                    RetryBody::streamed(body)
                };
                request::stamp(&call, &mut parts.headers);
                (State::Starting, Source::Once(Box::new((parts, body))))
            }
        };
        Self {
            state,
            flights: Flights::new(),
            service,
            classifier,
            source,
            call,
        }
    }
}

type Output<ResB> = Result<Response<ResB>, RetryError<TransportError>>;

impl<S, C, B, ResB> Future for ResponseFuture<S, C, B>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    C: Classify<Result<Response<ResB>, TransportError>>,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Output<ResB>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The whole retrying call is a retrying context: a retrying call made while serving
        // it is nested.
        let retrying = self.call.may_retry();
        nesting::retrying_scope(retrying, move || poll_call(self, cx))
    }
}

fn poll_call<S, C, B, ResB>(
    future: Pin<&mut ResponseFuture<S, C, B>>,
    cx: &mut Context<'_>,
) -> Poll<Output<ResB>>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    C: Classify<Result<Response<ResB>, TransportError>>,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let mut this = future.project();
    loop {
        let step = match this.state {
            State::Collecting { body, buffered } => {
                if let Err(error) = collect(this.call, this.source, body, buffered, cx) {
                    *this.state = State::Done;
                    return Poll::Ready(Err(RetryError::not_attempted(error)));
                }
                this.call.next(clock::now())
            }
            State::Starting => this.call.next(clock::now()),
            State::BodyBesideReopen => {
                *this.state = State::Done;
                let error = TransportError::new(
                    "a request with a Reopen extension has a body of its own: it must be empty, \
                     the bodies Reopen makes are sent",
                );
                return Poll::Ready(Err(RetryError::not_attempted(error)));
            }
            State::Ready(attempt) => {
                let attempt = *attempt;
                // The first attempt's service was made ready by `Retry::poll_ready`; readiness
                // is used once.
                let ready = if attempt.number() == 1 {
                    Ok(())
                } else {
                    ready!(this.service.poll_ready(cx))
                };
                *this.state = State::Running { held_hedge: None };
                match ready {
                    Ok(()) => {
                        send(&mut this, attempt, false);
                        continue;
                    }
                    Err(error) => not_ready(&mut this, attempt, error),
                }
            }
            State::Running { held_hedge } => {
                let hedge_at = this.call.hedge_at().filter(|_| held_hedge.is_none());
                match this.flights.as_mut().poll_landed(cx, hedge_at) {
                    Poll::Ready(FlightEvent::Answered {
                        attempt,
                        scope,
                        output,
                    }) => finish(&mut this, attempt, &scope, output),
                    Poll::Ready(FlightEvent::Cut { attempt, scope }) => {
                        request::cut(this.call, attempt, &scope)
                    }
                    Poll::Ready(FlightEvent::HedgeDue(at)) => {
                        // The cuts still apply while the service is busy.
                        *held_hedge = Some(at);
                        Step::KeepWaiting
                    }
                    Poll::Ready(FlightEvent::Woke) => this.call.next(clock::now()),
                    Poll::Pending => match *held_hedge {
                        Some(due) => {
                            let ready = ready!(this.service.poll_ready(cx)).is_ok();
                            *held_hedge = None;
                            hedge_when_ready(this.call, ready, due)
                        }
                        None => return Poll::Pending,
                    },
                }
            }
            State::Done => panic!("ResponseFuture polled after completion"),
        };
        match step {
            // A hedge due beside the attempt before is not one beside this.
            Step::Run(attempt) => *this.state = State::Ready(attempt),
            Step::Hedge(attempt) => {
                // The service was made ready for it just now.
                send(&mut this, attempt, true);
            }
            Step::KeepWaiting => {}
            Step::Sleep(until) => {
                // A retried attempt's response was dropped unread: hyper closes its
                // connection rather than returning a half-read one to the pool.
                this.flights.as_mut().sleep(until);
                *this.state = State::Running { held_hedge: None };
            }
            Step::Done(mut output) => {
                // The attempts still in flight lost: dropped now.
                *this.state = State::Done;
                this.flights.as_mut().clear();
                if let (Ok(response), Some(attempts)) = (&mut output, this.call.answered_after()) {
                    response.extensions_mut().insert(attempts);
                }
                return Poll::Ready(output);
            }
        }
    }
}

/// Reads the request body's ready frames: a body that ended within the cap is the template
/// every attempt copies; a larger one, or a stream still producing, is sent once, as read so
/// far and then as it streams, neither stamped nor reported as nested.
fn collect<B>(
    call: &mut Call<TransportError>,
    source: &mut Source,
    body: &mut Option<B>,
    buffered: &mut Buffered,
    cx: &mut Context<'_>,
) -> Result<(), TransportError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let Some(reading) = body.as_mut() else {
        unreachable!("the body is read until the state changes")
    };
    let outgrown = buffer_ready(reading, buffered, cx).map_err(TransportError::new)?;
    let buffered = std::mem::replace(buffered, Buffered::new(0));
    let rest = body.take();
    let Source::Template(mut template) = std::mem::replace(source, Source::Sent) else {
        unreachable!("a call that may retry has a template")
    };
    if outgrown {
        call.single_attempt();
        request::stamp(call, &mut template.headers);
        let body = match rest {
            Some(rest) => RetryBody::streamed(Prefixed::new(buffered.frames, rest)),
            None => RetryBody::empty(),
        };
        *source = template.into_once(body);
    } else {
        request::stamp(call, &mut template.headers);
        template.body = Replay::Buffered(buffered.into_bytes());
        *source = Source::Template(template);
    }
    Ok(())
}

/// Sends `attempt` — the first request as given, a retry or a hedge rebuilt from the
/// template — to the service, ready for it, inside the attempt's span: the attempt of a
/// `Step::Run`, or a `hedge` beside it.
fn send<S, C, B>(this: &mut ResponseFutureProj<'_, S, C, B>, attempt: Attempt, hedge: bool)
where
    S: Service<Request<RetryBody>>,
{
    let (method, uri, headers) = this.source.parts_mut();
    let span = request::attempt_span(this.call, &attempt, method.as_str(), uri);
    request::stamp_attempt(headers, &attempt, &span);
    let future = {
        let _entered = span.enter();
        this.service
            .call(this.source.next_request(attempt.number() == 1))
    };
    if hedge {
        this.flights.as_mut().hedge(attempt, span, future);
    } else {
        this.flights.as_mut().run(attempt, span, future);
    }
}

/// The hedge that was `due`, now that the service is `ready` for it: a [`Step::Hedge`] (or a
/// [`Step::KeepWaiting`], if the budget refused it meanwhile). A service that failed to get ready
/// ends the call's hedging; the attempts in flight go on.
fn hedge_when_ready<T>(
    call: &mut Call<TransportError>,
    ready: bool,
    due: Instant,
) -> Step<T, TransportError> {
    if ready {
        call.next(clock::now().max(due))
    } else {
        call.stop_hedging();
        Step::KeepWaiting
    }
}

/// Classifies a finished attempt and hands it to the call.
#[inline(always)]
fn finish<S, C, B, ResB, Error>(
    this: &mut ResponseFutureProj<'_, S, C, B>,
    attempt: Attempt,
    span: &Span,
    result: Result<Response<ResB>, Error>,
) -> Step<Response<ResB>, TransportError>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    C: Classify<Result<Response<ResB>, TransportError>>,
    Error: Into<BoxError>,
{
    let result = result.map_err(TransportError::new);
    let verdict = this.classifier.classify(&result);
    let status = result.as_ref().ok().map(|response| {
        request::heard(this.call, response.headers());
        response.status()
    });
    request::answered(this.call, attempt, span, status, verdict, result)
}

/// Hands the call a retry that was never sent: its service failed to get ready with `error`.
/// The classifier's verdict on the error stands, but a transient one is
/// [`Unreachable`](Verdict::Unreachable): the dependency never saw the attempt, so its token
/// goes back and the retries after it are spread over the time the call has left (B13, O7).
#[cold]
fn not_ready<S, C, B, ResB, Error>(
    this: &mut ResponseFutureProj<'_, S, C, B>,
    attempt: Attempt,
    error: Error,
) -> Step<Response<ResB>, TransportError>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    C: Classify<Result<Response<ResB>, TransportError>>,
    Error: Into<BoxError>,
{
    let result = Err(TransportError::new(error));
    let verdict = match this.classifier.classify(&result) {
        Verdict::Transient { .. } => Verdict::Unreachable,
        verdict => verdict,
    };
    request::answered(this.call, attempt, &Span::none(), None, verdict, result)
}

impl<S, C, B> ResponseFuture<S, C, B>
where
    S: Service<Request<RetryBody>>,
{
    /// The call behind the response: what the gRPC layer reads its metrics from once it ends.
    #[cfg(feature = "grpc")]
    pub(crate) fn call(&self) -> &Call<TransportError> {
        &self.call
    }
}

impl<S, C, B> std::fmt::Debug for ResponseFuture<S, C, B>
where
    S: Service<Request<RetryBody>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}
