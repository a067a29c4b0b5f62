//! `grpc-timeout` (SPEC C2): `nresilience_wire::grpc_timeout` on the raw input bytes.
//!
//! Asserts, beyond "no panic", against the grammar of the gRPC over HTTP/2 spec (one to eight
//! ASCII digits, then one of `H M S m u n`):
//! - it reads exactly the values of that grammar, and to `digits × unit` exactly;
//! - a value it reads, re-serialised in the same unit without leading zeros, and in
//!   milliseconds as the client writes it (`{ms}m`, when that fits in eight digits and
//!   loses nothing), reads back to the same duration.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use nresilience_wire::grpc_timeout;
use nresilience_fuzz::strict_decimal;

fn unit(byte: u8) -> Option<Duration> {
    Some(match byte {
        b'H' => Duration::from_secs(3_600),
        b'M' => Duration::from_secs(60),
        b'S' => Duration::from_secs(1),
        b'm' => Duration::from_millis(1),
        b'u' => Duration::from_micros(1),
        b'n' => Duration::from_nanos(1),
        _ => return None,
    })
}

fuzz_target!(|data: &[u8]| {
    let parsed = grpc_timeout(data);
    let expected = data.split_last().and_then(|(&last, digits)| {
        let n = strict_decimal(digits, 8)?;
        let unit = unit(last)?;
        Some((unit * u32::try_from(n).expect("eight digits fit"), n, last))
    });
    assert_eq!(
        parsed,
        expected.map(|(duration, _, _)| duration),
        "{data:?}"
    );
    let Some((duration, n, last)) = expected else {
        return;
    };
    let again = format!("{n}{}", char::from(last));
    assert_eq!(grpc_timeout(again.as_bytes()), Some(duration), "{again}");
    let millis = duration.as_millis();
    if duration.subsec_nanos() % 1_000_000 == 0 && millis <= 99_999_999 {
        let again = format!("{millis}m");
        assert_eq!(grpc_timeout(again.as_bytes()), Some(duration), "{again}");
    }
});
