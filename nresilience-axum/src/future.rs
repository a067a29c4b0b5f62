//! The response future of [`NestedRetry`](crate::NestedRetry).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use nresilience_core::nesting::NestingSource;
use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;

pin_project! {
    /// Response future of [`NestedRetry`](crate::NestedRetry): the inner service's future, run
    /// inside the nesting context when the request was marked.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<F> {
        Marked { #[pin] future: TaskLocalFuture<NestingSource, F> },
        Unmarked { #[pin] future: F },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn marked(future: TaskLocalFuture<NestingSource, F>) -> Self {
        ResponseFuture {
            kind: Kind::Marked { future },
        }
    }

    pub(crate) fn unmarked(future: F) -> Self {
        ResponseFuture {
            kind: Kind::Unmarked { future },
        }
    }
}

impl<F: Future> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Marked { future } => future.poll(cx),
            KindProj::Unmarked { future } => future.poll(cx),
        }
    }
}
