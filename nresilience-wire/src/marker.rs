//! The nested-retry marker's value (N1, N4).

use http::header::{HeaderMap, HeaderValue};

use crate::names::{MARKED, MARKER};

/// Whether a marker value says the request is marked: exactly `1`, optional whitespace aside
/// (N4).
///
/// A value is read as an HTTP list: a proxy may fold two marker lines into one, `1, 1`.
/// Anything else — another value, an empty one, one that is not visible ASCII — is no marker.
///
/// ```
/// use http::HeaderValue;
/// use nresilience_wire::is_marker;
///
/// assert!(is_marker(&HeaderValue::from_static("1")));
/// assert!(is_marker(&HeaderValue::from_static("0, 1")));
/// assert!(!is_marker(&HeaderValue::from_static("true")));
/// ```
#[inline]
pub fn is_marker(value: &HeaderValue) -> bool {
    // The first test is what every nresilience client sends; the reading after it is for the rest.
    value.as_bytes() == MARKED.as_bytes() || list_has_one(value)
}

/// [`is_marker`] for a value that is not exactly `1`.
#[inline(never)]
fn list_has_one(value: &HeaderValue) -> bool {
    // `to_str` refuses all but printable ASCII and tab: a non-UTF-8 value is simply no match.
    value.to_str().is_ok_and(|text| {
        text.split(',')
            .any(|element| element.trim_matches([' ', '\t']) == "1")
    })
}

/// Whether a request about to be sent carries the marker as a client stamps it: its headers
/// were forwarded from a request whose sender may retry it. Such a request is not stamped
/// again, and a retrying call made with it is nested (N1, N5).
#[inline]
#[must_use]
pub fn carries_marker(headers: &HeaderMap) -> bool {
    headers.get_all(&MARKER).iter().any(|value| value == MARKED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_marked(headers: &HeaderMap) -> bool {
        crate::RequestHeaders::read(headers).marked(headers)
    }

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(&MARKER, HeaderValue::from_bytes(value).unwrap());
        }
        headers
    }

    #[test]
    fn n1_only_a_marker_of_one_counts_as_carried() {
        let mut headers = HeaderMap::new();
        assert!(!carries_marker(&headers));
        headers.insert(&MARKER, HeaderValue::from_static("yes"));
        assert!(!carries_marker(&headers));
        headers.append(&MARKER, MARKED);
        assert!(carries_marker(&headers));
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
