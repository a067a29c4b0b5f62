//! The gRPC retry middleware: `GrpcRetryLayer` and the `GrpcRetry` service.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use nresilience_core::{Classify, RetryPolicy};
use tower::{Layer, Service};

use super::future::ResponseFuture;
use super::metrics::CallMetrics;
use super::status::into_status;
use super::tonic_body::TonicBody;
use super::GrpcClassifier;
use crate::body::{BoxError, RetryBody, TransportError};
use crate::layer::{Retry, RetryLayer};

/// A tower layer that retries gRPC calls under a [`RetryPolicy`], in front of a tonic
/// `Channel` or any service of `http::Request<tonic::body::Body>`.
///
/// It is a [`RetryLayer`] that retries and, under a policy that hedges, hedges POSTs (every
/// gRPC call is one: a policy with a hedge is the channel's hedging policy, gRFC A6), classifies with
/// [`GrpcClassifier`], hands the inner service `tonic::body::Body` requests, and fails with
/// a [`tonic::Status`]. A call whose request messages are all ready when it is made is
/// buffered (up to [`max_buffered_body`](Self::max_buffered_body)), may be retried, and
/// carries `x-nresilience-retrying: 1` on every attempt; a call still streaming is sent once.
/// Every call ends by recording gRPC's own retry metrics (gRFC A96, [`metrics`](super::metrics))
/// beside nresilience's. See the [module docs](super).
#[derive(Clone, Debug)]
#[must_use]
pub struct GrpcRetryLayer<C = GrpcClassifier> {
    inner: RetryLayer<C>,
    metrics: Arc<CallMetrics>,
}

impl GrpcRetryLayer {
    /// A layer retrying gRPC calls under `policy`, classifying them with [`GrpcClassifier`].
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            inner: RetryLayer::new(policy)
                .retry_non_idempotent(true)
                .hedge_non_idempotent(true)
                .classifier(GrpcClassifier::new()),
            metrics: Arc::new(CallMetrics::new()),
        }
    }
}

impl<C> GrpcRetryLayer<C> {
    /// The largest encoded request buffered for replay; a larger one is sent once and not
    /// stamped. Defaults to 64 KiB.
    pub fn max_buffered_body(mut self, bytes: usize) -> Self {
        self.inner = self.inner.max_buffered_body(bytes);
        self
    }

    /// The target gRPC's own metrics attribute calls to (`grpc.target`, gRFC A66): the URI
    /// the channel was made for, `dns:///inventory:50051`. A layer in front of a tonic
    /// `Channel` sees only each request's path, so without it calls are attributed to the
    /// request's `scheme://authority` when it has one and to `other` when not.
    pub fn target(mut self, target: &str) -> Self {
        self.metrics = Arc::new(CallMetrics::clone(&self.metrics).with_target(target));
        self
    }

    /// Replaces the classifier of responses and errors; it sees the response before
    /// tonic decodes it, as [`GrpcClassifier`] does.
    pub fn classifier<C2>(self, classifier: C2) -> GrpcRetryLayer<C2> {
        GrpcRetryLayer {
            inner: self.inner.classifier(classifier),
            metrics: self.metrics,
        }
    }

    /// The policy the layer retries under.
    pub fn policy(&self) -> &RetryPolicy {
        self.inner.policy()
    }
}

impl<S, C: Clone> Layer<S> for GrpcRetryLayer<C> {
    type Service = GrpcRetry<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcRetry {
            inner: self.inner.layer(TonicBody(inner)),
            metrics: Arc::clone(&self.metrics),
        }
    }
}

/// The retrying service [`GrpcRetryLayer`] wraps around a gRPC channel.
#[derive(Clone)]
pub struct GrpcRetry<S, C = GrpcClassifier> {
    inner: Retry<TonicBody<S>, C>,
    metrics: Arc<CallMetrics>,
}

impl<S, C> GrpcRetry<S, C> {
    /// The policy the service retries under.
    pub fn policy(&self) -> &RetryPolicy {
        self.inner.policy()
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner.get_ref().0
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner.get_mut().0
    }

    /// The wrapped service, by value.
    pub fn into_inner(self) -> S {
        self.inner.into_inner().0
    }
}

impl<S: fmt::Debug, C> fmt::Debug for GrpcRetry<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetry")
            .field("inner", self.get_ref())
            .field("policy", self.policy())
            .finish()
    }
}

impl<S, C, B, ResB> Service<Request<B>> for GrpcRetry<S, C>
where
    S: Service<Request<tonic::body::Body>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    C: Classify<Result<Response<ResB>, TransportError>> + Clone,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ResB>;
    type Error = tonic::Status;
    type Future = ResponseFuture<S, C, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<Request<RetryBody>>::poll_ready(&mut self.inner, cx).map_err(into_status)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The retry layer buffers the messages that are ready now; a call still streaming
        // is sent once, unstamped (N1).
        let target = self.metrics.target_of(request.uri());
        let inner = self.inner.call(request);
        ResponseFuture::new(inner, Arc::clone(&self.metrics), target)
    }
}
