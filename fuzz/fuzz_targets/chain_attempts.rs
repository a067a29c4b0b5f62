//! The `attempts` member of `x-nresilience-chain` (SPEC C4):
//! `nresilience_core::chain::attempts` on the raw input.
//!
//! Asserts, beyond "no panic": it reads exactly the strict decimals (ASCII digits only, at
//! most ten) from 1 to `u32::MAX`, as their value; a value it reads, re-serialised as plain
//! digits, reads back; and it agrees with `chain::retried`, whose grammar (C6) is the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_core::chain::{attempts, retried};
use nresilience_fuzz::strict_decimal;

fuzz_target!(|data: &[u8]| {
    let parsed = attempts(data);
    let expected = strict_decimal(data, 10)
        .filter(|&n| n >= 1)
        .and_then(|n| u32::try_from(n).ok());
    assert_eq!(parsed, expected, "{data:?}");
    assert_eq!(retried(data), parsed, "the same grammar: {data:?}");
    if let Some(n) = parsed {
        assert_eq!(attempts(n.to_string().as_bytes()), Some(n));
    }
});
