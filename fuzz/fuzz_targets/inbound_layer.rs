//! Every chain header a hop reads from its caller (SPEC C2–C5) and the marker (N4), through
//! the public `NestedRetryLayer` (the reading, `inbound::read`, is crate-private).
//!
//! Input: `name: value` lines, the request's headers in order (any names: the two chain
//! headers, the marker, others), and directives `:max-depth: N` (the layer's maximum, default
//! 16), `:status: N` (what the handler answers, default 200) and `:ignore:` (an edge layer,
//! `ignore_inbound()`).
//!
//! Asserts, beyond "no panic":
//! - a header never turns the layer's answer into an error, and never changes the handler's
//!   answer (no signal is stamped on a `5xx` when no call was made: C7 only reports calls);
//! - the only answer the layer makes itself is C5's: `508 Loop Detected` with
//!   `x-nresilience-overloaded: 1`, without running the handler, exactly when the depth the
//!   request says is above the maximum;
//! - what the handler sees (`chain::inbound()`, the `Inbound` and `RetryMarker` extensions,
//!   the nesting context) is what the public parsers make of the headers: each header counts
//!   only when sent once and when `deadline_ms` / `ChainFacts::parse` / `AttemptOf::parse`
//!   reads it (the attempt number: F1), and the deadline is `now + left` taken during the
//!   call;
//! - an edge (`ignore_inbound`) removes the three headers and the attempt number (F1) and
//!   sees no context.
#![no_main]

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode};
use libfuzzer_sys::fuzz_target;
use http::HeaderName;
use nresilience_axum::nesting::{self, NestingSource};
use nresilience_axum::{NestedRetryLayer, RetryMarker};
use nresilience_core::chain::{self, Inbound};
use nresilience_wire::{self as wire, ChainFacts};
use nresilience_core::clock;
use nresilience_fuzz::{directive, directive_number, header_lines, header_map, n4_marks, ready};
use tower::{Layer, Service, ServiceExt};

const CHAIN: [HeaderName; 4] = [wire::DEADLINE, wire::CHAIN, wire::MARKER, wire::ATTEMPT];

#[derive(Clone, Debug)]
struct Seen {
    sync_nesting: Option<NestingSource>,
    nesting: Option<NestingSource>,
    sync_inbound: Option<Inbound>,
    inbound: Option<Inbound>,
    inbound_extension: Option<Inbound>,
    marker: Option<RetryMarker>,
    headers: HeaderMap,
}

fn one<T>(headers: &HeaderMap, name: HeaderName, parse: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
    wire::single(headers.get_all(name).iter().map(HeaderValue::as_bytes)).and_then(parse)
}

fuzz_target!(|data: &[u8]| {
    let lines = header_lines(data);
    let headers = header_map(&lines);
    let max_depth = directive(&lines, b"max-depth")
        .and_then(directive_number)
        .map_or(16, |n| u32::try_from(n).unwrap_or(u32::MAX));
    let status = directive(&lines, b"status")
        .and_then(directive_number)
        .and_then(|n| StatusCode::from_u16(u16::try_from(n).ok()?).ok())
        .unwrap_or(StatusCode::OK);
    let edge = directive(&lines, b"ignore").is_some();

    // What the SPEC says the layer makes of the headers, by the public parsers.
    let left = one(&headers, wire::DEADLINE, wire::deadline_ms);
    let facts = one(&headers, wire::CHAIN, |value| Some(ChainFacts::parse(value)))
        .unwrap_or_default();
    let (depth, attempts, criticality) = (facts.depth, facts.attempts, facts.criticality);
    let attempt = one(&headers, wire::ATTEMPT, wire::AttemptOf::parse);
    let said = left.is_some()
        || depth.is_some()
        || attempts.is_some()
        || criticality.is_some()
        || attempt.is_some();
    let marked = headers
        .get_all(wire::MARKER)
        .iter()
        .any(|value| n4_marks(value.as_bytes()));

    let mut layer = NestedRetryLayer::new().max_depth(max_depth);
    if edge {
        layer = layer.ignore_inbound();
    }
    let ran = std::cell::Cell::new(false);
    let handler = tower::service_fn(|request: Request<()>| {
        ran.set(true);
        let sync_nesting = nesting::current();
        let sync_inbound = chain::inbound();
        async move {
            let seen = Seen {
                sync_nesting,
                nesting: nesting::current(),
                sync_inbound,
                inbound: chain::inbound(),
                inbound_extension: request.extensions().get::<Inbound>().copied(),
                marker: request.extensions().get::<RetryMarker>().copied(),
                headers: request.headers().clone(),
            };
            let mut response = Response::new(());
            *response.status_mut() = status;
            response
                .headers_mut()
                .insert("x-handler", HeaderValue::from_static("ran"));
            response.extensions_mut().insert(seen);
            // A handler error type that is not `Infallible`, so an `Err` could be seen.
            Ok::<_, &'static str>(response)
        }
    });
    let mut service = layer.layer(handler);
    let mut request = Request::new(());
    *request.headers_mut() = headers.clone();
    let service = ready(service.ready()).expect("service_fn is always ready");
    let before = clock::now();
    let answer = ready(service.call(request));
    let after = clock::now();
    let response = answer.expect("a header turned the answer into an error");

    if edge {
        assert!(ran.get());
        assert_eq!(response.status(), status);
        let seen = response
            .extensions()
            .get::<Seen>()
            .expect("the handler ran");
        for name in CHAIN {
            assert!(!seen.headers.contains_key(&name), "an edge removes {name}");
        }
        assert_eq!(
            seen.headers.len(),
            headers.len()
                - CHAIN
                    .iter()
                    .map(|n| headers.get_all(n).iter().count())
                    .sum::<usize>()
        );
        assert_eq!((seen.nesting, seen.sync_nesting), (None, None));
        assert_eq!(
            (seen.inbound, seen.sync_inbound, seen.inbound_extension),
            (None, None, None)
        );
        assert_eq!(seen.marker, None);
        return;
    }

    if depth.unwrap_or(0) > max_depth {
        assert!(
            !ran.get(),
            "C5: the handler must not run at depth {depth:?} > {max_depth}"
        );
        assert_eq!(response.status(), StatusCode::LOOP_DETECTED);
        assert_eq!(
            response
                .headers()
                .get(wire::OVERLOADED)
                .map(HeaderValue::as_bytes),
            Some(&b"1"[..]),
            "C5 carries the overload signal"
        );
        return;
    }

    assert!(ran.get(), "the handler runs below the maximum depth");
    assert_eq!(response.status(), status, "the answer is the handler's");
    assert_eq!(
        response.headers().len(),
        1,
        "nothing stamped: {:?}",
        response.headers()
    );
    assert!(!response.headers().contains_key(wire::OVERLOADED));
    assert!(!response.headers().contains_key(wire::RETRIED));
    let seen = response
        .extensions()
        .get::<Seen>()
        .expect("the handler ran");
    assert_eq!(
        seen.headers, headers,
        "the layer passes the headers on untouched"
    );

    let context = marked.then_some(NestingSource::Header);
    assert_eq!(seen.nesting, context, "N4");
    assert_eq!(seen.sync_nesting, context, "N4 (sync call)");

    let told = seen.inbound;
    assert_eq!(told.is_some(), said, "told {told:?}");
    assert_eq!(seen.sync_inbound, told);
    assert_eq!(seen.inbound_extension, told);
    assert_eq!(
        seen.marker,
        marked.then(|| RetryMarker::with_chain(told)),
        "RetryMarker"
    );
    if let Some(told) = told {
        assert_eq!(told.depth, depth.unwrap_or(0), "C4 depth");
        assert_eq!(told.attempts, attempts.unwrap_or(1), "C4 attempts");
        assert_eq!(told.criticality, criticality, "C3");
        assert_eq!(told.attempt, attempt.map_or(1, wire::AttemptOf::number), "F1");
        match (told.deadline, left) {
            (None, None) => {}
            (Some(deadline), Some(left)) => {
                assert!(left <= Duration::from_secs(86_400));
                assert!(deadline >= before + left && deadline <= after + left, "C2");
            }
            (deadline, left) => panic!("C2: deadline {deadline:?} from {left:?}"),
        }
    }
});
