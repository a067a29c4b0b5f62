//! What both HTTP drivers — the tower layer and the reqwest middleware — do around a call and
//! each of its attempts: the opt-in rule, the call's start, the headers every attempt carries,
//! an attempt's span and deadline, and what an attempt's end hands the call.

use http::{HeaderMap, Method, StatusCode};
use nresilience_core::call::{Attempt, Call, CallOptions, Step};
use nresilience_core::{clock, RetryPolicy, Verdict};
use tracing::Span;

use crate::layer::Retryable;
use crate::request::{
    carries_marker, host_key, is_idempotent, stamp_call, stamp_deadline, CallFacts, MARKED, MARKER,
};
use crate::telemetry::{self, Destination};

/// Whether the caller lets a request be retried: its [`Retryable`] extension when it has one,
/// which wins both ways; otherwise an idempotent method (H3), or any with the driver's
/// `retry_non_idempotent`.
#[inline]
pub(crate) fn opted_in(
    retryable: Option<&Retryable>,
    retry_non_idempotent: bool,
    method: &Method,
) -> bool {
    match retryable {
        Some(Retryable(choice)) => *choice,
        None => retry_non_idempotent || is_idempotent(method),
    }
}

/// Starts the call of a request to `authority` under `policy`, at most one attempt unless it
/// `may_retry`: charged to the host's own bucket (H5), and nested when the request already
/// carries the marker (N5). Started outside the retrying scope: the call reads whether it is
/// nested itself.
#[inline(always)]
pub(crate) fn start<E>(
    policy: &RetryPolicy,
    may_retry: bool,
    method: &Method,
    authority: &str,
    headers: &HeaderMap,
) -> Call<E> {
    let key = host_key(authority);
    let options = CallOptions::new()
        .may_retry(may_retry)
        .marked(carries_marker(headers))
        .target(authority)
        .method(method.as_str())
        .key(&key);
    Call::start(policy, clock::now(), options)
}

/// Writes what every attempt of `call` carries: the marker when the call may retry (N1) —
/// on the first attempt too, since by the time a retry goes out the amplification has
/// happened, and never twice — and what the call says about the chain (C3, C4).
#[inline(always)]
pub(crate) fn stamp<E>(call: &Call<E>, headers: &mut HeaderMap) {
    if call.may_retry() && !carries_marker(headers) {
        headers.insert(MARKER, MARKED);
    }
    let facts = CallFacts {
        depth: call.depth(),
        potential_attempts: call.potential_attempts(),
        criticality: call.criticality(),
    };
    stamp_call(headers, facts);
}

/// The span of `attempt`, after the OpenTelemetry HTTP conventions: a child of the call's.
#[inline]
pub(crate) fn attempt_span<E>(
    call: &Call<E>,
    attempt: &Attempt,
    method: &str,
    destination: &dyn Destination,
) -> Span {
    telemetry::attempt_span(call.span(), method, destination, attempt)
}

/// Writes what differs from attempt to attempt into the headers it is sent with: its
/// deadline (C2) and its span's trace context (N6).
#[inline]
pub(crate) fn stamp_attempt(headers: &mut HeaderMap, attempt: &Attempt, span: &Span) {
    stamp_deadline(headers, attempt.timeout());
    telemetry::inject_context(span, headers);
}

/// Records an attempt's answer — its `status`, or `None` when the request failed — and its
/// `verdict` on its span, and hands it to the call.
#[inline]
pub(crate) fn answered<T, E>(
    call: &mut Call<E>,
    attempt: Attempt,
    span: &Span,
    status: Option<StatusCode>,
    verdict: Verdict,
    result: Result<T, E>,
) -> Step<T, E> {
    telemetry::record_result(span, status, &verdict);
    call.attempted(attempt, result, verdict, clock::now())
}

/// Records that the driver cut `attempt` at its timeout, and hands it to the call.
#[inline]
pub(crate) fn cut<T, E>(call: &mut Call<E>, attempt: Attempt, span: &Span) -> Step<T, E> {
    telemetry::record_timeout(span);
    call.timed_out(attempt, clock::now())
}
