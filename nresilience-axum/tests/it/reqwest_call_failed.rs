//! `?` on the reqwest middleware's error in a handler (feature `reqwest`): the answer says
//! why the call stopped, as it does for a `RetryError`.

#![cfg(feature = "reqwest")]
#![allow(clippy::unwrap_used)]

use axum::http::StatusCode;
use axum::response::IntoResponse;
use nresilience_axum::CallFailed;
use nresilience_client::reqwest::RetryMiddleware;
use nresilience_core::{Backoff, RetryPolicy, StopReason};

use crate::support::loopback;

/// A port nothing listens on: every connection is refused.
async fn refusing() -> String {
    let (listener, addr) = loopback().await;
    drop(listener);
    format!("http://{addr}/")
}

async fn failed_through(
    client: &reqwest_middleware::ClientWithMiddleware,
    url: &str,
) -> CallFailed {
    let failed: Result<(), CallFailed> = async {
        client.get(url).send().await?;
        Ok(())
    }
    .await;
    failed.unwrap_err()
}

// Paused: with the dependency refusing connections, the default policy spreads its
// remaining attempts over the call's 30 s deadline.
#[tokio::test(start_paused = true)]
async fn c6_a_call_the_middleware_retried_answers_with_the_retried_signal() {
    let policy = RetryPolicy::builder()
        .backoff(Backoff::none())
        .build()
        .unwrap();
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::new(policy))
        .build();
    let failed = failed_through(&client, &refusing().await).await;
    assert_eq!(failed.reason(), StopReason::AttemptsExhausted);
    assert_eq!(failed.retried(), Some(3));
    let response = failed.into_response();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(response.headers()["x-nresilience-retried"], "3");
}

#[tokio::test]
async fn c1_c6_an_error_from_outside_the_middleware_answers_502_with_no_signal() {
    // No retry middleware: the error is reqwest's own.
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new()).build();
    let failed = failed_through(&client, &refusing().await).await;
    assert_eq!(failed.signal(), None);
    let response = failed.into_response();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    assert!(!response.headers().contains_key("x-nresilience-retried"));
}
