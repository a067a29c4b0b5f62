//! The `attempts` member of `x-nresilience-chain` (SPEC C4): `nresilience_wire::attempts` on
//! the raw input.
//!
//! Asserts, beyond "no panic": it reads exactly the positive decimals (ASCII digits only, any
//! length), as their value, and one too large for a `u32` as `u32::MAX` (a count that
//! overflows saturates, never restarts); a value it reads, re-serialised as plain digits,
//! reads back; and it agrees with `nresilience_wire::retried`, whose grammar (C6) is the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_fuzz::saturating_count;
use nresilience_wire::{attempts, retried};

fuzz_target!(|data: &[u8]| {
    let parsed = attempts(data);
    assert_eq!(parsed, saturating_count(data), "{data:?}");
    assert_eq!(retried(data), parsed, "the same grammar: {data:?}");
    if let Some(n) = parsed {
        assert_eq!(attempts(n.to_string().as_bytes()), Some(n));
    }
});
