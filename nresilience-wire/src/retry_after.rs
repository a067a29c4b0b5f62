//! Reading a server's `Retry-After` pushback: delta-seconds or an HTTP-date, as a
//! delay from now; and the pushback of an answer, where `retry-after-ms` comes first.
//!
//! The value comes from the peer, so anything this module cannot read is ignored with a
//! `debug` event, never an error or a panic: the backoff curve applies instead.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use http::header::{HeaderMap, HeaderValue, RETRY_AFTER};
//! use nresilience_wire::{parse_retry_after, retry_after};
//!
//! // Wed, 21 Oct 2015 07:28:00 GMT
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
//! let seconds = HeaderValue::from_static("120");
//! let date = HeaderValue::from_static("Wed, 21 Oct 2015 07:30:00 GMT");
//! assert_eq!(parse_retry_after(&seconds, now), Some(Duration::from_secs(120)));
//! assert_eq!(parse_retry_after(&date, now), Some(Duration::from_secs(120)));
//!
//! // A date in the past means "now"; garbage means "no pushback".
//! let past = HeaderValue::from_static("Wed, 21 Oct 2015 07:00:00 GMT");
//! assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
//! assert_eq!(parse_retry_after(&HeaderValue::from_static("-1"), now), None);
//!
//! // The first value that parses wins.
//! let mut headers = HeaderMap::new();
//! headers.append(RETRY_AFTER, HeaderValue::from_static("soon"));
//! headers.append(RETRY_AFTER, HeaderValue::from_static("7"));
//! assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(7)));
//! ```

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, HeaderValue, RETRY_AFTER};

use crate::number::saturating;

/// The pushback in one `Retry-After` value, or `None` if it is not one.
///
/// Reads either form RFC 9110 allows:
///
/// - **delta-seconds**: ASCII digits only. Huge numbers saturate at `u64::MAX` seconds, so
///   a caller must cap the delay (by the backoff cap and the time left) before adding
///   it to an `Instant`.
/// - **HTTP-date** (IMF-fixdate, or the obsolete RFC 850 and asctime forms): `date − now`,
///   clamped at zero, so a date in the past gives `Some(Duration::ZERO)`. HTTP-dates have
///   whole-second resolution; the result keeps `now`'s fraction of a second, so it ends at
///   the instant the server named.
///
/// Spaces and tabs around the value are ignored. Anything else — a sign, a fraction, a unit,
/// an empty value, bytes that are not visible ASCII — is `None` and a `debug` event saying
/// why.
pub fn parse_retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let Ok(text) = value.to_str() else {
        tracing::debug!(value = ?value, "ignoring retry-after that is not visible ascii");
        return None;
    };
    let text = text.trim_matches([' ', '\t']);
    if text.is_empty() {
        tracing::debug!("ignoring empty retry-after");
        return None;
    }
    if let Some(seconds) = saturating(text.as_bytes()) {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(date) = httpdate::parse_http_date(text) {
        Some(date.duration_since(now).unwrap_or(Duration::ZERO))
    } else {
        tracing::debug!(
            value = text,
            "ignoring retry-after that is neither delta-seconds nor an http-date"
        );
        None
    }
}

/// The pushback an answer's `headers` ask for: the first `retry-after-ms` value that parses
/// ([`retry_after_ms`](crate::retry_after_ms)), else the first `Retry-After` value that does,
/// else the reset of an exhausted `RateLimit` quota ([`read_ratelimit`](crate::read_ratelimit)):
/// the headers that name a wait come before the field that describes a quota.
///
/// `retry-after-ms` wins when both parse, as the SDKs that read both (OpenAI's and
/// Anthropic's, the Vercel AI SDK) let it: it is the same pushback, to the millisecond.
/// Every `Retry-After` value is read as by [`parse_retry_after`]; values before the first
/// valid one are skipped with a `debug` event each. `None` when neither header parses.
#[must_use]
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    crate::retry_after_ms(headers)
        .or_else(|| {
            headers
                .get_all(RETRY_AFTER)
                .iter()
                .find_map(|value| parse_retry_after(value, now))
        })
        .or_else(|| crate::read_ratelimit(headers))
}

/// The `Retry-After` value for `wait`: whole seconds, rounded up, so that a caller that
/// comes back on time finds what it was told to wait for.
///
/// ```
/// use std::time::Duration;
/// use nresilience_wire::retry_after_seconds;
///
/// assert_eq!(retry_after_seconds(Duration::from_millis(2_001)), "3");
/// ```
#[must_use]
pub fn retry_after_seconds(wait: Duration) -> HeaderValue {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    HeaderValue::from(seconds)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Wed, 21 Oct 2015 07:28:00 GMT.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    fn parse(value: &str) -> Option<Duration> {
        parse_retry_after(&HeaderValue::from_str(value).unwrap(), now())
    }

    #[test]
    fn k13_retry_after_ms_comes_before_retry_after_and_garbage_in_it_does_not() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers, now()), Some(Duration::from_secs(2)));
        headers.append(crate::RETRY_AFTER_MS, HeaderValue::from_static("soon"));
        assert_eq!(
            retry_after(&headers, now()),
            Some(Duration::from_secs(2)),
            "an unusable retry-after-ms is no pushback: Retry-After decides"
        );
        headers.append(crate::RETRY_AFTER_MS, HeaderValue::from_static("1250.5"));
        assert_eq!(
            retry_after(&headers, now()),
            Some(Duration::from_micros(1_250_500)),
            "the first retry-after-ms that parses wins"
        );
        headers.remove(RETRY_AFTER);
        assert_eq!(
            retry_after(&headers, now()),
            Some(Duration::from_micros(1_250_500))
        );
    }

    proptest! {
        /// K13's precedence over any pair of values: a `retry-after-ms` that parses decides,
        /// else the `Retry-After` that parses, else nothing.
        #[test]
        fn k13_the_precedence_holds_for_any_values(ms in "[ -~]{0,12}", seconds in "[ -~]{0,12}") {
            let mut headers = HeaderMap::new();
            let ms_value = HeaderValue::from_str(&ms).unwrap();
            let seconds_value = HeaderValue::from_str(&seconds).unwrap();
            headers.insert(crate::RETRY_AFTER_MS, ms_value.clone());
            headers.insert(RETRY_AFTER, seconds_value.clone());
            let expected = crate::parse_retry_after_ms(ms_value.as_bytes())
                .or_else(|| parse_retry_after(&seconds_value, now()));
            prop_assert_eq!(retry_after(&headers, now()), expected);
        }
    }

    #[test]
    fn h2_delta_seconds_is_the_delay() {
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse("120"), Some(Duration::from_secs(120)));
        assert_eq!(parse("007"), Some(Duration::from_secs(7)));
    }

    #[test]
    fn h2_spaces_and_tabs_around_the_value_are_ignored() {
        assert_eq!(parse(" 5"), Some(Duration::from_secs(5)));
        assert_eq!(parse("5\t "), Some(Duration::from_secs(5)));
        assert_eq!(
            parse("  Wed, 21 Oct 2015 07:28:30 GMT\t"),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn h2_huge_delta_saturates_instead_of_panicking() {
        let huge = "9".repeat(400);
        assert_eq!(parse(&huge), Some(Duration::from_secs(u64::MAX)));
        assert_eq!(
            parse("18446744073709551616"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse("18446744073709551615"),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn h2_http_date_is_date_minus_now_in_every_rfc_9110_form() {
        let two_minutes = Some(Duration::from_secs(120));
        assert_eq!(parse("Wed, 21 Oct 2015 07:30:00 GMT"), two_minutes); // IMF-fixdate
        assert_eq!(parse("Wednesday, 21-Oct-15 07:30:00 GMT"), two_minutes); // RFC 850
        assert_eq!(parse("Wed Oct 21 07:30:00 2015"), two_minutes); // asctime
    }

    #[test]
    fn h2_http_date_keeps_the_fraction_of_a_second_of_now() {
        let now = now() + Duration::from_millis(250);
        let value = HeaderValue::from_static("Wed, 21 Oct 2015 07:28:02 GMT");
        assert_eq!(
            parse_retry_after(&value, now),
            Some(Duration::from_millis(1750))
        );
    }

    #[test]
    fn h2_past_or_present_date_clamps_to_zero() {
        assert_eq!(parse("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        assert_eq!(parse("Wed, 21 Oct 2015 07:27:59 GMT"), Some(Duration::ZERO));
        assert_eq!(parse("Thu, 01 Jan 1970 00:00:00 GMT"), Some(Duration::ZERO));
    }

    #[test]
    fn h2_garbage_is_ignored() {
        for garbage in [
            "",
            "   ",
            "-1",
            "+5",
            "1.5",
            "5s",
            "0x10",
            "5, 10",
            "1 2",
            "soon",
            "Wed, 21 Oct 2015 07:30:00",        // no zone
            "Wed, 21 Oct 2015 25:30:00 GMT",    // no such hour
            "Thu, 21 Oct 2015 07:30:00 GMT",    // wrong weekday
            "2015-10-21T07:30:00Z",             // not an HTTP-date
            "Wed, 21 Oct 2015 07:30:00 GMT, 5", // a list
        ] {
            assert_eq!(parse(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn h2_opaque_bytes_are_ignored() {
        for bytes in [&b"\xff"[..], b"12\x80", b"\xc3\xa9", b"\x80 5"] {
            let value = HeaderValue::from_bytes(bytes).unwrap();
            assert_eq!(parse_retry_after(&value, now()), None, "{bytes:?}");
        }
    }

    #[test]
    fn h2_first_valid_header_wins() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers, now()), None);
        headers.append(RETRY_AFTER, HeaderValue::from_static("later"));
        assert_eq!(retry_after(&headers, now()), None);
        headers.append(RETRY_AFTER, HeaderValue::from_static("7"));
        headers.append(RETRY_AFTER, HeaderValue::from_static("9"));
        assert_eq!(retry_after(&headers, now()), Some(Duration::from_secs(7)));
    }

    /// Byte strings shaped like the grammar, so the cases reach the interesting branches.
    fn near_miss() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[ \t]{0,2}[0-9+.-]{0,25}[ \t]{0,2}",
            "(Mon|Wed|Sun|Thursday)?,? ?[0-9]{1,2}[ -](Oct|Feb|Xyz)[ -][0-9]{2,5} [0-9:]{5,9} (GMT|UTC)?",
        ]
        .prop_map(String::into_bytes)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        /// H2: nothing a peer can send makes the parser panic.
        #[test]
        fn h2_any_bytes_never_panic(
            bytes in prop_oneof![proptest::collection::vec(any::<u8>(), 0..48), near_miss()],
            offset in any::<u64>(),
        ) {
            if let Ok(value) = HeaderValue::from_bytes(&bytes) {
                let now = SystemTime::UNIX_EPOCH + Duration::from_nanos(offset);
                let parsed = parse_retry_after(&value, now);
                if value.to_str().is_err() {
                    prop_assert_eq!(parsed, None);
                }
            }
        }

        /// H2: delta-seconds are read exactly, with or without surrounding whitespace.
        #[test]
        fn h2_any_u32_delta_round_trips(
            seconds in any::<u32>(),
            before in "[ \t]{0,3}",
            after in "[ \t]{0,3}",
        ) {
            let value = HeaderValue::from_str(&format!("{before}{seconds}{after}")).unwrap();
            prop_assert_eq!(
                parse_retry_after(&value, now()),
                Some(Duration::from_secs(u64::from(seconds)))
            );
        }

        /// H2: a future date, as a server formats it, comes back as the delay to that
        /// second: exact when `now` is a whole second, less `now`'s fraction otherwise.
        #[test]
        fn h2_any_future_http_date_round_trips_to_the_second(
            now_seconds in 0u64..100 * 365 * 86_400,
            now_nanos in 0u32..1_000_000_000,
            ahead in 1u64..10 * 365 * 86_400,
        ) {
            let whole = SystemTime::UNIX_EPOCH + Duration::from_secs(now_seconds);
            let now = whole + Duration::from_nanos(u64::from(now_nanos));
            let date = httpdate::fmt_http_date(whole + Duration::from_secs(ahead));
            let value = HeaderValue::from_str(&date).unwrap();
            let expected = Duration::from_secs(ahead) - Duration::from_nanos(u64::from(now_nanos));
            prop_assert_eq!(parse_retry_after(&value, whole), Some(Duration::from_secs(ahead)));
            prop_assert_eq!(parse_retry_after(&value, now), Some(expected));
        }
    }

    #[test]
    fn c1_retry_after_written_rounds_up_to_whole_seconds_and_reads_back() {
        assert_eq!(retry_after_seconds(Duration::ZERO), "0");
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), "1");
        assert_eq!(retry_after_seconds(Duration::from_secs(2)), "2");
        assert_eq!(retry_after_seconds(Duration::from_millis(2_001)), "3");
        let written = retry_after_seconds(Duration::from_millis(1_500));
        assert_eq!(
            parse_retry_after(&written, now()),
            Some(Duration::from_secs(2))
        );
    }
}
