//! Reading a server's `retry-after-ms` pushback: milliseconds, as the OpenAI and Anthropic
//! APIs send it beside `Retry-After`, and as the Stainless SDKs and the Vercel AI SDK honour
//! it, before `Retry-After`.

use std::time::Duration;

use http::header::HeaderMap;

use crate::names::RETRY_AFTER_MS;
use crate::number::saturating;

/// The pushback in one `retry-after-ms` value, or `None` if it is not one: a non-negative
/// decimal of milliseconds, with a fraction or without (`1500`, `1500.5`, `0.25`), ASCII
/// whitespace around it ignored. A huge value saturates, so a caller must cap the delay (by
/// the backoff cap and the time left) as for `Retry-After`. A sign, an exponent, `inf`,
/// `NaN`, a unit, a list or an empty value is `None`: the backoff curve applies.
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::parse_retry_after_ms;
///
/// assert_eq!(parse_retry_after_ms(b"1500"), Some(Duration::from_millis(1_500)));
/// assert_eq!(parse_retry_after_ms(b" 0.25 "), Some(Duration::from_micros(250)));
/// assert_eq!(parse_retry_after_ms(b"-1"), None);
/// assert_eq!(parse_retry_after_ms(b"1e3"), None);
/// ```
#[must_use]
pub fn parse_retry_after_ms(value: &[u8]) -> Option<Duration> {
    let value = value.trim_ascii();
    let (whole, fraction) = match value.iter().position(|&byte| byte == b'.') {
        Some(dot) => (&value[..dot], Some(&value[dot + 1..])),
        None => (value, None),
    };
    // `.5` and `5.` are numbers to a float parser; a digit on each side of a point is asked
    // of neither form here, and both are read.
    let millis = match whole {
        [] if fraction.is_some_and(|f| !f.is_empty()) => 0,
        whole => saturating(whole)?,
    };
    let nanos = match fraction {
        None | Some([]) if !whole.is_empty() => 0,
        None | Some([]) => return None,
        Some(fraction) => sub_millisecond_nanos(fraction)?,
    };
    Some(Duration::from_millis(millis).saturating_add(Duration::from_nanos(nanos)))
}

/// The nanoseconds of a millisecond's decimal fraction, digits only; past the sixth digit
/// the fraction is below a nanosecond and truncated.
fn sub_millisecond_nanos(fraction: &[u8]) -> Option<u64> {
    if !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut nanos = 0;
    for position in 0..6 {
        let digit = fraction
            .get(position)
            .map_or(0, |digit| u64::from(digit - b'0'));
        nanos = nanos * 10 + digit;
    }
    Some(nanos)
}

/// The pushback in the first `retry-after-ms` header of `headers` that parses; values before
/// it are skipped with a `debug` event each.
#[must_use]
pub fn retry_after_ms(headers: &HeaderMap) -> Option<Duration> {
    headers.get_all(RETRY_AFTER_MS).iter().find_map(|value| {
        let parsed = parse_retry_after_ms(value.as_bytes());
        if parsed.is_none() {
            tracing::debug!(value = ?value, "ignoring retry-after-ms that is not milliseconds");
        }
        parsed
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn k13_milliseconds_with_a_fraction_or_without_are_the_delay() {
        let cases: [(&[u8], Option<Duration>); 14] = [
            (b"0", Some(Duration::ZERO)),
            (b"1500", Some(Duration::from_millis(1_500))),
            (b"\t20 ", Some(Duration::from_millis(20))),
            (b"1500.5", Some(Duration::from_micros(1_500_500))),
            (b".5", Some(Duration::from_micros(500))),
            (b"5.", Some(Duration::from_millis(5))),
            (b"0.0000019", Some(Duration::from_nanos(1))),
            (
                b"99999999999999999999999",
                Some(Duration::from_millis(u64::MAX)),
            ),
            (b"", None),
            (b".", None),
            (b"-1", None),
            (b"+5", None),
            (b"1e3", None),
            (b"NaN", None),
        ];
        for (value, expected) in cases {
            assert_eq!(
                parse_retry_after_ms(value),
                expected,
                "{}",
                String::from_utf8_lossy(value)
            );
        }
        for value in [&b"inf"[..], b"5 ms", b"1,2", b"1.2.3", b"0x10"] {
            assert_eq!(parse_retry_after_ms(value), None);
        }
    }

    proptest! {
        /// Whole milliseconds, written as digits, read back exactly.
        #[test]
        fn k13_whole_milliseconds_read_back(millis in any::<u64>()) {
            let written = millis.to_string();
            prop_assert_eq!(
                parse_retry_after_ms(written.as_bytes()),
                Some(Duration::from_millis(millis))
            );
        }

        /// Microseconds written as a millisecond fraction read back exactly.
        #[test]
        fn k13_a_fraction_of_microseconds_reads_back(micros in 0u64..1_000_000_000_000) {
            let written = format!("{}.{:03}", micros / 1_000, micros % 1_000);
            prop_assert_eq!(
                parse_retry_after_ms(written.as_bytes()),
                Some(Duration::from_micros(micros))
            );
        }
    }
}
