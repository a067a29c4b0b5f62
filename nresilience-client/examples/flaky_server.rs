//! A `Client` retrying a GET against a local server that fails twice, then answers.
//!
//! The server listens on a free loopback port, prints every request it receives with its
//! `x-nresilience-retrying` marker, and stops when the example ends.
//!
//! ```text
//! cargo run -p nresilience-client --example flaky_server
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use http_body_util::BodyExt;
use nresilience_client::{wire, Client};
use nresilience_core::{Backoff, RetryPolicy};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let received = Arc::new(AtomicU32::new(0));
    let app = Router::new()
        .route("/orders/7", get(flaky))
        .with_state(Arc::clone(&received));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    // The defaults (3 attempts in all, a retry budget per host) with a shorter backoff, so
    // the example finishes at once.
    let policy = RetryPolicy::builder()
        .backoff(Backoff::default().with_transient_base(Duration::from_millis(20)))
        .build()?;
    let client = Client::new(policy);

    let url = format!("http://{address}/orders/7");
    println!("client: GET {url}");
    let response = client.get(url.as_str()).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    println!(
        "client: {status} after {} attempts: {}",
        received.load(Ordering::Relaxed),
        String::from_utf8_lossy(&body)
    );

    server.abort();
    Ok(())
}

/// Answers `503` to the first two requests and `200` from then on.
async fn flaky(State(received): State<Arc<AtomicU32>>, headers: HeaderMap) -> (StatusCode, String) {
    let number = received.fetch_add(1, Ordering::Relaxed) + 1;
    let marker = headers
        .get(wire::MARKER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("absent");
    let status = if number <= 2 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    println!(
        "server: request {number} ({}: {marker}) -> {status}",
        wire::MARKER
    );
    (status, format!("order 7, served on request {number}"))
}
