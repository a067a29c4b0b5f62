//! `Retry-After` (SPEC H2, K13): `nresilience_wire::{parse_retry_after, retry_after}` on
//! arbitrary values, one per input line, at four different `now`s.
//!
//! Asserts, beyond "no panic":
//! - a value that is not visible ASCII is `None`; spaces and tabs around it are ignored;
//! - delta-seconds (digits only) are read exactly, saturating at `u64::MAX`, and the seconds
//!   re-serialised as digits read back to the same delay;
//! - an HTTP-date reads as `date − now` clamped at zero; a future date re-serialised as an
//!   IMF-fixdate (`httpdate::fmt_http_date`) reads back to the same delay, at the instant the
//!   server named (whole seconds since the epoch);
//! - anything else (a sign, a fraction, a unit, a list) is `None`;
//! - `retry_after` over all the lines as one header list is the first value that parses.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{HeaderValue, RETRY_AFTER};
use libfuzzer_sys::fuzz_target;
use nresilience_fuzz::values_of;
use nresilience_wire::{parse_retry_after, retry_after};

/// Wed, 21 Oct 2015 07:28:00 GMT, the README's example.
const T0: u64 = 1_445_412_480;

fn nows() -> [SystemTime; 4] {
    [
        UNIX_EPOCH + Duration::from_secs(T0),
        UNIX_EPOCH + Duration::from_secs(T0) + Duration::from_millis(250),
        UNIX_EPOCH,
        // 2200-01-01, after every two-digit-year RFC 850 date.
        UNIX_EPOCH + Duration::from_secs(7_258_118_400) + Duration::from_nanos(999_999_999),
    ]
}

fn check_one(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let parsed = parse_retry_after(value, now);
    let Ok(text) = value.to_str() else {
        assert_eq!(parsed, None, "opaque bytes {value:?} gave a delay");
        return parsed;
    };
    let text = text.trim_matches([' ', '\t']);
    if text.is_empty() {
        assert_eq!(parsed, None, "empty value {value:?} gave a delay");
        return parsed;
    }
    if text.bytes().all(|byte| byte.is_ascii_digit()) {
        let significant = text.trim_start_matches('0');
        let expected = if significant.len() > 20 {
            u64::MAX
        } else {
            significant
                .parse::<u128>()
                .unwrap_or(0)
                .min(u128::from(u64::MAX)) as u64
        };
        assert_eq!(parsed, Some(Duration::from_secs(expected)), "{value:?}");
        // Re-serialised, the delay reads back.
        let again = HeaderValue::from(expected);
        assert_eq!(parse_retry_after(&again, now), parsed, "{value:?}");
        return parsed;
    }
    match (httpdate::parse_http_date(text), parsed) {
        (Ok(date), Some(delay)) => {
            assert_eq!(
                delay,
                date.duration_since(now).unwrap_or(Duration::ZERO),
                "{value:?}"
            );
            if delay > Duration::ZERO {
                let named = now + delay;
                assert_eq!(
                    named, date,
                    "the delay ends at the instant named: {value:?}"
                );
                let since_epoch = named.duration_since(UNIX_EPOCH).expect("after the epoch");
                assert_eq!(since_epoch.subsec_nanos(), 0, "{value:?}");
                let imf = HeaderValue::from_str(&httpdate::fmt_http_date(named))
                    .expect("an IMF-fixdate is a header value");
                assert_eq!(
                    parse_retry_after(&imf, now),
                    Some(delay),
                    "{value:?} as {imf:?}"
                );
            }
        }
        (Err(_), None) => {}
        (date, parsed) => panic!("{value:?}: httpdate says {date:?}, parse_retry_after {parsed:?}"),
    }
    // Not digits: never a sign, fraction or unit read as seconds.
    if let Some(delay) = parsed {
        assert!(
            httpdate::parse_http_date(text).is_ok(),
            "{value:?} gave {delay:?}"
        );
    }
    parsed
}

fuzz_target!(|data: &[u8]| {
    let (values, headers) = values_of(&RETRY_AFTER, data);
    for now in nows() {
        let first = values.iter().find_map(|value| check_one(value, now));
        assert_eq!(
            retry_after(&headers, now),
            first,
            "the first value that parses wins"
        );
    }
});
