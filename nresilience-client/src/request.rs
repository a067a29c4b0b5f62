//! What both HTTP drivers read off an outbound request — whether its method may be retried,
//! whether it already carries the nested-retry marker, and which host's bucket funds it —
//! and the deadline they write on each attempt.

use std::borrow::Cow;
use std::cell::RefCell;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Method;
use nresilience_core::chain::{
    deadline_value, grpc_timeout, ATTEMPTS_HEADER, CRITICALITY_HEADER, DEADLINE_HEADER,
    DEPTH_HEADER,
};
use nresilience_core::nesting::{MARKER_HEADER, MARKER_VALUE};
use nresilience_core::Criticality;

/// The marker's name, parsed once.
pub(crate) const MARKER: HeaderName = HeaderName::from_static(MARKER_HEADER);

/// The marker's value, as it is stamped.
pub(crate) const MARKED: HeaderValue = HeaderValue::from_static(MARKER_VALUE);

/// The chain headers' names, parsed once.
const DEADLINE: HeaderName = HeaderName::from_static(DEADLINE_HEADER);
const DEPTH: HeaderName = HeaderName::from_static(DEPTH_HEADER);
const ATTEMPTS: HeaderName = HeaderName::from_static(ATTEMPTS_HEADER);
const CRITICALITY: HeaderName = HeaderName::from_static(CRITICALITY_HEADER);

/// What every attempt of a call tells the hop it reaches about the chain above.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallFacts {
    /// The call's depth in the chain.
    pub(crate) depth: u32,
    /// The attempts that could reach the dependency through the call and those above it.
    pub(crate) potential_attempts: u32,
    /// How much the caller waits on the call.
    pub(crate) criticality: Criticality,
}

/// gRPC's own per-call deadline.
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// Writes what the hop an attempt reaches should know of the chain above it: its depth and
/// the attempts that could reach it (C4), and the call's criticality. The same for every
/// attempt of a call; [`stamp_deadline`] writes what differs.
pub(crate) fn stamp_call(headers: &mut HeaderMap, call: CallFacts) {
    // One growth of the map for these and the deadline, not one per insert.
    headers.reserve(4);
    headers.insert(DEPTH, small_number(call.depth));
    headers.insert(ATTEMPTS, small_number(call.potential_attempts));
    headers.insert(
        CRITICALITY,
        HeaderValue::from_static(call.criticality.as_str()),
    );
}

/// Writes how long the attempt's caller will still wait for it (C2), `timeout` being the
/// smaller of the call's deadline left and the attempt's own timeout or ceiling, so the
/// callee's retrying calls give up no later. An attempt without one carries no deadline, even
/// one forwarded from the request being served. A gRPC request gets the same as its
/// `grpc-timeout`, in milliseconds, unless the one the caller set is shorter: an attempt
/// never loosens the caller's own deadline.
pub(crate) fn stamp_deadline(headers: &mut HeaderMap, timeout: Option<Duration>) {
    let Some(timeout) = timeout else {
        headers.remove(DEADLINE);
        return;
    };
    let millis = deadline_value(timeout);
    headers.insert(DEADLINE, millis_value(millis));
    if is_grpc(headers) {
        let set = headers
            .get(GRPC_TIMEOUT)
            .and_then(|value| grpc_timeout(value.as_bytes()));
        if set.is_some_and(|set| set <= timeout) {
            return;
        }
        // gRPC allows at most eight digits per unit.
        let value = format!("{}m", millis.min(99_999_999));
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(GRPC_TIMEOUT, value);
        }
    }
}

/// `millis` as a header value. Consecutive attempts often carry the same number (the attempt
/// timeout or the ceiling, when it is shorter than the deadline left), so the last value made
/// on this thread is reused instead of allocating a new one for each.
fn millis_value(millis: u64) -> HeaderValue {
    thread_local! {
        static LAST: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((cached, value)) if *cached == millis => value.clone(),
            _ => {
                let value = HeaderValue::from(millis);
                *last = Some((millis, value.clone()));
                value
            }
        }
    })
}

/// `n` as a header value, without allocating for the depths and attempt counts real chains
/// have.
fn small_number(n: u32) -> HeaderValue {
    const SMALL: [&str; 65] = [
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
        "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31",
        "32", "33", "34", "35", "36", "37", "38", "39", "40", "41", "42", "43", "44", "45", "46",
        "47", "48", "49", "50", "51", "52", "53", "54", "55", "56", "57", "58", "59", "60", "61",
        "62", "63", "64",
    ];
    match usize::try_from(n).ok().and_then(|i| SMALL.get(i)) {
        Some(text) => HeaderValue::from_static(text),
        None => HeaderValue::from(n),
    }
}

/// Whether the request is a gRPC call, by its content type.
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

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
    fn c2_each_attempt_carries_the_time_its_caller_waits_in_whole_milliseconds() {
        let mut headers = HeaderMap::new();
        stamp(&mut headers, Some(Duration::from_micros(40_900)));
        assert_eq!(
            headers[DEADLINE_HEADER], "41",
            "rounded up: the caller's cut comes first"
        );
        assert!(headers.get("grpc-timeout").is_none());
        stamp(&mut headers, Some(Duration::from_millis(7)));
        assert_eq!(
            headers.get_all(DEADLINE_HEADER).iter().count(),
            1,
            "replaced"
        );
        let mut none = HeaderMap::new();
        stamp(&mut none, None);
        assert!(none.get(DEADLINE_HEADER).is_none());
    }

    #[test]
    fn c2_an_attempt_without_a_timeout_drops_a_forwarded_deadline() {
        let mut forwarded = HeaderMap::new();
        forwarded.insert(DEADLINE, HeaderValue::from_static("40"));
        stamp(&mut forwarded, None);
        assert!(forwarded.get(DEADLINE_HEADER).is_none());
    }

    #[test]
    fn c2_a_grpc_attempt_gets_the_same_as_its_grpc_timeout() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("30S"));
        stamp(&mut headers, Some(Duration::from_millis(250)));
        assert_eq!(headers["grpc-timeout"], "250m");
        assert_eq!(headers[DEADLINE_HEADER], "250");
    }

    #[test]
    fn c2_a_grpc_attempt_never_loosens_the_callers_own_grpc_timeout() {
        for (set, expected) in [
            ("100m", "100m"),
            ("250000u", "250000u"),
            ("1S", "250m"),
            ("not a timeout", "250m"),
        ] {
            let mut headers = grpc_request();
            headers.insert(GRPC_TIMEOUT, HeaderValue::from_static(set));
            stamp(&mut headers, Some(Duration::from_millis(250)));
            assert_eq!(headers["grpc-timeout"], expected, "{set}");
            assert_eq!(headers[DEADLINE_HEADER], "250", "{set}");
        }
        let mut headers = grpc_request();
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("100m"));
        stamp(&mut headers, None);
        assert_eq!(
            headers["grpc-timeout"], "100m",
            "no attempt timeout: the caller's"
        );
    }

    fn grpc_request() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers
    }

    #[test]
    fn c2_a_reused_deadline_value_is_the_number_asked_for() {
        for millis in [40, 40, 7, 40, 0, u64::MAX, u64::MAX, 1] {
            assert_eq!(millis_value(millis), HeaderValue::from(millis), "{millis}");
        }
    }

    #[test]
    fn c4_small_numbers_are_written_as_any_number_is() {
        for n in [0, 1, 9, 10, 16, 64, 65, 1_000, u32::MAX] {
            assert_eq!(small_number(n), HeaderValue::from(n), "{n}");
        }
    }

    #[test]
    fn c4_every_attempt_carries_its_depth_and_potential_attempts() {
        let mut headers = HeaderMap::new();
        stamp(&mut headers, None);
        assert_eq!(headers[DEPTH_HEADER], "2");
        assert_eq!(headers[ATTEMPTS_HEADER], "16");
        assert_eq!(headers[CRITICALITY_HEADER], "sheddable");
    }

    /// Stamps an attempt of a sheddable call at depth 2 below a 4-attempt caller, itself of 4
    /// attempts.
    fn stamp(headers: &mut HeaderMap, timeout: Option<Duration>) {
        let facts = CallFacts {
            depth: 2,
            potential_attempts: 16,
            criticality: Criticality::Sheddable,
        };
        stamp_call(headers, facts);
        stamp_deadline(headers, timeout);
    }

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
