//! What both HTTP drivers read off an outbound request — whether its method may be retried,
//! whether it already carries the nested-retry marker, and which host's bucket funds it —
//! and the deadline they write on each attempt.

use std::borrow::Cow;
use std::cell::RefCell;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Method;
use nresilience_core::chain::{
    deadline_value, grpc_timeout, ChainFacts, CHAIN_HEADER, DEADLINE_HEADER,
};
use nresilience_core::nesting::{MARKER_HEADER, MARKER_VALUE};
use nresilience_core::Criticality;

/// The marker's name, parsed once.
pub(crate) const MARKER: HeaderName = HeaderName::from_static(MARKER_HEADER);

/// The marker's value, as it is stamped.
pub(crate) const MARKED: HeaderValue = HeaderValue::from_static(MARKER_VALUE);

/// The chain headers' names, parsed once.
const DEADLINE: HeaderName = HeaderName::from_static(DEADLINE_HEADER);
const CHAIN: HeaderName = HeaderName::from_static(CHAIN_HEADER);

/// What every attempt of a call tells the hop it reaches about the chain above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    // One growth of the map for this, the deadline and the marker, not one per insert.
    headers.reserve(3);
    headers.insert(CHAIN, chain_value(call));
}

/// The `x-nresilience-chain` value of `call`. A service's calls at one place in the chain
/// tell the same facts, so the last value made on this thread is reused instead of writing
/// and allocating a new one for each.
fn chain_value(call: CallFacts) -> HeaderValue {
    thread_local! {
        static LAST: LastValue<CallFacts> = const { LastValue::new() };
    }
    LAST.with(|last| {
        last.of(call, || {
            let facts = ChainFacts::written(call.depth, call.potential_attempts, call.criticality);
            HeaderValue::try_from(facts.to_string())
                .unwrap_or_else(|_| unreachable!("digits, letters, '=', ',' and spaces"))
        })
    })
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
        static LAST: LastValue<u64> = const { LastValue::new() };
    }
    LAST.with(|last| last.of(millis, || HeaderValue::from(millis)))
}

/// The header value made last on a thread, and what it was made from.
struct LastValue<K>(RefCell<Option<(K, HeaderValue)>>);

impl<K: Copy + PartialEq> LastValue<K> {
    const fn new() -> Self {
        Self(RefCell::new(None))
    }

    /// The value of `key`: the last one, when it was made from `key`, or a new one from `make`.
    fn of(&self, key: K, make: impl FnOnce() -> HeaderValue) -> HeaderValue {
        let mut last = self.0.borrow_mut();
        match &*last {
            Some((made_from, value)) if *made_from == key => value.clone(),
            _ => {
                let value = make();
                *last = Some((key, value.clone()));
                value
            }
        }
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
    fn c4_every_attempt_carries_its_depth_and_potential_attempts() {
        let mut headers = HeaderMap::new();
        stamp(&mut headers, None);
        assert_eq!(
            headers[CHAIN_HEADER],
            "depth=2, attempts=16, criticality=sheddable"
        );
        // Another call's facts are its own, not the value reused from the call before.
        stamp_call(
            &mut headers,
            CallFacts {
                depth: 1,
                potential_attempts: 3,
                criticality: Criticality::Normal,
            },
        );
        assert_eq!(
            headers[CHAIN_HEADER],
            "depth=1, attempts=3, criticality=normal"
        );
        assert_eq!(headers.get_all(CHAIN_HEADER).iter().count(), 1);
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
