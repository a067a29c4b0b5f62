//! The server side of nested-retry detection: a tower layer that reads the
//! `x-nresilience-retrying` marker into the [`nesting`] context of `nresilience-core`.
//!
//! # Example
//!
//! One line registers it; a handler then runs inside the context its caller's marker set.
//!
//! ```
//! use axum::{body::Body, http::Request, routing::get, Router};
//! use nresilience_axum::{nesting, NestedRetryLayer};
//! use tower::ServiceExt;
//!
//! async fn handler() -> &'static str {
//!     assert_eq!(nesting::current(), Some(nesting::NestingSource::Header));
//!     "called by a client that may retry"
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let app = Router::new()
//!     .route("/", get(handler))
//!     .layer(NestedRetryLayer::new());
//!
//! let request = Request::get("/")
//!     .header("x-nresilience-retrying", "1")
//!     .body(Body::empty())?;
//! let response = app.oneshot(request).await?;
//! assert_eq!(response.status(), 200);
//! # Ok(())
//! # }
//! ```
//!
//! # Why
//!
//! Retries multiply across hops: a frontend that retries three times onto a backend that
//! retries three times sends nine attempts to the database, and each hop sees only its own
//! three. `nresilience-client` stamps the marker on every request it may retry;
//! this layer, on the receiving hop, publishes it to the task-local context, so when the
//! handler makes a call that may retry, `nresilience-core` reports a `NestedRetry` there —
//! the middle hop of the chain sees the loop it is part of. Detection reports and never
//! changes behaviour.
//!
//! # Where to register it
//!
//! Outside anything that calls out. With axum, `Router::layer` wraps the routes added before
//! it: call it after the last route. The layer is generic over `http::Request<B>`, so the same
//! value serves `axum::Router::layer`, `tonic::transport::Server::builder().layer(..)` and a
//! plain hyper service (`NestedRetryLayer::new().layer(service)`). It adds no error of its own;
//! it touches a response only to add the chain's signal to a `5xx` (below) and answers by
//! itself only a request that is deeper than it allows.
//!
//! # What it reads
//!
//! A request is marked when any of its `x-nresilience-retrying` values is exactly `1`,
//! optional whitespace aside; a value is read as an HTTP list, so a proxy that folds
//! two marker lines into `1, 1` keeps the mark. The name matches in any case over HTTP/1 and
//! lower-case over HTTP/2 and gRPC metadata. Any other value, or one that is not visible ASCII,
//! is no marker: a `debug` event, never a rejected request.
//!
//! # The chain rules
//!
//! The layer also makes its hop behave as part of one system with the hops around it
//! ([`nresilience_core::chain`]):
//!
//! - It reads what the caller said — how long it will wait (`x-nresilience-deadline-ms`), how
//!   deep the request is, how many attempts could reach it and how much it matters
//!   (`x-nresilience-chain: depth=2, attempts=16, criticality=normal`) — and runs
//!   the handler with it: its retrying calls give up with the caller, report the worst case
//!   when nested, and may take the caller's criticality. A value that does not parse, or a
//!   header sent twice, is no value: never an error.
//! - A request deeper than [`NestedRetryLayer::max_depth`] (16) is answered `508 Loop
//!   Detected` with the overload signal, and the handler does not run.
//! - When the handler answers a `5xx`, the layer adds what the calls made while serving it
//!   learned: `x-nresilience-overloaded: 1` (and `Retry-After`) if one was refused by its
//!   budget or breaker, else `x-nresilience-retried: N` if one failed after retrying. The
//!   caller's nresilience client then does not retry the answer. A handler may instead answer
//!   with [`CallFailed`] through `?`.
//!
//! # A fleet bounded by its dependency
//!
//! [`FleetLayer`], registered beside [`NestedRetryLayer`], makes the service its callers'
//! coordinator (F2): it counts the first attempts and the retries reaching it and writes on
//! every answer the share of retries it sees, the share it accepts (10 % by default) and the
//! allowance it advises (`x-nresilience-fleet: retries=0.240, accepted=0.100,
//! allowance=0.708`). Each nresilience client scales its own retry budget to it, the floor
//! first (F3), so many small clients are held together where each one's floor alone would let
//! them add up. Off unless registered.
//!
//! [`AdmissionLayer`] makes the service spend its capacity on the work its callers still wait
//! for (F4): over its capacity it refuses retries before first attempts and sheddable
//! requests before critical ones, and at once a request whose caller waits less than the
//! typical handling time, each with the overload signal and without running the handler.
//! Off unless registered.
//!
//! # Trust boundary
//!
//! A public client can send the marker and the chain's headers too. On an edge service, use
//! [`NestedRetryLayer::ignore_inbound`]: they are ignored and removed from the request.
//!
//! # Spawned tasks and response bodies
//!
//! The context covers the inner service's `call` and its response future. Task-locals do not
//! cross `tokio::spawn`, and a streaming response body is polled after that future has
//! finished: a marked request therefore also carries a [`RetryMarker`] in its extensions, whose
//! [`scope`](RetryMarker::scope) runs a spawned task — one that feeds a streaming body, say — in
//! the same context; and a request whose caller said anything of the chain carries it as a
//! [`chain::Inbound`](nresilience_core::chain::Inbound) extension, for
//! [`chain::serving`](nresilience_core::chain::serving).
//!
//! # Cost
//!
//! A request with neither marker nor chain headers costs one pass over its header names and
//! a scope that learns how its calls end: no allocation, no box, no event. A marked one adds
//! the extension (one small map) and the nesting scope. axum's `Router::layer` boxes
//! every route again, whatever the layer; where that matters, wrap the whole router instead
//! (`BENCHMARKS.md` has the figures):
//!
//! ```no_run
//! use axum::{extract::Request, routing::get, Router, ServiceExt};
//! use nresilience_axum::NestedRetryLayer;
//! use tower::Layer;
//!
//! # async fn run() -> std::io::Result<()> {
//! let app = Router::new().route("/", get(|| async { "hello" }));
//! let app = NestedRetryLayer::new().layer(app);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, ServiceExt::<Request>::into_make_service(app)).await
//! # }
//! ```
//!
//! The ids in parentheses (B1, C2, O5 …) name the rules of the repository's
//! [docs/rules.md](https://github.com/nresilience/nresilience-rs/blob/main/docs/rules.md),
//! each given there in full; the text beside an id says the rule in brief.
#![forbid(unsafe_code)]

mod admission;
mod call_failed;
mod fleet;
pub mod future;
mod layer;
mod marker;

pub use admission::{Admission, AdmissionFuture, AdmissionLayer};
pub use call_failed::CallFailed;
pub use fleet::{Fleet, FleetFuture, FleetLayer};
pub use layer::{NestedRetry, NestedRetryLayer};
pub use marker::RetryMarker;
/// The nesting context this layer sets: re-exported from `nresilience-core`.
pub use nresilience_core::nesting;
/// The headers on the wire: their names, and the parse and format of every value.
pub use nresilience_wire as wire;
