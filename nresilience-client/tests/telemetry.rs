//! Spans and trace context through the client, read back from an in-memory OpenTelemetry
//! exporter (SPEC N5, N6).
//!
//! Its own test binary: the subscriber, tracer provider and propagator are process-wide.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use nresilience_client::Client;
use nresilience_core::{Backoff, RetryPolicy};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{global, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;

fn exporter() -> &'static (InMemorySpanExporter, SdkTracerProvider) {
    static SETUP: OnceLock<(InMemorySpanExporter, SdkTracerProvider)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .unwrap();
        global::set_text_map_propagator(TraceContextPropagator::new());
        (exporter, provider)
    })
}

#[derive(Clone, Default)]
struct Seen {
    failures_left: Arc<AtomicU32>,
    traceparents: Arc<Mutex<Vec<String>>>,
}

async fn flaky(State(seen): State<Seen>, headers: HeaderMap) -> Response {
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    seen.traceparents.lock().unwrap().push(traceparent);
    let fail = seen
        .failures_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if fail {
        StatusCode::SERVICE_UNAVAILABLE.into_response()
    } else {
        "ok".into_response()
    }
}

async fn server(failures: u32) -> (SocketAddr, Seen) {
    let seen = Seen::default();
    seen.failures_left.store(failures, Ordering::SeqCst);
    let app = Router::new()
        .route("/", get(flaky))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn client() -> Client {
    let policy = RetryPolicy::builder()
        .name("telemetry")
        .backoff(Backoff::none())
        .build()
        .unwrap();
    Client::new(policy)
}

#[tokio::test]
async fn n6_every_attempt_is_a_span_and_carries_the_trace_context() {
    let (exporter, provider) = exporter();
    let (addr, seen) = server(1).await;
    let response = client().get(format!("http://{addr}/")).await.unwrap();
    assert_eq!(response.status(), 200);
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let attempts: Vec<&SpanData> = spans
        .iter()
        .filter(|s| attribute(s, "url.full") == Some(&Value::from(format!("http://{addr}/"))))
        .collect();
    assert_eq!(attempts.len(), 2, "one span per physical attempt");
    let resends: Vec<Option<&Value>> = attempts
        .iter()
        .map(|s| attribute(s, "http.request.resend_count"))
        .collect();
    assert_eq!(resends, vec![None, Some(&Value::I64(1))]);
    assert_eq!(
        attribute(attempts[0], "http.response.status_code"),
        Some(&Value::I64(503))
    );

    let traceparents = seen.traceparents.lock().unwrap().clone();
    assert_eq!(traceparents.len(), 2);
    let trace_id = attempts[0].span_context.trace_id().to_string();
    for (traceparent, span) in traceparents.iter().zip(&attempts) {
        // version-traceid-spanid-flags: each attempt is its own parent for the server.
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!(parts[1], trace_id, "one trace across attempts");
        assert_eq!(parts[2], span.span_context.span_id().to_string());
    }
}

#[tokio::test]
async fn n5_a_client_call_inside_a_retrying_call_reports_one_nested_retry() {
    let (exporter, provider) = exporter();
    let (addr, _) = server(0).await;
    let outer = RetryPolicy::builder().name("outer").build().unwrap();
    let client = client();
    let target = addr.to_string();
    outer
        .execute(|_| {
            let client = client.clone();
            let url = format!("http://{addr}/");
            async move { client.get(url).await.map(|_| ()) }
        })
        .await
        .unwrap();
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let nested: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "NestedRetry")
        .filter(|s| attribute(s, "nresilience.target") == Some(&Value::from(target.clone())))
        .collect();
    assert_eq!(nested.len(), 1, "one report, from the client's call");
    let span = nested[0];
    assert_eq!(
        attribute(span, "nresilience.source"),
        Some(&Value::from("in_process"))
    );
    assert_eq!(
        attribute(span, "nresilience.policy"),
        Some(&Value::from("telemetry"))
    );
    assert_eq!(
        attribute(span, "nresilience.method"),
        Some(&Value::from("GET"))
    );
    assert_eq!(
        attribute(span, "nresilience.attempts"),
        Some(&Value::I64(1))
    );
    assert_eq!(
        attribute(span, "nresilience.outcome"),
        Some(&Value::from("succeeded"))
    );
}
