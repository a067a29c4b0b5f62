//! The snippet of docs/observability.md that serves the library's metrics from one's own
//! service (SPEC B12): an OpenTelemetry 0.33 meter provider with a Prometheus reader,
//! installed before the policies, and a `GET /metrics` page reading its registry.

#![allow(clippy::unwrap_used)]

use axum::body::Body;
use axum::http::Request;
use axum::{http::header::CONTENT_TYPE, routing::get, Router};
use http_body_util::BodyExt;
use nresilience_core::RetryPolicy;
use opentelemetry::global;
use opentelemetry_sdk::{metrics::SdkMeterProvider, Resource};
use prometheus::{Encoder, Registry, TextEncoder};
use tower::ServiceExt;

/// Installs the process's meter provider, before any policy is built, and returns the
/// router of its `GET /metrics` page.
fn metrics(service: &str) -> Result<(SdkMeterProvider, Router), Box<dyn std::error::Error>> {
    let registry = Registry::new();
    let reader = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .build()?;
    let provider = SdkMeterProvider::builder()
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_owned())
                .build(),
        )
        .with_reader(reader)
        .build();
    global::set_meter_provider(provider.clone());
    let page = move || {
        let mut body = Vec::new();
        let encoded = TextEncoder::new().encode(&registry.gather(), &mut body);
        let body = encoded.map_or_else(|error| error.to_string().into_bytes(), |()| body);
        std::future::ready(([(CONTENT_TYPE, "text/plain; version=0.0.4")], body))
    };
    Ok((provider, Router::new().route("/metrics", get(page))))
}

#[tokio::test]
async fn b12_a_service_serves_the_library_s_metrics_on_its_own_metrics_page() {
    let (_provider, router) = metrics("inventory").unwrap();
    // Built after the provider: a policy takes its instruments when it is built.
    let policy = RetryPolicy::builder().name("db").build().unwrap();
    policy
        .execute(|_| async { Ok::<(), ()>(()) })
        .await
        .unwrap();
    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let response = router.oneshot(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let page = String::from_utf8_lossy(&body);
    assert!(
        page.contains(r#"nresilience_calls_total{nresilience_criticality="normal",nresilience_outcome="succeeded",nresilience_policy="db""#),
        "{page}"
    );
}
