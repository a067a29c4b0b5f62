//! The retry middleware for [`reqwest_middleware`]: the same retries as
//! [`RetryLayer`](crate::RetryLayer), for a reqwest client.
//!
//! One line adds it: `ClientBuilder::new(reqwest::Client::new()).with(RetryMiddleware::new(policy))`.
//! It follows the tower layer rule for rule: responses and errors are classified as
//! [`classify`](crate::classify) says; idempotent methods are retried, others only with
//! [`RetryMiddleware::retry_non_idempotent`] or a [`Retryable`] extension set with
//! `RequestBuilder::with_extension`, which wins both ways; exactly the requests that may
//! be retried carry `x-nresilience-retrying: 1`, on every attempt; a retrying call made
//! inside a retrying context is reported once; with the default `Automatic` budget each
//! host has its own bucket; when the attempts run out on a retryable status, the last
//! response is returned rather than an error.
//!
//! A request whose body is a stream (`reqwest::Request::try_clone` gives `None`) is sent once,
//! unmarked, rather than refused.
//!
//! # Errors
//!
//! A call that ends without a response to return fails with
//! `reqwest_middleware::Error::Middleware` wrapping a [`RetryError`] — why the call stopped,
//! the attempts made, the last attempt's error, and, for a budget refusal, the
//! [`CallRejected`](nresilience_core::CallRejected) hint. [`retry_error`] reads it back.
//!
//! # Example
//!
//! ```no_run
//! use nresilience_client::reqwest::{retry_error, RetryMiddleware};
//! use nresilience_core::{RetryPolicy, StopReason};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(RetryMiddleware::new(RetryPolicy::default()))
//!     .build();
//! match client.get("http://127.0.0.1:8080/health").send().await {
//!     Ok(response) => println!("{}", response.status()),
//!     Err(error) => match retry_error(&error) {
//!         Some(failed) if failed.reason() == StopReason::BudgetExhausted => {
//!             println!("retry refused; come back in {:?}", failed.rejection());
//!         }
//!         _ => return Err(error.into()),
//!     },
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use ::reqwest::{Request, Response, Url};
use http::Extensions;
use nresilience_core::call::{Attempt, Call, CallOptions, Step, Timer};
use nresilience_core::clock;
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::{RetryError, RetryPolicy, Verdict};
use pin_project_lite::pin_project;
use reqwest_middleware::{Middleware, Next};
use tracing::{Instrument, Span};

use crate::classify::HttpClassifier;
use crate::layer::Retryable;
use crate::request::{
    carries_marker, host_key, is_idempotent, stamp_call, stamp_deadline, CallFacts, MARKED, MARKER,
};
use crate::telemetry;

/// The error a failed call carries inside `reqwest_middleware::Error::Middleware`.
pub type Error = RetryError<reqwest_middleware::Error>;

/// The [`RetryError`] inside an error returned through [`RetryMiddleware`], if it is one.
///
/// Every error of a call the middleware ran is one; an error from a middleware in front of
/// it is not.
pub fn retry_error(error: &reqwest_middleware::Error) -> Option<&Error> {
    match error {
        reqwest_middleware::Error::Middleware(error) => error.downcast_ref(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// A [`reqwest_middleware::Middleware`] that retries requests under a [`RetryPolicy`].
///
/// With the default `Automatic` budget each host gets its own bucket, from the policy's
/// keyed buckets: clones of one policy share them.
#[derive(Clone)]
#[must_use]
pub struct RetryMiddleware {
    policy: RetryPolicy,
    retry_non_idempotent: bool,
    classifier: HttpClassifier,
}

impl RetryMiddleware {
    /// A middleware retrying under `policy`, classifying responses as
    /// [`HttpClassifier`] does.
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            retry_non_idempotent: false,
            classifier: HttpClassifier::new(),
        }
    }

    /// Classifies responses with `classifier`: [`HttpClassifier::new`] with a chain signal
    /// turned off, say. Errors are classified by what they are, whatever the classifier.
    pub fn classifier(mut self, classifier: HttpClassifier) -> Self {
        self.classifier = classifier;
        self
    }

    /// Retries POST, PATCH and other non-idempotent methods too; a [`Retryable`]
    /// extension on a request still wins. Defaults to `false`.
    pub fn retry_non_idempotent(mut self, retry: bool) -> Self {
        self.retry_non_idempotent = retry;
        self
    }

    /// The policy the middleware retries under.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

impl fmt::Debug for RetryMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryMiddleware")
            .field("policy", &self.policy)
            .field("retry_non_idempotent", &self.retry_non_idempotent)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let opted = match extensions.get::<Retryable>() {
            Some(Retryable(choice)) => *choice,
            None => self.retry_non_idempotent || is_idempotent(request.method()),
        };
        let marked = carries_marker(request.headers());
        // A streamed body cannot be sent again: its call is a single attempt.
        let replayable = request.body().is_none_or(|body| body.as_bytes().is_some());
        let target = authority(request.url());
        let key = host_key(target);
        let options = CallOptions::new()
            .may_retry(opted && replayable)
            .marked(marked)
            .target(target)
            .method(request.method().as_str())
            .key(&key);
        // Started outside the retrying scope: the call reads whether it is nested itself.
        let mut call = Call::start(&self.policy, clock::now(), options);
        stamp_call(request.headers_mut(), call_facts(&call));
        let mut template = None;
        if call.may_retry() {
            // Stamped on the first attempt too: by the time a retry goes out, the
            // amplification has already happened (N1). Never stamped twice.
            if !marked {
                request.headers_mut().insert(MARKER, MARKED);
            }
            template = request.try_clone();
            if template.is_none() {
                call.single_attempt();
                if !marked {
                    request.headers_mut().remove(MARKER);
                }
            }
        }
        let attempts = Attempts {
            call,
            classifier: self.classifier,
            first: Some(request),
            template,
            extensions,
            next,
        };
        let retrying = attempts.call.may_retry();
        let output = Scoped {
            inner: attempts.run(),
            retrying,
        }
        .await;
        output.map_err(|error| reqwest_middleware::Error::Middleware(anyhow::Error::new(error)))
    }
}

pin_project! {
    /// A call's attempts, run inside the in-process retrying context when the call may
    /// retry: a retrying call made while serving it is nested (N5). One wrapper for both
    /// cases, so the call's future is laid out (and moved) once.
    struct Scoped<F> {
        #[pin]
        inner: F,
        retrying: bool,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if *this.retrying {
            nesting::sync_scope(NestingSource::InProcess, || this.inner.poll(cx))
        } else {
            this.inner.poll(cx)
        }
    }
}

/// `host[:port]` of `url`, without user information; the port only when it is not the
/// scheme's default, which the URL parser has already dropped.
fn authority(url: &Url) -> &str {
    // User information has any `@` of its own percent-encoded: the last one ends it.
    let authority = url.authority();
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

// ===== impl Attempts =====

/// One call's attempts: the request of the first, and what a retry is cloned from.
struct Attempts<'a, 'e> {
    call: Call<reqwest_middleware::Error>,
    classifier: HttpClassifier,
    first: Option<Request>,
    template: Option<Request>,
    extensions: &'e mut Extensions,
    next: Next<'a>,
}

impl<'a> Attempts<'a, '_> {
    async fn run(mut self) -> Result<Response, Error> {
        if self.call.may_hedge() {
            return self.run_hedged().await;
        }
        let mut step = self.call.next(clock::now());
        loop {
            step = match step {
                Step::Run(attempt) => self.attempt(attempt).await,
                Step::Sleep(until) => {
                    // A retried attempt's response was dropped unread: its connection is
                    // closed rather than returned half-read to the pool.
                    tokio::time::sleep_until(until.into()).await;
                    self.call.next(clock::now())
                }
                Step::Hedge(_) | Step::InFlight => unreachable!("a call that may not hedge"),
                Step::Done(result) => return result,
            };
        }
    }

    /// The request of `attempt`: the first as given, a later one cloned from the template.
    fn request(&mut self, attempt: Attempt) -> (Span, Request) {
        // What changes from attempt to attempt is written into the template before it is
        // copied, so the copy is made at its final size.
        match (self.first.take(), self.template.as_mut()) {
            (Some(mut request), _) => (prepare(&self.call, attempt, &mut request), request),
            (None, Some(template)) => {
                let span = prepare(&self.call, attempt, template);
                match template.try_clone() {
                    Some(request) => (span, request),
                    None => unreachable!("a template is a request that clones"),
                }
            }
            (None, None) => unreachable!("a call without a template makes one attempt"),
        }
    }

    async fn attempt(&mut self, attempt: Attempt) -> Step<Response, reqwest_middleware::Error> {
        let (span, request) = self.request(attempt);
        let sent = self
            .next
            .clone()
            .run(request, self.extensions)
            .instrument(span.clone());
        let result = match attempt.cut_at() {
            Some(cut_at) => tokio::time::timeout_at(cut_at.into(), sent).await.ok(),
            None => Some(sent.await),
        };
        match result {
            Some(result) => self.answered(attempt, &span, result),
            None => {
                telemetry::record_timeout(&span);
                self.call.timed_out(attempt, clock::now())
            }
        }
    }

    fn answered(
        &mut self,
        attempt: Attempt,
        span: &Span,
        result: reqwest_middleware::Result<Response>,
    ) -> Step<Response, reqwest_middleware::Error> {
        let verdict = classify(&self.classifier, &result);
        let status = result.as_ref().ok().map(Response::status);
        telemetry::record_result(span, status, &verdict);
        self.call.attempted(attempt, result, verdict, clock::now())
    }

    /// The call's attempts when it may hedge: several may be in flight at once (HG1), each
    /// with extensions of its own; the answering attempt's are the caller's afterwards.
    async fn run_hedged(mut self) -> Result<Response, Error> {
        let extensions = self.extensions.clone();
        let mut flights: Vec<Flight<'a>> = Vec::new();
        let mut timer = std::pin::pin!(Timer::new());
        let mut answered = None;
        let mut step = self.call.next(clock::now());
        loop {
            match step {
                Step::Run(attempt) | Step::Hedge(attempt) => {
                    let (span, request) = self.request(attempt);
                    let next = self.next.clone();
                    let mut own = extensions.clone();
                    let future = Box::pin(
                        async move {
                            let result = next.run(request, &mut own).await;
                            (result, own)
                        }
                        .instrument(span.clone()),
                    );
                    flights.push(Flight {
                        attempt,
                        span,
                        future,
                    });
                }
                Step::InFlight => {}
                Step::Sleep(until) => {
                    tokio::time::sleep_until(until.into()).await;
                    step = self.call.next(clock::now());
                    continue;
                }
                Step::Done(result) => {
                    // The attempts still in flight lost: dropped with `flights`.
                    if let (Ok(_), Some(own)) = (&result, answered) {
                        *self.extensions = own;
                    }
                    return result;
                }
            }
            let cut = flights
                .iter()
                .enumerate()
                .filter_map(|(at, f)| f.attempt.cut_at().map(|cut| (at, cut)))
                .min_by_key(|(_, cut)| *cut);
            let hedge_at = self.call.hedge_at();
            let wake = [cut.map(|(_, cut)| cut), hedge_at]
                .into_iter()
                .flatten()
                .min();
            timer.as_mut().set(wake);
            let event = std::future::poll_fn(|cx| {
                let done = flights.iter_mut().enumerate().find_map(|(at, flight)| {
                    match flight.future.as_mut().poll(cx) {
                        Poll::Ready(output) => Some((at, output)),
                        Poll::Pending => None,
                    }
                });
                match done {
                    Some(done) => Poll::Ready(Some(done)),
                    None => timer.as_mut().poll(cx).map(|()| None),
                }
            })
            .await;
            let now = clock::now();
            step = match event {
                Some((at, (result, own))) => {
                    let flight = flights.swap_remove(at);
                    answered = Some(own);
                    self.answered(flight.attempt, &flight.span, result)
                }
                // The timer was set to the earliest of the cuts and the hedge: that one is due.
                None => match (cut, hedge_at) {
                    (Some((at, cut)), hedge_at) if hedge_at.is_none_or(|h| cut <= h) => {
                        let flight = flights.swap_remove(at);
                        telemetry::record_timeout(&flight.span);
                        self.call.timed_out(flight.attempt, now)
                    }
                    (_, Some(hedge_at)) => self.call.next(now.max(hedge_at)),
                    _ => Step::InFlight,
                },
            };
        }
    }
}

/// An attempt in flight beside others, and the extensions it was sent with.
struct Flight<'a> {
    attempt: Attempt,
    span: Span,
    future: Pin<
        Box<dyn Future<Output = (reqwest_middleware::Result<Response>, Extensions)> + Send + 'a>,
    >,
}

/// The verdict on an attempt: a response by its status, an error by what it is.
///
/// A request reqwest could not build and a redirect loop are `Permanent`: sending it again
/// cannot fix them. Every other error — connect, I/O, timeout, or an error from a middleware
/// behind this one — is transient, as in the tower layer.
fn classify(classifier: &HttpClassifier, result: &reqwest_middleware::Result<Response>) -> Verdict {
    match result {
        // The wall clock is read only for a retryable status, never on the success path.
        Ok(response) => {
            classifier.classify_response(response.status(), response.headers(), SystemTime::now)
        }
        Err(reqwest_middleware::Error::Reqwest(error))
            if error.is_builder() || error.is_redirect() =>
        {
            Verdict::Permanent
        }
        Err(_) => Verdict::TRANSIENT,
    }
}

// ===== telemetry =====

impl telemetry::Destination for Url {
    fn host(&self) -> Option<&str> {
        self.host_str()
    }

    fn port(&self) -> Option<u16> {
        self.port_or_known_default()
    }
}

/// The span of one attempt, after the OpenTelemetry HTTP conventions; `request` gets its
/// deadline (C2) and its trace context (N6).
fn prepare(
    call: &Call<reqwest_middleware::Error>,
    attempt: Attempt,
    request: &mut Request,
) -> Span {
    let span = telemetry::attempt_span(
        call.span(),
        request.method().as_str(),
        request.url(),
        &attempt,
    );
    stamp_deadline(request.headers_mut(), attempt.timeout());
    telemetry::inject_context(&span, request.headers_mut());
    span
}

/// What every attempt of the call says about the chain.
fn call_facts(call: &Call<reqwest_middleware::Error>) -> CallFacts {
    CallFacts {
        depth: call.depth(),
        potential_attempts: call.potential_attempts(),
        criticality: call.criticality(),
    }
}
