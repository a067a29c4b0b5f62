//! Whatever a peer puts in the chain's headers, the layer never panics and never answers in
//! the handler's place, except a request whose depth is past the loop guard (SPEC C2–C5).

#![allow(clippy::unwrap_used)]

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode};
use nresilience_axum::NestedRetryLayer;
use proptest::prelude::*;
use tower::{service_fn, Layer, ServiceExt};

const HEADERS: [&str; 3] = [
    "x-nresilience-deadline-ms",
    "x-nresilience-chain",
    "x-nresilience-retrying",
];

/// What the layer answers a request carrying `values` (by header, each possibly repeated).
fn answer(values: &[Vec<Vec<u8>>]) -> StatusCode {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    for (name, values) in HEADERS.iter().zip(values) {
        for value in values {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                request.headers_mut().append(*name, value);
            }
        }
    }
    let handler =
        service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime
        .block_on(NestedRetryLayer::new().layer(handler).oneshot(request))
        .unwrap()
        .status()
}

/// Header values: digits, members of the chain header and near-misses of them, and
/// arbitrary bytes, sometimes repeated.
fn values() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let word = "([0-9]{1,12}|critical|normal|sheddable|1| 1|-3|\\+4|1e3)";
    let member =
        proptest::string::string_regex(&format!("(depth|attempts|criticality|Depth|x)[ =]{word}"))
            .unwrap();
    let value = prop_oneof![
        "[0-9]{1,12}".prop_map(String::into_bytes),
        proptest::collection::vec(member, 1..4).prop_map(|members| members.join(", ").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..16),
    ];
    proptest::collection::vec(value, 0..3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn c2_c5_no_header_value_makes_an_error_answer(
        values in proptest::collection::vec(values(), HEADERS.len())
    ) {
        let status = answer(&values);
        // What reaches the layer: the values a header can carry.
        let sent: Vec<&Vec<u8>> = values[1]
            .iter()
            .filter(|value| HeaderValue::from_bytes(value).is_ok())
            .collect();
        let depth = match sent.as_slice() {
            [one] => nresilience_axum::wire::ChainFacts::parse(one).depth,
            _ => None,
        };
        if depth.is_some_and(|depth| depth > 16) {
            prop_assert_eq!(status, StatusCode::LOOP_DETECTED);
        } else {
            prop_assert_eq!(status, StatusCode::OK);
        }
    }
}

#[test]
fn c4_c5_a_depth_too_large_for_its_type_is_past_the_guard_not_a_new_chain() {
    let chain = |value: &str| vec![vec![], vec![value.as_bytes().to_vec()], vec![]];
    for value in [
        "depth=99999999999999999999, attempts=4",
        "depth=4294967296",
        "depth=100001, attempts=4",
    ] {
        assert_eq!(answer(&chain(value)), StatusCode::LOOP_DETECTED, "{value}");
    }
    assert_eq!(answer(&chain("depth=16, attempts=4")), StatusCode::OK);
}
