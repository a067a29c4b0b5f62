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
//! Every attempt goes on through the middleware behind this one starting from the request's
//! extensions as the caller passed them, as a hedge runs beside the attempt before it; the
//! extensions of the attempt whose response is returned are the caller's afterwards, and a
//! call that fails leaves them as they were.
//!
//! A request whose body is a stream (`reqwest::Request::try_clone` gives `None`) is sent once,
//! unmarked, rather than refused; if that attempt fails in a way a retry could fix, the call
//! stops with `StopReason::NotReplayable` (H7). A body of any size the caller can make again
//! — a file, a function — set with `RequestBuilder::with_extension(Reopen::..)`
//! ([`Reopen`]) is made again for every attempt instead, never held in
//! memory whole.
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
//! nested-retry marker and the chain rules (C1–C7), and overload control (O1, O2) when on.
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

mod future;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use ::reqwest::{Request, Response, Url};
use http::Extensions;
use nresilience_core::{RetryError, RetryPolicy};
use reqwest_middleware::{Middleware, Next};

use crate::classify::HttpClassifier;
use crate::reopen::Reopen;
use crate::request;
use crate::telemetry;
use future::Attempts;

/// The error a failed call carries inside `reqwest_middleware::Error::Middleware`.
pub type Error = RetryError<reqwest_middleware::Error>;

/// The [`RetryError`] inside an error returned through [`RetryMiddleware`], if it is one.
///
/// Every error of a call the middleware ran is one; an error from a middleware in front of
/// it is not.
#[must_use]
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
    hedge_non_idempotent: bool,
    classifier: HttpClassifier,
}

impl RetryMiddleware {
    /// A middleware retrying under `policy`, classifying responses as
    /// [`HttpClassifier`] does.
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            retry_non_idempotent: false,
            hedge_non_idempotent: false,
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

    /// Hedges POST, PATCH and other non-idempotent methods too, under a policy that hedges,
    /// when they may be retried; a [`Hedgeable`](crate::Hedgeable) extension on a request
    /// still wins. Defaults to `false`: a retried POST is sent again after a failure, never
    /// twice at once.
    pub fn hedge_non_idempotent(mut self, hedge: bool) -> Self {
        self.hedge_non_idempotent = hedge;
        self
    }

    /// The policy the middleware retries under.
    #[must_use]
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

impl fmt::Debug for RetryMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryMiddleware")
            .field("policy", &self.policy)
            .field("retry_non_idempotent", &self.retry_non_idempotent)
            .field("hedge_non_idempotent", &self.hedge_non_idempotent)
            .finish_non_exhaustive()
    }
}

/// The future a middleware's `handle` returns.
type Handled<'a> = Pin<Box<dyn Future<Output = reqwest_middleware::Result<Response>> + Send + 'a>>;

// `handle` as `#[async_trait]` declares it, written out: the call's future is boxed as it is,
// rather than inside an async block that would hold it beside the request and move both.
impl Middleware for RetryMiddleware {
    fn handle<'s, 'e, 'n, 'a>(
        &'s self,
        mut request: Request,
        extensions: &'e mut Extensions,
        next: Next<'n>,
    ) -> Handled<'a>
    where
        's: 'a,
        'e: 'a,
        'n: 'a,
        Self: 'a,
    {
        let opted = request::opted_in(
            extensions.get(),
            self.retry_non_idempotent,
            request.method(),
        );
        // A body the caller makes again is retried whatever it is (H7); a streamed one cannot
        // be sent again: its call is a single attempt, unmarked.
        let reopen = extensions.get::<Reopen>().cloned();
        let bytes = request.body().map(reqwest::Body::as_bytes);
        if reopen.is_some() && bytes.is_some_and(|bytes| bytes.is_none_or(|b| !b.is_empty())) {
            return Box::pin(std::future::ready(Err(body_beside_reopen())));
        }
        let replayable = reopen.is_some() || bytes.is_none_or(|bytes| bytes.is_some());
        let hedgeable = request::hedging_allowed(
            extensions.get(),
            self.hedge_non_idempotent,
            request.method(),
        );
        let mut call = request::start(
            &self.policy,
            (opted, hedgeable),
            request.method(),
            authority(request.url()),
            request.headers(),
        );
        if !replayable {
            call.single_attempt();
        }
        request::stamp(&call, request.headers_mut());
        Box::pin(Attempts::new(
            call,
            self.classifier,
            (request, reopen),
            extensions,
            next,
            future::attempt,
        ))
    }
}

/// The error of a request with a body of its own beside a [`Reopen`]: only one of them could
/// be sent.
fn body_beside_reopen() -> reqwest_middleware::Error {
    let error = anyhow::anyhow!(
        "a request with a Reopen extension has a body of its own: it must be empty, the bodies \
         Reopen makes are sent"
    );
    let error = RetryError::not_attempted(reqwest_middleware::Error::Middleware(error));
    reqwest_middleware::Error::Middleware(anyhow::Error::new(error))
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

// ===== telemetry =====

impl telemetry::Destination for Url {
    fn host(&self) -> Option<&str> {
        self.host_str()
    }

    fn port(&self) -> Option<u16> {
        self.port_or_known_default()
    }
}
