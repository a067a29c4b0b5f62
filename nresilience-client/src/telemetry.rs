//! One client span per physical attempt, after the OpenTelemetry HTTP conventions, and the
//! W3C trace context on every attempt (N6).

use http::{HeaderMap, Request, Response};
use nresilience_core::Verdict;
use opentelemetry_http::HeaderInjector;
use tracing::{field, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::body::TransportError;

/// The span of one attempt, a child of the call's span.
///
/// `http.request.resend_count` is set on resends only, as the conventions ask.
pub(crate) fn attempt_span<B>(call: &Span, request: &Request<B>, attempt: u32) -> Span {
    let uri = request.uri();
    let method = request.method().as_str();
    let span = tracing::info_span!(
        parent: call,
        "HTTP",
        otel.name = method,
        otel.kind = "client",
        otel.status_code = field::Empty,
        http.request.method = method,
        server.address = uri.host(),
        server.port = uri.port_u16().map(i64::from),
        url.full = %uri,
        http.request.resend_count = field::Empty,
        http.response.status_code = field::Empty,
        error.type = field::Empty,
    );
    if attempt > 1 {
        // Recorded as i64: unsigned 32-bit fields reach OpenTelemetry as strings.
        span.record("http.request.resend_count", i64::from(attempt - 1));
    }
    span
}

/// Puts the attempt span's trace context into the request headers through the global
/// propagator, so the server continues the same trace (N6).
pub(crate) fn inject_context(span: &Span, headers: &mut HeaderMap) {
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
}

pub(crate) fn record_result<B>(
    span: &Span,
    result: &Result<Response<B>, TransportError>,
    verdict: &Verdict,
) {
    match result {
        Ok(response) => {
            let status = response.status();
            span.record("http.response.status_code", i64::from(status.as_u16()));
            if status.is_server_error() {
                span.record("error.type", status.as_str());
                span.record("otel.status_code", "ERROR");
            }
        }
        Err(_) => {
            span.record("error.type", "request_error");
            span.record("otel.status_code", "ERROR");
        }
    }
    if verdict.is_retryable() {
        tracing::debug!(parent: span, verdict = verdict.as_str(), "attempt failed");
    }
}

pub(crate) fn record_timeout(span: &Span) {
    span.record("error.type", "timeout");
    span.record("otel.status_code", "ERROR");
}
