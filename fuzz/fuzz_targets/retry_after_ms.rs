//! `retry-after-ms` (SPEC K13): `nresilience_wire::{parse_retry_after_ms, retry_after_ms}` and
//! its precedence in `retry_after`, on arbitrary values, one per input line.
//!
//! Asserts, beyond "no panic":
//! - a value is read as a non-negative decimal of milliseconds with an optional fraction
//!   (a digit on at least one side of the point), ASCII whitespace around it ignored, to the
//!   nanosecond the first six fraction digits give, saturating at `u64::MAX` milliseconds —
//!   checked against a model in `u128` arithmetic; anything else is `None`;
//! - whole milliseconds re-serialised as digits read back to the same delay;
//! - `retry_after_ms` over the lines as one header list is the first value that parses, and
//!   `retry_after` with a `Retry-After: 9` beside them is that value, or 9 s when none parses.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use http::header::{HeaderValue, RETRY_AFTER};
use libfuzzer_sys::fuzz_target;
use nresilience_fuzz::values_of;
use nresilience_wire::{parse_retry_after_ms, retry_after, retry_after_ms, RETRY_AFTER_MS};

/// The value's delay by the format's definition, in `u128` arithmetic.
fn model(value: &[u8]) -> Option<Duration> {
    let text = value.trim_ascii();
    let (whole, fraction) = match text.iter().position(|&b| b == b'.') {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, &b""[..]),
    };
    let digits = |part: &[u8]| part.iter().all(u8::is_ascii_digit);
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let millis = whole.iter().fold(0u128, |n, d| {
        (n * 10 + u128::from(d - b'0')).min(u128::from(u64::MAX))
    });
    let nanos = (0..6).fold(0u64, |n, i| {
        n * 10 + fraction.get(i).map_or(0, |d| u64::from(d - b'0'))
    });
    let millis = u64::try_from(millis).unwrap_or(u64::MAX);
    Some(Duration::from_millis(millis).saturating_add(Duration::from_nanos(nanos)))
}

fuzz_target!(|data: &[u8]| {
    let (values, mut headers) = values_of(&RETRY_AFTER_MS, data);
    for value in &values {
        let parsed = parse_retry_after_ms(value.as_bytes());
        assert_eq!(parsed, model(value.as_bytes()), "{value:?}");
        if let Some(delay) = parsed.filter(|delay| delay.subsec_nanos() % 1_000_000 == 0) {
            let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            let again = HeaderValue::from(millis);
            assert_eq!(parse_retry_after_ms(again.as_bytes()), parsed, "{value:?}");
        }
    }
    let first = values
        .iter()
        .find_map(|value| parse_retry_after_ms(value.as_bytes()));
    assert_eq!(
        retry_after_ms(&headers),
        first,
        "the first value that parses wins"
    );
    headers.insert(RETRY_AFTER, HeaderValue::from_static("9"));
    assert_eq!(
        retry_after(&headers, UNIX_EPOCH),
        first.or(Some(Duration::from_secs(9))),
        "retry-after-ms first, then Retry-After"
    );
});
