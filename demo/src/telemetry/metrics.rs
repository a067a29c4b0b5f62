//! Where the library's metrics go (SPEC B12): a Prometheus text page at `GET /metrics` on
//! every hop, and OTLP when the standard variables name an endpoint.
//!
//! One OpenTelemetry meter provider per process, installed as the global one before any
//! policy is built (a policy takes its instruments when it is built). Its Prometheus reader
//! names series as OpenTelemetry's conventions map them (`nresilience.calls` →
//! `nresilience_calls_total`, `nresilience.call.duration` in seconds →
//! `nresilience_call_duration_seconds`), and every series carries the process's
//! `service_name`, so one Prometheus tells the hops apart.

use std::collections::HashSet;

use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use opentelemetry::{global, Key};
use opentelemetry_prometheus::ResourceSelector;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::Resource;
use prometheus::{Encoder, Registry, TextEncoder};

use super::Wire;
use crate::chain::Result;

/// The path every hop serves its metrics on.
pub const METRICS_PATH: &str = "/metrics";

/// The process's meter provider and the registry its Prometheus page reads; flushes the
/// OTLP exporter, if any, when dropped.
#[derive(Debug)]
pub struct Metrics {
    provider: SdkMeterProvider,
    registry: Registry,
}

impl Drop for Metrics {
    fn drop(&mut self) {
        let _ = self.provider.shutdown();
    }
}

impl Metrics {
    /// Installs the global meter provider for the process named `service` (unless
    /// `OTEL_SERVICE_NAME` names it otherwise).
    pub fn install(service: &str) -> Result<Self> {
        let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| service.to_owned());
        let registry = Registry::new();
        let prometheus = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .with_resource_selector(ResourceSelector::from(HashSet::from([
                Key::from_static_str("service.name"),
            ])))
            .build()?;
        let resource = Resource::builder().with_service_name(service).build();
        let mut builder = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(prometheus);
        if let Some(exporter) = otlp_exporter()? {
            builder = builder.with_reader(PeriodicReader::builder(exporter).build());
        }
        let provider = builder.build();
        global::set_meter_provider(provider.clone());
        Ok(Self { provider, registry })
    }

    /// `GET /metrics`: the Prometheus text page of this process's metrics.
    pub fn router(&self) -> Router {
        let registry = self.registry.clone();
        Router::new().route(
            METRICS_PATH,
            get(move || std::future::ready(page(&registry))),
        )
    }
}

fn page(registry: &Registry) -> Response {
    let encoder = TextEncoder::new();
    let mut body = Vec::new();
    match encoder.encode(&registry.gather(), &mut body) {
        Ok(()) => ([(CONTENT_TYPE, encoder.format_type().to_owned())], body).into_response(),
        Err(error) => {
            tracing::warn!(%error, "the metrics page could not be encoded");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the metrics could not be encoded",
            )
                .into_response()
        }
    }
}

/// The OTLP metrics exporter the standard variables describe, when they name an endpoint
/// (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`) and
/// `OTEL_METRICS_EXPORTER` is not `none` (a traces-only backend, say), sent as
/// [`Wire::for_signal`] says.
fn otlp_exporter() -> Result<Option<opentelemetry_otlp::MetricExporter>> {
    use opentelemetry_otlp::WithExportConfig;

    let endpoint = [
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ];
    let off = std::env::var("OTEL_METRICS_EXPORTER")
        .is_ok_and(|exporters| exporters.split(',').any(|e| e.trim() == "none"));
    if off || endpoint.iter().all(|name| std::env::var_os(name).is_none()) {
        return Ok(None);
    }
    let builder = opentelemetry_otlp::MetricExporter::builder();
    let exporter = match Wire::for_signal("METRICS") {
        Wire::Grpc => builder.with_tonic().build()?,
        Wire::Http(protocol) => builder.with_http().with_protocol(protocol).build()?,
    };
    Ok(Some(exporter))
}
