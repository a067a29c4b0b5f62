//! The response future of [`NestedRetry`](crate::NestedRetry).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use nresilience_core::chain::{
    self, Inbound, Learned, LearningFuture, OVERLOADED_HEADER, OVERLOADED_VALUE, RETRIED_HEADER,
};
use nresilience_core::nesting::NestingSource;
use nresilience_core::scope::Scoped;
use pin_project_lite::pin_project;

use crate::call_failed::whole_seconds;

pin_project! {
    /// Response future of [`NestedRetry`](crate::NestedRetry): the inner service's future, run
    /// inside the nesting context when the request was marked, and learning how the calls
    /// it makes end, so that a `5xx` answer carries the chain's signal; or the answer to a
    /// request the loop guard stopped.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F>
    where
        F: Future,
    {
        #[pin]
        learning: LearningFuture<Kind<F>>,
    }
}

impl<F: Future> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F>
    where
        F: Future,
    {
        Marked { #[pin] future: Scoped<NestingSource, F> },
        Unmarked { #[pin] future: F },
        Told { #[pin] future: Scoped<Inbound, F> },
        MarkedAndTold { #[pin] future: Scoped<Inbound, Scoped<NestingSource, F>> },
        // Boxed: rare, and an answer is larger than most futures that make one.
        Answered { output: Option<Box<F::Output>> },
    }
}

impl<F: Future> ResponseFuture<F> {
    pub(crate) fn marked(future: Scoped<NestingSource, F>) -> Self {
        ResponseFuture {
            learning: chain::learning(Kind::Marked { future }),
        }
    }

    pub(crate) fn unmarked(future: F) -> Self {
        ResponseFuture {
            learning: chain::learning(Kind::Unmarked { future }),
        }
    }

    /// The answer to a request deeper than the layer allows: `508 Loop Detected` with the
    /// overload signal, so no hop above retries it.
    pub(crate) fn loop_detected<B, E>() -> Self
    where
        F: Future<Output = Result<Response<B>, E>>,
        B: Default,
    {
        let mut response = Response::new(B::default());
        *response.status_mut() = StatusCode::LOOP_DETECTED;
        response.headers_mut().insert(
            OVERLOADED_HEADER,
            HeaderValue::from_static(OVERLOADED_VALUE),
        );
        ResponseFuture {
            learning: chain::learning(Kind::Answered {
                output: Some(Box::new(Ok(response))),
            }),
        }
    }

    pub(crate) fn told(future: Scoped<Inbound, F>) -> Self {
        ResponseFuture {
            learning: chain::learning(Kind::Told { future }),
        }
    }

    pub(crate) fn marked_and_told(future: Scoped<Inbound, Scoped<NestingSource, F>>) -> Self {
        ResponseFuture {
            learning: chain::learning(Kind::MarkedAndTold { future }),
        }
    }
}

impl<F: Future> Future for Kind<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            KindProj::Marked { future } => future.poll(cx),
            KindProj::Unmarked { future } => future.poll(cx),
            KindProj::Told { future } => future.poll(cx),
            KindProj::MarkedAndTold { future } => future.poll(cx),
            KindProj::Answered { output } => match output.take() {
                Some(output) => Poll::Ready(*output),
                None => panic!("ResponseFuture polled after completion"),
            },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut learning = self.project().learning;
        let mut output = std::task::ready!(learning.as_mut().poll(cx));
        if let Ok(response) = &mut output {
            if response.status().is_server_error() {
                stamp(response, learning.value());
            }
        }
        Poll::Ready(output)
    }
}

/// Puts on a `5xx` answer the signal of how the calls made while serving it failed, unless
/// the handler set one itself: the overload signal (with `Retry-After` from the refusal's
/// hint) when one was refused for overload, else the retried signal.
fn stamp<B>(response: &mut Response<B>, learned: &Learned) {
    let headers = response.headers_mut();
    if headers.contains_key(OVERLOADED_HEADER) || headers.contains_key(RETRIED_HEADER) {
        return;
    }
    if learned.overloaded() {
        headers.insert(
            OVERLOADED_HEADER,
            HeaderValue::from_static(OVERLOADED_VALUE),
        );
        if let Some(retry_after) = learned.retry_after() {
            headers
                .entry(RETRY_AFTER)
                .or_insert_with(|| whole_seconds(retry_after));
        }
    } else if let Some(attempts) = learned.retried() {
        headers.insert(RETRIED_HEADER, HeaderValue::from(attempts));
    }
}
