//! A dependency's answer a handler cannot use, answered as the failed call it was (H4, H8,
//! C1, C6): `CallFailed::from_response` reads the attempts on the response a retrying client
//! returned.

#![allow(clippy::unwrap_used)]

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use nresilience_axum::CallFailed;
use nresilience_client::Client;
use nresilience_core::{Backoff, RetryPolicy, StopReason};

use crate::support::loopback;

/// A dependency answering every request on `/down` 503, on `/overloaded` 503 with the
/// overload signal, and on `/missing` 404.
async fn dependency() -> String {
    let (listener, addr) = loopback().await;
    let app = Router::new()
        .route("/down", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
        .route(
            "/overloaded",
            get(|| async {
                let mut headers = HeaderMap::new();
                headers.insert("x-nresilience-overloaded", "1".parse().unwrap());
                (StatusCode::SERVICE_UNAVAILABLE, headers)
            }),
        )
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// No timer but the backoff's, and no backoff: real sockets, real time, at once.
fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .attempt_timeout(None)
        .deadline(None)
        .attempt_ceiling(None)
        .backoff(Backoff::none())
        .build()
        .unwrap()
}

async fn answered(path: &str) -> CallFailed {
    let url = dependency().await;
    let response = Client::new(policy())
        .get(format!("{url}{path}"))
        .await
        .unwrap();
    assert!(!response.status().is_success());
    CallFailed::from_response(&response)
}

#[tokio::test]
async fn h4_c6_a_5xx_returned_after_the_attempts_ran_out_answers_with_the_retried_signal() {
    let failed = answered("/down").await;
    assert_eq!(failed.reason(), StopReason::AttemptsExhausted);
    assert_eq!(failed.retried(), Some(3));
    let response = failed.into_response();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(response.headers()["x-nresilience-retried"], "3");
}

#[tokio::test]
async fn c1_an_overloaded_answer_returned_answers_with_the_overload_signal() {
    let failed = answered("/overloaded").await;
    assert_eq!(failed.reason(), StopReason::Overloaded);
    let response = failed.into_response();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["x-nresilience-overloaded"], "1");
}

#[tokio::test]
async fn h8_an_answer_the_call_accepted_answers_502_with_no_signal() {
    // A 404 is the dependency's answer, not a failure to retry (H1): one attempt.
    let failed = answered("/missing").await;
    assert_eq!(failed.reason(), StopReason::Permanent);
    assert_eq!(failed.signal(), None);
    assert_eq!(failed.status(), StatusCode::BAD_GATEWAY);
}

#[cfg(feature = "reqwest")]
#[tokio::test]
async fn h4_c6_the_reqwest_middleware_s_answer_says_the_same_through_its_extensions() {
    let url = dependency().await;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(nresilience_client::reqwest::RetryMiddleware::new(policy()))
        .build();
    let response = client.get(format!("{url}/down")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let failed = CallFailed::from_extensions(response.extensions());
    assert_eq!(failed.retried(), Some(3));
}
