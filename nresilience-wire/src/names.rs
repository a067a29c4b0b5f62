//! The names of every header, and the values that are constants.

use http::header::{HeaderName, HeaderValue};

/// The prefix every nresilience header starts with: a server reads a request's own headers
/// by comparing names against it, not by looking each one up.
pub const PREFIX: &str = "x-nresilience-";

/// Marks a request its sender may retry (N1): a retrying call made while serving it is
/// nested. HTTP/1 names arrive in any case and are lower-cased by the server; HTTP/2 and gRPC
/// send them lower-case, so one name covers all three.
pub const MARKER: HeaderName = HeaderName::from_static("x-nresilience-retrying");

/// The marker's one meaningful value, as it is stamped.
pub const MARKED: HeaderValue = HeaderValue::from_static("1");

/// How long the caller will still wait for this attempt, in whole milliseconds (C2).
pub const DEADLINE: HeaderName = HeaderName::from_static("x-nresilience-deadline-ms");

/// Where a request's call sits in the chain (C3, C4): [`ChainFacts`](crate::ChainFacts).
pub const CHAIN: HeaderName = HeaderName::from_static("x-nresilience-chain");

/// A hop's own call was refused for overload: its callers do not retry the answer (C1).
pub const OVERLOADED: HeaderName = HeaderName::from_static("x-nresilience-overloaded");

/// The value of [`OVERLOADED`]; any other value is no signal.
pub const OVERLOADED_VALUE: HeaderValue = HeaderValue::from_static("1");

/// A hop failed after retrying: the value is the attempts it made (C6).
pub const RETRIED: HeaderName = HeaderName::from_static("x-nresilience-retried");

/// Which attempt of its call a request is (F1): `N`, or `N; hedge`; a first attempt goes
/// without it, as in gRPC.
pub const ATTEMPT: HeaderName = HeaderName::from_static("x-nresilience-attempt");

/// What a service tells its callers about the fleet's retries (F2), on its answers.
pub const FLEET: HeaderName = HeaderName::from_static("x-nresilience-fleet");

/// gRPC's count of the attempts before this one, on every attempt but the first (gRFC A6).
pub const GRPC_PREVIOUS_ATTEMPTS: HeaderName =
    HeaderName::from_static("grpc-previous-rpc-attempts");

/// gRPC's own per-call deadline.
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// `RateLimit`: a server's quotas, and when an exhausted one resets (the IETF draft).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// `retry-after-ms`: a server's pushback in milliseconds (the OpenAI and Anthropic APIs).
pub const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");

/// A gRPC server's pushback: wait this many milliseconds, or with a negative value, do not
/// retry (gRFC A6).
pub const GRPC_PUSHBACK: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");

/// A gRPC answer's status code, in the headers of a trailers-only answer.
pub const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// A gRPC answer's `google.rpc.Status`, base64: its details may hold the server's pushback
/// as a `google.rpc.RetryInfo` (K15).
pub const GRPC_STATUS_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_header_of_the_chain_has_the_prefix() {
        for name in [
            &MARKER,
            &DEADLINE,
            &CHAIN,
            &OVERLOADED,
            &RETRIED,
            &ATTEMPT,
            &FLEET,
        ] {
            assert!(name.as_str().starts_with(PREFIX), "{name}");
        }
    }
}
