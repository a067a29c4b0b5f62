//! The response future of [`NestedRetry`](crate::NestedRetry).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Response, StatusCode};
use nresilience_core::chain::{self, Inbound, Learned, Signal};
use nresilience_core::nesting::{self, NestingSource};
use nresilience_wire as wire;
use pin_project_lite::pin_project;

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
        kind: Kind<F>,
        learned: Learned,
        // What the request carried, set around each poll; `None` on most requests.
        nesting: Option<NestingSource>,
        inbound: Option<Inbound>,
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
        Serving { #[pin] future: F },
        // Boxed: rare, and an answer is larger than most futures that make one.
        Answered { output: Option<Box<F::Output>> },
    }
}

impl<F: Future> ResponseFuture<F> {
    /// The inner service's future for a request that carried neither the marker nor the
    /// caller's word.
    pub(crate) fn unmarked(future: F) -> Self {
        Self::carrying(future, None, None)
    }

    /// The inner service's future, run inside `nesting` and `inbound` when they are `Some`.
    pub(crate) fn carrying(
        future: F,
        nesting: Option<NestingSource>,
        inbound: Option<Inbound>,
    ) -> Self {
        Self {
            kind: Kind::Serving { future },
            learned: Learned::default(),
            nesting,
            inbound,
        }
    }

    /// The answer to a request deeper than the layer allows: `508 Loop Detected` with the
    /// overload signal, so no hop above retries it.
    #[cold]
    #[inline(never)]
    pub(crate) fn loop_detected<B, E>() -> Self
    where
        F: Future<Output = Result<Response<B>, E>>,
        B: Default,
    {
        let mut response = Response::new(B::default());
        *response.status_mut() = StatusCode::LOOP_DETECTED;
        wire::write_signal(response.headers_mut(), Signal::Overloaded, None);
        Self {
            kind: Kind::Answered {
                output: Some(Box::new(Ok(response))),
            },
            learned: Learned::default(),
            nesting: None,
            inbound: None,
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (nesting, inbound) = (*this.nesting, *this.inbound);
        let kind = this.kind;
        let mut poll = chain::learning_sync(this.learned, || match kind.project() {
            KindProj::Serving { future } => match (nesting, inbound) {
                (None, None) => future.poll(cx),
                (Some(source), None) => nesting::sync_scope(source, || future.poll(cx)),
                (None, Some(inbound)) => chain::serving_sync(inbound, || future.poll(cx)),
                (Some(source), Some(inbound)) => {
                    chain::serving_sync(inbound, || nesting::sync_scope(source, || future.poll(cx)))
                }
            },
            KindProj::Answered { output } => match output.take() {
                Some(output) => Poll::Ready(*output),
                None => panic!("ResponseFuture polled after completion"),
            },
        });
        // Inspected where it lies: the answer is not moved on its way out.
        if let Poll::Ready(Ok(response)) = &mut poll {
            if response.status().is_server_error() {
                stamp(response, this.learned);
            }
        }
        poll
    }
}

/// Puts on a `5xx` answer the signal of how the calls made while serving it failed, unless
/// the handler set one itself: the overload signal (with `Retry-After` from the refusal's
/// hint) when one was refused for overload, else the retried signal.
fn stamp<B>(response: &mut Response<B>, learned: &Learned) {
    let headers = response.headers_mut();
    if headers.contains_key(wire::OVERLOADED) || headers.contains_key(wire::RETRIED) {
        return;
    }
    if learned.overloaded() {
        wire::write_signal(headers, Signal::Overloaded, learned.retry_after());
    } else if let Some(attempts) = learned.retried() {
        wire::write_signal(headers, Signal::Retried { attempts }, None);
    }
}
