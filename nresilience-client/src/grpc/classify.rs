//! What a gRPC attempt's outcome means for the call.

use std::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use nresilience_core::chain::{overloaded, retried, single, OVERLOADED_HEADER, RETRIED_HEADER};
use nresilience_core::{Classify, Verdict};
use tonic::Code;

/// The metadata key a server sets to push a retry back: `grpc-retry-pushback-ms`.
pub const PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

const GRPC_STATUS: &str = "grpc-status";

/// Classifies gRPC attempts by the table in the [module docs](super).
///
/// Every `Err` (the connection failed, the stream was reset) is a transient failure; a
/// response is classified by [`classify_grpc`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrpcClassifier;

impl GrpcClassifier {
    /// The classifier; it has no settings.
    pub const fn new() -> Self {
        GrpcClassifier
    }
}

impl<B, E> Classify<Result<Response<B>, E>> for GrpcClassifier {
    fn classify(&self, result: &Result<Response<B>, E>) -> Verdict {
        match result {
            Ok(response) => classify_grpc(response.status(), response.headers()),
            Err(_) => Verdict::TRANSIENT,
        }
    }
}

/// The verdict on a gRPC response with HTTP `status` and `headers`, by the table in the
/// [module docs](super).
///
/// A `grpc-status` header decides (a trailers-only response carries it there); without
/// one, a `200` is a success — its status comes in the trailers, after the response is
/// already the caller's — and any other HTTP status is read as the gRPC spec maps it.
/// Nothing a peer sends makes it panic.
pub fn classify_grpc(status: StatusCode, headers: &HeaderMap) -> Verdict {
    let verdict = classify_code(status, headers);
    if verdict == Verdict::Success {
        return verdict;
    }
    // The chain's signals, as metadata: the hop refused its own call for overload, or
    // retried already; either way this call does not retry onto it.
    let signal = |name: &str| single(headers.get_all(name).iter().map(|v| v.as_bytes()));
    if signal(OVERLOADED_HEADER).is_some_and(overloaded) {
        return Verdict::Overloaded;
    }
    if signal(RETRIED_HEADER).and_then(retried).is_some() {
        return Verdict::RetriedBelow;
    }
    verdict
}

/// The verdict by `grpc-status` (or the HTTP status without one) and pushback alone.
fn classify_code(status: StatusCode, headers: &HeaderMap) -> Verdict {
    let Some(code) = headers.get(GRPC_STATUS) else {
        return match status.as_u16() {
            200 => Verdict::Success,
            // The gRPC spec reads these as UNAVAILABLE. A 429 is a throttle, as in H1.
            502..=504 => Verdict::TRANSIENT,
            429 => Verdict::THROTTLED,
            _ => Verdict::Permanent,
        };
    };
    match Code::from_bytes(code.as_bytes()) {
        Code::Ok => Verdict::Success,
        Code::Unavailable | Code::DeadlineExceeded => match pushback(headers) {
            Pushback::Stop => Verdict::Permanent,
            Pushback::After(retry_after) => Verdict::Transient { retry_after },
        },
        Code::ResourceExhausted => match pushback(headers) {
            Pushback::Stop => Verdict::Permanent,
            Pushback::After(retry_after) => Verdict::Throttled {
                self_imposed: false,
                retry_after,
            },
        },
        _ => Verdict::Permanent,
    }
}

/// What `grpc-retry-pushback-ms` asks of the next retry.
enum Pushback {
    /// Wait this long (K13), or on the curve when `None`.
    After(Option<Duration>),
    /// A negative value: the server asks not to be retried.
    Stop,
}

/// The first parseable `grpc-retry-pushback-ms` value decides; unparseable ones are skipped.
fn pushback(headers: &HeaderMap) -> Pushback {
    for value in headers.get_all(PUSHBACK_HEADER) {
        match parse_pushback(value.as_bytes()) {
            Some(pushback) => return pushback,
            None => tracing::debug!(?value, "ignoring an unparseable grpc-retry-pushback-ms"),
        }
    }
    Pushback::After(None)
}

/// An optionally signed decimal integer of milliseconds; a huge one saturates.
fn parse_pushback(value: &[u8]) -> Option<Pushback> {
    let value = value.trim_ascii();
    let (negative, digits) = match value.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, value),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let millis = digits.iter().fold(0u64, |millis, digit| {
        millis
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    });
    Some(if negative && millis > 0 {
        Pushback::Stop
    } else {
        Pushback::After(Some(Duration::from_millis(millis)))
    })
}

#[cfg(test)]
mod tests {
    use std::io;

    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &[u8])]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_bytes(value).unwrap());
        }
        headers
    }

    fn grpc(code: &[u8]) -> Verdict {
        classify_grpc(StatusCode::OK, &headers(&[(GRPC_STATUS, code)]))
    }

    fn grpc_with_pushback(code: &[u8], pushback: &[u8]) -> Verdict {
        let headers = headers(&[(GRPC_STATUS, code), (PUSHBACK_HEADER, pushback)]);
        classify_grpc(StatusCode::OK, &headers)
    }

    fn transient(millis: u64) -> Verdict {
        Verdict::Transient {
            retry_after: Some(Duration::from_millis(millis)),
        }
    }

    fn throttled(millis: u64) -> Verdict {
        Verdict::Throttled {
            self_imposed: false,
            retry_after: Some(Duration::from_millis(millis)),
        }
    }

    #[test]
    fn h6_unavailable_and_deadline_exceeded_are_transient() {
        assert_eq!(grpc(b"14"), Verdict::TRANSIENT);
        assert_eq!(grpc(b"4"), Verdict::TRANSIENT);
    }

    #[test]
    fn h6_resource_exhausted_is_throttled_by_the_server_not_self_imposed() {
        let verdict = grpc(b"8");
        assert_eq!(verdict, Verdict::THROTTLED);
        assert!(!verdict.is_self_imposed(), "charged to the budget (B8, E6)");
    }

    #[test]
    fn h6_ok_is_success() {
        assert_eq!(grpc(b"0"), Verdict::Success);
        assert_eq!(grpc_with_pushback(b"0", b"-1"), Verdict::Success);
    }

    #[test]
    fn h6_every_other_code_is_permanent() {
        for code in (1..=16).filter(|code| ![4, 8, 14].contains(code)) {
            let code = code.to_string();
            assert_eq!(grpc(code.as_bytes()), Verdict::Permanent, "{code}");
            // Pushback does not make a permanent failure retryable.
            assert_eq!(
                grpc_with_pushback(code.as_bytes(), b"10"),
                Verdict::Permanent,
                "{code}"
            );
        }
    }

    #[test]
    fn h6_an_unknown_or_garbage_grpc_status_is_permanent() {
        for garbage in [
            &b"17"[..],
            b"99",
            b"140",
            b"",
            b"fourteen",
            b"-14",
            b" 14",
            b"\xff",
        ] {
            assert_eq!(grpc(garbage), Verdict::Permanent, "{garbage:?}");
        }
    }

    #[test]
    fn h6_a_200_without_grpc_status_is_success_its_status_is_in_the_trailers() {
        assert_eq!(
            classify_grpc(StatusCode::OK, &HeaderMap::new()),
            Verdict::Success
        );
    }

    #[test]
    fn h6_a_grpc_status_header_wins_over_the_http_status() {
        let unavailable = headers(&[(GRPC_STATUS, b"14")]);
        assert_eq!(
            classify_grpc(StatusCode::NOT_FOUND, &unavailable),
            Verdict::TRANSIENT
        );
        let ok = headers(&[(GRPC_STATUS, b"0")]);
        assert_eq!(
            classify_grpc(StatusCode::SERVICE_UNAVAILABLE, &ok),
            Verdict::Success
        );
    }

    #[test]
    fn h6_http_502_503_504_without_grpc_status_are_transient() {
        for status in [502, 503, 504] {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(
                classify_grpc(status, &HeaderMap::new()),
                Verdict::TRANSIENT,
                "{status}"
            );
        }
    }

    #[test]
    fn h6_http_429_without_grpc_status_is_throttled() {
        assert_eq!(
            classify_grpc(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new()),
            Verdict::THROTTLED
        );
    }

    #[test]
    fn h6_every_other_http_status_without_grpc_status_is_permanent() {
        for status in (100..=999).filter(|s| ![200, 429, 502, 503, 504].contains(s)) {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(
                classify_grpc(status, &HeaderMap::new()),
                Verdict::Permanent,
                "{status}"
            );
        }
    }

    #[test]
    fn k13_pushback_millis_are_the_retry_after() {
        assert_eq!(grpc_with_pushback(b"14", b"1500"), transient(1500));
        assert_eq!(grpc_with_pushback(b"4", b"0"), transient(0));
        assert_eq!(grpc_with_pushback(b"8", b"1500"), throttled(1500));
        assert_eq!(grpc_with_pushback(b"8", b"-0"), throttled(0));
    }

    #[test]
    fn k13_a_huge_pushback_saturates_instead_of_overflowing() {
        assert_eq!(
            grpc_with_pushback(b"8", b"99999999999999999999999999"),
            throttled(u64::MAX)
        );
    }

    #[test]
    fn h6_negative_pushback_means_do_not_retry() {
        for code in [&b"14"[..], b"4", b"8"] {
            assert_eq!(
                grpc_with_pushback(code, b"-1"),
                Verdict::Permanent,
                "{code:?}"
            );
            assert_eq!(
                grpc_with_pushback(code, b"-99999999999999999999999"),
                Verdict::Permanent,
                "{code:?}"
            );
        }
    }

    #[test]
    fn h6_garbage_pushback_is_ignored_and_the_curve_applies() {
        for garbage in [&b"soon"[..], b"1.5", b"+5", b"", b"-", b"1e3", b"\xff\xfe"] {
            assert_eq!(
                grpc_with_pushback(b"14", garbage),
                Verdict::TRANSIENT,
                "{garbage:?}"
            );
            assert_eq!(
                grpc_with_pushback(b"8", garbage),
                Verdict::THROTTLED,
                "{garbage:?}"
            );
        }
    }

    #[test]
    fn h6_the_first_parseable_pushback_decides() {
        let headers = headers(&[
            (GRPC_STATUS, b"14"),
            (PUSHBACK_HEADER, b"later"),
            (PUSHBACK_HEADER, b"250"),
            (PUSHBACK_HEADER, b"-1"),
        ]);
        assert_eq!(classify_grpc(StatusCode::OK, &headers), transient(250));
    }

    #[test]
    fn h6_classifier_reads_responses_and_calls_errors_transient() {
        let response = |code: &'static str| {
            Ok::<_, io::Error>(
                Response::builder()
                    .header(GRPC_STATUS, code)
                    .body(())
                    .unwrap(),
            )
        };
        let classifier = GrpcClassifier::new();
        assert_eq!(classifier.classify(&response("0")), Verdict::Success);
        assert_eq!(classifier.classify(&response("14")), Verdict::TRANSIENT);
        assert_eq!(classifier.classify(&response("3")), Verdict::Permanent);
        let reset: Result<Response<()>, io::Error> = Err(io::ErrorKind::ConnectionReset.into());
        assert_eq!(classifier.classify(&reset), Verdict::TRANSIENT);
    }
}
