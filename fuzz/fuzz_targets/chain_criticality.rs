//! The `criticality` member of `x-nresilience-chain` (SPEC C3, B9):
//! `nresilience_core::Criticality::from_header` on the raw input.
//!
//! Asserts, beyond "no panic": exactly the three lower-case names the client writes
//! (`critical`, `normal`, `sheddable`) are read, each as itself (`as_str` round-trips), and
//! nothing else is — no other case, no whitespace, no prefix.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_core::Criticality;

fuzz_target!(|data: &[u8]| {
    let parsed = Criticality::from_header(data);
    let expected = match data {
        b"critical" => Some(Criticality::Critical),
        b"normal" => Some(Criticality::Normal),
        b"sheddable" => Some(Criticality::Sheddable),
        _ => None,
    };
    assert_eq!(parsed, expected, "{data:?}");
    if let Some(criticality) = parsed {
        assert_eq!(criticality.as_str().as_bytes(), data);
        assert_eq!(
            Criticality::from_header(criticality.as_str().as_bytes()),
            Some(criticality)
        );
    }
});
