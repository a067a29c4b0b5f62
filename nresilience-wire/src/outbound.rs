//! What a client writes on each attempt it sends: the marker (N1), where its call sits in the
//! chain (C3, C4) and how long its caller will still wait (C2).

use std::cell::RefCell;
use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use nresilience_core::Criticality;

use crate::deadline::{deadline_value, grpc_timeout, grpc_timeout_value};
use crate::facts::ChainFacts;
use crate::marker::carries_marker;
use crate::names::{CHAIN, DEADLINE, GRPC_TIMEOUT, MARKED, MARKER};

/// Stamps the marker on a request its call may retry, unless it carries it already (N1):
/// on the first attempt too, since by the time a retry goes out the amplification has
/// happened, and never twice.
#[inline]
pub fn stamp_marker(headers: &mut HeaderMap) {
    if !carries_marker(headers) {
        headers.insert(MARKER, MARKED);
    }
}

/// Writes what the hop an attempt reaches should know of the chain above it: its `depth`,
/// the `attempts` that could reach it (C4), and the call's `criticality` (C3). The same for
/// every attempt of a call; [`stamp_deadline`] writes what differs.
///
/// ```
/// use http::HeaderMap;
/// use nresilience_core::Criticality;
/// use nresilience_wire::{stamp_call, ChainFacts, CHAIN};
///
/// let mut headers = HeaderMap::new();
/// stamp_call(&mut headers, 2, 16, Criticality::Sheddable);
/// let read = ChainFacts::parse(headers[CHAIN].as_bytes());
/// assert_eq!(read, ChainFacts::written(2, 16, Criticality::Sheddable));
/// ```
#[inline]
pub fn stamp_call(headers: &mut HeaderMap, depth: u32, attempts: u32, criticality: Criticality) {
    // One growth of the map for this, the deadline and the marker, not one per insert.
    headers.reserve(3);
    headers.insert(CHAIN, chain_value((depth, attempts, criticality)));
}

/// The `x-nresilience-chain` value of a call. A service's calls at one place in the chain
/// tell the same facts, so the last value made on this thread is reused instead of writing
/// and allocating a new one for each.
fn chain_value(call: (u32, u32, Criticality)) -> HeaderValue {
    thread_local! {
        static LAST: LastValue<(u32, u32, Criticality)> = const { LastValue::new() };
    }
    LAST.with(|last| {
        last.of(call, || {
            let (depth, attempts, criticality) = call;
            let facts = ChainFacts::written(depth, attempts, criticality);
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
///
/// ```
/// use std::time::Duration;
/// use http::HeaderMap;
/// use nresilience_wire::{stamp_deadline, DEADLINE};
///
/// let mut headers = HeaderMap::new();
/// stamp_deadline(&mut headers, Some(Duration::from_micros(40_900)));
/// assert_eq!(headers[DEADLINE], "41");
/// ```
#[inline]
pub fn stamp_deadline(headers: &mut HeaderMap, timeout: Option<Duration>) {
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
        if let Some(value) = grpc_timeout_value(millis) {
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
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c2_each_attempt_carries_the_time_its_caller_waits_in_whole_milliseconds() {
        let mut headers = HeaderMap::new();
        stamp(&mut headers, Some(Duration::from_micros(40_900)));
        assert_eq!(
            headers[DEADLINE], "41",
            "rounded up: the caller's cut comes first"
        );
        assert!(headers.get(GRPC_TIMEOUT).is_none());
        stamp(&mut headers, Some(Duration::from_millis(7)));
        assert_eq!(headers.get_all(DEADLINE).iter().count(), 1, "replaced");
        let mut none = HeaderMap::new();
        stamp(&mut none, None);
        assert!(none.get(DEADLINE).is_none());
    }

    #[test]
    fn c2_an_attempt_without_a_timeout_drops_a_forwarded_deadline() {
        let mut forwarded = HeaderMap::new();
        forwarded.insert(DEADLINE, HeaderValue::from_static("40"));
        stamp(&mut forwarded, None);
        assert!(forwarded.get(DEADLINE).is_none());
    }

    #[test]
    fn c2_a_grpc_attempt_gets_the_same_as_its_grpc_timeout() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("30S"));
        stamp(&mut headers, Some(Duration::from_millis(250)));
        assert_eq!(headers[GRPC_TIMEOUT], "250m");
        assert_eq!(headers[DEADLINE], "250");
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
            assert_eq!(headers[GRPC_TIMEOUT], expected, "{set}");
            assert_eq!(headers[DEADLINE], "250", "{set}");
        }
        let mut headers = grpc_request();
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("100m"));
        stamp(&mut headers, None);
        assert_eq!(
            headers[GRPC_TIMEOUT], "100m",
            "no attempt timeout: the caller's"
        );
    }

    fn grpc_request() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
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
            headers[CHAIN],
            "depth=2, attempts=16, criticality=sheddable"
        );
        // Another call's facts are its own, not the value reused from the call before.
        stamp_call(&mut headers, 1, 3, Criticality::Normal);
        assert_eq!(headers[CHAIN], "depth=1, attempts=3, criticality=normal");
        assert_eq!(headers.get_all(CHAIN).iter().count(), 1);
    }

    /// Stamps an attempt of a sheddable call at depth 2 below a 4-attempt caller, itself of 4
    /// attempts.
    fn stamp(headers: &mut HeaderMap, timeout: Option<Duration>) {
        stamp_call(headers, 2, 16, Criticality::Sheddable);
        stamp_deadline(headers, timeout);
    }

    #[test]
    fn n1_the_marker_is_stamped_once() {
        let mut headers = HeaderMap::new();
        stamp_marker(&mut headers);
        stamp_marker(&mut headers);
        assert_eq!(headers.get_all(MARKER).iter().count(), 1);
        assert_eq!(headers[MARKER], "1");
    }
}
