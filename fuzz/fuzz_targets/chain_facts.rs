//! `x-nresilience-chain` (SPEC C3, C4): `nresilience_wire::ChainFacts::parse` on the raw
//! input.
//!
//! Asserts, beyond "no panic": each fact is what its member parser (`depth`,
//! `attempts`, `Criticality::from_header`) reads from the one member with its key —
//! members split at commas, spaces and tabs around each trimmed, the key before the first
//! `=` — and nothing when its key comes twice or not at all, whatever the other members say;
//! and the facts read, written back as a call writes them, read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nresilience_wire::{attempts, depth, ChainFacts};
use nresilience_core::Criticality;

/// The value of the one member keyed `key`, if exactly one is.
fn member<'a>(data: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut found = data
        .split(|&byte| byte == b',')
        .map(|member| member.trim_ascii())
        .filter_map(|member| {
            let at = member.iter().position(|&byte| byte == b'=')?;
            (&member[..at] == key).then_some(&member[at + 1..])
        });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

fuzz_target!(|data: &[u8]| {
    let read = ChainFacts::parse(data);
    assert_eq!(read.depth, member(data, b"depth").and_then(depth), "{data:?}");
    assert_eq!(
        read.attempts,
        member(data, b"attempts").and_then(attempts),
        "{data:?}"
    );
    assert_eq!(
        read.criticality,
        member(data, b"criticality").and_then(Criticality::from_header),
        "{data:?}"
    );
    assert_eq!(ChainFacts::parse(read.to_string().as_bytes()), read);
    if let (Some(d), Some(a), Some(c)) = (read.depth, read.attempts, read.criticality) {
        assert_eq!(read, ChainFacts::written(d, a, c));
    }
});
