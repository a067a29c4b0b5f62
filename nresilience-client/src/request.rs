//! What both HTTP drivers read off an outbound request: whether its method may be retried,
//! whether it already carries the nested-retry marker, and which host's bucket funds it.

use std::borrow::Cow;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Method;
use nresilience_core::nesting::{MARKER_HEADER, MARKER_VALUE};

/// The marker's name, parsed once.
pub(crate) const MARKER: HeaderName = HeaderName::from_static(MARKER_HEADER);

/// The marker's value, as it is stamped.
pub(crate) const MARKED: HeaderValue = HeaderValue::from_static(MARKER_VALUE);

/// Whether a method may be retried without the caller's say-so (H3).
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS | Method::TRACE
    )
}

/// Whether the request already carries the marker: its headers were forwarded from a
/// request whose sender may retry it. Such a request is not stamped again, and a retrying
/// call made with it is reported as nested (N1, N5).
pub(crate) fn carries_marker(headers: &HeaderMap) -> bool {
    headers.get_all(&MARKER).iter().any(|value| value == MARKED)
}

/// The key of the host's own bucket (H5): the authority, lower-cased (hosts compare
/// case-insensitively), without allocating when it is lower-case already.
pub(crate) fn host_key(authority: &str) -> Cow<'_, str> {
    if authority.bytes().any(|byte| byte.is_ascii_uppercase()) {
        Cow::Owned(authority.to_ascii_lowercase())
    } else {
        Cow::Borrowed(authority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h3_idempotent_methods() {
        for method in [
            Method::GET,
            Method::HEAD,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
            Method::TRACE,
        ] {
            assert!(is_idempotent(&method), "{method}");
        }
        for method in [Method::POST, Method::PATCH, Method::CONNECT] {
            assert!(!is_idempotent(&method), "{method}");
        }
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
    fn h5_hosts_are_keyed_case_insensitively() {
        assert_eq!(host_key("API.Example.com:8080"), "api.example.com:8080");
        assert!(matches!(host_key("api.example.com"), Cow::Borrowed(_)));
    }
}
