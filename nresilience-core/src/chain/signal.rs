//! Reading the chain's signals from a peer's header values.

use std::time::Duration;

use super::OVERLOADED_VALUE;

/// The one value of a header, or `None` when it is absent or sent more than once: a repeated
/// signal is ambiguous, and an ambiguous signal is no signal.
///
/// ```
/// use nresilience_core::chain::single;
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
/// use nresilience_core::chain::overloaded;
///
/// assert!(overloaded(b"1"));
/// assert!(!overloaded(b"true"));
/// assert!(!overloaded(b" 1"));
/// ```
pub fn overloaded(value: &[u8]) -> bool {
    value == OVERLOADED_VALUE.as_bytes()
}

/// The attempts an `x-nresilience-retried` value says the hop made: a decimal integer from 1
/// to `u32::MAX`, digits only. Anything else — empty, signed, spaced, fractional, too large,
/// not ASCII — is `None`.
///
/// ```
/// use nresilience_core::chain::retried;
///
/// assert_eq!(retried(b"4"), Some(4));
/// assert_eq!(retried(b"0"), None);
/// assert_eq!(retried(b"-4"), None);
/// assert_eq!(retried(b"99999999999"), None);
/// ```
pub fn retried(value: &[u8]) -> Option<u32> {
    // Ten digits hold every u32; a longer run of digits is too large whatever it says.
    let attempts = decimal(value, 10)?;
    u32::try_from(attempts).ok().filter(|&n| n >= 1)
}

/// The time a `grpc-timeout` value gives the call: one to eight digits and a unit — `H`,
/// `M`, `S`, `m` (milliseconds), `u` (microseconds) or `n` (nanoseconds) — as the gRPC
/// over HTTP/2 spec writes it. Anything else is `None`.
///
/// ```
/// use std::time::Duration;
/// use nresilience_core::chain::grpc_timeout;
///
/// assert_eq!(grpc_timeout(b"250m"), Some(Duration::from_millis(250)));
/// assert_eq!(grpc_timeout(b"2S"), Some(Duration::from_secs(2)));
/// assert_eq!(grpc_timeout(b"123456789m"), None);
/// assert_eq!(grpc_timeout(b"5"), None);
/// ```
pub fn grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, digits) = value.split_last()?;
    let n = decimal(digits, 8)?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3_600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// An unsigned decimal of at most `max_digits` digits (at most 19, which a `u64` holds),
/// digits only: the strict form every chain header takes.
pub(super) fn decimal(value: &[u8], max_digits: usize) -> Option<u64> {
    if value.is_empty() || value.len() > max_digits || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        value
            .iter()
            .fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0')),
    )
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
    fn c2_grpc_timeout_takes_eight_digits_and_a_unit() {
        assert_eq!(grpc_timeout(b"1H"), Some(Duration::from_secs(3_600)));
        assert_eq!(grpc_timeout(b"3M"), Some(Duration::from_secs(180)));
        assert_eq!(
            grpc_timeout(b"99999999S"),
            Some(Duration::from_secs(99_999_999))
        );
        assert_eq!(grpc_timeout(b"7u"), Some(Duration::from_micros(7)));
        assert_eq!(grpc_timeout(b"7n"), Some(Duration::from_nanos(7)));
        assert_eq!(
            grpc_timeout(b"99999999H"),
            Some(Duration::from_secs(99_999_999 * 3_600))
        );
        for value in [
            &b""[..],
            b"m",
            b"1",
            b"-1m",
            b" 1m",
            b"1 m",
            b"1x",
            b"1ms",
            b"123456789S",
            b"\xffm",
        ] {
            assert_eq!(grpc_timeout(value), None, "{value:?}");
        }
    }

    #[test]
    fn c6_retried_takes_positive_decimal_attempts_only() {
        assert_eq!(retried(b"1"), Some(1));
        assert_eq!(retried(b"16"), Some(16));
        assert_eq!(retried(b"0004"), Some(4));
        assert_eq!(retried(b"4294967295"), Some(u32::MAX));
        for value in [
            &b""[..],
            b"0",
            b"+4",
            b"-4",
            b"4.0",
            b" 4",
            b"4294967296",
            b"99999999999",
            b"\xff\xfe",
        ] {
            assert_eq!(retried(value), None, "{value:?}");
        }
    }

    #[test]
    fn c6_a_header_sent_twice_is_no_value() {
        assert_eq!(single([b"3".as_slice(), b"4".as_slice()]), None);
        assert_eq!(single([b"3".as_slice()]), Some(b"3".as_slice()));
    }

    proptest! {
        #[test]
        fn c2_c6_arbitrary_bytes_never_panic_and_round_trip_when_valid(
            bytes in proptest::collection::vec(any::<u8>(), 0..16)
        ) {
            let _ = overloaded(&bytes);
            let _ = grpc_timeout(&bytes);
            if let Some(attempts) = retried(&bytes) {
                let text = std::str::from_utf8(&bytes).unwrap_or_default();
                prop_assert_eq!(text.trim_start_matches('0').parse::<u32>().ok(), Some(attempts));
            }
        }

        #[test]
        fn c6_every_attempt_count_written_reads_back(attempts in 1u32..) {
            prop_assert_eq!(retried(attempts.to_string().as_bytes()), Some(attempts));
        }
    }
}
