//! [`NestedRetryLayer`] and the service it applies, [`NestedRetry`].

use std::task::{Context, Poll};

use http::{HeaderMap, Request, Response};
use nresilience_core::chain::{self, Inbound};
use nresilience_core::nesting::{self, NestingSource};
use tower::{Layer, Service};

use nresilience_wire::{self as wire, RequestHeaders};

use crate::future::ResponseFuture;
use crate::marker::RetryMarker;

/// Reads the nested-retry marker of each request into the [`nesting`](crate::nesting) context.
///
/// Applies [`NestedRetry`]. See the [crate docs](crate) for where to register it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct NestedRetryLayer {
    ignore_inbound: bool,
    max_depth: u32,
}

/// How deep a request may be before the layer takes it for a loop.
const DEFAULT_MAX_DEPTH: u32 = 16;

impl Default for NestedRetryLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl NestedRetryLayer {
    /// A layer that trusts the inbound marker: for services called by your own services.
    pub const fn new() -> Self {
        Self {
            ignore_inbound: false,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// The deepest a request may say it is (the `depth` of `x-nresilience-chain`) before this
    /// hop takes it for a loop: a deeper one is answered `508 Loop Detected` with the overload
    /// signal, so that no hop above retries it, and the handler does not run. A service
    /// configured to call itself stops there instead of calling itself until its file
    /// descriptors run out.
    /// Defaults to 16.
    pub const fn max_depth(mut self, max_depth: u32) -> Self {
        self.max_depth = max_depth;
        self
    }

    /// Ignores the inbound marker and removes it from the request, for an edge service that
    /// faces untrusted clients: a public caller cannot fake the nesting reports of this hop, nor
    /// pass the marker on through it.
    ///
    /// Only the header is distrusted; the in-process context of a call that may retry is still
    /// set and reported by `nresilience-core`. Defaults to reading the marker.
    pub const fn ignore_inbound(mut self) -> Self {
        self.ignore_inbound = true;
        self
    }
}

impl<S> Layer<S> for NestedRetryLayer {
    type Service = NestedRetry<S>;

    fn layer(&self, inner: S) -> Self::Service {
        NestedRetry {
            inner,
            ignore_inbound: self.ignore_inbound,
            max_depth: self.max_depth,
        }
    }
}

// ===== impl NestedRetry =====

/// Runs a request that arrived with the `x-nresilience-retrying: 1` marker inside the
/// [`NestingSource::Header`] context, and puts a [`RetryMarker`] in its extensions.
///
/// The context covers the inner service's synchronous `call` and its whole response future.
/// An unmarked request without chain headers passes through untouched. Errors are the inner
/// service's, unchanged; so are responses, but for two things the chain rules ask of the
/// layer: a `5xx` answer gets the signal of how the calls made while serving it failed,
/// unless the handler set one (C7), and a request deeper than
/// [`max_depth`](NestedRetryLayer::max_depth) is answered by the layer itself, with an
/// empty `508` (C5).
///
/// That empty answer is why the response body must be [`Default`]: axum's `Body`, and
/// `http-body-util`'s `Full`, `Empty` and `BoxBody` are. A service that answers with a body
/// that is not — hyper's `Incoming`, relayed from a proxied upstream — maps it into a
/// `BoxBody` under this layer (`MapResponseBodyLayer::new(BodyExt::boxed)`).
#[derive(Clone, Debug)]
pub struct NestedRetry<S> {
    inner: S,
    ignore_inbound: bool,
    max_depth: u32,
}

impl<S> NestedRetry<S> {
    /// Wraps `inner`, trusting the inbound marker (as [`NestedRetryLayer::new`]).
    pub const fn new(inner: S) -> Self {
        Self {
            inner,
            ignore_inbound: false,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// A layer that wraps services in `NestedRetry`.
    pub const fn layer() -> NestedRetryLayer {
        NestedRetryLayer::new()
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes `self`, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, ResB> Service<Request<B>> for NestedRetry<S>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    ResB: Default,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    // Out of line: inlined into the services around it, it made them copy the request and
    // the future more than the call costs.
    #[inline(never)]
    fn call(&mut self, request: Request<B>) -> Self::Future {
        // Most requests carry none of the chain's headers: one pass over the names, no
        // lookup by name, and nothing else to do.
        if !wire::carries_chain_headers(request.headers()) {
            return ResponseFuture::unmarked(call_inner(&mut self.inner, request));
        }
        if self.ignore_inbound {
            let future = call_carrying(&mut self.inner, request, None, None, true);
            return ResponseFuture::unmarked(future);
        }
        let Some((nesting, inbound)) = self.read_chain(request.headers()) else {
            return ResponseFuture::loop_detected();
        };
        let future = call_carrying(&mut self.inner, request, nesting, inbound, false);
        ResponseFuture::carrying(future, nesting, inbound)
    }
}

/// The inner service's `call`, kept out of line: inlined, its future is built on the stack
/// and copied into the response future instead of in place.
#[inline(never)]
fn call_inner<S: Service<R>, R>(inner: &mut S, request: R) -> S::Future {
    inner.call(request)
}

/// The inner service's `call` for a request with a header of the chain's prefix: with what
/// it carried in its extensions and around the call, or, at an edge (`strip`), without any
/// of it.
///
/// The request is changed here, where it is owned, rather than by the caller, which only
/// reads it: measured cheaper.
#[inline(never)]
fn call_carrying<S, B>(
    inner: &mut S,
    mut request: Request<B>,
    nesting: Option<NestingSource>,
    inbound: Option<Inbound>,
    strip: bool,
) -> S::Future
where
    S: Service<Request<B>>,
{
    if strip {
        if request.headers_mut().remove(wire::MARKER).is_some() {
            tracing::debug!("removed inbound nested-retry marker: this hop ignores it");
        }
        wire::remove_caller_headers(request.headers_mut());
    }
    if nesting.is_some() {
        request
            .extensions_mut()
            .insert(RetryMarker::with_chain(inbound));
    }
    if let Some(inbound) = inbound {
        // Task-locals do not cross `tokio::spawn`; the extension does.
        request.extensions_mut().insert(inbound);
    }
    match (nesting, inbound) {
        (None, None) => inner.call(request),
        (Some(source), None) => nesting::sync_scope(source, || inner.call(request)),
        (None, Some(inbound)) => chain::serving_sync(inbound, || inner.call(request)),
        (Some(source), Some(inbound)) => chain::serving_sync(inbound, || {
            nesting::sync_scope(source, || inner.call(request))
        }),
    }
}

impl<S> NestedRetry<S> {
    /// What a request with a header of the chain's prefix carried: the nesting context when
    /// it was marked, and its caller's word. `None` when the request is deeper than the layer
    /// allows.
    #[inline]
    fn read_chain(&self, headers: &HeaderMap) -> Option<(Option<NestingSource>, Option<Inbound>)> {
        let read = RequestHeaders::read(headers);
        let inbound = read.inbound();
        let marked = read.marked(headers);
        if let Some(depth) = inbound
            .map(|inbound| inbound.depth)
            .filter(|&d| d > self.max_depth)
        {
            tracing::warn!(
                depth,
                max_depth = self.max_depth,
                "nresilience.loop_detected"
            );
            return None;
        }
        Some((marked.then_some(NestingSource::Header), inbound))
    }
}
