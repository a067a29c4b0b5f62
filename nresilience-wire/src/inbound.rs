//! Reading, at the trust boundary, what a request's own headers say about its caller: the
//! marker (N4), how long the caller will still wait (C2) and where its call sits in the chain
//! (C3, C4).

use http::header::{HeaderMap, HeaderValue};
use nresilience_core::chain::{self, Inbound};
use nresilience_core::clock;

use crate::attempt::AttemptOf;
use crate::deadline::deadline_ms;
use crate::facts::ChainFacts;
use crate::marker::is_marker;
use crate::names::{ATTEMPT, CHAIN, DEADLINE, MARKER, PREFIX};

/// What a request's `x-nresilience-` headers said: the marker and the caller's word.
///
/// Read in one pass over the headers, comparing only the names with the chain's prefix: a
/// lookup by name hashes the name, and three of them cost more than the rest of a server
/// layer.
///
/// ```
/// use http::{HeaderMap, HeaderValue};
/// use nresilience_wire::{RequestHeaders, CHAIN, MARKED, MARKER};
///
/// let mut headers = HeaderMap::new();
/// headers.insert(MARKER, MARKED);
/// headers.insert(CHAIN, HeaderValue::from_static("depth=2, attempts=9"));
/// let read = RequestHeaders::read(&headers);
/// assert!(read.marked(&headers));
/// assert_eq!(read.inbound().map(|inbound| inbound.depth), Some(2));
/// ```
#[derive(Debug, Default)]
pub struct RequestHeaders<'a> {
    marked: bool,
    marker_seen: bool,
    /// Bit `i` set: the header of slot `i` was sent, and `values[i]` is its value, or `None`
    /// when it was sent more than once.
    sent: u8,
    values: [Option<&'a HeaderValue>; 3],
}

/// The slots of [`RequestHeaders::values`].
const DEADLINE_SLOT: usize = 0;
const CHAIN_SLOT: usize = 1;
const ATTEMPT_SLOT: usize = 2;

/// Whether any header has the chain's prefix: most requests carry none, and a server layer
/// reads no further for them.
///
/// A pass over the names alone: the map keeps one entry per name, and walking its entries
/// skips the state that walking name and value pairs carries for repeated names.
#[inline(always)]
#[must_use]
pub fn carries_chain_headers(headers: &HeaderMap) -> bool {
    for name in headers.keys() {
        if name.as_str().starts_with(PREFIX) {
            return true;
        }
    }
    false
}

impl<'a> RequestHeaders<'a> {
    /// What the request's own headers said: call it for a request of which
    /// [`carries_chain_headers`] holds.
    // Inlined into the server layer's path: measured cheaper than the call and the copy of
    // what it read.
    #[inline(always)]
    #[must_use]
    pub fn read(headers: &'a HeaderMap) -> Self {
        let mut read = RequestHeaders::default();
        for (name, value) in headers {
            let Some(suffix) = name.as_str().strip_prefix(PREFIX) else {
                continue;
            };
            // The names' suffixes, checked against the names by
            // `every_chain_header_and_the_marker_share_the_prefix_and_are_read`.
            let slot = match suffix {
                "retrying" => {
                    read.marker_seen = true;
                    read.marked |= is_marker(value);
                    continue;
                }
                "deadline-ms" => DEADLINE_SLOT,
                "chain" => CHAIN_SLOT,
                "attempt" => ATTEMPT_SLOT,
                _ => continue,
            };
            read.push(slot, value);
        }
        read
    }

    fn push(&mut self, slot: usize, value: &'a HeaderValue) {
        let bit = 1 << slot;
        self.values[slot] = (self.sent & bit == 0).then_some(value);
        self.sent |= bit;
    }

    /// The one usable value of `slot`, parsed by `parse`: a header sent twice, or one that
    /// does not parse, is no value.
    fn parse<T>(&self, slot: usize, name: &str, parse: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        if self.sent & (1 << slot) == 0 {
            return None;
        }
        let value = self.values[slot].and_then(|value| parse(value.as_bytes()));
        if value.is_none() {
            tracing::debug!(header = name, "ignoring an unusable chain header");
        }
        value
    }

    /// Whether the request carries the marker: any of its values is exactly `1` (N4). A
    /// marker with no such value is a debug event, never an error.
    #[inline]
    #[must_use]
    pub fn marked(&self, headers: &HeaderMap) -> bool {
        if self.marker_seen && !self.marked {
            ignored_marker(headers);
        }
        self.marked
    }

    /// The caller's word, when the request carries any: how long it will still wait, counted
    /// from now, how deep in the chain the request is, how many attempts could reach it, how
    /// much the caller waits on it and which attempt of its call the request is. A value that
    /// does not parse, or a header sent twice, is no word at all; a fact of
    /// `x-nresilience-chain` that does not parse is no word of that fact.
    #[inline]
    #[must_use]
    pub fn inbound(&self) -> Option<Inbound> {
        if self.sent == 0 {
            // A marked request from a client that sends no chain headers.
            return None;
        }
        self.parse_inbound()
    }

    fn parse_inbound(&self) -> Option<Inbound> {
        let left = self.parse(DEADLINE_SLOT, DEADLINE.as_str(), deadline_ms);
        let facts = self
            .parse(CHAIN_SLOT, CHAIN.as_str(), |value| {
                Some(ChainFacts::parse(value)).filter(|facts| !facts.is_empty())
            })
            .unwrap_or_default();
        let attempt = self.parse(ATTEMPT_SLOT, ATTEMPT.as_str(), AttemptOf::parse);
        if left.is_none() && facts.is_empty() && attempt.is_none() {
            return None;
        }
        let deadline = left.map(|left| chain::deadline_from(clock::now(), left));
        Some(
            Inbound::new()
                .deadline(deadline)
                .depth(facts.depth.unwrap_or(0))
                .attempts(facts.attempts.unwrap_or(1))
                .criticality(facts.criticality)
                .attempt(attempt.map_or(1, AttemptOf::number)),
        )
    }
}

#[cold]
fn ignored_marker(headers: &HeaderMap) {
    for value in headers.get_all(&MARKER) {
        tracing::debug!(value = ?value, "ignoring nested-retry marker whose value is not 1");
    }
}

/// Removes every header through which a caller speaks to this hop, for an edge that does
/// not trust its callers: its deadline, its place in the chain and which attempt of its call
/// the request is (F1), so a public caller can neither shorten this hop's deadline nor move
/// the retry share a fleet layer behind the edge counts.
pub fn remove_caller_headers(headers: &mut HeaderMap) {
    for name in [&DEADLINE, &CHAIN, &ATTEMPT] {
        if headers.remove(name).is_some() {
            tracing::debug!(header = %name, "removed an inbound chain header: this hop ignores it");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;
    use proptest::prelude::*;

    use super::*;

    fn read(headers: &HeaderMap) -> Option<Inbound> {
        RequestHeaders::read(headers).inbound()
    }

    fn with(values: &[&[u8]]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(&DEADLINE, HeaderValue::from_bytes(value).unwrap());
        }
        headers
    }

    #[tokio::test(start_paused = true)]
    async fn c2_the_deadline_counts_from_the_arrival() {
        let now = clock::now();
        let inbound = read(&with(&[b"40"])).unwrap();
        assert_eq!(inbound.deadline, Some(now + Duration::from_millis(40)));
    }

    #[test]
    fn every_chain_header_and_the_marker_share_the_prefix_and_are_read() {
        for (name, slot) in [
            (DEADLINE, Some(DEADLINE_SLOT)),
            (CHAIN, Some(CHAIN_SLOT)),
            (MARKER, None),
        ] {
            assert!(name.as_str().starts_with(PREFIX), "{name}");
            let mut headers = HeaderMap::new();
            headers.insert(name.clone(), HeaderValue::from_static("1"));
            assert!(carries_chain_headers(&headers), "{name}");
            let said = RequestHeaders::read(&headers);
            match slot {
                Some(slot) => {
                    assert_eq!(said.sent, 1 << slot, "{name}");
                    assert!(said.values[slot].is_some(), "{name}");
                    assert!(!said.marker_seen, "{name}");
                }
                None => assert!(said.marked && said.sent == 0, "{name}"),
            }
        }
        assert!(!carries_chain_headers(&HeaderMap::new()));
    }

    #[test]
    fn c2_absent_repeated_or_garbled_is_no_word() {
        assert_eq!(read(&HeaderMap::new()), None);
        assert_eq!(read(&with(&[b"40", b"40"])), None);
        for value in [&b"-1"[..], b"1e3", b"", b"99999999999", b"\xff"] {
            assert_eq!(read(&with(&[value])), None, "{value:?}");
        }
    }

    #[test]
    fn c2_c4_an_edge_removes_them() {
        let mut headers = with(&[b"40"]);
        let facts = "depth=3, attempts=64, criticality=critical";
        headers.insert(&CHAIN, HeaderValue::from_static(facts));
        remove_caller_headers(&mut headers);
        assert!(headers.is_empty());
    }

    #[test]
    fn c4_depth_and_attempts_are_read_alone_or_together() {
        let mut headers = HeaderMap::new();
        headers.insert(&CHAIN, HeaderValue::from_static("depth=3"));
        let told = read(&headers).unwrap();
        assert_eq!((told.deadline, told.depth, told.attempts), (None, 3, 1));
        headers.insert(&CHAIN, HeaderValue::from_static("depth=3, attempts=64"));
        assert_eq!(read(&headers).unwrap().attempts, 64);
        headers.insert(&CHAIN, HeaderValue::from_static("depth=0, attempts=64"));
        let told = read(&headers).unwrap();
        assert_eq!((told.depth, told.attempts), (0, 64), "garbled: no depth");
        headers.append(&CHAIN, HeaderValue::from_static("depth=2"));
        assert_eq!(read(&headers), None, "sent twice: no word at all");
    }

    #[test]
    fn c3_criticality_is_read_exactly() {
        let mut headers = HeaderMap::new();
        headers.insert(&CHAIN, HeaderValue::from_static("criticality=sheddable"));
        assert_eq!(
            read(&headers).unwrap().criticality,
            Some(nresilience_core::Criticality::Sheddable)
        );
        headers.insert(&CHAIN, HeaderValue::from_static("criticality=SHEDDABLE"));
        assert_eq!(read(&headers), None, "no usable word at all");
    }

    proptest! {
        #[test]
        fn c2_any_bytes_give_a_deadline_only_from_one_usable_value(
            values in proptest::collection::vec(
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..24),
                    "[ \t]?[0-9]{0,11}[ \t]?".prop_map(String::into_bytes),
                ],
                0..3,
            )
        ) {
            let mut headers = HeaderMap::new();
            for value in &values {
                if let Ok(value) = HeaderValue::from_bytes(value) {
                    headers.append(&DEADLINE, value);
                }
            }
            let sent: Vec<_> = headers.get_all(&DEADLINE).iter().collect();
            let left = match sent.as_slice() {
                [one] => deadline_ms(one.as_bytes()),
                _ => None,
            };
            let before = clock::now();
            let deadline = read(&headers).and_then(|inbound| inbound.deadline);
            let after = clock::now();
            if let Some(left) = left {
                let deadline = deadline.expect("one usable value is a deadline");
                prop_assert!(before + left <= deadline && deadline <= after + left);
            } else { prop_assert_eq!(deadline, None) }
        }
    }
}
