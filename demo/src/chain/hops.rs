//! The retrying hops as axum apps, and the layers every hop serves with.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http_body_util::BodyExt;
use nresilience_axum::{CallFailed, NestedRetryLayer};
use nresilience_client::Client;
use nresilience_core::{chain, clock, StopReason};
use opentelemetry_http::HeaderExtractor;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::stats::{Hop, Stats};
use crate::telemetry::ServedBy;

/// The longest a hop reads an upstream's answer when its caller said nothing of its
/// deadline: the hops' own call deadline.
const BODY_LIMIT: Duration = Duration::from_secs(30);

#[derive(Clone)]
struct HopState {
    hop: Hop,
    stats: Arc<Stats>,
    client: Client,
    upstream: String,
}

/// A hop that answers by calling `upstream` with its own retrying client.
pub fn hop_app(hop: Hop, stats: Arc<Stats>, client: Client, upstream: String) -> Router {
    let state = HopState {
        hop,
        stats,
        client,
        upstream,
    };
    let app = Router::new().route("/", get(forward)).with_state(state);
    serve_layers(app, hop)
}

async fn forward(State(state): State<HopState>) -> Response {
    state.stats.received(state.hop);
    match state.client.get(state.upstream.as_str()).await {
        Ok(response) => {
            let status = response.status();
            // Read the answer through so the connection goes back to the pool, but no longer
            // than the caller waits; a body that stalls or is cut short is no answer.
            let limit = chain::inbound()
                .and_then(|inbound| inbound.deadline)
                .map_or(BODY_LIMIT, |deadline| {
                    deadline.saturating_duration_since(clock::now())
                });
            match tokio::time::timeout(limit, response.into_body().collect()).await {
                Ok(Ok(_)) => status.into_response(),
                Ok(Err(_)) => (
                    StatusCode::BAD_GATEWAY,
                    "the upstream's answer was cut short",
                )
                    .into_response(),
                Err(_) => {
                    (StatusCode::GATEWAY_TIMEOUT, "the upstream's answer stalled").into_response()
                }
            }
        }
        Err(error) => {
            match error.reason() {
                StopReason::BudgetExhausted => state.stats.refused(state.hop),
                StopReason::Saturated => state.stats.saturated(state.hop),
                _ => {}
            }
            // A refusal (the budget's, or overload control's) answers 503 overloaded, a
            // failure after retries 502 retried: the caller's client retries neither (C1, C6).
            CallFailed::from(error).into_response()
        }
    }
}

/// The layers every nresilience hop serves with: the nested-retry marker and the chain's
/// headers, outermost so everything that calls out runs inside it, and a server span
/// continuing the caller's trace. The frontend faces the users: it trusts none of their
/// headers.
pub(super) fn serve_layers(app: Router, hop: Hop) -> Router {
    let nested = match hop {
        Hop::Frontend => NestedRetryLayer::new().ignore_inbound(),
        Hop::Backend | Hop::Db => NestedRetryLayer::new(),
    };
    traced(app, hop).layer(nested)
}

/// `app` with a server span per request, continuing the caller's trace.
pub(super) fn traced(app: Router, hop: Hop) -> Router {
    app.layer(axum::middleware::from_fn_with_state(hop, continue_trace))
}

/// A server span per request whose parent is the caller's W3C trace context (N6).
async fn continue_trace(State(hop): State<Hop>, request: Request, next: Next) -> Response {
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(request.headers()))
    });
    let span = tracing::info_span!(
        "request",
        otel.name = %format_args!("{} {}", request.method(), request.uri().path()),
        otel.kind = "server",
        hop = hop.name(),
        http.request.method = %request.method(),
        url.path = request.uri().path(),
    );
    // Every span below this one, in this hop, inherits the hop's name (D2).
    let _ = span.set_parent(parent.with_value(ServedBy(hop.name())));
    next.run(request).instrument(span).await
}
