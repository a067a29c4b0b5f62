//! The request side of both HTTP drivers — the tower layer and the reqwest middleware:
//! whether a request may be retried, which host's bucket funds it, the call's start, the
//! headers every attempt carries (written by `nresilience-wire`), an attempt's span and
//! deadline, and what an attempt's end hands the call.

use std::borrow::Cow;

use http::{HeaderMap, Method, StatusCode};
use nresilience_core::call::{Attempt, Call, CallOptions, Step};
use nresilience_core::{clock, RetryPolicy, Verdict};
use nresilience_wire as wire;
use tracing::Span;

use crate::telemetry::{self, Destination};

/// A per-request override of whether a request may be retried, set as a request extension.
///
/// It wins both ways: `Retryable(true)` opts a POST in, `Retryable(false)` keeps a GET
/// to a single attempt. A body too large to buffer is sent once whatever it says. Opting a
/// POST into retries does not opt it into hedging, under a policy that hedges: that takes
/// [`Hedgeable`] too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retryable(pub bool);

/// A per-request override of whether a request that may be retried may also be hedged
/// (HG1): sent again beside the attempt in flight, before that one has answered. Set as a
/// request extension.
///
/// Without it, only an idempotent method is hedged (or any, with the driver's
/// `hedge_non_idempotent`, as the gRPC layer sets it): `Retryable(true)` (or the driver's
/// `retry_non_idempotent`) lets a POST be sent again after a failure, one attempt at a time,
/// never two at once, since both could reach the server. `Hedgeable(true)` lets it be;
/// `Hedgeable(false)` keeps a GET's attempts one at a time. A request that may not be retried
/// is never hedged, whatever it says.
///
/// ```
/// use http::Request;
/// use nresilience_client::{Hedgeable, Retryable};
///
/// let mut order = Request::post("http://orders.internal/").body(())?;
/// // Retried and hedged: the server deduplicates by an idempotency key.
/// order.extensions_mut().insert(Retryable(true));
/// order.extensions_mut().insert(Hedgeable(true));
/// assert_eq!(order.extensions().get(), Some(&Hedgeable(true)));
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hedgeable(pub bool);

/// Whether the caller lets a request be hedged: its [`Hedgeable`] extension when it has one,
/// which wins both ways; otherwise an idempotent method (H3), or any with the driver's
/// `hedge_non_idempotent` — its `retry_non_idempotent` opts a method into retries only.
#[inline]
pub(crate) fn hedging_allowed(
    hedgeable: Option<&Hedgeable>,
    hedge_non_idempotent: bool,
    method: &Method,
) -> bool {
    match hedgeable {
        Some(Hedgeable(choice)) => *choice,
        None => hedge_non_idempotent || is_idempotent(method),
    }
}

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
/// `may_retry`, hedged only if it `may_hedge` too: charged to the host's own bucket (H5),
/// and nested when the request already carries the marker (N5). Started outside the
/// retrying scope: the call reads whether it is nested itself.
#[inline(always)]
pub(crate) fn start<E>(
    policy: &RetryPolicy,
    (may_retry, may_hedge): (bool, bool),
    method: &Method,
    authority: &str,
    headers: &HeaderMap,
) -> Call<E> {
    let key = host_key(authority);
    let options = CallOptions::new()
        .may_retry(may_retry)
        .may_hedge(may_hedge)
        .marked(wire::carries_marker(headers))
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
    if call.may_retry() {
        wire::stamp_marker(headers);
    }
    wire::stamp_call(
        headers,
        call.depth(),
        call.potential_attempts(),
        call.criticality(),
    );
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

/// Writes what differs from attempt to attempt into the headers it is sent with: which
/// attempt it is, after the first (F1), its deadline (C2) and its span's trace context (N6).
#[inline]
pub(crate) fn stamp_attempt(headers: &mut HeaderMap, attempt: &Attempt, span: &Span) {
    // A first attempt carries no number, as in gRPC (A6): one header fewer on every call's
    // success path, for a number its absence says.
    let number = wire::AttemptOf::new(attempt.number(), attempt.is_hedge());
    if number.is_retry() {
        wire::stamp_attempt_number(headers, number);
    }
    wire::stamp_deadline(headers, attempt.timeout());
    telemetry::inject_context(span, headers);
}

/// Follows the dependency's advice on the fleet's retries, when an answer's `headers` carry
/// it (F3): the call's bucket uses what the dependency allows it of its budget.
#[inline]
pub(crate) fn heard<E>(call: &Call<E>, headers: &HeaderMap) {
    if let Some(advice) = wire::read_fleet(headers) {
        call.follow_fleet(advice.allowance(), clock::now());
    }
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

/// Whether a method may be retried without the caller's say-so (H3).
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS | Method::TRACE
    )
}

/// The key of the host's own bucket (H5): the authority, lower-cased (hosts compare
/// case-insensitively), without allocating when it is lower-case already.
pub(crate) fn host_key(authority: &str) -> Cow<'_, str> {
    if authority.bytes().any(|byte| byte.is_ascii_uppercase()) {
        Cow::Owned(authority.to_ascii_lowercase())
    } else {
        Cow::Borrowed(authority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h3_idempotent_methods() {
        for method in [
            Method::GET,
            Method::HEAD,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
            Method::TRACE,
        ] {
            assert!(is_idempotent(&method), "{method}");
        }
        for method in [Method::POST, Method::PATCH, Method::CONNECT] {
            assert!(!is_idempotent(&method), "{method}");
        }
    }

    #[test]
    fn h5_hosts_are_keyed_case_insensitively() {
        assert_eq!(host_key("API.Example.com:8080"), "api.example.com:8080");
        assert!(matches!(host_key("api.example.com"), Cow::Borrowed(_)));
    }
}
