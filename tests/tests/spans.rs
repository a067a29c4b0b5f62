//! Spans and trace context across real hops (SPEC N1, N4, N5, N6): the client's attempt
//! spans and `traceparent`, and a frontend that retries calling a backend that retries
//! calling a db, each an axum server on loopback with `NestedRetryLayer`. Spans are read
//! back from an in-memory OpenTelemetry exporter.
//!
//! Its own test binary: the subscriber, tracer provider and propagator are process-wide.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use nresilience_axum::NestedRetryLayer;
use nresilience_client::Client;
use nresilience_core::{Backoff, RetryPolicy};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{global, Value};
use opentelemetry_http::HeaderExtractor;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
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

async fn flaky_server(failures: u32) -> (SocketAddr, Seen) {
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

fn client(name: &'static str) -> Client {
    let policy = RetryPolicy::builder()
        .name(name)
        .backoff(Backoff::none())
        .build()
        .unwrap();
    Client::new(policy)
}

/// A server span per request whose parent is the caller's trace context (N6), as an
/// application sets up its tracing.
async fn continue_trace(request: axum::extract::Request, next: Next) -> Response {
    let parent = global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(request.headers()))
    });
    let span = tracing::info_span!("request", otel.kind = "server");
    let _ = span.set_parent(parent);
    next.run(request).instrument(span).await
}

async fn serve(app: Router) -> SocketAddr {
    let app = app.layer(axum::middleware::from_fn(continue_trace));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A db that fails its first `failures` requests with 503.
async fn db(failures: u32) -> SocketAddr {
    let left = Arc::new(AtomicU32::new(failures));
    let app = Router::new()
        .route(
            "/",
            get(|State(left): State<Arc<AtomicU32>>| async move {
                let fail = left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if fail {
                    StatusCode::SERVICE_UNAVAILABLE.into_response()
                } else {
                    "row".into_response()
                }
            }),
        )
        .with_state(left)
        .layer(NestedRetryLayer::new());
    serve(app).await
}

/// A hop that answers by calling `upstream` with its own retrying client.
async fn hop(name: &'static str, upstream: SocketAddr) -> SocketAddr {
    let state = (client(name), format!("http://{upstream}/"));
    let app = Router::new()
        .route(
            "/",
            get(|State((client, url)): State<(Client, String)>| async move {
                match client.get(url).await {
                    Ok(response) => StatusCode::from_u16(response.status().as_u16())
                        .unwrap()
                        .into_response(),
                    Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
                }
            }),
        )
        .with_state(state)
        .layer(NestedRetryLayer::new());
    serve(app).await
}

#[tokio::test]
async fn n4_n5_the_middle_hop_reports_the_nested_retry_in_the_same_trace() {
    let (exporter, provider) = exporter();
    let db = db(1).await;
    let backend = hop("backend", db).await;
    let frontend = hop("frontend", backend).await;

    let caller = client("user");
    let response: Response = caller
        .get(format!("http://{frontend}/"))
        .await
        .unwrap()
        .into_response();
    assert_eq!(response.status(), 200);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();

    let nested: Vec<&SpanData> = spans.iter().filter(|s| s.name == "NestedRetry").collect();
    let by_policy = |policy: &str| {
        nested
            .iter()
            .filter(|s| attribute(s, "nresilience.policy") == Some(&Value::from(policy.to_owned())))
            .copied()
            .collect::<Vec<_>>()
    };
    // The frontend and the backend each received a marked request and retry onwards: each
    // reports once, from the header. The user's client ran in no retrying context.
    let backend_reports = by_policy("backend");
    assert_eq!(backend_reports.len(), 1, "{nested:#?}");
    assert_eq!(
        attribute(backend_reports[0], "nresilience.source"),
        Some(&Value::from("header"))
    );
    assert_eq!(
        attribute(backend_reports[0], "nresilience.target"),
        Some(&Value::from(db.to_string()))
    );
    assert_eq!(
        attribute(backend_reports[0], "nresilience.attempts"),
        Some(&Value::I64(2))
    );
    // Three 3-attempt clients in series: the backend's call is the third, and up to 27
    // attempts could reach the db through it (C4); the frontend's, the second, 9.
    assert_eq!(
        attribute(backend_reports[0], "nresilience.nesting.depth"),
        Some(&Value::I64(3))
    );
    assert_eq!(
        attribute(backend_reports[0], "nresilience.potential_attempts"),
        Some(&Value::I64(27))
    );
    let frontend_reports = by_policy("frontend");
    assert_eq!(frontend_reports.len(), 1);
    assert_eq!(
        attribute(frontend_reports[0], "nresilience.potential_attempts"),
        Some(&Value::I64(9))
    );
    assert!(by_policy("user").is_empty());

    // One user action, one trace: the backend's report shares the user's trace id.
    let user_attempt = spans
        .iter()
        .find(|s| attribute(s, "url.full") == Some(&Value::from(format!("http://{frontend}/"))))
        .unwrap();
    assert_eq!(
        backend_reports[0].span_context.trace_id(),
        user_attempt.span_context.trace_id()
    );
}

/// F1: the `NestedRetry` span says which attempt of its caller's call the hop was serving,
/// so a loop shows which of the caller's retries set it off; a first attempt, which carries
/// no number, is attempt 1.
#[tokio::test]
async fn f1_the_nested_retry_span_says_which_attempt_of_its_caller_the_hop_served() {
    let (exporter, provider) = exporter();
    let db = db(2).await;
    let backend = hop("serving-a-retry", db).await;
    let single = RetryPolicy::builder()
        .name("caller")
        .max_attempts(1)
        .build()
        .unwrap();
    let caller = Client::new(single);
    for attempt in [None, Some("3")] {
        let mut request = axum::http::Request::get(format!("http://{backend}/"))
            .header("x-nresilience-retrying", "1");
        if let Some(attempt) = attempt {
            request = request.header("x-nresilience-attempt", attempt);
        }
        let request = request.body(axum::body::Body::empty()).unwrap();
        let response: Response = caller.request(request).await.unwrap().into_response();
        assert_eq!(response.status(), 200);
    }
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let mut served: Vec<&Value> = spans
        .iter()
        .filter(|s| s.name == "NestedRetry")
        .filter(|s| {
            attribute(s, "nresilience.policy") == Some(&Value::from("serving-a-retry".to_owned()))
        })
        .map(|s| attribute(s, "nresilience.caller_attempt").expect("the caller's attempt"))
        .collect();
    served.sort_by_key(|value| value.to_string());
    assert_eq!(served, [&Value::I64(1), &Value::I64(3)]);
}

#[tokio::test]
async fn n4_an_edge_that_ignores_the_inbound_marker_reports_nothing_from_it() {
    let (exporter, provider) = exporter();
    let db = db(0).await;
    let state = (client("edge"), format!("http://{db}/"));
    let app = Router::new()
        .route(
            "/",
            get(|State((client, url)): State<(Client, String)>| async move {
                client
                    .get(url)
                    .await
                    .map(|_| "ok")
                    .map_err(|_| StatusCode::BAD_GATEWAY)
            }),
        )
        .with_state(state)
        .layer(NestedRetryLayer::new().ignore_inbound());
    let edge = serve(app).await;
    // A public caller fakes the marker.
    let request = axum::http::Request::get(format!("http://{edge}/"))
        .header("x-nresilience-retrying", "1")
        .body(axum::body::Body::empty())
        .unwrap();
    let single = RetryPolicy::builder().max_attempts(1).build().unwrap();
    let response = Client::new(single).request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let edge_reports = spans
        .iter()
        .filter(|s| s.name == "NestedRetry")
        .filter(|s| attribute(s, "nresilience.policy") == Some(&Value::from("edge")))
        .count();
    assert_eq!(edge_reports, 0);
}

#[tokio::test]
async fn n6_every_attempt_is_a_span_and_carries_the_trace_context() {
    let (exporter, provider) = exporter();
    let (addr, seen) = flaky_server(1).await;
    let response = client("telemetry")
        .get(format!("http://{addr}/"))
        .await
        .unwrap();
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
    let (addr, _) = flaky_server(0).await;
    let outer = RetryPolicy::builder().name("outer").build().unwrap();
    let client = client("telemetry");
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
