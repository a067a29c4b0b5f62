//! The `depth` member of `x-nresilience-chain` (SPEC C4, C5): `nresilience_wire::depth` on
//! the raw input.
//!
//! Asserts, beyond "no panic": it reads exactly the positive decimals (ASCII digits only, any
//! length), as their value, and one too large for a `u32` as `u32::MAX`, deeper than any loop
//! guard allows (a depth that overflows never restarts the chain); a depth it reads,
//! re-serialised as plain digits, reads back to the same depth; and the value the next hop
//! writes (depth + 1, saturating, C4) reads back as one more, or as the largest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_fuzz::saturating_count;
use nresilience_wire::depth;

fuzz_target!(|data: &[u8]| {
    let parsed = depth(data);
    assert_eq!(parsed, saturating_count(data), "{data:?}");
    if let Some(n) = parsed {
        assert_eq!(depth(n.to_string().as_bytes()), Some(n));
        let next = n.saturating_add(1);
        assert_eq!(depth(next.to_string().as_bytes()), Some(next));
    }
});
