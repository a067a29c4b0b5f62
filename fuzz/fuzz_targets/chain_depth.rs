//! The `depth` member of `x-nresilience-chain` (SPEC C4, C5): `nresilience_core::chain::depth`
//! on the raw input.
//!
//! Asserts, beyond "no panic": it reads exactly the strict decimals (ASCII digits only, at
//! most six) from 1 to 100,000, as their value; a depth it reads, re-serialised as plain
//! digits, reads back to the same depth; and the value the next hop writes (depth + 1, C4)
//! reads back as one more while it stays in range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_core::chain::depth;
use nresilience_fuzz::strict_decimal;

fuzz_target!(|data: &[u8]| {
    let parsed = depth(data);
    let expected = strict_decimal(data, 6)
        .filter(|depth| (1..=100_000).contains(depth))
        .map(|depth| u32::try_from(depth).expect("in range"));
    assert_eq!(parsed, expected, "{data:?}");
    if let Some(n) = parsed {
        assert_eq!(depth(n.to_string().as_bytes()), Some(n));
        let next = n + 1;
        assert_eq!(
            depth(next.to_string().as_bytes()),
            (next <= 100_000).then_some(next)
        );
    }
});
