//! Reading the `x-nresilience-retrying` marker and the typed extension that carries
//! it past `tokio::spawn`.

use std::future::Future;

use http::header::{HeaderName, HeaderValue};
use nresilience_core::chain::{self, Inbound};
use nresilience_core::nesting::{self, NestingSource, MARKER_HEADER, MARKER_VALUE};
use nresilience_core::scope::Scoped;

/// The marker's name, parsed once. HTTP/1 names arrive in any case and are lower-cased by the
/// server; HTTP/2 and gRPC send them lower-case: one lookup covers all three.
pub(crate) static MARKER: HeaderName = HeaderName::from_static(MARKER_HEADER);

/// The request being served arrived with the nested-retry marker: its sender may retry it.
///
/// [`NestedRetry`](crate::NestedRetry) inserts it into the request extensions of a marked
/// request (and only of a marked one), next to setting the task-local
/// [`nesting`](crate::nesting) context. The task-local does not cross `tokio::spawn`; the
/// extension does, and [`scope`](Self::scope) carries the context into the spawned task:
///
/// ```
/// use axum::{extract::Extension, routing::get, Router};
/// use nresilience_axum::{nesting, NestedRetryLayer, RetryMarker};
///
/// async fn handler(marker: Option<Extension<RetryMarker>>) -> &'static str {
///     let work = async { nesting::current().map_or("none", |source| source.as_str()) };
///     // Lost in a bare spawn, carried when the marker is present.
///     match marker {
///         Some(Extension(marker)) => tokio::spawn(marker.scope(work)).await.unwrap(),
///         None => tokio::spawn(work).await.unwrap(),
///     }
/// }
///
/// let app: Router = Router::new()
///     .route("/", get(handler))
///     .layer(NestedRetryLayer::new());
/// ```
///
/// Code that holds no request can read [`nesting::current`](crate::nesting::current) and
/// [`chain::inbound`] before spawning and wrap the task in
/// [`nesting::scope`](crate::nesting::scope) and [`chain::serving`] instead. An unmarked
/// request that carried chain headers has the [`chain::Inbound`] extension alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RetryMarker {
    chain: Option<Inbound>,
}

impl RetryMarker {
    /// A marker, as the layer inserts it for a request without chain headers. For tests of
    /// handlers that run without the layer.
    pub const fn new() -> Self {
        RetryMarker { chain: None }
    }

    /// A marker for a request that said `chain` about the chain above it.
    pub const fn with_chain(chain: Option<Inbound>) -> Self {
        RetryMarker { chain }
    }

    /// What the request said about the chain above it, when it said anything.
    pub const fn chain(&self) -> Option<Inbound> {
        self.chain
    }

    /// Where the context came from: always [`NestingSource::Header`].
    pub const fn source(&self) -> NestingSource {
        NestingSource::Header
    }

    /// Runs `future` inside the nesting context this request carried, and with what it said
    /// about the chain, as the layer runs the request itself: wrap a spawned task in it.
    pub fn scope<F: Future>(&self, future: F) -> Scoped<Inbound, Scoped<NestingSource, F>> {
        let chain = self.chain.unwrap_or_default();
        chain::serving(chain, nesting::scope(self.source(), future))
    }
}

/// Whether one of the marker's values is exactly `1`, optional whitespace aside (SPEC N4).
///
/// A value is read as an HTTP list: a proxy may fold two marker lines into one, `1, 1`.
/// Anything else — another value, an empty one, one that is not visible ASCII — is no marker.
#[inline]
pub(crate) fn value_is_one(value: &HeaderValue) -> bool {
    // The first test is what every nresilience client sends; the reading after it is for the rest.
    value.as_bytes() == MARKER_VALUE.as_bytes() || list_has_one(value)
}

/// [`value_is_one`] for a value that is not exactly `1`.
#[inline(never)]
fn list_has_one(value: &HeaderValue) -> bool {
    // `to_str` refuses all but printable ASCII and tab: a non-UTF-8 value is simply no match.
    value.to_str().is_ok_and(|text| {
        text.split(',')
            .any(|element| element.trim_matches([' ', '\t']) == MARKER_VALUE)
    })
}

#[cfg(test)]
mod tests {
    use http::header::HeaderMap;

    use super::*;

    fn is_marked(headers: &HeaderMap) -> bool {
        crate::inbound::said(headers).marked(headers)
    }

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(&MARKER, HeaderValue::from_bytes(value).unwrap());
        }
        headers
    }

    #[test]
    fn n4_marker_value_one_marks() {
        assert!(is_marked(&headers(&[b"1"])));
    }

    #[test]
    fn n4_absent_marker_does_not_mark() {
        assert!(!is_marked(&HeaderMap::new()));
    }

    #[test]
    fn n4_optional_whitespace_around_one_still_marks() {
        for value in [&b" 1"[..], b"1 ", b"\t1\t", b" \t 1 \t "] {
            assert!(is_marked(&headers(&[value])), "{value:?}");
        }
    }

    #[test]
    fn n4_any_of_several_marker_values_being_one_marks() {
        assert!(is_marked(&headers(&[b"0", b"1"])));
        assert!(is_marked(&headers(&[b"1", b"garbage"])));
        assert!(is_marked(&headers(&[b"\xff", b"1"])));
    }

    #[test]
    fn n4_folded_list_with_a_one_element_marks() {
        assert!(is_marked(&headers(&[b"1, 1"])));
        assert!(is_marked(&headers(&[b"0,1"])));
    }

    #[test]
    fn n4_any_other_value_does_not_mark() {
        let others: [&[u8]; 16] = [
            b"",
            b" ",
            b"0",
            b"2",
            b"01",
            b"10",
            b"11",
            b"1.0",
            b"+1",
            b"1 1",
            b"true",
            b"yes",
            b"one",
            b",",
            b" , ",
            b"\xef\xbc\x91", // fullwidth digit one
        ];
        for value in others {
            assert!(!is_marked(&headers(&[value])), "{value:?}");
        }
        assert!(!is_marked(&headers(&[b"0", b"true"])));
    }

    #[test]
    fn n4_non_utf8_value_does_not_mark() {
        assert!(!is_marked(&headers(&[b"\xff"])));
        assert!(!is_marked(&headers(&[b"1\xff"])));
        assert!(!is_marked(&headers(&[b"1, \xc3\x28"])));
    }

    #[test]
    fn n4_marker_extension_scopes_the_header_source() {
        let marker = RetryMarker::new();
        assert_eq!(marker.source(), NestingSource::Header);
        let inside = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(marker.scope(async { nesting::current() }));
        assert_eq!(inside, Some(NestingSource::Header));
    }

    proptest::proptest! {
        #[test]
        fn n4_arbitrary_values_never_panic_and_mark_only_with_a_one(
            values in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..12), 0..4)
        ) {
            let mut map = HeaderMap::new();
            for value in &values {
                if let Ok(value) = HeaderValue::from_bytes(value) {
                    map.append(&MARKER, value);
                }
            }
            let marked = is_marked(&map);
            if !values.iter().flatten().any(|byte| *byte == b'1') {
                proptest::prop_assert!(!marked);
            }
        }

        #[test]
        fn n4_one_padded_with_optional_whitespace_marks_beside_any_other_value(
            before in "[ \t]{0,4}",
            after in "[ \t]{0,4}",
            other in proptest::collection::vec(proptest::num::u8::ANY, 0..12),
        ) {
            let mut map = HeaderMap::new();
            if let Ok(other) = HeaderValue::from_bytes(&other) {
                map.append(&MARKER, other);
            }
            map.append(&MARKER, HeaderValue::from_str(&format!("{before}1{after}")).unwrap());
            proptest::prop_assert!(is_marked(&map));
        }
    }
}
