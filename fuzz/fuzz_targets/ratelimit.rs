//! The IETF `RateLimit` field (SPEC K13): `nresilience_wire::{ratelimit_reset, read_ratelimit}`
//! on arbitrary values, one per input line, and its place after `Retry-After` in
//! `retry_after`.
//!
//! Asserts, beyond "no panic":
//! - a reset read is whole seconds of at most 15 digits, from a value that names `r` and `t`;
//! - a reset `read_ratelimit` reads over the lines as one field is the longest of the lines'
//!   own;
//! - `retry_after` with a `Retry-After: 9` beside them is 9 s whatever `RateLimit` says.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use http::header::{HeaderValue, RETRY_AFTER};
use libfuzzer_sys::fuzz_target;
use nresilience_fuzz::values_of;
use nresilience_wire::{ratelimit_reset, read_ratelimit, retry_after, RATELIMIT};

fuzz_target!(|data: &[u8]| {
    let (values, mut headers) = values_of(&RATELIMIT, data);
    for value in &values {
        if let Some(reset) = ratelimit_reset(value.as_bytes()) {
            assert!(reset.as_secs() < 1_000_000_000_000_000, "{value:?}");
            assert_eq!(reset.subsec_nanos(), 0, "{value:?}");
            let text = value.as_bytes();
            let names = |key: &[u8]| text.windows(key.len()).any(|w| w == key);
            assert!(names(b"r=") && names(b"t="), "{value:?}");
        }
    }
    let read = read_ratelimit(&headers);
    if let Some(longest) = read {
        let per_line: Vec<_> = values
            .iter()
            .map(|v| ratelimit_reset(v.as_bytes()))
            .collect();
        assert_eq!(
            per_line.iter().flatten().max(),
            Some(&longest),
            "{values:?}"
        );
    }
    headers.insert(RETRY_AFTER, HeaderValue::from_static("9"));
    assert_eq!(
        retry_after(&headers, UNIX_EPOCH),
        Some(Duration::from_secs(9)),
        "Retry-After before RateLimit"
    );
});
