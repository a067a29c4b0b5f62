//! The signals an answer carries about how the hop's own call ended (C1, C6), read strictly
//! and written in one place.

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use nresilience_core::chain::Signal;

use crate::names::{GRPC_PUSHBACK, OVERLOADED, OVERLOADED_VALUE, RETRIED};
use crate::number::count;
use crate::retry_after::retry_after_seconds;

/// The one value of a header, or `None` when it is absent or sent more than once: a repeated
/// signal is ambiguous, and an ambiguous signal is no signal.
///
/// ```
/// use nresilience_wire::single;
///
/// assert_eq!(single([b"1".as_slice()]), Some(b"1".as_slice()));
/// assert_eq!(single([b"1".as_slice(), b"1".as_slice()]), None);
/// assert_eq!(single(std::iter::empty::<&[u8]>()), None);
/// ```
pub fn single<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    let mut values = values.into_iter();
    let first = values.next()?;
    values.next().is_none().then_some(first)
}

/// Whether an `x-nresilience-overloaded` value is the signal: exactly `1`.
///
/// ```
/// use nresilience_wire::overloaded;
///
/// assert!(overloaded(b"1"));
/// assert!(!overloaded(b"true"));
/// assert!(!overloaded(b" 1"));
/// ```
pub fn overloaded(value: &[u8]) -> bool {
    value == OVERLOADED_VALUE.as_bytes()
}

/// The attempts an `x-nresilience-retried` value says the hop made: a positive decimal,
/// digits only; one too large for a `u32` is `u32::MAX`. Anything else — empty, signed,
/// spaced, fractional, not ASCII — is `None`.
///
/// ```
/// use nresilience_wire::retried;
///
/// assert_eq!(retried(b"4"), Some(4));
/// assert_eq!(retried(b"0"), None);
/// assert_eq!(retried(b"-4"), None);
/// assert_eq!(retried(b"99999999999"), Some(u32::MAX));
/// ```
#[must_use]
pub fn retried(value: &[u8]) -> Option<u32> {
    count(value)
}

/// Whether an answer carries the overload signal, sent once.
pub fn read_overloaded(headers: &HeaderMap) -> bool {
    one_value(headers, &OVERLOADED).is_some_and(overloaded)
}

/// The attempts an answer's retried signal says the hop made, when it carries one, sent once.
pub fn read_retried(headers: &HeaderMap) -> Option<u32> {
    one_value(headers, &RETRIED).and_then(retried)
}

/// The value of a header sent exactly once.
pub(crate) fn one_value<'a>(headers: &'a HeaderMap, name: &http::HeaderName) -> Option<&'a [u8]> {
    single(headers.get_all(name).iter().map(HeaderValue::as_bytes))
}

/// Puts `signal` on an answer's headers: `x-nresilience-overloaded: 1`, with `retry_after`
/// as `Retry-After` in whole seconds unless the answer has one, or
/// `x-nresilience-retried: N`.
///
/// ```
/// use std::time::Duration;
/// use http::HeaderMap;
/// use nresilience_core::chain::Signal;
/// use nresilience_wire::{read_overloaded, write_signal};
///
/// let mut headers = HeaderMap::new();
/// write_signal(&mut headers, Signal::Overloaded, Some(Duration::from_millis(1_500)));
/// assert!(read_overloaded(&headers));
/// assert_eq!(headers["retry-after"], "2");
/// ```
pub fn write_signal(headers: &mut HeaderMap, signal: Signal, retry_after: Option<Duration>) {
    match signal {
        Signal::Overloaded => {
            headers.insert(OVERLOADED, OVERLOADED_VALUE);
            if let Some(retry_after) = retry_after {
                headers
                    .entry(RETRY_AFTER)
                    .or_insert_with(|| retry_after_seconds(retry_after));
            }
        }
        Signal::Retried { attempts } => {
            headers.insert(RETRIED, HeaderValue::from(attempts));
        }
    }
}

/// Puts `signal` on a gRPC status's metadata: the overload signal with
/// `grpc-retry-pushback-ms: -1`, which asks any gRPC client not to retry, or the retried
/// signal.
pub fn write_grpc_signal(headers: &mut HeaderMap, signal: Signal) {
    write_signal(headers, signal, None);
    if signal == Signal::Overloaded {
        headers.insert(GRPC_PUSHBACK, HeaderValue::from_static("-1"));
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn c1_only_exactly_one_is_the_overload_signal() {
        assert!(overloaded(b"1"));
        for value in [&b""[..], b"0", b"01", b"1 ", b"yes", b"\xff", b"11"] {
            assert!(!overloaded(value), "{value:?}");
        }
    }

    #[test]
    fn c6_retried_takes_positive_decimal_attempts_and_saturates() {
        assert_eq!(retried(b"1"), Some(1));
        assert_eq!(retried(b"16"), Some(16));
        assert_eq!(retried(b"0004"), Some(4));
        assert_eq!(retried(b"4294967295"), Some(u32::MAX));
        assert_eq!(retried(b"4294967296"), Some(u32::MAX));
        for value in [&b""[..], b"0", b"+4", b"-4", b"4.0", b" 4", b"\xff\xfe"] {
            assert_eq!(retried(value), None, "{value:?}");
        }
    }

    #[test]
    fn c1_c6_a_signal_sent_twice_is_no_signal() {
        let mut headers = HeaderMap::new();
        headers.append(OVERLOADED, OVERLOADED_VALUE);
        headers.append(RETRIED, HeaderValue::from(3));
        assert!(read_overloaded(&headers));
        assert_eq!(read_retried(&headers), Some(3));
        headers.append(OVERLOADED, OVERLOADED_VALUE);
        headers.append(RETRIED, HeaderValue::from(3));
        assert!(!read_overloaded(&headers));
        assert_eq!(read_retried(&headers), None);
    }

    #[test]
    fn c1_c6_what_is_written_reads_back() {
        let mut headers = HeaderMap::new();
        write_signal(&mut headers, Signal::Retried { attempts: 4 }, None);
        assert_eq!(read_retried(&headers), Some(4));
        assert!(!read_overloaded(&headers));

        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("30"));
        write_signal(
            &mut headers,
            Signal::Overloaded,
            Some(Duration::from_secs(1)),
        );
        assert!(read_overloaded(&headers));
        assert_eq!(
            headers[RETRY_AFTER], "30",
            "the answer's own pushback stays"
        );
        assert_eq!(read_retried(&headers), None);

        let mut grpc = HeaderMap::new();
        write_grpc_signal(&mut grpc, Signal::Overloaded);
        assert_eq!(grpc[GRPC_PUSHBACK], "-1");
        assert!(read_overloaded(&grpc));
        let mut grpc = HeaderMap::new();
        write_grpc_signal(&mut grpc, Signal::Retried { attempts: 2 });
        assert!(grpc.get(GRPC_PUSHBACK).is_none());
    }

    proptest! {
        #[test]
        fn c6_every_attempt_count_written_reads_back(attempts in 1u32..) {
            prop_assert_eq!(retried(attempts.to_string().as_bytes()), Some(attempts));
        }

        #[test]
        fn c1_c6_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            let _ = overloaded(&bytes);
            prop_assert_ne!(retried(&bytes), Some(0));
        }
    }
}
