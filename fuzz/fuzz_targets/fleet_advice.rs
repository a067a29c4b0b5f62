//! `x-nresilience-fleet` (SPEC F2, F3): `nresilience_wire::parse_fleet` on the raw input.
//!
//! Asserts, beyond "no panic": it reads exactly `retries=S, accepted=S, allowance=S`, each `S`
//! one digit, a point and three digits from `0.000` to `1.000`, as those thousandths; the
//! advice it reads, written by `fleet_value`, is the input byte for byte (one form on the
//! wire); and the allowance a client would follow is a share in `0..=1`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_wire::{fleet_value, parse_fleet};

/// The reference reading, from the SPEC's format: the three shares in thousandths.
fn reference(data: &[u8]) -> Option<[u16; 3]> {
    let text = std::str::from_utf8(data).ok()?;
    let mut shares = [0_u16; 3];
    let mut rest = text;
    for (i, name) in ["retries=", "accepted=", "allowance="].iter().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix(", ")?;
        }
        rest = rest.strip_prefix(name)?;
        let share = rest.get(..5)?;
        rest = &rest[5..];
        let bytes = share.as_bytes();
        if bytes[1] != b'.' || !share.bytes().enumerate().all(|(at, b)| at == 1 || b.is_ascii_digit()) {
            return None;
        }
        let value: u16 = share.replace('.', "").parse().ok()?;
        if value > 1000 {
            return None;
        }
        shares[i] = value;
    }
    rest.is_empty().then_some(shares)
}

fuzz_target!(|data: &[u8]| {
    let parsed = parse_fleet(data);
    let expected = reference(data);
    assert_eq!(parsed.is_some(), expected.is_some(), "{data:?}");
    if let (Some(advice), Some([retries, accepted, allowance])) = (parsed, expected) {
        let thousandths = |share: f64| (share * 1000.0).round() as u16;
        assert_eq!(thousandths(advice.retries()), retries);
        assert_eq!(thousandths(advice.accepted()), accepted);
        assert_eq!(thousandths(advice.allowance().share()), allowance);
        assert!((0.0..=1.0).contains(&advice.allowance().share()));
        assert_eq!(fleet_value(&advice).as_bytes(), data, "one form on the wire");
    }
});
