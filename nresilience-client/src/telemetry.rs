//! One client span per physical attempt, after the OpenTelemetry HTTP conventions, and the
//! W3C trace context on every attempt.

use http::{HeaderMap, Request, StatusCode};
use nresilience_core::Verdict;
use opentelemetry_http::HeaderInjector;
use tracing::{field, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// What an attempt span says of the request, from whichever request type a driver has.
pub(crate) struct Target<'a> {
    pub(crate) method: &'a str,
    pub(crate) host: Option<&'a str>,
    pub(crate) port: Option<u16>,
    pub(crate) url: &'a dyn std::fmt::Display,
}

impl<'a, B> From<&'a Request<B>> for Target<'a> {
    fn from(request: &'a Request<B>) -> Self {
        let uri = request.uri();
        Self {
            method: request.method().as_str(),
            host: uri.host(),
            port: uri.port_u16(),
            url: uri,
        }
    }
}

/// The span of one attempt, a child of the call's span.
///
/// `http.request.resend_count` is set on resends only, as the conventions ask. Integers
/// are recorded as i64: unsigned fields reach OpenTelemetry as strings.
pub(crate) fn attempt_span(call: &Span, target: Target<'_>, attempt: u32) -> Span {
    let span = tracing::info_span!(
        parent: call,
        "HTTP",
        otel.name = target.method,
        otel.kind = "client",
        otel.status_code = field::Empty,
        http.request.method = target.method,
        server.address = target.host,
        server.port = target.port.map(i64::from),
        url.full = %target.url,
        http.request.resend_count = field::Empty,
        http.response.status_code = field::Empty,
        error.type = field::Empty,
    );
    if attempt > 1 {
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

/// Records an attempt's answer: its status, or `None` when the request failed.
pub(crate) fn record_result(span: &Span, status: Option<StatusCode>, verdict: &Verdict) {
    match status {
        Some(status) => {
            span.record("http.response.status_code", i64::from(status.as_u16()));
            if status.is_server_error() {
                span.record("error.type", status.as_str());
                span.record("otel.status_code", "ERROR");
            }
        }
        None => {
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
