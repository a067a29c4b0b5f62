//! What a request says about its caller, read at the trust boundary.

use http::header::{HeaderMap, HeaderName};
use nresilience_core::chain::{self, deadline_ms, Inbound, DEADLINE_HEADER};
use nresilience_core::clock;

/// The deadline header's name, parsed once.
pub(crate) static DEADLINE: HeaderName = HeaderName::from_static(DEADLINE_HEADER);

/// The caller's word, when the request carries any: how long it will still wait, counted
/// from now. A value that does not parse, or a header sent twice, is no word at all.
pub(crate) fn read(headers: &HeaderMap) -> Option<Inbound> {
    let values = headers.get_all(&DEADLINE);
    let left = chain::single(values.iter().map(|value| value.as_bytes())).and_then(deadline_ms);
    if left.is_none() && values.iter().next().is_some() {
        tracing::debug!("ignoring an unusable x-nresilience-deadline-ms");
    }
    left.map(|left| Inbound::new().deadline(Some(chain::deadline_from(clock::now(), left))))
}

/// Removes every header through which a caller speaks to this hop, for an edge that does
/// not trust its callers.
pub(crate) fn remove(headers: &mut HeaderMap) {
    if headers.remove(&DEADLINE).is_some() {
        tracing::debug!("removed an inbound x-nresilience-deadline-ms: this hop ignores it");
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
    fn c2_absent_repeated_or_garbled_is_no_word() {
        assert_eq!(read(&HeaderMap::new()), None);
        assert_eq!(read(&with(&[b"40", b"40"])), None);
        for value in [&b"-1"[..], b"1e3", b"", b"99999999999", b"\xff"] {
            assert_eq!(read(&with(&[value])), None, "{value:?}");
        }
    }

    #[test]
    fn c2_an_edge_removes_it() {
        let mut headers = with(&[b"40"]);
        remove(&mut headers);
        assert!(headers.is_empty());
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
