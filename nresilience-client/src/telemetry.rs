//! One client span per physical attempt, after the OpenTelemetry HTTP conventions, and the
//! W3C trace context on every attempt.

use http::{HeaderMap, StatusCode};
use nresilience_core::{Attempt, Verdict};
use opentelemetry_http::HeaderInjector;
use tracing::{field, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Where an attempt goes, from whichever request type a driver has: read for the attempt
/// span only when a subscriber takes the span.
pub(crate) trait Destination: std::fmt::Display {
    fn host(&self) -> Option<&str>;
    fn port(&self) -> Option<u16>;
}

impl Destination for http::Uri {
    fn host(&self) -> Option<&str> {
        Self::host(self)
    }

    fn port(&self) -> Option<u16> {
        self.port_u16()
    }
}

/// The span of one attempt, a child of the call's span.
///
/// `http.request.resend_count` is set on resends only, as the conventions ask. Integers
/// are recorded as i64: unsigned fields reach OpenTelemetry as strings. The fields are
/// evaluated only when a subscriber takes the span.
pub(crate) fn attempt_span(
    call: &Span,
    method: &str,
    destination: &dyn Destination,
    attempt: &Attempt,
) -> Span {
    let span = tracing::info_span!(
        parent: call,
        "HTTP",
        otel.name = method,
        otel.kind = "client",
        otel.status_code = field::Empty,
        http.request.method = method,
        server.address = destination.host(),
        server.port = destination.port().map(i64::from),
        url.full = %destination,
        http.request.resend_count = field::Empty,
        http.response.status_code = field::Empty,
        error.type = field::Empty,
        nresilience.hedge = field::Empty,
    );
    if attempt.is_retry() && !span.is_disabled() {
        // A hedge is a resend too (HG3).
        span.record("http.request.resend_count", i64::from(attempt.number() - 1));
        if attempt.is_hedge() {
            span.record("nresilience.hedge", true);
        }
    }
    span
}

/// Puts the attempt span's trace context into the request headers through the global
/// propagator, so the server continues the same trace (N6).
pub(crate) fn inject_context(span: &Span, headers: &mut HeaderMap) {
    // A span no subscriber took has the empty context, which puts nothing in the headers.
    if span.is_disabled() {
        return;
    }
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
}

/// Records an attempt's answer: its status, or `None` when the request failed.
pub(crate) fn record_result(span: &Span, status: Option<StatusCode>, verdict: &Verdict) {
    if verdict.is_retryable() {
        tracing::debug!(parent: span, verdict = verdict.as_str(), "attempt failed");
    }
    // Recording into a span no subscriber took looks each field up by name for nothing.
    if span.is_disabled() {
        return;
    }
    if let Some(status) = status {
        span.record("http.response.status_code", i64::from(status.as_u16()));
        if status.is_server_error() {
            span.record("error.type", status.as_str());
            span.record("otel.status_code", "ERROR");
        }
    } else {
        span.record("error.type", "request_error");
        span.record("otel.status_code", "ERROR");
    }
}

pub(crate) fn record_timeout(span: &Span) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", "timeout");
    span.record("otel.status_code", "ERROR");
}
