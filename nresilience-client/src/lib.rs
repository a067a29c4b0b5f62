//! The outbound side of nresilience: a tower layer that retries HTTP requests under a
//! [`RetryPolicy`](nresilience_core::RetryPolicy), stamps the nested-retry marker, and
//! reports nested retries; and a ready [`Client`] over hyper-util.
//!
//! # What is retried
//!
//! Responses and errors are classified as the table in [`classify`] says. Idempotent methods (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) are retried; others only
//! with [`RetryLayer::retry_non_idempotent`] or a [`Retryable`] extension, which wins both
//! ways. A body whose frames are all ready at once is buffered for replay up to 64 KiB; a
//! body of any size the caller can make again (a file, a function), set as a [`Reopen`]
//! extension, is made again for every attempt; a larger body, or a stream still producing,
//! is sent once, and its call stops with `StopReason::NotReplayable` where it would have
//! retried (H7). Exactly the requests that may be retried carry `x-nresilience-retrying: 1`, on
//! every attempt. When the attempts run out on a retryable status, the last response is
//! returned rather than an error.
//!
//! Every response returned carries an [`Attempts`] extension: the attempts made, the one that
//! answered, the hedges and the time waited between attempts, and whether the call stopped on
//! an answer it did not accept (H8).
//!
//! The ids in parentheses (B1, C2, O5 …) name the rules of the repository's
//! [docs/rules.md](https://github.com/nresilience/nresilience-rs/blob/main/docs/rules.md),
//! each given there in full; the text beside an id says the rule in brief.
#![forbid(unsafe_code)]

mod body;
mod chain_signals;
pub mod classify;
mod client;
mod future;
#[cfg(feature = "grpc")]
pub mod grpc;
mod layer;
mod reopen;
mod replay;
mod request;
#[cfg(feature = "reqwest")]
pub mod reqwest;
mod telemetry;

pub use body::{BoxError, RetryBody, TransportError};
pub use classify::HttpClassifier;
pub use client::{Client, ClientBuilder};
pub use future::ResponseFuture;
pub use layer::{Retry, RetryLayer, DEFAULT_MAX_BUFFERED_BODY};
/// What every response a client returns says of the attempts behind it, as an extension (H8).
pub use nresilience_core::call::Attempts;
/// The headers on the wire: their names, and the parse and format of every value.
pub use nresilience_wire as wire;
pub use reopen::Reopen;
pub use request::{Hedgeable, Retryable};
/// The rustls that [`ClientBuilder::build_tls`] takes a configuration of, so that yours is
/// the same version.
#[cfg(feature = "rustls")]
pub use rustls;
