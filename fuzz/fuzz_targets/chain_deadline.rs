//! `x-nresilience-deadline-ms` (SPEC C2): `nresilience_wire::deadline_ms` on the raw
//! input, and `deadline_value` (what the client writes) on a duration taken from the input.
//!
//! Asserts, beyond "no panic":
//! - it reads exactly the strict decimals (one to nine ASCII digits, nothing else) up to a
//!   day, as that many milliseconds;
//! - a value it reads, written back with `deadline_value`, reads back to the same duration;
//! - for any duration, what `deadline_value` writes reads back, is never shorter than the
//!   duration (rounded up, at most a day) and less than 1 ms longer.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use nresilience_wire::{deadline_ms, deadline_value};
use nresilience_fuzz::strict_decimal;

const DAY: Duration = Duration::from_secs(86_400);

fuzz_target!(|data: &[u8]| {
    let parsed = deadline_ms(data);
    let expected = strict_decimal(data, 9)
        .filter(|&millis| millis <= 86_400_000)
        .map(Duration::from_millis);
    assert_eq!(parsed, expected, "{data:?}");
    if let Some(left) = parsed {
        let written = deadline_value(left).to_string();
        assert_eq!(
            deadline_ms(written.as_bytes()),
            Some(left),
            "{left:?} as {written}"
        );
    }

    // Any duration: the first 12 bytes as seconds and nanoseconds.
    let mut bytes = [0u8; 12];
    let n = data.len().min(12);
    bytes[..n].copy_from_slice(&data[..n]);
    let secs = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let nanos = u32::from_le_bytes(bytes[8..].try_into().expect("4 bytes")) % 1_000_000_000;
    for secs in [secs, secs % 100_000, secs % 100] {
        let left = Duration::new(secs, nanos);
        let written = deadline_value(left).to_string();
        let read = deadline_ms(written.as_bytes())
            .unwrap_or_else(|| panic!("{left:?} written as {written} does not read back"));
        let bound = left.min(DAY);
        assert!(read >= bound, "{left:?} written as {written}: shorter");
        assert!(
            read < bound + Duration::from_millis(1),
            "{left:?} written as {written}: 1 ms longer"
        );
    }
});
