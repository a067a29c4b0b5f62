//! `x-nresilience-attempt` (SPEC F1): `nresilience_wire::AttemptOf::parse` on the raw input,
//! and the request headers `read_attempt` reads it from.
//!
//! Asserts, beyond "no panic": it reads exactly a positive decimal (ASCII digits only, any
//! length; one too large for a `u32` is `u32::MAX`) optionally followed by exactly `; hedge`;
//! a value it reads is a retry exactly when its number is above 1; and what it reads, stamped
//! on a request by `stamp_attempt_number`, reads back the same.
#![no_main]

use http::HeaderMap;
use libfuzzer_sys::fuzz_target;
use nresilience_fuzz::saturating_count;
use nresilience_wire::{read_attempt, stamp_attempt_number, AttemptOf};

fuzz_target!(|data: &[u8]| {
    let parsed = AttemptOf::parse(data);
    let (digits, hedge) = match data.strip_suffix(b"; hedge") {
        Some(digits) => (digits, true),
        None => (data, false),
    };
    let expected = saturating_count(digits).map(|number| (number, hedge));
    assert_eq!(
        parsed.map(|attempt| (attempt.number(), attempt.is_hedge())),
        expected,
        "{data:?}"
    );
    if let Some(attempt) = parsed {
        assert_eq!(attempt.is_retry(), attempt.number() > 1);
        let mut headers = HeaderMap::new();
        stamp_attempt_number(&mut headers, attempt);
        assert_eq!(read_attempt(&headers), Some(attempt));
    }
});
