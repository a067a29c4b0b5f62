//! What a request says about its caller, read at the trust boundary.

use http::header::{HeaderMap, HeaderName};
use nresilience_core::chain::{
    self, deadline_ms, Inbound, ATTEMPTS_HEADER, CRITICALITY_HEADER, DEADLINE_HEADER, DEPTH_HEADER,
};
use nresilience_core::clock;
use nresilience_core::Criticality;

/// The chain headers' names, parsed once.
pub(crate) static DEADLINE: HeaderName = HeaderName::from_static(DEADLINE_HEADER);
static DEPTH: HeaderName = HeaderName::from_static(DEPTH_HEADER);
static ATTEMPTS: HeaderName = HeaderName::from_static(ATTEMPTS_HEADER);
static CRITICALITY: HeaderName = HeaderName::from_static(CRITICALITY_HEADER);

/// The prefix every header of the chain, the marker included, starts with.
const PREFIX: &str = "x-nresilience-";

/// Whether any header's name starts as the chain's do: a scan of the names, cheaper than a
/// lookup of each by name when, as on most requests, there are none.
pub(crate) fn any_chain_header(headers: &HeaderMap) -> bool {
    headers.keys().any(|name| name.as_str().starts_with(PREFIX))
}

/// The caller's word, when the request carries any: how long it will still wait, counted
/// from now, how deep in the chain the request is, and how many attempts could reach it. A
/// value that does not parse, or a header sent twice, is no word at all.
pub(crate) fn read(headers: &HeaderMap) -> Option<Inbound> {
    let left = one(headers, &DEADLINE, deadline_ms);
    let depth = one(headers, &DEPTH, chain::depth);
    let attempts = one(headers, &ATTEMPTS, chain::attempts);
    let criticality = one(headers, &CRITICALITY, Criticality::from_header);
    if left.is_none() && depth.is_none() && attempts.is_none() && criticality.is_none() {
        return None;
    }
    let deadline = left.map(|left| chain::deadline_from(clock::now(), left));
    Some(
        Inbound::new()
            .deadline(deadline)
            .depth(depth.unwrap_or(0))
            .attempts(attempts.unwrap_or(1))
            .criticality(criticality),
    )
}

/// The one usable value of `name`, parsed by `parse`.
fn one<T>(headers: &HeaderMap, name: &HeaderName, parse: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
    let values = headers.get_all(name);
    let value = chain::single(values.iter().map(|value| value.as_bytes())).and_then(parse);
    if value.is_none() && values.iter().next().is_some() {
        tracing::debug!(header = %name, "ignoring an unusable chain header");
    }
    value
}

/// Removes every header through which a caller speaks to this hop, for an edge that does
/// not trust its callers.
pub(crate) fn remove(headers: &mut HeaderMap) {
    for name in [&DEADLINE, &DEPTH, &ATTEMPTS, &CRITICALITY] {
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
            DEPTH_HEADER,
            ATTEMPTS_HEADER,
            CRITICALITY_HEADER,
            nresilience_core::nesting::MARKER_HEADER,
        ] {
            assert!(name.starts_with(PREFIX), "{name}");
            let mut headers = HeaderMap::new();
            headers.insert(HeaderName::from_static(name), HeaderValue::from_static("1"));
            assert!(any_chain_header(&headers), "{name}");
        }
        assert!(!any_chain_header(&HeaderMap::new()));
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
        headers.insert(&DEPTH, HeaderValue::from_static("3"));
        headers.insert(&ATTEMPTS, HeaderValue::from_static("64"));
        headers.insert(&CRITICALITY, HeaderValue::from_static("critical"));
        remove(&mut headers);
        assert!(headers.is_empty());
    }

    #[test]
    fn c4_depth_and_attempts_are_read_alone_or_together() {
        let mut headers = HeaderMap::new();
        headers.insert(&DEPTH, HeaderValue::from_static("3"));
        let told = read(&headers).unwrap();
        assert_eq!((told.deadline, told.depth, told.attempts), (None, 3, 1));
        headers.insert(&ATTEMPTS, HeaderValue::from_static("64"));
        assert_eq!(read(&headers).unwrap().attempts, 64);
        headers.insert(&DEPTH, HeaderValue::from_static("0"));
        assert_eq!(read(&headers).unwrap().depth, 0, "garbled: no depth");
    }

    #[test]
    fn c3_criticality_is_read_exactly() {
        let mut headers = HeaderMap::new();
        headers.insert(&CRITICALITY, HeaderValue::from_static("sheddable"));
        assert_eq!(
            read(&headers).unwrap().criticality,
            Some(Criticality::Sheddable)
        );
        headers.insert(&CRITICALITY, HeaderValue::from_static("SHEDDABLE"));
        assert_eq!(read(&headers), None, "no usable word at all");
    }

    proptest! {
        #[test]
        fn c2_arbitrary_header_bytes_never_panic(
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..3)
        ) {
            let mut headers = HeaderMap::new();
            for value in &values {
                if let Ok(value) = HeaderValue::from_bytes(value) {
                    headers.append(&DEADLINE, value);
                }
            }
            let _ = read(&headers);
        }
    }
}
