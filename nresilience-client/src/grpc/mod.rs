//! gRPC calls through tonic, retried under a policy and stamped with the nested-retry marker
//! (feature `grpc`).
//!
//! One line, `ServiceBuilder::new().layer(grpc::layer(policy)).service(channel)`, puts the
//! retry layer in front of a tonic `Channel`; the generated client (or
//! `tonic::client::Grpc`) is then built on the wrapped channel as usual (see the
//! [example](#example)).
//!
//! Every call records gRPC's own retry metrics as gRFC A96 names them ([`metrics`]) beside
//! nresilience's: `grpc.client.call.retries`, `grpc.client.call.hedges` and
//! `grpc.client.call.retry_delay`.
//!
//! # What is retried
//!
//! Every gRPC call is a POST, so the layer retries POSTs (the [`RetryLayer`](crate::RetryLayer)
//! opt-in); a [`Retryable`](crate::Retryable) extension on the `tonic::Request` still wins
//! both ways. A call is classified from the response headers, before tonic decodes it:
//!
//! | response | verdict | retried? |
//! |---|---|---|
//! | `grpc-status: 14` `UNAVAILABLE`, `4` `DEADLINE_EXCEEDED` | `Transient { retry_after }` | yes, on the transient curve |
//! | `grpc-status: 8` `RESOURCE_EXHAUSTED` | `Throttled { self_imposed: false, retry_after }` | yes, on the throttled curve, charged to the budget |
//! | `grpc-status: 0` `OK` | `Success` | no |
//! | any other `grpc-status`, or one that does not parse | `Permanent` | no |
//! | `200` without `grpc-status` | `Success`: its status comes in the trailers | no |
//! | `502`, `503`, `504` without `grpc-status` | `Transient` (the gRPC spec: `UNAVAILABLE`) | yes |
//! | `429` without `grpc-status` | `Throttled`, as over plain HTTP (the gRPC spec: `UNAVAILABLE`) | yes |
//! | any other HTTP status without `grpc-status` | `Permanent` | no |
//! | `Err(_)` whose connection was refused: nothing listened | `Unreachable` | yes: spread over the time left (O7), and a retry refused gets its token back (B13) |
//! | any other `Err(_)`: the connection failed, the stream was reset | `Transient` | yes |
//! | a retryable code with `x-nresilience-overloaded: 1` | `Overloaded { retry_after }` | no: the hop refused its own call for overload (C1) |
//! | a code that would be retried, with `x-nresilience-retried: N` | `RetriedBelow` | no: the hop retried already (C6) |
//!
//! The chain's signals count only on a code a client would retry, and each can be turned
//! off per client ([`GrpcClassifier::overload_signal`], [`GrpcClassifier::retried_signal`],
//! given to [`GrpcRetryLayer::classifier`]).
//!
//! On a retryable code, the server's pushback is served verbatim (K13, K15), read in this
//! order: a stop first, then the most precise:
//!
//! 1. `grpc-retry-pushback-ms` negative: "do not retry", and the attempt is `Permanent`,
//!    whatever else the answer says;
//! 2. a `google.rpc.RetryInfo` in `grpc-status-details-bin` (Google Cloud and Gemini answer
//!    `RESOURCE_EXHAUSTED` with one; `tonic-types` writes it with `StatusExt`): its
//!    `retry_delay`, to the nanosecond;
//! 3. `grpc-retry-pushback-ms` non-negative: that many milliseconds;
//! 4. otherwise the backoff curve.
//!
//! A value that does not parse (not base64, not a well-formed `google.rpc.Status`, a negative or
//! out-of-range `Duration`, a pushback that is not an integer) is no value: the next in the list
//! applies. When the call stops on a gRPC answer, the caller gets that answer and tonic turns it
//! into its `Status`.
//!
//! # Why only the start of a stream
//!
//! A status known only from the trailers arrives after the response headers, when the
//! response already belongs to the caller: like gRPC's own retries, the layer decides before
//! the call is committed, so only trailers-only failures are retried. For the same reason
//! only a request that is complete when the call is made is replayed: unary and
//! server-streaming calls, and client streams whose messages are all ready. A stream that is
//! still producing (a bidirectional chat, say) is sent once, unstamped, rather than held back
//! until it ends; so is a request larger than 64 KiB encoded.
//!
//! # Failures
//!
//! The service fails with a [`tonic::Status`] whose source is the
//! [`RetryError`](nresilience_core::RetryError): `DEADLINE_EXCEEDED` when the deadline or the
//! attempt timeout stopped the call, `UNAVAILABLE` when the budget refused a retry, otherwise
//! tonic's reading of the last error (a connection that could not be made is `UNAVAILABLE`).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//!
//! use http::{HeaderMap, HeaderValue, StatusCode};
//! use nresilience_client::grpc::{self, classify_grpc};
//! use nresilience_core::{RetryPolicy, Verdict};
//! use tonic::transport::Endpoint;
//! use tower::ServiceBuilder;
//!
//! # fn is_grpc_service<T: tonic::client::GrpcService<tonic::body::Body>>(_: &T) {}
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() {
//!     let channel = Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
//!     let channel = ServiceBuilder::new()
//!         .layer(grpc::layer(RetryPolicy::default()))
//!         .service(channel);
//! #   is_grpc_service(&channel);
//!     // What a generated client is built on, as `EchoClient::new(channel)` is.
//!     let _client = tonic::client::Grpc::new(channel);
//!
//!     // A trailers-only RESOURCE_EXHAUSTED with pushback: retried after exactly 1.5 s.
//!     let mut headers = HeaderMap::new();
//!     headers.insert("grpc-status", HeaderValue::from_static("8"));
//!     headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("1500"));
//!     let pushed_back = Verdict::Throttled {
//!         self_imposed: false,
//!         retry_after: Some(Duration::from_millis(1500)),
//!     };
//!     assert_eq!(classify_grpc(StatusCode::OK, &headers), pushed_back);
//! }
//! ```

mod classify;
mod future;
mod layer;
pub mod metrics;
mod status;
mod tonic_body;

use nresilience_core::RetryPolicy;

pub use classify::{classify_grpc, GrpcClassifier};
pub use future::ResponseFuture;
pub use layer::{GrpcRetry, GrpcRetryLayer};

/// The layer that retries gRPC calls under `policy`: [`GrpcRetryLayer::new`].
///
/// `ServiceBuilder::new().layer(nresilience_client::grpc::layer(policy)).service(channel)`
/// wraps a tonic `Channel` for a generated client.
pub fn layer(policy: RetryPolicy) -> GrpcRetryLayer {
    GrpcRetryLayer::new(policy)
}
