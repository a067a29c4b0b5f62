//! Reading the `x-nresilience-retrying` marker and the typed extension that carries
//! it past `tokio::spawn`.

use std::future::Future;

use nresilience_core::chain::{self, Inbound};
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::scope::Scoped;

/// The request being served arrived with the nested-retry marker: its sender may retry it.
///
/// [`NestedRetry`](crate::NestedRetry) inserts it into the request extensions of a marked
/// request (and only of a marked one), next to setting the task-local
/// [`nesting`](crate::nesting) context. The task-local does not cross `tokio::spawn`; the
/// extension does, and [`scope`](Self::scope) carries the context into the spawned task:
///
/// ```
/// use axum::{extract::Extension, routing::get, Router};
/// use nresilience_axum::{nesting, NestedRetryLayer, RetryMarker};
///
/// async fn handler(marker: Option<Extension<RetryMarker>>) -> &'static str {
///     let work = async { nesting::current().map_or("none", |source| source.as_str()) };
///     // Lost in a bare spawn, carried when the marker is present.
///     match marker {
///         Some(Extension(marker)) => tokio::spawn(marker.scope(work)).await.unwrap(),
///         None => tokio::spawn(work).await.unwrap(),
///     }
/// }
///
/// let app: Router = Router::new()
///     .route("/", get(handler))
///     .layer(NestedRetryLayer::new());
/// ```
///
/// Code that holds no request can read [`nesting::current`](crate::nesting::current) and
/// [`chain::inbound`] before spawning and wrap the task in
/// [`nesting::scope`](crate::nesting::scope) and [`chain::serving`] instead. An unmarked
/// request that carried chain headers has the [`chain::Inbound`] extension alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RetryMarker {
    chain: Option<Inbound>,
}

impl RetryMarker {
    /// A marker, as the layer inserts it for a request without chain headers. For tests of
    /// handlers that run without the layer.
    #[must_use]
    pub const fn new() -> Self {
        Self { chain: None }
    }

    /// A marker for a request that said `chain` about the chain above it.
    #[must_use]
    pub const fn with_chain(chain: Option<Inbound>) -> Self {
        Self { chain }
    }

    /// What the request said about the chain above it, when it said anything.
    #[must_use]
    pub const fn chain(&self) -> Option<Inbound> {
        self.chain
    }

    /// Where the context came from: always [`NestingSource::Header`].
    #[must_use]
    pub const fn source(&self) -> NestingSource {
        NestingSource::Header
    }

    /// Runs `future` inside the nesting context this request carried, and with what it said
    /// about the chain, as the layer runs the request itself: wrap a spawned task in it.
    pub fn scope<F: Future>(&self, future: F) -> Scoped<Inbound, Scoped<NestingSource, F>> {
        let chain = self.chain.unwrap_or_default();
        chain::serving(chain, nesting::scope(self.source(), future))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n4_marker_extension_scopes_the_header_source() {
        let marker = RetryMarker::new();
        assert_eq!(marker.source(), NestingSource::Header);
        let inside = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(marker.scope(async { nesting::current() }));
        assert_eq!(inside, Some(NestingSource::Header));
    }
}
