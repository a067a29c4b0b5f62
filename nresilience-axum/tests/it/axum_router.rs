//! Through a real axum `Router`: `oneshot`, and served over a socket.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::Extension;
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use nresilience_axum::nesting::{self, NestingSource};
use nresilience_axum::{wire, NestedRetry, NestedRetryLayer, RetryMarker};
use nresilience_core::chain;
use tower::{service_fn, Layer, Service, ServiceExt};

use crate::support::{self, Events, MALFORMED, MARKED, UNMARKED};

const MARKER: &str = "x-nresilience-retrying";

async fn report(marker: Option<Extension<RetryMarker>>, headers: HeaderMap) -> String {
    // Read after a real suspension: the context must cover the whole future, not its first poll.
    tokio::time::sleep(Duration::from_millis(1)).await;
    support::report(marker.as_ref().map(|Extension(marker)| marker), &headers)
}

async fn spawned(marker: Option<Extension<RetryMarker>>) -> String {
    let read = || async { nesting::current().map_or("none", |source| source.as_str()) };
    let bare = tokio::spawn(read()).await.expect("the bare task");
    let carried = match marker {
        Some(Extension(marker)) => tokio::spawn(marker.scope(read()))
            .await
            .expect("the carried task"),
        None => "no extension",
    };
    format!("bare={bare} carried={carried}")
}

async fn spawned_chain(marker: Extension<RetryMarker>) -> String {
    let read = || async {
        chain::inbound().map_or("none".to_owned(), |said| {
            let waits = said.deadline.is_some();
            format!(
                "depth={} attempts={} waits={waits}",
                said.depth, said.attempts
            )
        })
    };
    let bare = tokio::spawn(read()).await.expect("the bare task");
    let carried = tokio::spawn(marker.scope(read()))
        .await
        .expect("the carried task");
    format!("bare: {bare}; carried: {carried}")
}

async fn traceparent(headers: HeaderMap) -> String {
    headers
        .get("traceparent")
        .map(|value| value.to_str().expect("an ascii traceparent").to_owned())
        .unwrap_or_default()
}

fn app(layer: NestedRetryLayer) -> Router {
    Router::new()
        .route("/", get(report))
        .route("/spawn", get(spawned))
        .route("/spawn-chain", get(spawned_chain))
        .route("/traceparent", get(traceparent))
        .layer(layer)
}

fn request(markers: &[&[u8]]) -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).expect("a request");
    for marker in markers {
        request.headers_mut().append(
            MARKER,
            HeaderValue::from_bytes(marker).expect("a valid header value"),
        );
    }
    request
}

async fn body_of(router: Router, request: Request<Body>) -> String {
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    String::from_utf8(body.to_vec()).expect("a utf-8 body")
}

// ===== oneshot =====

#[tokio::test]
async fn n4_marker_value_one_sets_header_source() {
    let seen = body_of(app(NestedRetryLayer::new()), request(&[b"1"])).await;
    assert_eq!(seen, MARKED);
}

#[tokio::test]
async fn n4_absent_marker_leaves_the_context_unset() {
    let seen = body_of(app(NestedRetryLayer::new()), request(&[])).await;
    assert_eq!(seen, UNMARKED);
}

#[tokio::test]
async fn n4_marker_padded_with_optional_whitespace_marks() {
    let seen = body_of(app(NestedRetryLayer::new()), request(&[b" 1\t"])).await;
    assert_eq!(seen, MARKED);
}

#[tokio::test]
async fn n4_any_marker_value_being_one_marks() {
    let seen = body_of(app(NestedRetryLayer::new()), request(&[b"yes", b"1"])).await;
    assert_eq!(seen, MARKED);
}

#[tokio::test]
async fn n4_malformed_marker_is_no_marker_and_the_request_is_served() {
    for value in [
        &b"0"[..],
        b"true",
        b"01",
        b"1.0",
        b"",
        b"1 1",
        b"\xff",
        b"1\x80",
    ] {
        let seen = body_of(app(NestedRetryLayer::new()), request(&[value])).await;
        assert_eq!(seen, MALFORMED, "{value:?}");
    }
}

#[tokio::test]
async fn n4_marker_extension_carries_the_context_into_a_spawned_task() {
    let marked = Request::get("/spawn")
        .header(MARKER, "1")
        .body(Body::empty())
        .unwrap();
    let seen = body_of(app(NestedRetryLayer::new()), marked).await;
    assert_eq!(seen, "bare=none carried=header");

    let unmarked = Request::get("/spawn").body(Body::empty()).unwrap();
    let seen = body_of(app(NestedRetryLayer::new()), unmarked).await;
    assert_eq!(seen, "bare=none carried=no extension");
}

#[tokio::test]
async fn c2_c4_the_marker_extension_carries_the_chain_facts_into_a_spawned_task() {
    let told = Request::get("/spawn-chain")
        .header(MARKER, "1")
        .header(wire::CHAIN, "depth=2, attempts=16")
        .header(wire::DEADLINE, "900")
        .body(Body::empty())
        .unwrap();
    let seen = body_of(app(NestedRetryLayer::new()), told).await;
    assert_eq!(seen, "bare: none; carried: depth=2 attempts=16 waits=true");
}

#[tokio::test]
async fn n4_context_covers_the_synchronous_call_and_ends_with_the_request() {
    let inner = service_fn(|_: Request<Body>| {
        let at_call = nesting::current();
        async move { Ok::<_, Infallible>(Response::new((at_call, nesting::current()))) }
    });
    let mut service = NestedRetry::new(inner);

    let response = service.ready().await.unwrap().call(request(&[b"1"])).await;
    let header = Some(NestingSource::Header);
    assert_eq!(response.map(Response::into_body), Ok((header, header)));
    assert_eq!(nesting::current(), None);

    let response = service.ready().await.unwrap().call(request(&[])).await;
    assert_eq!(response.map(Response::into_body), Ok((None, None)));
}

#[tokio::test]
async fn trust_boundary_ignore_inbound_ignores_and_removes_the_marker() {
    let edge = app(NestedRetryLayer::new().ignore_inbound());
    assert_eq!(body_of(edge.clone(), request(&[b"1"])).await, UNMARKED);
    assert_eq!(
        body_of(edge.clone(), request(&[b"1", b"1"])).await,
        UNMARKED
    );
    assert_eq!(body_of(edge, request(&[])).await, UNMARKED);
}

/// F1 at the trust boundary: an edge removes every header through which a caller speaks to
/// it, the attempt number with the chain's; a hop that trusts its callers passes them on.
#[tokio::test]
async fn trust_boundary_an_edge_removes_the_attempt_number_with_the_chain_headers() {
    async fn seen(headers: HeaderMap) -> String {
        let names = [wire::MARKER, wire::DEADLINE, wire::CHAIN, wire::ATTEMPT];
        let seen: Vec<&str> = names
            .iter()
            .filter(|name| headers.contains_key(*name))
            .map(axum::http::HeaderName::as_str)
            .collect();
        seen.join(" ")
    }
    let sent = || {
        Request::get("/")
            .header(wire::MARKER, "1")
            .header(wire::DEADLINE, "500")
            .header(wire::CHAIN, "depth=1, attempts=3")
            .header(wire::ATTEMPT, "2")
            .header("x-other", "kept")
            .body(Body::empty())
            .unwrap()
    };
    let router = |layer: NestedRetryLayer| Router::new().route("/", get(seen)).layer(layer);
    assert_eq!(
        body_of(router(NestedRetryLayer::new()), sent()).await,
        "x-nresilience-retrying x-nresilience-deadline-ms x-nresilience-chain x-nresilience-attempt"
    );
    assert_eq!(
        body_of(router(NestedRetryLayer::new().ignore_inbound()), sent()).await,
        ""
    );
}

#[tokio::test]
async fn n4_layer_leaves_responses_untouched() {
    async fn handler() -> impl IntoResponse {
        (
            StatusCode::IM_A_TEAPOT,
            [("x-from-handler", "kept")],
            "body",
        )
    }
    let bare = Router::new().route("/", get(handler));
    let layered = bare.clone().layer(NestedRetryLayer::new());

    for markers in [&[][..], &[&b"1"[..]], &[&b"junk"[..]]] {
        let expected = bare.clone().oneshot(request(markers)).await.unwrap();
        let actual = layered.clone().oneshot(request(markers)).await.unwrap();
        assert_eq!(actual.status(), expected.status());
        assert_eq!(actual.headers(), expected.headers());
        let expected = to_bytes(expected.into_body(), usize::MAX).await.unwrap();
        let actual = to_bytes(actual.into_body(), usize::MAX).await.unwrap();
        assert_eq!(actual, expected);
    }
}

#[tokio::test]
async fn n4_inner_error_passes_through_unchanged() {
    #[derive(Debug, PartialEq)]
    struct Refused(&'static str);

    for markers in [&[][..], &[&b"1"[..]]] {
        let inner =
            service_fn(|_: Request<Body>| async { Err::<Response<()>, _>(Refused("inner")) });
        let result = NestedRetry::new(inner).oneshot(request(markers)).await;
        assert_eq!(result.map(Response::into_body), Err(Refused("inner")));
    }
}

#[test]
fn n4_malformed_marker_emits_one_debug_event_per_value_and_no_other_marker_does() {
    let events = Events::default();
    let inner = service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(())) });
    let mut service = NestedRetry::new(inner);

    events.record(|| {
        for markers in [&[][..], &[&b"1"[..]], &[&b"2"[..], &b"\xfe"[..]]] {
            drop(service.call(request(markers)));
        }
    });

    assert_eq!(
        events.recorded(),
        [
            r#"DEBUG ignoring nested-retry marker whose value is not 1 value="2""#,
            r#"DEBUG ignoring nested-retry marker whose value is not 1 value="\xfe""#,
        ]
    );
}

#[tokio::test]
async fn n6_traceparent_passes_through_the_layer() {
    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for layer in [
        NestedRetryLayer::new(),
        NestedRetryLayer::new().ignore_inbound(),
    ] {
        let request = Request::get("/traceparent")
            .header("traceparent", TRACEPARENT)
            .header(MARKER, "1")
            .body(Body::empty())
            .unwrap();
        assert_eq!(body_of(app(layer), request).await, TRACEPARENT);
    }
}

// ===== over a socket =====

async fn serve(router: Router) -> std::net::SocketAddr {
    let (listener, addr) = support::loopback().await;
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serving") });
    addr
}

#[tokio::test]
async fn n4_over_a_socket_handler_sees_the_flag_and_extension_when_the_marker_is_one() {
    let addr = serve(app(NestedRetryLayer::new())).await;
    let seen = support::http1_get(addr, "/", &[b"x-nresilience-retrying: 1"]).await;
    assert_eq!(seen, (200, MARKED.to_owned()));
}

#[tokio::test]
async fn n4_over_a_socket_absent_or_malformed_marker_sets_no_flag() {
    let addr = serve(app(NestedRetryLayer::new())).await;
    assert_eq!(
        support::http1_get(addr, "/", &[]).await,
        (200, UNMARKED.to_owned())
    );
    for header in [
        &b"x-nresilience-retrying: 0"[..],
        b"x-nresilience-retrying: true",
        b"x-nresilience-retrying: 1 1",
        b"x-nresilience-retrying: \xff\xfe",
    ] {
        let seen = support::http1_get(addr, "/", &[header]).await;
        assert_eq!(seen, (200, MALFORMED.to_owned()), "{header:?}");
    }
}

#[tokio::test]
async fn n4_over_a_socket_http1_marker_name_matches_in_any_case() {
    let addr = serve(app(NestedRetryLayer::new())).await;
    for header in [
        &b"X-NResilience-Retrying: 1"[..],
        b"X-NRESILIENCE-RETRYING:1",
        b"x-NreSilience-retrying:  1 ",
    ] {
        let seen = support::http1_get(addr, "/", &[header]).await;
        assert_eq!(seen, (200, MARKED.to_owned()), "{header:?}");
    }
}

#[tokio::test]
async fn n4_over_a_socket_one_of_several_marker_lines_being_one_marks() {
    let addr = serve(app(NestedRetryLayer::new())).await;
    let lines: [&[u8]; 2] = [b"X-NResilience-Retrying: 0", b"x-nresilience-retrying: 1"];
    let seen = support::http1_get(addr, "/", &lines).await;
    assert_eq!(seen, (200, MARKED.to_owned()));
}

#[tokio::test]
async fn n4_over_a_socket_spawned_task_gets_the_context_through_the_extension() {
    let addr = serve(app(NestedRetryLayer::new())).await;
    let seen = support::http1_get(addr, "/spawn", &[b"x-nresilience-retrying: 1"]).await;
    assert_eq!(seen, (200, "bare=none carried=header".to_owned()));
}

#[tokio::test]
async fn trust_boundary_over_a_socket_ignore_inbound_ignores_the_marker() {
    let addr = serve(app(NestedRetryLayer::new().ignore_inbound())).await;
    let seen = support::http1_get(addr, "/", &[b"X-NResilience-Retrying: 1"]).await;
    assert_eq!(seen, (200, UNMARKED.to_owned()));
}

#[tokio::test]
async fn c5_a_request_deeper_than_the_maximum_is_answered_508_overloaded_unhandled() {
    let handled = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = std::sync::Arc::clone(&handled);
    let inner = service_fn(move |_: Request<Body>| {
        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async { Ok::<_, Infallible>(Response::new(Body::empty())) }
    });
    let layered = NestedRetryLayer::new().max_depth(2).layer(inner);
    let at_depth = |depth: &'static str| {
        Request::get("/")
            .header("x-nresilience-chain", format!("depth={depth}"))
            .body(Body::empty())
            .unwrap()
    };

    let deep = layered.clone().oneshot(at_depth("3")).await.unwrap();
    assert_eq!(deep.status(), StatusCode::LOOP_DETECTED);
    assert_eq!(deep.headers()["x-nresilience-overloaded"], "1");
    assert_eq!(handled.load(std::sync::atomic::Ordering::Relaxed), 0);

    let allowed = layered.clone().oneshot(at_depth("2")).await.unwrap();
    assert_eq!(allowed.status(), StatusCode::OK);
    // A depth too large to count is deeper than the guard allows, never a new chain.
    let huge = layered
        .clone()
        .oneshot(at_depth("99999999999999999999"))
        .await
        .unwrap();
    assert_eq!(huge.status(), StatusCode::LOOP_DETECTED);
    // A depth that does not parse is no depth: handled.
    let garbled = layered.oneshot(at_depth("9x")).await.unwrap();
    assert_eq!(garbled.status(), StatusCode::OK);
    assert_eq!(handled.load(std::sync::atomic::Ordering::Relaxed), 2);
}
