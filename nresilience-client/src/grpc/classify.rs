//! What a gRPC attempt's outcome means for the call.

use http::{HeaderMap, Response, StatusCode};
use nresilience_core::{Classify, Verdict};
use nresilience_wire::{read_grpc_pushback, read_retry_info, GrpcPushback, GRPC_STATUS};
use tonic::Code;

use crate::chain_signals::ChainSignals;
use crate::classify::classify_error;

/// Classifies gRPC attempts by the table in the [module docs](super).
///
/// An `Err` whose connection was refused is [`Unreachable`](Verdict::Unreachable), as over
/// plain HTTP ([`classify_error`]); every other `Err` (the connection failed, the stream was
/// reset) is a transient failure. A response is classified by
/// [`GrpcClassifier::classify_response`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcClassifier {
    signals: ChainSignals,
}

impl GrpcClassifier {
    /// The classifier, honouring both chain signals.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            signals: ChainSignals::BOTH,
        }
    }

    /// Whether a retryable answer (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`,
    /// or the HTTP statuses read as those) with `x-nresilience-overloaded: 1` ends the call
    /// with that answer (`Overloaded`, C1). Defaults to `true`; `false` classifies it by its
    /// code and pushback alone.
    #[must_use]
    pub const fn overload_signal(mut self, honour: bool) -> Self {
        self.signals.overloaded = honour;
        self
    }

    /// Whether an answer that would be retried, with `x-nresilience-retried: N`, ends the
    /// call with that answer (`RetriedBelow`, C6). Defaults to `true`; `false` classifies it
    /// by its code and pushback alone.
    #[must_use]
    pub const fn retried_signal(mut self, honour: bool) -> Self {
        self.signals.retried = honour;
        self
    }

    /// The verdict on a gRPC response with HTTP `status` and `headers`, by the table in the
    /// [module docs](super), with this classifier's choice of signals.
    ///
    /// A `grpc-status` header decides (a trailers-only response carries it there); without
    /// one, a `200` is a success — its status comes in the trailers, after the response is
    /// already the caller's — and any other HTTP status is read as the gRPC spec maps it.
    /// The chain's signals count only on a code a client would retry: on `INVALID_ARGUMENT`,
    /// say, they change nothing, and a hop that failed for the caller's own fault is no
    /// evidence against it. Nothing a peer sends makes it panic.
    #[must_use]
    pub fn classify_response(&self, status: StatusCode, headers: &HeaderMap) -> Verdict {
        let (verdict, retryable_code) = classify_code(status, headers);
        if !retryable_code {
            return verdict;
        }
        // The hop refused its own call for overload: `grpc-retry-pushback-ms: -1` says the
        // same to any gRPC client; this one also learns it was an overload (C1, C7).
        if self.signals.says_overloaded(headers) {
            return Verdict::Overloaded {
                retry_after: verdict.retry_after(),
            };
        }
        // The hop retried already; a server that asked not to be retried at all is obeyed
        // as it asked (C6).
        if verdict.is_retryable() && self.signals.says_retried(headers) {
            return Verdict::RetriedBelow;
        }
        verdict
    }
}

impl Default for GrpcClassifier {
    fn default() -> Self {
        Self::new()
    }
}

impl<B, E: std::error::Error + 'static> Classify<Result<Response<B>, E>> for GrpcClassifier {
    fn classify(&self, result: &Result<Response<B>, E>) -> Verdict {
        match result {
            Ok(response) => self.classify_response(response.status(), response.headers()),
            Err(error) => classify_error(error),
        }
    }
}

/// The verdict on a gRPC response with HTTP `status` and `headers`, by the table in the
/// [module docs](super), honouring both chain signals: [`GrpcClassifier::classify_response`]
/// of [`GrpcClassifier::new`].
#[must_use]
pub fn classify_grpc(status: StatusCode, headers: &HeaderMap) -> Verdict {
    GrpcClassifier::new().classify_response(status, headers)
}

/// The verdict by `grpc-status` (or the HTTP status without one) and pushback alone, and
/// whether the code is one a client retries when no pushback says otherwise.
fn classify_code(status: StatusCode, headers: &HeaderMap) -> (Verdict, bool) {
    let Some(code) = headers.get(GRPC_STATUS) else {
        return match status.as_u16() {
            200 => (Verdict::Success, false),
            // The gRPC spec reads these as UNAVAILABLE. A 429 is a throttle, as in H1.
            502..=504 => (Verdict::TRANSIENT, true),
            429 => (Verdict::THROTTLED, true),
            _ => (Verdict::Permanent, false),
        };
    };
    match Code::from_bytes(code.as_bytes()) {
        Code::Ok => (Verdict::Success, false),
        Code::Unavailable | Code::DeadlineExceeded => match pushback(headers) {
            GrpcPushback::Stop => (Verdict::Permanent, true),
            GrpcPushback::After(retry_after) => (Verdict::Transient { retry_after }, true),
        },
        Code::ResourceExhausted => match pushback(headers) {
            GrpcPushback::Stop => (Verdict::Permanent, true),
            GrpcPushback::After(retry_after) => (
                Verdict::Throttled {
                    self_imposed: false,
                    retry_after,
                },
                true,
            ),
        },
        _ => (Verdict::Permanent, false),
    }
}

/// The pushback of a retryable answer (K15): a negative `grpc-retry-pushback-ms` asks not to
/// be retried whatever else the answer says; otherwise `google.rpc.RetryInfo`'s delay, to the
/// nanosecond, before `grpc-retry-pushback-ms`'s milliseconds, the most precise first.
fn pushback(headers: &HeaderMap) -> GrpcPushback {
    match read_grpc_pushback(headers) {
        GrpcPushback::Stop => GrpcPushback::Stop,
        GrpcPushback::After(millis) => GrpcPushback::After(read_retry_info(headers).or(millis)),
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::time::Duration;

    use http::{HeaderName, HeaderValue};

    use nresilience_wire::{GRPC_PUSHBACK, GRPC_STATUS_DETAILS, OVERLOADED, RETRIED};

    use crate::TransportError;

    use super::*;

    fn headers(pairs: &[(HeaderName, &[u8])]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name.clone(), HeaderValue::from_bytes(value).unwrap());
        }
        headers
    }

    fn grpc(code: &[u8]) -> Verdict {
        classify_grpc(StatusCode::OK, &headers(&[(GRPC_STATUS, code)]))
    }

    fn grpc_with_pushback(code: &[u8], pushback: &[u8]) -> Verdict {
        let headers = headers(&[(GRPC_STATUS, code), (GRPC_PUSHBACK, pushback)]);
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

    /// `google.rpc.Status { code: 8, message: "quota", details: [RetryInfo { 1.5 s }] }`.
    const RETRY_INFO_1500_MS: &[u8] =
        b"CAgSBXF1b3RhGjYKKHR5cGUuZ29vZ2xlYXBpcy5jb20vZ29vZ2xlLnJwYy5SZXRyeUluZm8SCgoICAEQgMq17gE";

    fn grpc_with_details(code: &[u8], details: &[u8], pushback: Option<&[u8]>) -> Verdict {
        let mut pairs = vec![(GRPC_STATUS, code), (GRPC_STATUS_DETAILS, details)];
        pairs.extend(pushback.map(|pushback| (GRPC_PUSHBACK, pushback)));
        classify_grpc(StatusCode::OK, &headers(&pairs))
    }

    #[test]
    fn k15_retry_info_is_the_pushback_of_a_retryable_code() {
        assert_eq!(
            grpc_with_details(b"8", RETRY_INFO_1500_MS, None),
            throttled(1500)
        );
        assert_eq!(
            grpc_with_details(b"14", RETRY_INFO_1500_MS, None),
            transient(1500)
        );
        assert_eq!(
            grpc_with_details(b"4", RETRY_INFO_1500_MS, None),
            transient(1500)
        );
        // On a code no client retries, it changes nothing.
        assert_eq!(
            grpc_with_details(b"3", RETRY_INFO_1500_MS, None),
            Verdict::Permanent
        );
    }

    #[test]
    fn k15_retry_info_wins_over_pushback_millis_but_a_negative_pushback_stops() {
        assert_eq!(
            grpc_with_details(b"8", RETRY_INFO_1500_MS, Some(b"20")),
            throttled(1500),
            "the most precise first"
        );
        assert_eq!(
            grpc_with_details(b"8", RETRY_INFO_1500_MS, Some(b"-1")),
            Verdict::Permanent,
            "a server that asks not to be retried is obeyed"
        );
    }

    #[test]
    fn k15_details_that_do_not_parse_leave_the_pushback_or_the_curve() {
        for garbage in [&b"not base64!"[..], b"CAg", b"////", b""] {
            assert_eq!(
                grpc_with_details(b"8", garbage, Some(b"20")),
                throttled(20),
                "{garbage:?}"
            );
            assert_eq!(
                grpc_with_details(b"14", garbage, None),
                Verdict::TRANSIENT,
                "{garbage:?}"
            );
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
            (GRPC_PUSHBACK, b"later"),
            (GRPC_PUSHBACK, b"250"),
            (GRPC_PUSHBACK, b"-1"),
        ]);
        assert_eq!(classify_grpc(StatusCode::OK, &headers), transient(250));
    }

    #[test]
    fn h6_o7_classifier_reads_responses_errors_transient_a_refused_connection_unreachable() {
        let response = |code: &'static str| {
            Ok::<_, io::Error>(
                Response::builder()
                    .header(GRPC_STATUS, code)
                    .body(())
                    .unwrap(),
            )
        };
        let classifier = GrpcClassifier::default();
        assert_eq!(classifier.classify(&response("0")), Verdict::Success);
        assert_eq!(classifier.classify(&response("14")), Verdict::TRANSIENT);
        assert_eq!(classifier.classify(&response("3")), Verdict::Permanent);
        let reset: Result<Response<()>, io::Error> = Err(io::ErrorKind::ConnectionReset.into());
        assert_eq!(classifier.classify(&reset), Verdict::TRANSIENT);
        // O7, B13: refused, however deep in the error's sources.
        let refused = TransportError::new(io::Error::from(io::ErrorKind::ConnectionRefused));
        let refused: Result<Response<()>, TransportError> = Err(refused);
        assert_eq!(classifier.classify(&refused), Verdict::Unreachable);
    }

    #[test]
    fn c1_the_overload_signal_ends_a_retryable_answer_and_carries_its_pushback() {
        let signalled = |code: &'static [u8], pushback: &'static [u8]| {
            headers(&[
                (GRPC_STATUS, code),
                (GRPC_PUSHBACK, pushback),
                (OVERLOADED, b"1"),
            ])
        };
        // What a hop's `CallFailed` becomes as a `tonic::Status`.
        let refused = signalled(b"14", b"-1");
        assert_eq!(classify_grpc(StatusCode::OK, &refused), Verdict::OVERLOADED);
        assert_eq!(
            classify_grpc(StatusCode::OK, &signalled(b"8", b"300")),
            Verdict::Overloaded {
                retry_after: Some(Duration::from_millis(300))
            }
        );
        let ignoring = GrpcClassifier::new().overload_signal(false);
        assert_eq!(
            ignoring.classify_response(StatusCode::OK, &refused),
            Verdict::Permanent,
            "by its pushback alone"
        );
        assert_eq!(
            ignoring.classify_response(StatusCode::OK, &signalled(b"14", b"20")),
            transient(20)
        );
    }

    #[test]
    fn c1_c6_signals_on_a_code_no_client_retries_change_nothing() {
        for code in [&b"3"[..], b"5", b"7", b"13", b"garbage"] {
            for signal in [(OVERLOADED, &b"1"[..]), (RETRIED, b"4")] {
                let answer = headers(&[(GRPC_STATUS, code), signal.clone()]);
                assert_eq!(
                    classify_grpc(StatusCode::OK, &answer),
                    Verdict::Permanent,
                    "{code:?} {signal:?}"
                );
            }
        }
        let not_found = headers(&[(OVERLOADED, b"1")]);
        assert_eq!(
            classify_grpc(StatusCode::NOT_FOUND, &not_found),
            Verdict::Permanent
        );
    }

    #[test]
    fn c6_a_retryable_answer_retried_below_ends_the_call() {
        let retried = |code: &'static [u8]| headers(&[(GRPC_STATUS, code), (RETRIED, b"4")]);
        for code in [&b"14"[..], b"4", b"8"] {
            assert_eq!(
                classify_grpc(StatusCode::OK, &retried(code)),
                Verdict::RetriedBelow,
                "{code:?}"
            );
        }
        let stop = headers(&[
            (GRPC_STATUS, b"14"),
            (GRPC_PUSHBACK, b"-1"),
            (RETRIED, b"4"),
        ]);
        assert_eq!(
            classify_grpc(StatusCode::OK, &stop),
            Verdict::Permanent,
            "asked not to be retried at all"
        );
        let ignoring = GrpcClassifier::new().retried_signal(false);
        assert_eq!(
            ignoring.classify_response(StatusCode::OK, &retried(b"14")),
            Verdict::TRANSIENT
        );
        let garbled = headers(&[(GRPC_STATUS, b"14"), (RETRIED, b"-4")]);
        assert_eq!(classify_grpc(StatusCode::OK, &garbled), Verdict::TRANSIENT);
    }
}
