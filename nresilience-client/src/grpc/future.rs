//! The response future of [`GrpcRetry`](super::GrpcRetry), and what its failures mean in gRPC.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use nresilience_core::Classify;
use pin_project_lite::pin_project;
use tonic::Status;
use tower::Service;

use super::metrics::{CallMetrics, CallTarget};
use super::status::into_status;
use super::tonic_body::TonicBody;
use bytes::Bytes;
use http_body::Body;

use crate::body::{BoxError, TransportError};

pin_project! {
    /// The response future of [`GrpcRetry`](super::GrpcRetry).
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, C, B>
    where
        S: Service<Request<tonic::body::Body>>,
    {
        #[pin]
        inner: crate::ResponseFuture<TonicBody<S>, C, B>,
        metrics: Arc<CallMetrics>,
        // Taken when the call's metrics are recorded, once.
        target: Option<CallTarget>,
    }
}

impl<S, C, B> ResponseFuture<S, C, B>
where
    S: Service<Request<tonic::body::Body>>,
{
    pub(super) fn new(
        inner: crate::ResponseFuture<TonicBody<S>, C, B>,
        metrics: Arc<CallMetrics>,
        target: CallTarget,
    ) -> Self {
        Self {
            inner,
            metrics,
            target: Some(target),
        }
    }
}

impl<S, C, B, ResB> Future for ResponseFuture<S, C, B>
where
    S: Service<Request<tonic::body::Body>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    C: Classify<Result<Response<ResB>, TransportError>>,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response<ResB>, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let output = ready!(this.inner.as_mut().poll(cx));
        if let Some(target) = this.target.take() {
            let call = this.inner.as_ref().get_ref().call();
            this.metrics
                .record(&target, call.attempts(), call.hedges(), call.waited());
        }
        Poll::Ready(output.map_err(into_status))
    }
}

impl<S, C, B> fmt::Debug for ResponseFuture<S, C, B>
where
    S: Service<Request<tonic::body::Body>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("inner", &self.inner)
            .finish()
    }
}
