//! The response future of [`GrpcRetry`](super::GrpcRetry), and what its failures mean in gRPC.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use nresilience_core::{Classify, LastAttempt, RetryError, StopReason};
use pin_project_lite::pin_project;
use tonic::{Code, Status};
use tower::Service;

use super::layer::TonicBody;
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
    }
}

impl<S, C, B> ResponseFuture<S, C, B>
where
    S: Service<Request<tonic::body::Body>>,
{
    pub(super) fn new(inner: crate::ResponseFuture<TonicBody<S>, C, B>) -> Self {
        Self { inner }
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
        self.project().inner.poll(cx).map_err(into_status)
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

/// The status a failed call reports, with the [`RetryError`] as its source.
///
/// A call stopped by the deadline, or whose last attempt timed out, is `DEADLINE_EXCEEDED`;
/// one the budget or this process's own limiter or breaker refused is `UNAVAILABLE`. Any
/// other failure is what tonic makes of the last attempt's error (a connection that could not
/// be made is `UNAVAILABLE`). A call that ended on a gRPC answer is not here: the caller gets
/// that answer (H4), and tonic reads its status.
pub(super) fn into_status(error: RetryError<TransportError>) -> Status {
    let code = match (error.reason(), error.last_attempt()) {
        (StopReason::DeadlineExceeded, _) | (_, LastAttempt::TimedOut) => Code::DeadlineExceeded,
        (StopReason::BudgetExhausted, _) | (_, LastAttempt::Refused) => Code::Unavailable,
        _ => return Status::from_error(Box::new(error)),
    };
    let mut status = Status::new(code, error.to_string());
    status.set_source(Arc::new(error));
    status
}

#[cfg(test)]
mod tests {
    use std::io;

    use nresilience_core::CallRejected;

    use super::*;

    fn failed(reason: StopReason, last: LastAttempt<TransportError>) -> RetryError<TransportError> {
        let rejected =
            (reason == StopReason::BudgetExhausted).then(|| CallRejected::budget_exhausted(None));
        RetryError::new(reason, 2, last, rejected)
    }

    fn refused() -> LastAttempt<TransportError> {
        LastAttempt::Error(TransportError::new(io::Error::from(
            io::ErrorKind::ConnectionRefused,
        )))
    }

    #[test]
    fn deadline_and_timeouts_are_deadline_exceeded() {
        let status = into_status(failed(StopReason::DeadlineExceeded, LastAttempt::Rejected));
        assert_eq!(status.code(), Code::DeadlineExceeded);
        let status = into_status(failed(StopReason::AttemptsExhausted, LastAttempt::TimedOut));
        assert_eq!(status.code(), Code::DeadlineExceeded);
    }

    #[test]
    fn b7_a_budget_refusal_is_unavailable_and_carries_the_retry_error() {
        let status = into_status(failed(StopReason::BudgetExhausted, refused()));
        assert_eq!(status.code(), Code::Unavailable);
        let source = std::error::Error::source(&status).unwrap();
        let error = source.downcast_ref::<RetryError<TransportError>>().unwrap();
        assert_eq!(error.reason(), StopReason::BudgetExhausted);
        assert_eq!(error.attempts(), 2);
    }

    #[test]
    fn b8_a_refusal_by_this_process_is_unavailable() {
        let status = into_status(failed(StopReason::AttemptsExhausted, LastAttempt::Refused));
        assert_eq!(status.code(), Code::Unavailable);
    }

    #[test]
    fn a_status_in_the_last_error_is_the_calls_status() {
        let last = LastAttempt::Error(TransportError::new(Status::unauthenticated("who?")));
        let status = into_status(failed(StopReason::Permanent, last));
        assert_eq!(status.code(), Code::Unauthenticated);
        assert_eq!(status.message(), "who?");
    }

    #[test]
    fn any_other_error_is_unknown_and_carries_the_retry_error() {
        let status = into_status(failed(StopReason::AttemptsExhausted, refused()));
        assert_eq!(status.code(), Code::Unknown);
        let source = std::error::Error::source(&status).unwrap();
        assert!(source.is::<RetryError<TransportError>>());
    }
}
