//! The response future of [`Retry`](crate::Retry): one call's attempts as a state machine.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::{Extensions, HeaderMap, Method, Request, Response, Uri, Version};
use http_body::Body;
use http_body::Frame;
use nresilience_core::call::{Attempt, Call, Step, Timer};
use nresilience_core::clock;
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::{Classify, RetryError};
use pin_project_lite::pin_project;
use tower::Service;
use tracing::Span;

use crate::body::{BoxError, Prefixed, RetryBody, TransportError};
use crate::request::{carries_marker, stamp_call, stamp_deadline, CallFacts, MARKED, MARKER};
use crate::telemetry;

/// What a retry is rebuilt from: the request as it was, with its body buffered.
struct Template {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
    body: Bytes,
}

impl Template {
    fn into_request(self, body: RetryBody) -> Request<RetryBody> {
        let mut request = Request::new(body);
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers;
        *request.extensions_mut() = self.extensions;
        request
    }

    fn request(&self) -> Request<RetryBody> {
        let mut request = Request::new(RetryBody::buffered(self.body.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        *request.extensions_mut() = self.extensions.clone();
        request
    }
}

/// What the attempts are made from.
enum Source {
    /// The request as buffered, copied for every attempt. Boxed, as the next: the future is
    /// moved whole several times on its way to the runtime, and a request is most of it.
    Template(Box<Template>),
    /// The request of a call that makes one attempt.
    Once(Box<Request<RetryBody>>),
    /// That one attempt has gone out.
    Sent,
}

pin_project! {
    #[project = StateProj]
    enum State<F, B> {
        // Buffering the request body's ready frames, up to the cap, so it can be sent again.
        Collecting { body: Option<B>, buffered: Buffered },
        // Asking the call for its first step.
        Starting,
        // Waiting for the service to be ready for the admitted attempt.
        Ready,
        // An attempt in flight, cut by the timer when it is armed; hedges may run beside it.
        Calling { #[pin] future: F },
        // Only hedges in flight: the attempt they were started beside has ended.
        Hedged,
        // A backoff, or the rejection pause before a refusal.
        Sleeping,
        Done,
    }
}

pin_project! {
    /// The response future of [`Retry`](crate::Retry).
    #[must_use = "futures do nothing unless polled"]
    #[project = ResponseFutureProj]
    pub struct ResponseFuture<S, C, B>
    where
        S: Service<Request<RetryBody>>,
    {
        #[pin]
        state: State<S::Future, B>,
        #[pin]
        timer: Timer,
        service: S,
        classifier: C,
        source: Source,
        call: Call<TransportError>,
        admitted: Option<Attempt>,
        attempt_span: Span,
        // Hedges beside the attempt (HG1), out of line: most calls never hedge.
        hedging: Option<Box<Hedging<S::Future>>>,
    }
}

/// The hedges of a call.
struct Hedging<F> {
    in_flight: Vec<Hedge<F>>,
    /// A hedge is due and waits for the service to be ready: it is asked of the call (and
    /// paid for) only once the service can take it at once.
    awaits_service: bool,
}

/// A hedged attempt in flight.
struct Hedge<F> {
    attempt: Attempt,
    span: Span,
    future: Pin<Box<F>>,
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
        max_buffered: usize,
    ) -> Self {
        let (parts, body) = request.into_parts();
        let (state, source) = if call.may_retry() {
            let template = Template {
                method: parts.method,
                uri: parts.uri,
                version: parts.version,
                headers: parts.headers,
                extensions: parts.extensions,
                body: Bytes::new(),
            };
            let state = State::Collecting {
                body: Some(body),
                buffered: Buffered::new(max_buffered),
            };
            (state, Source::Template(Box::new(template)))
        } else {
            let body = if body.is_end_stream() {
                RetryBody::empty()
            } else {
                RetryBody::streamed(body)
            };
            let first = Request::from_parts(parts, body);
            (State::Starting, Source::Once(Box::new(first)))
        };
        Self {
            state,
            timer: Timer::new(),
            service,
            classifier,
            source,
            call,
            admitted: None,
            attempt_span: Span::none(),
            hedging: None,
        }
    }
}

/// The frames of a request body read so far, while they fit the cap.
struct Buffered {
    cap: usize,
    size: usize,
    frames: Vec<Frame<Bytes>>,
}

impl Buffered {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            size: 0,
            frames: Vec::new(),
        }
    }

    /// Keeps `frame`; `false` once the body no longer fits the cap or carries trailers,
    /// which a replay would not reproduce.
    fn push(&mut self, frame: Frame<Bytes>) -> bool {
        let fits = match frame.data_ref() {
            Some(data) => {
                self.size += data.len();
                self.size <= self.cap
            }
            None => false,
        };
        self.frames.push(frame);
        fits
    }

    fn into_bytes(self) -> Bytes {
        let mut frames = self.frames.into_iter().filter_map(|f| f.into_data().ok());
        match (frames.next(), frames.next()) {
            (None, _) => Bytes::new(),
            (Some(only), None) => only,
            (Some(first), Some(second)) => {
                let mut all = BytesMut::with_capacity(self.size);
                all.extend_from_slice(&first);
                all.extend_from_slice(&second);
                frames.for_each(|f| all.extend_from_slice(&f));
                all.freeze()
            }
        }
    }
}

/// Reads the frames of the body that are ready now into `buffered`: `false` when it ended
/// within the cap (replayable), `true` when it outgrew the cap or is still producing (a
/// stream), with the rest still in `body`.
///
/// A stream is never waited for: its next message may depend on the response, and holding
/// it back until it ends would deadlock such a call or delay a slow upload.
fn buffer_ready<B>(
    body: &mut B,
    buffered: &mut Buffered,
    cx: &mut Context<'_>,
) -> Result<bool, B::Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    loop {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(None) => return Ok(false),
            Poll::Ready(Some(Err(error))) => return Err(error),
            Poll::Ready(Some(Ok(frame))) => {
                if !buffered.push(frame) {
                    return Ok(true);
                }
            }
            Poll::Pending => return Ok(true),
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
        if self.call.may_retry() {
            // The whole retrying call is a retrying context: a retrying call made while
            // serving it is nested.
            nesting::sync_scope(NestingSource::InProcess, move || poll_call(self, cx))
        } else {
            poll_call(self, cx)
        }
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
        let step = match this.state.as_mut().project() {
            StateProj::Collecting { body, buffered } => {
                let Some(reading) = body.as_mut() else {
                    unreachable!("the body is read until the state changes")
                };
                let outgrown = match buffer_ready(reading, buffered, cx) {
                    Ok(outgrown) => outgrown,
                    Err(error) => {
                        this.state.set(State::Done);
                        let error = TransportError::new(error);
                        return Poll::Ready(Err(RetryError::not_attempted(error)));
                    }
                };
                let buffered = std::mem::replace(buffered, Buffered::new(0));
                let rest = body.take();
                let Source::Template(mut template) = std::mem::replace(this.source, Source::Sent)
                else {
                    unreachable!("a call that may retry has a template")
                };
                if outgrown {
                    // Too large or still streaming: sent once, as read so far and then as it
                    // streams, neither stamped nor reported as nested.
                    this.call.single_attempt();
                    let prefix = buffered.frames;
                    let body = match rest {
                        Some(rest) => RetryBody::streamed(Prefixed::new(prefix, rest)),
                        None => RetryBody::empty(),
                    };
                    *this.source = Source::Once(Box::new(template.into_request(body)));
                } else {
                    template.body = buffered.into_bytes();
                    // Stamped on the first attempt too: by the time a retry goes out, the
                    // amplification has already happened. Never stamped twice.
                    if !carries_marker(&template.headers) {
                        template.headers.insert(MARKER, MARKED);
                    }
                    stamp_call(&mut template.headers, call_facts(this.call));
                    *this.source = Source::Template(template);
                }
                this.call.next(clock::now())
            }
            StateProj::Starting => this.call.next(clock::now()),
            StateProj::Ready => {
                // The first attempt's service was made ready by `Retry::poll_ready`; readiness
                // is used once.
                let first = this.admitted.is_some_and(|a| a.number() == 1);
                let ready = if first {
                    Ok(())
                } else {
                    ready!(this.service.poll_ready(cx))
                };
                match ready {
                    Ok(()) => {
                        send(&mut this);
                        continue;
                    }
                    Err(error) => {
                        this.state.set(State::Hedged);
                        let attempt = admitted(this.admitted);
                        finish_attempt(&mut this, attempt, Err(TransportError::new(error)), None)
                    }
                }
            }
            StateProj::Calling { future } => {
                let polled = {
                    let _entered = this.attempt_span.enter();
                    future.poll(cx)
                };
                match polled {
                    Poll::Ready(result) => {
                        this.state.set(State::Hedged);
                        let attempt = admitted(this.admitted);
                        let result = result.map_err(TransportError::new);
                        finish_attempt(&mut this, attempt, result, None)
                    }
                    Poll::Pending => ready!(poll_hedges(&mut this, cx)),
                }
            }
            StateProj::Hedged => ready!(poll_hedges(&mut this, cx)),
            StateProj::Sleeping => {
                ready!(this.timer.as_mut().poll(cx));
                this.call.next(clock::now())
            }
            StateProj::Done => panic!("ResponseFuture polled after completion"),
        };
        match step {
            Step::Run(attempt) => {
                *this.admitted = Some(attempt);
                if let Some(hedging) = this.hedging.as_deref_mut() {
                    // A hedge due beside the attempt before is not one beside this.
                    hedging.awaits_service = false;
                }
                let wake = if this.call.may_hedge() {
                    wake_at(&this)
                } else {
                    attempt.cut_at()
                };
                this.timer.as_mut().set(wake);
                this.state.set(State::Ready);
            }
            Step::Hedge(attempt) => {
                // The service was made ready for it just now.
                let span = prepare(&mut this, &attempt);
                let future = {
                    let _entered = span.enter();
                    Box::pin(this.service.call(request(this.source)))
                };
                hedging(this.hedging).in_flight.push(Hedge {
                    attempt,
                    span,
                    future,
                });
                let wake = wake_at(&this);
                this.timer.as_mut().set(wake);
            }
            Step::InFlight => {
                let wake = wake_at(&this);
                this.timer.as_mut().set(wake);
            }
            Step::Sleep(until) => {
                // A retried attempt's response was dropped unread: hyper closes its
                // connection rather than returning a half-read one to the pool.
                this.timer.as_mut().set(Some(until));
                this.state.set(State::Sleeping);
            }
            Step::Done(output) => {
                // The attempts still in flight lost: dropped now.
                this.state.set(State::Done);
                *this.hedging = None;
                return Poll::Ready(output);
            }
        }
    }
}

#[inline(always)]
fn admitted(attempt: &mut Option<Attempt>) -> Attempt {
    match attempt.take() {
        Some(attempt) => attempt,
        None => unreachable!("an attempt in flight was admitted"),
    }
}

/// While attempts are in flight: asks the call for a due hedge once the service is ready for
/// it, polls the hedges, and on the timer cuts the attempt due or readies the hedge. Pending
/// when there is nothing to report.
fn poll_hedges<S, C, B, ResB>(
    this: &mut ResponseFutureProj<'_, S, C, B>,
    cx: &mut Context<'_>,
) -> Poll<Step<Response<ResB>, TransportError>>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    C: Classify<Result<Response<ResB>, TransportError>>,
{
    if this.hedging.as_deref().is_some_and(|h| h.awaits_service) {
        if let Poll::Ready(step) = hedge_when_ready(this, cx) {
            return Poll::Ready(step);
        }
    }
    let answered = this.hedging.as_deref_mut().and_then(|hedging| {
        let answered = hedging
            .in_flight
            .iter_mut()
            .enumerate()
            .find_map(|(at, hedge)| {
                let _entered = hedge.span.enter();
                match hedge.future.as_mut().poll(cx) {
                    Poll::Ready(result) => Some((at, result)),
                    Poll::Pending => None,
                }
            });
        answered.map(|(at, result)| (hedging.in_flight.swap_remove(at), result))
    });
    if let Some((hedge, result)) = answered {
        let result = result.map_err(TransportError::new);
        return Poll::Ready(finish_attempt(
            this,
            hedge.attempt,
            result,
            Some(&hedge.span),
        ));
    }
    ready!(this.timer.as_mut().poll(cx));
    let now = clock::now();
    // The timer was set to the earliest of the cuts and the hedge: that one is due.
    let (cut, hedge_at) = (earliest_cut(this), hedge_at(this));
    Poll::Ready(match cut {
        Some((at, cut)) if hedge_at.is_none_or(|h| cut <= h) => match at {
            Cut::First => {
                this.state.set(State::Hedged);
                telemetry::record_timeout(this.attempt_span);
                let attempt = admitted(this.admitted);
                this.call.timed_out(attempt, now)
            }
            Cut::Hedge(at) => {
                let hedge = hedging(this.hedging).in_flight.swap_remove(at);
                telemetry::record_timeout(&hedge.span);
                this.call.timed_out(hedge.attempt, now)
            }
        },
        _ if hedge_at.is_some() => {
            hedging(this.hedging).awaits_service = true;
            match hedge_when_ready(this, cx) {
                Poll::Ready(step) => step,
                // The cuts still apply while the service is busy.
                Poll::Pending => Step::InFlight,
            }
        }
        _ => Step::InFlight,
    })
}

/// The hedge that is due, once the service is ready for it: a [`Step::Hedge`] (or a
/// [`Step::InFlight`], if the budget refused it meanwhile). A service that fails to get ready
/// ends the call's hedging; the attempts in flight go on.
fn hedge_when_ready<S, C, B, ResB>(
    this: &mut ResponseFutureProj<'_, S, C, B>,
    cx: &mut Context<'_>,
) -> Poll<Step<Response<ResB>, TransportError>>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    let ready = ready!(this.service.poll_ready(cx));
    hedging(this.hedging).awaits_service = false;
    let now = clock::now();
    Poll::Ready(match (ready, this.call.hedge_at()) {
        (Ok(()), Some(hedge_at)) => this.call.next(now.max(hedge_at)),
        (Ok(()), None) => Step::InFlight,
        (Err(_), _) => {
            this.call.stop_hedging();
            Step::InFlight
        }
    })
}

/// The hedges of the call, made by the first.
fn hedging<F>(hedging: &mut Option<Box<Hedging<F>>>) -> &mut Hedging<F> {
    hedging.get_or_insert_with(|| {
        Box::new(Hedging {
            in_flight: Vec::new(),
            awaits_service: false,
        })
    })
}

/// When the call hedges next, unless a hedge already waits for the service.
fn hedge_at<S, C, B>(this: &ResponseFutureProj<'_, S, C, B>) -> Option<Instant>
where
    S: Service<Request<RetryBody>>,
{
    let awaiting = this.hedging.as_deref().is_some_and(|h| h.awaits_service);
    this.call.hedge_at().filter(|_| !awaiting)
}

/// Which attempt a cut is for.
#[derive(Clone, Copy)]
enum Cut {
    /// The attempt the hedges run beside.
    First,
    /// A hedge in flight, by its place.
    Hedge(usize),
}

/// The attempt cut first, and when.
fn earliest_cut<S, C, B>(this: &ResponseFutureProj<'_, S, C, B>) -> Option<(Cut, Instant)>
where
    S: Service<Request<RetryBody>>,
{
    // Admitted until it ends.
    let first = this
        .admitted
        .and_then(|a| a.cut_at())
        .map(|cut| (Cut::First, cut));
    let hedging = this.hedging.as_deref();
    let in_flight = hedging
        .into_iter()
        .flat_map(|h| h.in_flight.iter().enumerate());
    let hedges =
        in_flight.filter_map(|(at, hedge)| hedge.attempt.cut_at().map(|cut| (Cut::Hedge(at), cut)));
    first.into_iter().chain(hedges).min_by_key(|(_, cut)| *cut)
}

/// When the driver next has something to do while attempts run: the earliest cut, or the
/// hedge.
fn wake_at<S, C, B>(this: &ResponseFutureProj<'_, S, C, B>) -> Option<Instant>
where
    S: Service<Request<RetryBody>>,
{
    let cut = earliest_cut(this).map(|(_, cut)| cut);
    [cut, hedge_at(this)].into_iter().flatten().min()
}

/// Sends the admitted attempt: the first request as given, a retry rebuilt from the template.
fn send<S, C, B>(this: &mut ResponseFutureProj<'_, S, C, B>)
where
    S: Service<Request<RetryBody>>,
{
    let Some(attempt) = *this.admitted else {
        unreachable!("an attempt is sent once admitted")
    };
    *this.attempt_span = prepare(this, &attempt);
    let future = {
        let _entered = this.attempt_span.enter();
        this.service.call(request(this.source))
    };
    this.state.set(State::Calling { future });
}

/// The span of `attempt`, with the request it is sent as made ready for it.
///
/// What changes from attempt to attempt (the deadline, the trace context) is written into the
/// template before it is copied, so the copy is made at its final size.
fn prepare<S, C, B>(this: &mut ResponseFutureProj<'_, S, C, B>, attempt: &Attempt) -> Span
where
    S: Service<Request<RetryBody>>,
{
    let timeout = attempt.timeout();
    let call = &*this.call;
    let (span, headers) = match this.source {
        Source::Template(template) => {
            let span = telemetry::attempt_span(
                call.span(),
                template.method.as_str(),
                &template.uri,
                attempt,
            );
            (span, &mut template.headers)
        }
        Source::Once(request) => {
            let span = telemetry::attempt_span(
                call.span(),
                request.method().as_str(),
                request.uri(),
                attempt,
            );
            let headers = request.headers_mut();
            stamp_call(headers, call_facts(call));
            (span, headers)
        }
        Source::Sent => unreachable!("a call without a template makes one attempt"),
    };
    stamp_deadline(headers, timeout);
    telemetry::inject_context(&span, headers);
    span
}

/// The request the next attempt is sent as: a copy of the template, or the one request of a
/// call that makes one attempt. Built where it is passed on, not moved there.
#[inline(always)]
fn request(source: &mut Source) -> Request<RetryBody> {
    if let Source::Template(template) = source {
        return template.request();
    }
    match std::mem::replace(source, Source::Sent) {
        Source::Once(request) => *request,
        _ => unreachable!("a call without a template makes one attempt"),
    }
}

/// What every attempt of the call says about the chain.
fn call_facts(call: &Call<TransportError>) -> CallFacts {
    CallFacts {
        depth: call.depth(),
        potential_attempts: call.potential_attempts(),
        criticality: call.criticality(),
    }
}

/// Classifies a finished attempt and hands it to the call.
#[inline(always)]
fn finish_attempt<S, C, B, ResB>(
    this: &mut ResponseFutureProj<'_, S, C, B>,
    attempt: Attempt,
    result: Result<Response<ResB>, TransportError>,
    hedge_span: Option<&Span>,
) -> Step<Response<ResB>, TransportError>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    C: Classify<Result<Response<ResB>, TransportError>>,
{
    let verdict = this.classifier.classify(&result);
    let status = result.as_ref().ok().map(Response::status);
    let span = hedge_span.unwrap_or(this.attempt_span);
    telemetry::record_result(span, status, &verdict);
    this.call.attempted(attempt, result, verdict, clock::now())
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
