//! How long the caller will still wait: `x-nresilience-deadline-ms` and gRPC's `grpc-timeout`.

use std::time::Duration;

use http::HeaderValue;

use crate::number::decimal;

/// The most a caller may say it will wait: a day. A larger value is no value, so that a
/// peer cannot push an `Instant` past its range.
const MAX_DEADLINE_MS: u64 = 86_400_000;

/// The time an `x-nresilience-deadline-ms` value says the caller will still wait: whole
/// milliseconds, digits only, at most a day. Anything else — empty, signed, spaced,
/// fractional, larger — is `None`.
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::deadline_ms;
///
/// assert_eq!(deadline_ms(b"40"), Some(Duration::from_millis(40)));
/// assert_eq!(deadline_ms(b"-40"), None);
/// assert_eq!(deadline_ms(b"99999999999999999999"), None);
/// ```
#[must_use]
pub fn deadline_ms(value: &[u8]) -> Option<Duration> {
    let millis = decimal(value, 9)?;
    (millis <= MAX_DEADLINE_MS).then(|| Duration::from_millis(millis))
}

/// The `x-nresilience-deadline-ms` value for `left`: whole milliseconds, never more than a
/// day, rounded up.
///
/// Up, so that the caller's own cut comes first: the callee gives up no sooner than its
/// caller stops waiting, and the caller sees its attempt cut, not answered a moment before
/// the cut with the callee's `504` — a cut its measured ceiling learns from (E7), an answer
/// it does not. The callee never works on past that in practice: the caller's cut closes
/// the request, and the callee's handler, with its calls, is dropped with it.
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::deadline_value;
///
/// assert_eq!(deadline_value(Duration::from_micros(40_001)), 41);
/// ```
#[must_use]
pub fn deadline_value(left: Duration) -> u64 {
    let millis = left.as_millis() + u128::from(!left.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis)
        .unwrap_or(u64::MAX)
        .min(MAX_DEADLINE_MS)
}

/// The time a `grpc-timeout` value gives the call: one to eight digits and a unit — `H`,
/// `M`, `S`, `m` (milliseconds), `u` (microseconds) or `n` (nanoseconds) — as the gRPC
/// over HTTP/2 spec writes it. Anything else is `None`.
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::grpc_timeout;
///
/// assert_eq!(grpc_timeout(b"250m"), Some(Duration::from_millis(250)));
/// assert_eq!(grpc_timeout(b"2S"), Some(Duration::from_secs(2)));
/// assert_eq!(grpc_timeout(b"123456789m"), None);
/// assert_eq!(grpc_timeout(b"5"), None);
/// ```
#[must_use]
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

/// The `grpc-timeout` value for `millis`: in milliseconds, at most eight digits as gRPC
/// allows.
pub(crate) fn grpc_timeout_value(millis: u64) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("{}m", millis.min(99_999_999))).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn c2_deadline_takes_whole_milliseconds_up_to_a_day() {
        assert_eq!(deadline_ms(b"0"), Some(Duration::ZERO));
        assert_eq!(deadline_ms(b"86400000"), Some(Duration::from_secs(86_400)));
        for value in [
            &b""[..],
            b"86400001",
            b"+5",
            b"-5",
            b"5.0",
            b" 5",
            b"5ms",
            b"\xff",
        ] {
            assert_eq!(deadline_ms(value), None, "{value:?}");
        }
    }

    #[test]
    fn c2_e7_the_value_written_rounds_up_and_reads_back() {
        assert_eq!(deadline_value(Duration::from_micros(40_001)), 41);
        assert_eq!(deadline_value(Duration::from_millis(40)), 40);
        assert_eq!(deadline_value(Duration::ZERO), 0);
        assert_eq!(deadline_value(Duration::MAX), MAX_DEADLINE_MS);
        let written = deadline_value(Duration::from_millis(1234)).to_string();
        assert_eq!(
            deadline_ms(written.as_bytes()),
            Some(Duration::from_millis(1234))
        );
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
    fn c2_the_grpc_timeout_written_reads_back_within_eight_digits() {
        let written = grpc_timeout_value(250).unwrap();
        assert_eq!(written, "250m");
        assert_eq!(
            grpc_timeout(written.as_bytes()),
            Some(Duration::from_millis(250))
        );
        assert_eq!(grpc_timeout_value(u64::MAX).unwrap(), "99999999m");
    }

    proptest! {
        #[test]
        fn c2_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Some(left) = deadline_ms(&bytes) {
                prop_assert!(left <= Duration::from_millis(MAX_DEADLINE_MS));
            }
            let _ = grpc_timeout(&bytes);
        }
    }
}
