//! The overload limit's gauge under delta temporality (O4): a limit that binds and holds
//! still stays in every export while it refuses calls.
//!
//! Its own test binary: the meter provider is process-wide.

#![allow(clippy::unwrap_used)]

use nresilience_core::telemetry::OVERLOAD_LIMIT;
use opentelemetry::global;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{
    InMemoryMetricExporter, InMemoryMetricExporterBuilder, PeriodicReader, SdkMeterProvider,
    Temporality,
};

mod one_at_a_time;

/// The limit's points in the latest export, as `(dependency, value)`.
fn exported_limits(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> Vec<(String, u64)> {
    exporter.reset();
    provider.force_flush().unwrap();
    let mut limits = Vec::new();
    for resource in exporter.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == OVERLOAD_LIMIT) {
                if let AggregatedMetrics::U64(MetricData::Gauge(gauge)) = metric.data() {
                    for point in gauge.data_points() {
                        let dependency = point
                            .attributes()
                            .find(|kv| kv.key.as_str() == "nresilience.dependency")
                            .map(|kv| kv.value.to_string())
                            .unwrap_or_default();
                        limits.push((dependency, point.value()));
                    }
                }
            }
        }
    }
    limits
}

#[test]
fn o4_a_limit_that_holds_still_is_exported_while_it_refuses_calls() {
    let exporter = InMemoryMetricExporterBuilder::new()
        .with_temporality(Temporality::Delta)
        .build();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    global::set_meter_provider(provider.clone());

    let now = std::time::Instant::now();
    let (policy, running) = one_at_a_time::one_running("bound", now);
    assert_eq!(
        exported_limits(&provider, &exporter),
        [("db:5432".to_owned(), 1)],
        "recorded when the dependency's tracker is made"
    );
    assert_eq!(
        exported_limits(&provider, &exporter),
        [],
        "a delta export holds only what was recorded since the last"
    );

    one_at_a_time::refused(&policy, now);
    assert_eq!(
        exported_limits(&provider, &exporter),
        [("db:5432".to_owned(), 1)],
        "the refusal recorded the limit that refused it, though it did not move"
    );
    drop(running);
}
