//! The response future of [`Retry`](crate::Retry): one call's attempts as a state machine.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::header::HeaderValue;
use http::{Extensions, HeaderMap, Method, Request, Response, Uri, Version};
use http_body::Body;
use http_body::Frame;
use nresilience_core::call::{instant_after, now, outcome, Admission, Call, Decision};
use nresilience_core::nesting::{self, NestingSource, MARKER_HEADER, MARKER_VALUE};
use nresilience_core::{Classify, LastAttempt, RetryError, StopReason, Verdict};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower::Service;
use tracing::Span;

use crate::body::{BoxError, Prefixed, RetryBody, TransportError};
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

pin_project! {
    #[project = StateProj]
    enum State<F, B> {
        // Buffering the request body's ready frames, up to the cap, so it can be sent again.
        Collecting { body: Option<B>, buffered: Buffered },
        // Asking the breaker and limiter for the next attempt.
        Starting,
        // Waiting for the service to be ready for the next attempt.
        Ready,
        // An attempt in flight, cut by the timer when it is armed.
        Calling { #[pin] future: F },
        // The backoff before the next attempt.
        Backoff,
        // The rejection pause before a budget refusal is returned.
        Rejecting,
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
        // One timer serves the attempt timeout, the backoff and the rejection pause.
        #[pin]
        timer: Sleep,
        timer_armed: bool,
        service: S,
        classifier: C,
        template: Option<Template>,
        first: Option<Request<RetryBody>>,
        call: Call,
        attempt_span: Span,
        last: LastAttempt<TransportError>,
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
        call: Call,
        started: Instant,
        max_buffered: usize,
    ) -> Self {
        let (parts, body) = request.into_parts();
        let (state, template, first) = if call.may_retry() {
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
            (state, Some(template), None)
        } else {
            let body = if body.is_end_stream() {
                RetryBody::empty()
            } else {
                RetryBody::streamed(body)
            };
            (
                State::Starting,
                None,
                Some(Request::from_parts(parts, body)),
            )
        };
        Self {
            state,
            timer: tokio::time::sleep_until(started.into()),
            timer_armed: false,
            service,
            classifier,
            template,
            first,
            call,
            attempt_span: Span::none(),
            last: LastAttempt::Rejected,
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
            // serving it is nested (N5).
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
        match this.state.as_mut().project() {
            StateProj::Collecting { body, buffered } => {
                let Some(reading) = body.as_mut() else {
                    unreachable!("the body is read until the state changes")
                };
                let outgrown = match buffer_ready(reading, buffered, cx) {
                    Ok(outgrown) => outgrown,
                    Err(error) => {
                        this.state.set(State::Done);
                        let last = LastAttempt::Error(TransportError::new(error));
                        return Poll::Ready(Err(RetryError::new(
                            StopReason::Permanent,
                            0,
                            last,
                            None,
                        )));
                    }
                };
                let buffered = std::mem::replace(buffered, Buffered::new(0));
                let rest = body.take();
                let Some(mut template) = this.template.take() else {
                    unreachable!("a call that may retry has a template")
                };
                if outgrown {
                    // Too large or still streaming: sent once, as read so far and then as it
                    // streams, neither stamped nor reported as nested (N1).
                    this.call.single_attempt();
                    let prefix = buffered.frames;
                    let body = match rest {
                        Some(rest) => RetryBody::streamed(Prefixed::new(prefix, rest)),
                        None => RetryBody::empty(),
                    };
                    *this.first = Some(template.into_request(body));
                } else {
                    template.body = buffered.into_bytes();
                    // Stamped on the first attempt too: by the time a retry goes out, the
                    // amplification has already happened (N1). Never stamped twice.
                    if !template.headers.contains_key(MARKER_HEADER) {
                        template
                            .headers
                            .insert(MARKER_HEADER, HeaderValue::from_static(MARKER_VALUE));
                    }
                    *this.template = Some(template);
                }
                this.state.set(State::Starting);
            }
            StateProj::Starting => {
                let at = now();
                match this.call.begin_attempt(at) {
                    Admission::Run { timeout } => {
                        *this.timer_armed = timeout.is_some();
                        if let Some(timeout) = timeout {
                            this.timer.as_mut().reset(instant_after(at, timeout));
                        }
                        this.state.set(State::Ready);
                    }
                    Admission::Refused { verdict } => {
                        *this.last = LastAttempt::Refused;
                        let decision = this.call.end_attempt(verdict, at);
                        if let Some(output) = settle(&mut this, decision, None, at) {
                            return Poll::Ready(output);
                        }
                    }
                }
            }
            StateProj::Ready => {
                // The first attempt's service was made ready by `Retry::poll_ready`.
                if this.call.attempts() > 1 {
                    if let Err(error) = ready!(this.service.poll_ready(cx)) {
                        let result = Err(TransportError::new(error));
                        if let Some(output) = finish_attempt(&mut this, result) {
                            return Poll::Ready(output);
                        }
                        continue;
                    }
                }
                let mut request = match (this.first.take(), this.template.as_ref()) {
                    (Some(request), _) => request,
                    (None, Some(template)) => template.request(),
                    (None, None) => unreachable!("a call without a template makes one attempt"),
                };
                let span = telemetry::attempt_span(
                    this.call.span(),
                    (&request).into(),
                    this.call.attempts(),
                );
                telemetry::inject_context(&span, request.headers_mut());
                *this.attempt_span = span;
                let future = {
                    let _entered = this.attempt_span.enter();
                    this.service.call(request)
                };
                this.state.set(State::Calling { future });
            }
            StateProj::Calling { future } => {
                let polled = {
                    let _entered = this.attempt_span.enter();
                    future.poll(cx)
                };
                let result = match polled {
                    Poll::Ready(result) => Some(result.map_err(TransportError::new)),
                    Poll::Pending
                        if *this.timer_armed && this.timer.as_mut().poll(cx).is_ready() =>
                    {
                        None
                    }
                    Poll::Pending => return Poll::Pending,
                };
                let output = match result {
                    Some(result) => finish_attempt(&mut this, result),
                    None => {
                        telemetry::record_timeout(this.attempt_span);
                        *this.last = LastAttempt::TimedOut;
                        let at = now();
                        let decision = this.call.end_attempt(Verdict::TRANSIENT, at);
                        settle(&mut this, decision, None, at)
                    }
                };
                if let Some(output) = output {
                    return Poll::Ready(output);
                }
            }
            StateProj::Backoff => {
                ready!(this.timer.as_mut().poll(cx));
                this.state.set(State::Starting);
            }
            StateProj::Rejecting => {
                ready!(this.timer.as_mut().poll(cx));
                let rejected = this.call.reject(now());
                let last = std::mem::replace(this.last, LastAttempt::Rejected);
                this.state.set(State::Done);
                let attempts = this.call.attempts();
                return Poll::Ready(Err(RetryError::new(
                    StopReason::BudgetExhausted,
                    attempts,
                    last,
                    Some(rejected),
                )));
            }
            StateProj::Done => panic!("ResponseFuture polled after completion"),
        }
    }
}

/// Classifies a finished attempt and acts on the decision.
fn finish_attempt<S, C, B, ResB>(
    this: &mut ResponseFutureProj<'_, S, C, B>,
    result: Result<Response<ResB>, TransportError>,
) -> Option<Output<ResB>>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
    C: Classify<Result<Response<ResB>, TransportError>>,
{
    let verdict = this.classifier.classify(&result);
    let status = result.as_ref().ok().map(Response::status);
    telemetry::record_result(this.attempt_span, status, &verdict);
    let at = now();
    let decision = this.call.end_attempt(verdict, at);
    settle(this, decision, Some(result), at)
}

/// Turns a decision into the output, or into the next state.
fn settle<S, C, B, ResB>(
    this: &mut ResponseFutureProj<'_, S, C, B>,
    decision: Decision,
    result: Option<Result<Response<ResB>, TransportError>>,
    at: Instant,
) -> Option<Output<ResB>>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>>,
{
    let attempts = this.call.attempts();
    match decision {
        Decision::Stop(reason) => {
            this.state.set(State::Done);
            let last = std::mem::replace(this.last, LastAttempt::Rejected);
            Some(outcome(reason, attempts, result, last))
        }
        Decision::Retry(delay) | Decision::Reject(delay) => {
            // A retried attempt's response is dropped here, unread: hyper closes its
            // connection rather than returning a half-read one to the pool.
            if let Some(result) = result {
                *this.last = match result {
                    Ok(_) => LastAttempt::Rejected,
                    Err(error) => LastAttempt::Error(error),
                };
            }
            this.timer.as_mut().reset(instant_after(at, delay));
            *this.timer_armed = false;
            let next = if matches!(decision, Decision::Retry(_)) {
                State::Backoff
            } else {
                State::Rejecting
            };
            this.state.set(next);
            None
        }
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
