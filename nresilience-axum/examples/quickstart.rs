//! Two axum services, `edge` calling `inventory`, with nested-retry detection and the chain
//! rules. Run: `cargo run -p nresilience-axum --example quickstart`.

use std::net::SocketAddr;

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Router};
use http_body_util::BodyExt;
use nresilience_axum::{CallFailed, NestedRetryLayer, RetryMarker};
use nresilience_client::Client;
use nresilience_core::RetryPolicy;

#[derive(Clone)]
struct Edge {
    client: Client,
    inventory: String,
}

/// Calls `inventory`, retrying as the policy allows. A failed call becomes, through `?`, the
/// answer that keeps this service's callers from retrying onto the failure too.
async fn stock(State(edge): State<Edge>) -> Result<String, CallFailed> {
    let response = edge.client.get(format!("{}/count", edge.inventory)).await?;
    // Read the body: the connection goes back to the pool only once it is.
    let body = response.into_body().collect().await;
    let count = body.map(|body| body.to_bytes()).unwrap_or_default();
    Ok(format!("in stock: {}", String::from_utf8_lossy(&count)))
}

/// The request came from a client that may retry it (it carries the marker): a retrying call
/// made here would be reported as a nested retry.
async fn count(marker: Option<Extension<RetryMarker>>) -> String {
    let nested = if marker.is_some() { " (nested)" } else { "" };
    format!("42{nested}")
}

async fn serve(app: Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(address)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // An internal service: it reads what its callers say.
    let inventory = Router::new()
        .route("/count", get(count))
        .layer(NestedRetryLayer::new());
    let inventory = serve(inventory).await?;

    // The public-facing service: it ignores what its callers say (the trust boundary).
    let state = Edge {
        client: Client::new(RetryPolicy::default()),
        inventory: format!("http://{inventory}"),
    };
    let edge = Router::new()
        .route("/stock", get(stock))
        .with_state(state)
        .layer(NestedRetryLayer::new().ignore_inbound());
    let edge = serve(edge).await?;

    let user = Client::new(RetryPolicy::default());
    let response = user.get(format!("http://{edge}/stock")).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    println!("{status} {}", String::from_utf8_lossy(&body));
    assert_eq!(&body[..], b"in stock: 42 (nested)");
    Ok(())
}
