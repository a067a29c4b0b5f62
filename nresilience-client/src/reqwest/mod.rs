//! The retry middleware for [`reqwest_middleware`]: the same retries as
//! [`RetryLayer`](crate::RetryLayer), for a reqwest client.
//!
//! One line adds it: `ClientBuilder::new(inner).with(RetryMiddleware::new(policy))`, where
//! `inner` is a reqwest client built with `.retry(reqwest::retry::never())`.
//! It follows the tower layer rule for rule: responses and errors are classified as
//! [`classify`](crate::classify) says; idempotent methods are retried, others only with
//! [`RetryMiddleware::retry_non_idempotent`] or a [`Retryable`](crate::Retryable) extension
//! set with `RequestBuilder::with_extension`, which wins both ways; exactly the requests that
//! may be retried carry `x-nresilience-retrying: 1`, on every attempt; a retrying call made
//! inside a retrying context is reported once; with the default `Automatic` budget each
//! host has its own bucket; when the attempts run out on a retryable status, the last
//! response is returned rather than an error.
//!
//! Every attempt goes on through the middleware behind this one with a copy of the request's
//! extensions, as a hedge runs beside the attempt before it; the extensions of the attempt
//! whose response is returned are the caller's afterwards.
//!
//! A request whose body is a stream (`reqwest::Request::try_clone` gives `None`) is sent once,
//! unmarked, rather than refused.
//!
//! # reqwest's own retries
//!
//! reqwest 0.13's `Client` retries on its own: by default the protocol-level refusals of a
//! request the server never processed (an HTTP/2 `REFUSED_STREAM`, say), and with a
//! `reqwest::retry` policy whatever it classifies, on its per-host `TpsBudget`. Those retries
//! run inside each of this middleware's attempts, out of its sight: they are not counted as
//! attempts, not charged to the budget, not marked, not bounded by the attempt's timeout
//! separately, and they make a nested retry inside one process. Build the inner client with
//! `reqwest::Client::builder().retry(reqwest::retry::never())`, so that each attempt is one
//! request on the wire. What this middleware adds over reqwest's own: backoff with a separate
//! throttled base and jitter, `Retry-After` served verbatim, the deadline and each attempt's
//! bound (with the measured ceiling), the retry budget per host with its floor, the
//! nested-retry marker and the chain rules (C1–C7), and overload control (O1, O2) when on.//!
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
//! // reqwest's own retries off: every attempt is one request (see above).
//! let inner = reqwest::Client::builder().retry(reqwest::retry::never()).build()?;
//! let client = reqwest_middleware::ClientBuilder::new(inner)
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
use nresilience_core::call::{Attempt, Call, Flights, Landed, Step};
use nresilience_core::{clock, nesting, RetryError, RetryPolicy, Verdict};
use pin_project_lite::pin_project;
use reqwest_middleware::{Middleware, Next};
use tracing::Span;

use crate::classify::HttpClassifier;
use crate::outbound;
use crate::request::{carries_marker, MARKER};
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

    /// Retries POST, PATCH and other non-idempotent methods too; a [`Retryable`](crate::Retryable)
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
        let opted = outbound::opted_in(
            extensions.get(),
            self.retry_non_idempotent,
            request.method(),
        );
        // A streamed body cannot be sent again: its call is a single attempt.
        let replayable = request.body().is_none_or(|body| body.as_bytes().is_some());
        let mut call = outbound::start(
            &self.policy,
            opted && replayable,
            request.method(),
            authority(request.url()),
            request.headers(),
        );
        let marked = carries_marker(request.headers());
        outbound::stamp(&call, request.headers_mut());
        let mut template = None;
        if call.may_retry() {
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
            next,
        };
        let retrying = attempts.call.may_retry();
        let output = Scoped {
            inner: attempts.run(extensions),
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
        nesting::retrying_scope(*this.retrying, || this.inner.poll(cx))
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

/// An attempt sent on through the rest of the chain, with the extensions it owns.
type Sent<'a> =
    Pin<Box<dyn Future<Output = (reqwest_middleware::Result<Response>, Extensions)> + Send + 'a>>;

/// One call's attempts: the request of the first, and what a retry is cloned from.
struct Attempts<'a> {
    call: Call<reqwest_middleware::Error>,
    classifier: HttpClassifier,
    first: Option<Request>,
    template: Option<Request>,
    next: Next<'a>,
}

impl<'a> Attempts<'a> {
    /// Runs the call's steps. Each attempt is sent with a copy of the caller's `extensions`,
    /// as several may be in flight at once (HG1); the answering attempt's are the caller's
    /// afterwards.
    async fn run(mut self, extensions: &mut Extensions) -> Result<Response, Error> {
        let mut flights = std::pin::pin!(Flights::<Sent<'a>, Span>::new());
        let mut answered = None;
        let mut step = self.call.next(clock::now());
        loop {
            match step {
                Step::Run(attempt) => {
                    let (span, sent) = self.send(attempt, extensions.clone());
                    flights.as_mut().run(attempt, span, sent);
                }
                Step::Hedge(attempt) => {
                    let (span, sent) = self.send(attempt, extensions.clone());
                    flights.as_mut().hedge(attempt, span, sent);
                }
                Step::InFlight => {}
                // A retried attempt's response was dropped unread: its connection is closed
                // rather than returned half-read to the pool.
                Step::Sleep(until) => flights.as_mut().sleep(until),
                Step::Done(result) => {
                    // The attempts still in flight lost: dropped with `flights`.
                    if let (Ok(_), Some(own)) = (&result, answered) {
                        *extensions = own;
                    }
                    return result;
                }
            }
            let call = &self.call;
            let landed =
                std::future::poll_fn(|cx| flights.as_mut().poll_landed(cx, call.hedge_at())).await;
            step = match landed {
                Landed::Answered {
                    attempt,
                    scope,
                    output: (result, own),
                } => {
                    answered = Some(own);
                    let verdict = classify(&self.classifier, &result);
                    let status = result.as_ref().ok().map(Response::status);
                    outbound::answered(&mut self.call, attempt, &scope, status, verdict, result)
                }
                Landed::Cut { attempt, scope } => outbound::cut(&mut self.call, attempt, &scope),
                Landed::HedgeDue(at) => self.call.next(at),
                Landed::Woke => self.call.next(clock::now()),
            };
        }
    }

    /// Sends `attempt` on with `extensions` of its own: the first request as given, a later
    /// one cloned from the template.
    fn send(&mut self, attempt: Attempt, mut extensions: Extensions) -> (Span, Sent<'a>) {
        // What changes from attempt to attempt is written into the template before it is
        // copied, so the copy is made at its final size.
        let (span, request) = match (self.first.take(), self.template.as_mut()) {
            (Some(mut request), _) => (prepare(&self.call, &attempt, &mut request), request),
            (None, Some(template)) => {
                let span = prepare(&self.call, &attempt, template);
                match template.try_clone() {
                    Some(request) => (span, request),
                    None => unreachable!("a template is a request that clones"),
                }
            }
            (None, None) => unreachable!("a call without a template makes one attempt"),
        };
        let next = self.next.clone();
        let sent = Box::pin(async move {
            let result = next.run(request, &mut extensions).await;
            (result, extensions)
        });
        (span, sent)
    }
}

/// The span of `attempt`, with its request made ready for it.
fn prepare(
    call: &Call<reqwest_middleware::Error>,
    attempt: &Attempt,
    request: &mut Request,
) -> Span {
    let span = outbound::attempt_span(call, attempt, request.method().as_str(), request.url());
    outbound::stamp_attempt(request.headers_mut(), attempt, &span);
    span
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
