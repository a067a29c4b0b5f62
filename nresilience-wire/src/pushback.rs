//! A gRPC server's pushback, `grpc-retry-pushback-ms` (gRFC A6).

use std::time::Duration;

use http::HeaderMap;

use crate::names::GRPC_PUSHBACK;
use crate::number::saturating;

/// What `grpc-retry-pushback-ms` asks of the next retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcPushback {
    /// Wait this long before the retry (K13), or on the backoff curve when `None`.
    After(Option<Duration>),
    /// A negative value: the server asks not to be retried.
    Stop,
}

/// The pushback one `grpc-retry-pushback-ms` value asks for: an optionally signed decimal
/// of milliseconds, ASCII whitespace around it ignored; a huge one saturates. `-0` is no
/// wait, not a stop. Anything else is `None`.
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::{grpc_pushback, GrpcPushback};
///
/// assert_eq!(grpc_pushback(b"1500"), Some(GrpcPushback::After(Some(Duration::from_millis(1500)))));
/// assert_eq!(grpc_pushback(b"-1"), Some(GrpcPushback::Stop));
/// assert_eq!(grpc_pushback(b"soon"), None);
/// ```
#[must_use]
pub fn grpc_pushback(value: &[u8]) -> Option<GrpcPushback> {
    let value = value.trim_ascii();
    let (negative, digits) = match value.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, value),
    };
    let millis = saturating(digits)?;
    Some(if negative && millis > 0 {
        GrpcPushback::Stop
    } else {
        GrpcPushback::After(Some(Duration::from_millis(millis)))
    })
}

/// The pushback an answer asks for: its first `grpc-retry-pushback-ms` value that parses
/// decides, and values that do not are skipped with a `debug` event each; without one, the
/// backoff curve applies.
pub fn read_grpc_pushback(headers: &HeaderMap) -> GrpcPushback {
    for value in headers.get_all(GRPC_PUSHBACK) {
        if let Some(pushback) = grpc_pushback(value.as_bytes()) {
            return pushback;
        } else {
            tracing::debug!(?value, "ignoring an unparseable grpc-retry-pushback-ms")
        }
    }
    GrpcPushback::After(None)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use proptest::prelude::*;

    use super::*;

    fn after(millis: u64) -> Option<GrpcPushback> {
        Some(GrpcPushback::After(Some(Duration::from_millis(millis))))
    }

    #[test]
    fn k13_h6_pushback_is_signed_milliseconds_and_saturates() {
        assert_eq!(grpc_pushback(b"0"), after(0));
        assert_eq!(grpc_pushback(b"-0"), after(0));
        assert_eq!(grpc_pushback(b" 15\t"), after(15));
        assert_eq!(grpc_pushback(b"99999999999999999999999"), after(u64::MAX));
        assert_eq!(
            grpc_pushback(b"-99999999999999999999999"),
            Some(GrpcPushback::Stop)
        );
        for value in [&b""[..], b"-", b"+1", b"1.5", b"1 2", b"--1", b"\xff"] {
            assert_eq!(grpc_pushback(value), None, "{value:?}");
        }
    }

    #[test]
    fn h6_the_first_value_that_parses_decides() {
        let mut headers = HeaderMap::new();
        assert_eq!(read_grpc_pushback(&headers), GrpcPushback::After(None));
        headers.append(GRPC_PUSHBACK, HeaderValue::from_static("soon"));
        headers.append(GRPC_PUSHBACK, HeaderValue::from_static("-1"));
        headers.append(GRPC_PUSHBACK, HeaderValue::from_static("10"));
        assert_eq!(read_grpc_pushback(&headers), GrpcPushback::Stop);
    }

    proptest! {
        #[test]
        fn k13_any_bytes_read_without_panicking(value in proptest::collection::vec(any::<u8>(), 0..32)) {
            let _ = grpc_pushback(&value);
        }
    }
}
