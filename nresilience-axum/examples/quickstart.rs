//! The README's quick start: two axum services, `edge` calling `inventory`, with nested-retry
//! detection and the chain rules. Run: `cargo run -p nresilience-axum --example quickstart`.

use axum::extract::{Path, State};
use axum::{http::StatusCode, routing::get, Extension, Router};
use http_body_util::BodyExt;
use nresilience_axum::{CallFailed, NestedRetryLayer, RetryMarker};
use nresilience_client::{Attempts, Client};
use nresilience_core::RetryPolicy;

/// Calls `inventory`, retrying as the policy allows. `?` turns a failed call into the answer
/// that keeps this service's callers from retrying onto the failure too.
async fn stock(
    State((client, url)): State<(Client, String)>,
    Path(item): Path<String>,
) -> Result<String, CallFailed> {
    let response = client.get(format!("{url}/{item}")).await?;
    // When its attempts run out on a retryable status (a 503), a client returns that last
    // response: answer it as a failed call, not as a success.
    if !response.status().is_success() {
        return Err(CallFailed::from_response(&response));
    }
    let retries = response
        .extensions()
        .get::<Attempts>()
        .map_or(0, Attempts::retries);
    // Read the body: the connection goes back to the pool only then.
    let count = response.into_body().collect().await;
    let count = count.map(|body| body.to_bytes()).unwrap_or_default();
    let count = String::from_utf8_lossy(&count);
    Ok(format!("in stock: {count} (after {retries} retries)"))
}

/// The request carries the marker: a retrying call made here would be a nested retry.
async fn count(
    Path(item): Path<String>,
    marker: Option<Extension<RetryMarker>>,
) -> Result<&'static str, StatusCode> {
    match (item.as_str(), marker) {
        ("widgets", Some(_)) => Ok("42 (nested)"),
        ("widgets", None) => Ok("42"),
        _ => Err(StatusCode::SERVICE_UNAVAILABLE),
    }
}

async fn serve(app: Router) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Internal: reads what its callers say about the chain.
    let inventory = Router::new().route("/count/{item}", get(count));
    let inventory = serve(inventory.layer(NestedRetryLayer::new())).await?;
    // Public-facing: ignores what its callers say (the trust boundary).
    let client = Client::new(RetryPolicy::default());
    let edge = Router::new()
        .route("/stock/{item}", get(stock))
        .with_state((client, format!("{inventory}/count")))
        .layer(NestedRetryLayer::new().ignore_inbound());
    let edge = serve(edge).await?;

    let user = Client::new(RetryPolicy::default());
    let response = user.get(format!("{edge}/stock/widgets")).await?;
    let body = response.into_body().collect().await?.to_bytes();
    assert_eq!(&body[..], b"in stock: 42 (nested) (after 0 retries)");

    // Inventory answers 503 every time: the edge retried, so it says so, and the user's
    // client does not retry onto the failure (one attempt, a 502 it returns as it came).
    let response = user.get(format!("{edge}/stock/gadgets")).await?;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(response.headers()["x-nresilience-retried"], "3");
    assert_eq!(
        response.extensions().get::<Attempts>().map(Attempts::made),
        Some(1)
    );
    Ok(())
}
