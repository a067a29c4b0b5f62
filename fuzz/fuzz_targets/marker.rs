//! The nested-retry marker list (SPEC N4), through the public `NestedRetryLayer`: the parser
//! (`marker::is_marked`) is crate-private. Each input line is one value of
//! `x-nresilience-retrying`; the layer serves the request with a handler that records what it
//! sees.
//!
//! Asserts, beyond "no panic":
//! - the request is marked (the handler runs in the `Header` nesting context, in its
//!   synchronous `call` and in its future, and finds a `RetryMarker` extension) exactly when
//!   N4 says: some value is exactly `1`, or is visible ASCII with a comma-separated element
//!   that is `1` with optional whitespace around it;
//! - the marker alone never answers for the handler: the answer is the handler's, `Ok`,
//!   unchanged, and carries no chain context (`chain::inbound()` is `None`);
//! - behind `ignore_inbound()` no value marks, and the handler does not see the header.
#![no_main]

use std::convert::Infallible;

use http::header::HeaderValue;
use http::{Request, Response, StatusCode};
use libfuzzer_sys::fuzz_target;
use nresilience_axum::nesting::{self, NestingSource};
use nresilience_wire::MARKER;
use nresilience_axum::{NestedRetryLayer, RetryMarker};
use nresilience_core::chain;
use nresilience_fuzz::{lines, n4_marks, ready};
use tower::{Layer, Service, ServiceExt};

#[derive(Clone, Debug, PartialEq)]
struct Seen {
    sync_nesting: Option<NestingSource>,
    nesting: Option<NestingSource>,
    marker: Option<RetryMarker>,
    marker_header_present: bool,
    inbound: Option<chain::Inbound>,
}

fn serve(layer: NestedRetryLayer, request: Request<()>) -> Response<()> {
    let handler = tower::service_fn(|request: Request<()>| {
        let sync_nesting = nesting::current();
        async move {
            let seen = Seen {
                sync_nesting,
                nesting: nesting::current(),
                marker: request.extensions().get::<RetryMarker>().copied(),
                marker_header_present: request.headers().contains_key(MARKER),
                inbound: chain::inbound(),
            };
            let mut response = Response::new(());
            response
                .headers_mut()
                .insert("x-handler", HeaderValue::from_static("ran"));
            response.extensions_mut().insert(seen);
            Ok::<_, Infallible>(response)
        }
    });
    let mut service = layer.layer(handler);
    let service = ready(service.ready()).expect("service_fn is always ready");
    match ready(service.call(request)) {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fuzz_target!(|data: &[u8]| {
    let values: Vec<HeaderValue> = lines(data)
        .filter_map(|line| HeaderValue::from_bytes(line).ok())
        .collect();
    let expected = values.iter().any(|value| n4_marks(value.as_bytes()));
    let request = || {
        let mut request = Request::new(());
        for value in &values {
            request.headers_mut().append(MARKER, value.clone());
        }
        request
    };

    let response = serve(NestedRetryLayer::new(), request());
    assert_eq!(response.status(), StatusCode::OK, "{values:?}");
    assert_eq!(
        response.headers().len(),
        1,
        "the answer is the handler's: {values:?}"
    );
    let seen = response
        .extensions()
        .get::<Seen>()
        .expect("the handler ran");
    let context = expected.then_some(NestingSource::Header);
    assert_eq!(seen.nesting, context, "N4 on {values:?}");
    assert_eq!(seen.sync_nesting, context, "N4 (sync call) on {values:?}");
    assert_eq!(
        seen.marker,
        expected.then(|| RetryMarker::with_chain(None)),
        "RetryMarker extension on {values:?}"
    );
    assert_eq!(seen.marker_header_present, !values.is_empty());
    assert_eq!(
        seen.inbound, None,
        "the marker says nothing about the chain"
    );

    let response = serve(NestedRetryLayer::new().ignore_inbound(), request());
    assert_eq!(response.status(), StatusCode::OK);
    let seen = response
        .extensions()
        .get::<Seen>()
        .expect("the handler ran");
    assert_eq!(seen.nesting, None, "an edge ignores {values:?}");
    assert_eq!(seen.sync_nesting, None, "an edge ignores {values:?}");
    assert_eq!(seen.marker, None);
    assert!(!seen.marker_header_present, "an edge removes the marker");
});
