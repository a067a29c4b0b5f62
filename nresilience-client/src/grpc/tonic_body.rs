//! The channel under the retry layer, fed its bodies as tonic's.

use std::task::{Context, Poll};

use http::Request;
use tower::Service;

use crate::body::RetryBody;

/// The wrapped channel, fed the retry layer's bodies as `tonic::body::Body`.
#[derive(Clone, Debug)]
pub(super) struct TonicBody<S>(pub(super) S);

impl<S> Service<Request<RetryBody>> for TonicBody<S>
where
    S: Service<Request<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RetryBody>) -> S::Future {
        self.0.call(request.map(tonic::body::Body::new))
    }
}
