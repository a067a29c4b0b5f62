//! The README's quick start: two axum services, `edge` calling `inventory`, with nested-retry
//! detection and the chain rules. Run: `cargo run -p nresilience-axum --example quickstart`.

use axum::{extract::State, routing::get, Extension, Router};
use http_body_util::BodyExt;
use nresilience_axum::{CallFailed, NestedRetryLayer, RetryMarker};
use nresilience_client::Client;
use nresilience_core::RetryPolicy;

/// Calls `inventory`, retrying as the policy allows. `?` turns a failed call into the answer
/// that keeps this service's callers from retrying onto the failure too.
async fn stock(State((client, url)): State<(Client, String)>) -> Result<String, CallFailed> {
    let response = client.get(url.as_str()).await?;
    // Read the body: the connection goes back to the pool only then.
    let count = response
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes());
    Ok(format!(
        "in stock: {}",
        String::from_utf8_lossy(&count.unwrap_or_default())
    ))
}

/// The request carries the marker: a retrying call made here would be a nested retry.
async fn count(marker: Option<Extension<RetryMarker>>) -> &'static str {
    if marker.is_some() {
        "42 (nested)"
    } else {
        "42"
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
    let inventory = Router::new().route("/count", get(count));
    let inventory = serve(inventory.layer(NestedRetryLayer::new())).await?;
    // Public-facing: ignores what its callers say (the trust boundary).
    let client = Client::new(RetryPolicy::default());
    let edge = Router::new()
        .route("/stock", get(stock))
        .with_state((client, format!("{inventory}/count")))
        .layer(NestedRetryLayer::new().ignore_inbound());
    let edge = serve(edge).await?;

    let user = Client::new(RetryPolicy::default());
    let response = user.get(format!("{edge}/stock")).await?;
    let body = response.into_body().collect().await?.to_bytes();
    assert_eq!(&body[..], b"in stock: 42 (nested)");
    Ok(())
}
