//! `grpc-retry-pushback-ms` (SPEC H6, K13) and the gRPC classification around it, through the
//! public `nresilience_client::grpc::classify_grpc` and `GrpcClassifier::classify_response`
//! (the pushback parser, `nresilience_wire::grpc_pushback`, has its model here).
//!
//! Input: `name: value` lines, the response's headers (`grpc-status`,
//! `grpc-retry-pushback-ms`, the chain signals, anything), and `:status: N`, the HTTP status
//! (default 200).
//!
//! Asserts, beyond "no panic", against a reading written from the module's table:
//! - `grpc-status` 14 / 4 are Transient, 8 Throttled (not self-imposed), 0 Success, anything
//!   else Permanent; without `grpc-status`, 200 Success, 502–504 Transient, 429 Throttled;
//! - on a retryable code the first pushback value that is an optionally signed decimal
//!   (ASCII whitespace around it ignored) decides: non-negative = that many milliseconds,
//!   served verbatim (saturating), unless a `grpc-status-details-bin` holds a
//!   `google.rpc.RetryInfo` (K15), negative = do not retry (Permanent) whatever else is
//!   there; unparseable values are skipped; the pushback never matters on another code;
//! - a pushback that parses, re-serialised as plain digits, classifies the same;
//! - the chain signals (C1 `x-nresilience-overloaded: 1`, C6 `x-nresilience-retried: N`,
//!   each counted only when sent once) only turn a retryable code into `Overloaded` (with
//!   the same pushback) or a retryable verdict into `RetriedBelow`, and each can be turned
//!   off.
#![no_main]

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue};
use http::StatusCode;
use libfuzzer_sys::fuzz_target;
use http::HeaderName;
use nresilience_client::grpc::{classify_grpc, GrpcClassifier};
use nresilience_wire::{self as wire, GRPC_PUSHBACK, OVERLOADED, RETRIED};
use nresilience_core::Verdict;
use nresilience_fuzz::{directive, directive_number, header_lines, header_map};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pushback {
    After(Option<Duration>),
    Stop,
}

fn parse_pushback(value: &[u8]) -> Option<Pushback> {
    let value = value.trim_ascii();
    let (negative, digits) = match value.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, value),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let text = std::str::from_utf8(digits).expect("digits");
    let significant = text.trim_start_matches('0');
    let millis: u64 = if significant.is_empty() {
        0
    } else if significant.len() > 20 {
        u64::MAX
    } else {
        significant
            .parse::<u128>()
            .expect("digits")
            .min(u128::from(u64::MAX)) as u64
    };
    Some(if negative && millis > 0 {
        Pushback::Stop
    } else {
        Pushback::After(Some(Duration::from_millis(millis)))
    })
}

/// A negative pushback stops; otherwise a `google.rpc.RetryInfo` (its own target,
/// `retry_info`, checks its reading) comes before the milliseconds (K15).
fn pushback(headers: &HeaderMap) -> Pushback {
    let millis = headers
        .get_all(GRPC_PUSHBACK)
        .iter()
        .find_map(|value| parse_pushback(value.as_bytes()))
        .unwrap_or(Pushback::After(None));
    match (millis, wire::read_retry_info(headers)) {
        (Pushback::Stop, _) => Pushback::Stop,
        (_, Some(delay)) => Pushback::After(Some(delay)),
        (millis, None) => millis,
    }
}

/// The verdict by code and pushback alone, and whether the code is a retryable one.
fn by_code(status: StatusCode, headers: &HeaderMap) -> (Verdict, bool) {
    let Some(code) = headers.get("grpc-status") else {
        return match status.as_u16() {
            200 => (Verdict::Success, false),
            502..=504 => (Verdict::TRANSIENT, true),
            429 => (Verdict::THROTTLED, true),
            _ => (Verdict::Permanent, false),
        };
    };
    match (code.as_bytes(), pushback(headers)) {
        (b"0", _) => (Verdict::Success, false),
        (b"14" | b"4" | b"8", Pushback::Stop) => (Verdict::Permanent, true),
        (b"14" | b"4", Pushback::After(retry_after)) => (Verdict::Transient { retry_after }, true),
        (b"8", Pushback::After(retry_after)) => (
            Verdict::Throttled {
                self_imposed: false,
                retry_after,
            },
            true,
        ),
        _ => (Verdict::Permanent, false),
    }
}

fn one(headers: &HeaderMap, name: HeaderName) -> Option<&[u8]> {
    wire::single(headers.get_all(name).iter().map(HeaderValue::as_bytes))
}

fn expected(status: StatusCode, headers: &HeaderMap, overload: bool, retried: bool) -> Verdict {
    let (verdict, retryable_code) = by_code(status, headers);
    if !retryable_code {
        return verdict;
    }
    if overload && one(headers, OVERLOADED).is_some_and(wire::overloaded) {
        return Verdict::Overloaded {
            retry_after: verdict.retry_after(),
        };
    }
    if retried
        && verdict.is_retryable()
        && one(headers, RETRIED)
            .and_then(wire::retried)
            .is_some()
    {
        return Verdict::RetriedBelow;
    }
    verdict
}

fuzz_target!(|data: &[u8]| {
    let lines = header_lines(data);
    let headers = header_map(&lines);
    let status = directive(&lines, b"status")
        .and_then(directive_number)
        .and_then(|n| StatusCode::from_u16(u16::try_from(n).ok()?).ok())
        .unwrap_or(StatusCode::OK);

    let verdict = classify_grpc(status, &headers);
    assert_eq!(
        verdict,
        expected(status, &headers, true, true),
        "{status} {headers:?}"
    );
    for (overload, retried) in [(false, false), (true, false), (false, true)] {
        let classifier = GrpcClassifier::new()
            .overload_signal(overload)
            .retried_signal(retried);
        assert_eq!(
            classifier.classify_response(status, &headers),
            expected(status, &headers, overload, retried),
            "signals {overload}/{retried}: {status} {headers:?}"
        );
    }
    assert_eq!(
        GrpcClassifier::default().classify_response(status, &headers),
        verdict
    );

    // Re-serialised, a pushback that parsed classifies the same.
    if let (Some(code), Pushback::After(Some(delay))) =
        (headers.get("grpc-status"), pushback(&headers))
    {
        let mut again = HeaderMap::new();
        again.insert("grpc-status", code.clone());
        let millis = u64::try_from(delay.as_millis()).expect("at most u64::MAX ms");
        again.insert(GRPC_PUSHBACK, HeaderValue::from(millis));
        let plain = GrpcClassifier::new()
            .overload_signal(false)
            .retried_signal(false);
        assert_eq!(
            plain.classify_response(status, &again),
            plain.classify_response(status, &headers),
            "{headers:?} re-serialised as {again:?}"
        );
    }
});
