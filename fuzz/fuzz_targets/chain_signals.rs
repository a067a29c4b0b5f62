//! The answer signals a client reads (SPEC C1, C6): `nresilience_core::chain::{single,
//! overloaded, retried}`, each input line one value of the header.
//!
//! Asserts, beyond "no panic":
//! - `single` is the value when there is exactly one, and `None` for none or several;
//! - `overloaded` is exactly the value `1`;
//! - `retried` reads exactly the strict decimals (at most ten digits) from 1 to `u32::MAX`,
//!   and the attempts it reads, re-serialised, read back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_core::chain::{overloaded, retried, single};
use nresilience_fuzz::{lines, strict_decimal};

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
        let expected = strict_decimal(value, 10)
            .filter(|&n| n >= 1)
            .and_then(|n| u32::try_from(n).ok());
        assert_eq!(attempts, expected, "{value:?}");
        if let Some(n) = attempts {
            assert_eq!(retried(n.to_string().as_bytes()), Some(n));
        }
    }
});
