//! Where the demo's spans go: an OTLP endpoint when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set
//! (SPEC D2), else a compact console view of warnings. Either way each hop continues its
//! caller's W3C trace context and passes it on, and `NestedRetry` spans are counted per hop
//! for the summary. Metrics: see [`Metrics`].

mod metrics;
mod service_name;

pub use metrics::{Metrics, METRICS_PATH};
pub use service_name::{ServedBy, ServiceNameOnSpans};

use std::sync::Arc;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{global, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::chain::{CurrentRun, NestedCounter, Result};

/// What the console shows unless `RUST_LOG` says: warnings, less reqwest-retry's one per retry
/// (thousands a second in a peer row's storm; the demo counts its attempts itself).
const CONSOLE: &str = "warn,reqwest_retry=error";

/// The spans the demo traces: its own, at `info`. The exporter's own HTTP traffic is not
/// the demo's: its libraries' spans are kept out.
const QUIET: &str =
    "info,h2=off,hyper=off,hyper_util=off,tonic=off,tower=off,reqwest=off,opentelemetry=off";

/// Flushes exported spans and metrics when dropped.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    metrics: Metrics,
}

impl Telemetry {
    /// `GET /metrics` for a hop of this process.
    pub fn metrics_router(&self) -> axum::Router {
        self.metrics.router()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown();
        }
    }
}

/// Installs the process's subscriber and meter provider; `service` names the process
/// (`demo` for the whole chain in one process, or the hop) unless `OTEL_SERVICE_NAME` says
/// otherwise. Call it before building any policy: a policy takes its instruments from the
/// meter provider installed when it is built.
pub fn init(service: &str, run: Arc<CurrentRun>) -> Result<Telemetry> {
    let metrics = Metrics::install(service)?;
    global::set_text_map_propagator(TraceContextPropagator::new());
    let console = tracing_subscriber::fmt::layer()
        .compact()
        .with_writer(std::io::stderr)
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(CONSOLE)));
    let counter = NestedCounter::new(run);
    let registry = tracing_subscriber::registry().with(console).with(counter);

    let endpoint = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ];
    if endpoint.iter().all(|name| std::env::var_os(name).is_none()) {
        // No backend of its own, but a hop in a traced chain: its spans still join the
        // caller's trace and pass it on (W3C `traceparent`), they are only not exported.
        let provider = SdkTracerProvider::builder().build();
        let otel = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("nresilience-demo"))
            .with_filter(EnvFilter::new(QUIET));
        registry.with(otel).try_init()?;
        return Ok(Telemetry {
            provider: Some(provider),
            metrics,
        });
    }
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| service.to_owned());
    let exporter = exporter()?;
    let resource = Resource::builder()
        .with_service_name(service)
        .with_attribute(KeyValue::new("openinference.project.name", project()))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_span_processor(ServiceNameOnSpans::new(
            BatchSpanProcessor::builder(exporter).build(),
        ))
        .build();
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("nresilience-demo"))
        .with_filter(EnvFilter::new(QUIET));
    registry.with(otel).try_init()?;
    Ok(Telemetry {
        provider: Some(provider),
        metrics,
    })
}

/// The OTLP span exporter the standard `OTEL_EXPORTER_OTLP_*` variables describe.
fn exporter() -> Result<opentelemetry_otlp::SpanExporter> {
    use opentelemetry_otlp::WithExportConfig;

    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match Wire::for_signal("TRACES") {
        Wire::Grpc => builder.with_tonic().build()?,
        Wire::Http(protocol) => builder.with_http().with_protocol(protocol).build()?,
    };
    Ok(exporter)
}

/// How an OTLP exporter sends.
pub(crate) enum Wire {
    Grpc,
    Http(opentelemetry_otlp::Protocol),
}

impl Wire {
    /// gRPC when the protocol (`OTEL_EXPORTER_OTLP_{SIGNAL}_PROTOCOL`, else
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`) is `grpc`, else OTLP/HTTP: protobuf, or JSON when asked.
    /// Spelled out: with both HTTP encodings compiled in, the exporter's own fallback is JSON,
    /// while the OpenTelemetry default (and what Phoenix accepts) is protobuf.
    pub(crate) fn for_signal(signal: &str) -> Self {
        use opentelemetry_otlp::Protocol;

        let protocol = std::env::var(format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"))
            .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .unwrap_or_default();
        match protocol.trim().to_ascii_lowercase().as_str() {
            "grpc" => Self::Grpc,
            "http/json" => Self::Http(Protocol::HttpJson),
            _ => Self::Http(Protocol::HttpBinary),
        }
    }
}

/// The tracing backend's project for this run (Phoenix reads it from the resource).
fn project() -> String {
    std::env::var("NRESILIENCE_DEMO_PROJECT").unwrap_or_else(|_| "nresilience-demo".to_owned())
}
