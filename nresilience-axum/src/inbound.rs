//! What a request says about its caller, read at the trust boundary.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use nresilience_core::chain::{
    self, deadline_ms, ChainFacts, Inbound, CHAIN_HEADER, DEADLINE_HEADER,
};
use nresilience_core::clock;
use nresilience_core::nesting::MARKER_HEADER;

use crate::marker;

/// The chain headers' names, parsed once.
pub(crate) static DEADLINE: HeaderName = HeaderName::from_static(DEADLINE_HEADER);
static CHAIN: HeaderName = HeaderName::from_static(CHAIN_HEADER);

/// The prefix every header of the chain, the marker included, starts with.
const PREFIX: &str = "x-nresilience-";

/// What a request's `x-nresilience-` headers said: the marker and the caller's word.
///
/// Read in one pass over the header names, comparing only those with the chain's prefix: a
/// lookup by name hashes the name, and three of them cost more than the rest of the layer.
#[derive(Debug, Default)]
pub(crate) struct Said<'a> {
    marked: bool,
    marker_seen: bool,
    deadline: Slot<'a>,
    chain: Slot<'a>,
}

/// The values one chain header arrived with.
#[derive(Debug, Default, Clone, Copy)]
enum Slot<'a> {
    #[default]
    Absent,
    One(&'a HeaderValue),
    /// Sent more than once: no word at all.
    Repeated,
}

impl<'a> Slot<'a> {
    fn push(&mut self, value: &'a HeaderValue) {
        *self = match self {
            Slot::Absent => Slot::One(value),
            Slot::One(_) | Slot::Repeated => Slot::Repeated,
        };
    }

    /// The one usable value, parsed by `parse`.
    fn parse<T>(self, name: &str, parse: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        let value = match self {
            Slot::Absent => return None,
            Slot::One(value) => parse(value.as_bytes()),
            Slot::Repeated => None,
        };
        if value.is_none() {
            tracing::debug!(header = name, "ignoring an unusable chain header");
        }
        value
    }
}

/// What the request's own headers said, or `None` when none has the chain's prefix, as on
/// most requests.
pub(crate) fn said(headers: &HeaderMap) -> Option<Said<'_>> {
    let mut said: Option<Said<'_>> = None;
    for (name, value) in headers {
        let name = name.as_str();
        if !name.starts_with(PREFIX) {
            continue;
        }
        let said = said.get_or_insert_with(Said::default);
        match name {
            MARKER_HEADER => {
                said.marker_seen = true;
                said.marked |= marker::value_is_one(value);
            }
            DEADLINE_HEADER => said.deadline.push(value),
            CHAIN_HEADER => said.chain.push(value),
            _ => {}
        }
    }
    said
}

impl Said<'_> {
    /// Whether the request carries the marker: any of its values is exactly `1` (N4). A
    /// marker with no such value is a debug event, never an error.
    pub(crate) fn marked(&self, headers: &HeaderMap) -> bool {
        if self.marker_seen && !self.marked {
            for value in headers.get_all(&marker::MARKER) {
                tracing::debug!(value = ?value, "ignoring nested-retry marker whose value is not 1");
            }
        }
        self.marked
    }

    /// The caller's word, when the request carries any: how long it will still wait, counted
    /// from now, how deep in the chain the request is, and how many attempts could reach it.
    /// A value that does not parse, or a header sent twice, is no word at all; a fact of
    /// `x-nresilience-chain` that does not parse is no word of that fact.
    pub(crate) fn inbound(&self) -> Option<Inbound> {
        if [self.deadline, self.chain]
            .iter()
            .all(|slot| matches!(slot, Slot::Absent))
        {
            // A marked request from a client that sends no chain headers.
            return None;
        }
        let left = self.deadline.parse(DEADLINE_HEADER, deadline_ms);
        let facts = self
            .chain
            .parse(CHAIN_HEADER, |value| {
                Some(ChainFacts::parse(value)).filter(|facts| !facts.is_empty())
            })
            .unwrap_or_default();
        if left.is_none() && facts.is_empty() {
            return None;
        }
        let deadline = left.map(|left| chain::deadline_from(clock::now(), left));
        Some(
            Inbound::new()
                .deadline(deadline)
                .depth(facts.depth.unwrap_or(0))
                .attempts(facts.attempts.unwrap_or(1))
                .criticality(facts.criticality),
        )
    }
}

/// Removes every header through which a caller speaks to this hop, for an edge that does
/// not trust its callers.
pub(crate) fn remove(headers: &mut HeaderMap) {
    for name in [&DEADLINE, &CHAIN] {
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
        said(headers).and_then(|said| said.inbound())
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
    fn every_chain_header_and_the_marker_share_the_prefix() {
        for name in [
            DEADLINE_HEADER,
            CHAIN_HEADER,
            nresilience_core::nesting::MARKER_HEADER,
        ] {
            assert!(name.starts_with(PREFIX), "{name}");
            let mut headers = HeaderMap::new();
            headers.insert(HeaderName::from_static(name), HeaderValue::from_static("1"));
            assert!(said(&headers).is_some(), "{name}");
        }
        assert!(said(&HeaderMap::new()).is_none());
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
        remove(&mut headers);
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
            match left {
                Some(left) => {
                    let deadline = deadline.expect("one usable value is a deadline");
                    prop_assert!(before + left <= deadline && deadline <= after + left);
                }
                None => prop_assert_eq!(deadline, None),
            }
        }
    }
}
