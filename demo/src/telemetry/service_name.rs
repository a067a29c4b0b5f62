//! `service.name` on every span, not only on the resource: some backends (Phoenix among
//! them) drop resource attributes, and when the whole chain runs in one process the resource
//! cannot tell the hops apart anyway.

use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
use opentelemetry_sdk::Resource;

const SERVICE_NAME: &str = "service.name";

/// The hop serving a request, carried in the OpenTelemetry context its server span starts
/// from, so that every span below it (client attempts, `NestedRetry`) inherits it.
#[derive(Debug, Clone, Copy)]
pub struct ServedBy(pub &'static str);

/// Stamps `service.name` on each span as it starts: the hop from the context ([`ServedBy`]),
/// else the resource's service name; then hands the span on.
#[derive(Debug)]
pub struct ServiceNameOnSpans<P> {
    next: P,
    resource_service: Option<Value>,
}

impl<P> ServiceNameOnSpans<P> {
    /// Wraps the processor that exports.
    pub fn new(next: P) -> Self {
        Self {
            next,
            resource_service: None,
        }
    }
}

impl<P: SpanProcessor> SpanProcessor for ServiceNameOnSpans<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        let service = match cx.get::<ServedBy>() {
            Some(ServedBy(hop)) => Some(Value::from(*hop)),
            None => self.resource_service.clone(),
        };
        if let Some(service) = service {
            opentelemetry::trace::Span::set_attribute(span, KeyValue::new(SERVICE_NAME, service));
        }
        self.next.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        self.next.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.next.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.next.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource_service = resource.get(&SERVICE_NAME.into());
        self.next.set_resource(resource);
    }
}
