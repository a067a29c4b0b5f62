//! The answer signals a client reads (SPEC C1, C6): `nresilience_wire::{single, overloaded,
//! retried}`, each input line one value of the header.
//!
//! Asserts, beyond "no panic":
//! - `single` is the value when there is exactly one, and `None` for none or several;
//! - `overloaded` is exactly the value `1`;
//! - `retried` reads exactly the positive decimals (digits only, any length), one too large
//!   for a `u32` as `u32::MAX`, and the attempts it reads, re-serialised, read back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_fuzz::{lines, saturating_count};
use nresilience_wire::{overloaded, retried, single};

fuzz_target!(|data: &[u8]| {
    let values: Vec<&[u8]> = if data.is_empty() {
        Vec::new()
    } else {
        lines(data).collect()
    };
    let one = single(values.iter().copied());
    assert_eq!(one, (values.len() == 1).then(|| values[0]), "{values:?}");
    for value in &values {
        assert_eq!(overloaded(value), *value == b"1", "{value:?}");
        let attempts = retried(value);
        assert_eq!(attempts, saturating_count(value), "{value:?}");
        if let Some(n) = attempts {
            assert_eq!(retried(n.to_string().as_bytes()), Some(n));
        }
    }
});
