//! The retry middleware for HTTP services: `RetryLayer` and the `Retry` service.

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use nresilience_core::{Classify, RetryError, RetryPolicy};
use tower::{Layer, Service};

use crate::body::{BoxError, RetryBody, TransportError};
use crate::classify::HttpClassifier;
use crate::future::ResponseFuture;
use crate::reopen::Reopen;
use crate::request;

/// The default cap on a request body buffered for replay: 64 KiB.
pub const DEFAULT_MAX_BUFFERED_BODY: usize = 64 * 1024;

/// A tower layer that retries HTTP requests under a [`RetryPolicy`].
///
/// Requests that may be retried are stamped with `x-nresilience-retrying: 1` on every
/// attempt, the first included; a retrying call started inside a retrying context (or with
/// a request that already carries the marker) is reported once as a `NestedRetry` span. With
/// the default `Automatic` budget each host gets its own bucket, from the policy's keyed
/// buckets: clones of one policy share them.
///
/// Under a policy that hedges, a request that may be retried is hedged (HG1) when its method
/// is idempotent or a [`Hedgeable`](crate::Hedgeable) extension says so: each hedge is
/// another call of the inner service beside the one in flight, made once the service is ready
/// for it, carrying the marker and the chain headers; the first acceptable answer is returned
/// and the others are dropped.
#[derive(Clone)]
#[must_use]
pub struct RetryLayer<C = HttpClassifier> {
    shared: Arc<Shared>,
    classifier: C,
}

/// The layer's settings.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) policy: RetryPolicy,
    retry_non_idempotent: bool,
    hedge_non_idempotent: bool,
    max_buffered_body: usize,
}

impl RetryLayer {
    /// A layer retrying under `policy`, classifying responses as [`HttpClassifier`] does.
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            shared: Arc::new(Shared {
                policy,
                retry_non_idempotent: false,
                hedge_non_idempotent: false,
                max_buffered_body: DEFAULT_MAX_BUFFERED_BODY,
            }),
            classifier: HttpClassifier::new(),
        }
    }
}

impl<C> RetryLayer<C> {
    /// Retries POST, PATCH and other non-idempotent methods too; a [`Retryable`](crate::Retryable)
    /// extension on a request still wins. Defaults to `false`.
    pub fn retry_non_idempotent(mut self, retry: bool) -> Self {
        Arc::make_mut(&mut self.shared).retry_non_idempotent = retry;
        self
    }

    /// Hedges POST, PATCH and other non-idempotent methods too, under a policy that hedges,
    /// when they may be retried; a [`Hedgeable`](crate::Hedgeable) extension on a request
    /// still wins. Defaults to `false`: a retried POST is sent again after a failure, never
    /// twice at once.
    pub fn hedge_non_idempotent(mut self, hedge: bool) -> Self {
        Arc::make_mut(&mut self.shared).hedge_non_idempotent = hedge;
        self
    }

    /// The largest request body buffered for replay; a larger body, or a stream still
    /// producing, is sent once and not stamped, and if that attempt fails in a way a retry
    /// could fix, the call stops with `StopReason::NotReplayable` (H7). A body of any size
    /// set as a [`Reopen`] extension is made again for every attempt instead. Defaults to
    /// 64 KiB.
    pub fn max_buffered_body(mut self, bytes: usize) -> Self {
        Arc::make_mut(&mut self.shared).max_buffered_body = bytes;
        self
    }

    /// Replaces the classifier of responses and errors.
    pub fn classifier<C2>(self, classifier: C2) -> RetryLayer<C2> {
        RetryLayer {
            shared: self.shared,
            classifier,
        }
    }

    /// The policy the layer retries under.
    pub fn policy(&self) -> &RetryPolicy {
        &self.shared.policy
    }
}

impl<S, C: Clone> Layer<S> for RetryLayer<C> {
    type Service = Retry<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry {
            inner,
            shared: Arc::clone(&self.shared),
            classifier: self.classifier.clone(),
        }
    }
}

impl<C> fmt::Debug for RetryLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("policy", &self.shared.policy)
            .field("retry_non_idempotent", &self.shared.retry_non_idempotent)
            .field("hedge_non_idempotent", &self.shared.hedge_non_idempotent)
            .field("max_buffered_body", &self.shared.max_buffered_body)
            .finish()
    }
}

/// The retrying service [`RetryLayer`] wraps around an HTTP service.
#[derive(Clone)]
pub struct Retry<S, C = HttpClassifier> {
    inner: S,
    shared: Arc<Shared>,
    classifier: C,
}

impl<S, C> Retry<S, C> {
    /// The policy the service retries under.
    pub fn policy(&self) -> &RetryPolicy {
        &self.shared.policy
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, by value.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The same retries in front of a borrowed service: a caller that holds the service
    /// (a `Client`) makes a call without cloning it, where a service whose reference is a
    /// service too (hyper-util's client) allows it.
    pub(crate) fn by_ref(&self) -> Retry<&S, C>
    where
        C: Clone,
    {
        Retry {
            inner: &self.inner,
            shared: Arc::clone(&self.shared),
            classifier: self.classifier.clone(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for Retry<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("inner", &self.inner)
            .field("policy", &self.shared.policy)
            .finish()
    }
}

impl<S, C, B, ResB> Service<Request<B>> for Retry<S, C>
where
    S: Service<Request<RetryBody>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    C: Classify<Result<Response<ResB>, TransportError>> + Clone,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ResB>;
    type Error = RetryError<TransportError>;
    type Future = ResponseFuture<S, C, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|error| RetryError::not_attempted(TransportError::new(error)))
    }

    #[inline]
    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The ready service makes the first attempt; the clone left behind serves the next
        // caller (readiness is used once).
        let clone = self.inner.clone();
        let service = mem::replace(&mut self.inner, clone);
        let shared = &self.shared;
        let policy = &shared.policy;

        let opted = request::opted_in(
            request.extensions().get(),
            shared.retry_non_idempotent,
            request.method(),
        );
        // A body the caller makes again is retried whatever its size (H7). One of unknown
        // length is read up to the cap before the first attempt; one that outgrows it drops
        // the call to a single attempt then.
        let reopen = request.extensions().get::<Reopen>().cloned();
        let may_fit = reopen.is_some()
            || request
                .body()
                .size_hint()
                .upper()
                .is_none_or(|upper| upper <= shared.max_buffered_body as u64);
        let authority = request.uri().authority().map_or("", |a| a.as_str());
        let hedgeable = request::hedging_allowed(
            request.extensions().get(),
            shared.hedge_non_idempotent,
            request.method(),
        );
        let mut call = request::start(
            policy,
            (opted, hedgeable),
            request.method(),
            authority,
            request.headers(),
        );
        if !may_fit {
            call.single_attempt();
        }
        let body = (shared.max_buffered_body, reopen);
        ResponseFuture::new(request, service, self.classifier.clone(), call, body)
    }
}
