//! What an HTTP attempt's outcome means for the call.
//!
//! Only failures that another attempt can fix are retried: a connection that failed, a
//! timeout, a `408`, a `5xx`, and a throttle (`429`, or `503` with `Retry-After`). Every
//! other status means the dependency answered: the response goes to the caller as it is,
//! and it funds the retry budget like any success.
//!
//! | outcome | verdict | retried? | deposits? |
//! |---|---|---|---|
//! | `Err(_)` whose connection was refused (nothing listened) | `Unreachable` | yes, spread over the time the call has left (O7); its token goes back (B13) | no |
//! | any other `Err(_)`: connect or I/O error | `Transient { retry_after: None }` | yes, on the transient curve | no |
//! | timeout, attempt ceiling | `Transient` (the executor's verdict) | yes, on the transient curve | no |
//! | `408 Request Timeout` | `Transient { retry_after }` | yes | no |
//! | `429 Too Many Requests` | `Throttled { self_imposed: false, retry_after }` | yes, charged to the budget | no |
//! | `503` with a valid `Retry-After`, `retry-after-ms` or exhausted `RateLimit` | `Throttled { self_imposed: false, retry_after: Some(_) }` | yes, after exactly the pushback | no |
//! | `503` without one (absent or garbage) | `Transient { retry_after: None }` | yes, on the transient curve | no |
//! | any other `5xx` | `Transient { retry_after }` | yes | no |
//! | every other status: `1xx`, `2xx`, `3xx`, `4xx` but `408`/`429` | `Success` | no: returned to the caller | yes |
//! | a retryable status with `x-nresilience-overloaded: 1` | `Overloaded { retry_after }` | no: returned to the caller | no |
//! | a `5xx` with `x-nresilience-retried: N` | `RetriedBelow` | no: returned to the caller | no |
//!
//! The last two rows are the chain's signals ([`nresilience_core::chain`]): the hop answering
//! has refused its own call for overload, or has retried already, and retrying it again
//! would multiply the load. Each can be turned off per client
//! ([`HttpClassifier::overload_signal`], [`HttpClassifier::retried_signal`]), and then the
//! answer is classified by its status alone.
//! `retry_after` is the first valid `retry-after-ms` header, else the first valid
//! `Retry-After`, else the reset of an exhausted `RateLimit` quota ([`retry_after`]), or
//! `None`.
//! Pushback replaces the backoff curve verbatim, capped only by the backoff cap and the time
//! left; pushback at least as long as the time left ends the call at once with
//! `DeadlineExceeded`. A `Retry-After` on a `408` or a `5xx` other than `503`
//! does not change the verdict, but is carried as pushback all the same: the server said when
//! to come back.
//!
//! When attempts run out on a retryable *status* ([`is_retryable_status`]), the caller gets
//! that last response, not an error. No outcome is `Permanent`: an error that no retry
//! can fix (a malformed URI, say) needs a classifier that can tell the errors apart.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use http::header::{HeaderMap, HeaderValue, RETRY_AFTER};
//! use http::{Response, StatusCode};
//! use nresilience_client::classify::{classify_status, HttpClassifier};
//! use nresilience_core::{Classify, Verdict};
//!
//! let now = SystemTime::now();
//! let mut pushback = HeaderMap::new();
//! pushback.insert(RETRY_AFTER, HeaderValue::from_static("2"));
//! let none = HeaderMap::new();
//!
//! let throttled = Verdict::Throttled { self_imposed: false, retry_after: Some(Duration::from_secs(2)) };
//! assert_eq!(classify_status(StatusCode::SERVICE_UNAVAILABLE, &pushback, now), throttled);
//! assert_eq!(classify_status(StatusCode::SERVICE_UNAVAILABLE, &none, now), Verdict::TRANSIENT);
//! assert_eq!(classify_status(StatusCode::TOO_MANY_REQUESTS, &none, now), Verdict::THROTTLED);
//! assert_eq!(classify_status(StatusCode::NOT_FOUND, &pushback, now), Verdict::Success);
//!
//! let reset: Result<Response<()>, std::io::Error> = Err(std::io::ErrorKind::ConnectionReset.into());
//! assert_eq!(HttpClassifier::new().classify(&reset), Verdict::TRANSIENT);
//! let answered: Result<Response<()>, std::io::Error> = Ok(Response::new(()));
//! assert_eq!(HttpClassifier::new().classify(&answered), Verdict::Success);
//! ```

use std::time::SystemTime;

use http::{HeaderMap, Response, StatusCode};
use nresilience_core::{Classify, Verdict};

use crate::chain_signals::ChainSignals;
use nresilience_wire::retry_after;

/// Classifies HTTP attempts by the table in the [module docs](self).
///
/// Every `Err` is a transient failure; a response is classified by [`classify_status`],
/// with `SystemTime::now()` as the time an HTTP-date `Retry-After` is measured from. The
/// wall clock is read only for a retryable status, never for a success. Tests that need a
/// fixed time call [`classify_status`] directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpClassifier {
    signals: ChainSignals,
}

impl HttpClassifier {
    /// The classifier, honouring both chain signals.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            signals: ChainSignals::BOTH,
        }
    }

    /// Whether an answer with `x-nresilience-overloaded: 1` ends the call with that answer
    /// (`Overloaded`). Defaults to `true`; `false` classifies it by its status alone.
    #[must_use]
    pub const fn overload_signal(mut self, honour: bool) -> Self {
        self.signals.overloaded = honour;
        self
    }

    /// Whether a `5xx` with `x-nresilience-retried: N` ends the call with that answer
    /// (`RetriedBelow`). Defaults to `true`; `false` classifies it by its status alone.
    #[must_use]
    pub const fn retried_signal(mut self, honour: bool) -> Self {
        self.signals.retried = honour;
        self
    }

    /// The verdict on a response with `status` and `headers`, by the table in the
    /// [module docs](self), with this classifier's choice of signals. `now` is the time an
    /// HTTP-date `Retry-After` is measured from; it is called only for a retryable status.
    pub fn classify_response(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        now: impl FnOnce() -> SystemTime,
    ) -> Verdict {
        if !is_retryable_status(status) {
            return Verdict::Success;
        }
        if self.signals.says_overloaded(headers) {
            return Verdict::Overloaded {
                retry_after: retry_after(headers, now()),
            };
        }
        if status.is_server_error() && self.signals.says_retried(headers) {
            return Verdict::RetriedBelow;
        }
        classify_by_status(status, headers, now)
    }
}

impl Default for HttpClassifier {
    fn default() -> Self {
        Self::new()
    }
}

impl<B, E: std::error::Error + 'static> Classify<Result<Response<B>, E>> for HttpClassifier {
    fn classify(&self, result: &Result<Response<B>, E>) -> Verdict {
        match result {
            Ok(response) => {
                self.classify_response(response.status(), response.headers(), SystemTime::now)
            }
            Err(error) => classify_error(error),
        }
    }
}

/// The verdict on an attempt that ended in `error`: [`Unreachable`](Verdict::Unreachable)
/// when its connection was refused (nothing listened: the dependency never saw it), transient
/// otherwise.
pub fn classify_error(error: &(dyn std::error::Error + 'static)) -> Verdict {
    let mut cause = Some(error);
    while let Some(error) = cause {
        let refused = error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        if refused {
            return Verdict::Unreachable;
        }
        cause = error.source();
    }
    Verdict::TRANSIENT
}

/// The verdict on a response with `status` and `headers`, by the table in the
/// [module docs](self).
///
/// `now` is the time an HTTP-date `Retry-After` is measured from. Headers are read only
/// for a retryable status.
#[must_use]
pub fn classify_status(status: StatusCode, headers: &HeaderMap, now: SystemTime) -> Verdict {
    HttpClassifier::new().classify_response(status, headers, || now)
}

/// Whether `status` alone makes an attempt retryable: `408`, `429` and every `5xx`.
///
/// These are the statuses [`classify_status`] never calls a success, whatever the headers
/// say. When attempts run out on one of them, the caller gets that last response, not an
/// error.
#[must_use]
pub const fn is_retryable_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 429 | 500..=599)
}

/// A retryable status's verdict when no chain signal decides it.
fn classify_by_status(
    status: StatusCode,
    headers: &HeaderMap,
    now: impl FnOnce() -> SystemTime,
) -> Verdict {
    let pushback = retry_after(headers, now());
    match status {
        StatusCode::TOO_MANY_REQUESTS => Verdict::Throttled {
            self_imposed: false,
            retry_after: pushback,
        },
        StatusCode::SERVICE_UNAVAILABLE if pushback.is_some() => Verdict::Throttled {
            self_imposed: false,
            retry_after: pushback,
        },
        _ => Verdict::Transient {
            retry_after: pushback,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::time::Duration;

    use http::header::{HeaderValue, RETRY_AFTER};

    use super::*;
    use crate::body::TransportError;

    /// Wed, 21 Oct 2015 07:28:00 GMT.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    fn with_retry_after(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static(value));
        headers
    }

    fn classify(status: u16, headers: &HeaderMap) -> Verdict {
        classify_status(StatusCode::from_u16(status).unwrap(), headers, now())
    }

    fn throttled(retry_after: Option<Duration>) -> Verdict {
        Verdict::Throttled {
            self_imposed: false,
            retry_after,
        }
    }

    fn transient(retry_after: Option<Duration>) -> Verdict {
        Verdict::Transient { retry_after }
    }

    #[test]
    fn h1_io_errors_are_transient_and_a_refused_connection_unreachable() {
        let reset: Result<Response<()>, io::Error> = Err(io::ErrorKind::ConnectionReset.into());
        assert_eq!(HttpClassifier::new().classify(&reset), Verdict::TRANSIENT);
        // O7: refused, however deep in the error's sources.
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let wrapped: Result<Response<()>, TransportError> = Err(TransportError::new(refused));
        assert_eq!(
            HttpClassifier::new().classify(&wrapped),
            Verdict::Unreachable
        );
        let said: Result<Response<()>, io::Error> = Err(io::Error::other("connection refused"));
        assert_eq!(HttpClassifier::new().classify(&said), Verdict::TRANSIENT);
    }

    #[test]
    fn h1_408_is_transient() {
        assert_eq!(classify(408, &HeaderMap::new()), Verdict::TRANSIENT);
    }

    #[test]
    fn h1_500_502_504_are_transient() {
        for status in [500, 502, 504] {
            assert_eq!(
                classify(status, &HeaderMap::new()),
                Verdict::TRANSIENT,
                "{status}"
            );
        }
    }

    #[test]
    fn h1_every_5xx_but_503_is_transient_even_with_retry_after() {
        let pushback = with_retry_after("3");
        for status in (500..=599).filter(|&status| status != 503) {
            assert_eq!(
                classify(status, &pushback),
                transient(Some(Duration::from_secs(3))),
                "{status}"
            );
        }
    }

    #[test]
    fn h1_408_carries_a_valid_retry_after_as_pushback() {
        assert_eq!(
            classify(408, &with_retry_after("Wed, 21 Oct 2015 07:28:05 GMT")),
            transient(Some(Duration::from_secs(5)))
        );
    }

    #[test]
    fn h1_503_without_retry_after_is_transient() {
        assert_eq!(classify(503, &HeaderMap::new()), Verdict::TRANSIENT);
    }

    #[test]
    fn k13_a_429_with_retry_after_ms_waits_its_milliseconds_before_retry_after() {
        let mut headers = with_retry_after("3");
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(
            classify(429, &headers),
            throttled(Some(Duration::from_millis(1_500)))
        );
        assert_eq!(
            classify(503, &headers),
            throttled(Some(Duration::from_millis(1_500))),
            "a 503 with a pushback is a throttle, whichever header carries it"
        );
    }

    #[test]
    fn k13_a_429_whose_ratelimit_quota_is_exhausted_waits_for_its_reset() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "ratelimit",
            HeaderValue::from_static(r#""default";r=0;t=5"#),
        );
        assert_eq!(
            classify(429, &headers),
            throttled(Some(Duration::from_secs(5)))
        );
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(
            classify(429, &headers),
            throttled(Some(Duration::from_secs(2))),
            "Retry-After names the wait: it comes first"
        );
    }

    #[test]
    fn h1_503_with_retry_after_is_throttled_with_the_pushback() {
        assert_eq!(
            classify(503, &with_retry_after("120")),
            throttled(Some(Duration::from_secs(120)))
        );
        assert_eq!(
            classify(503, &with_retry_after("0")),
            throttled(Some(Duration::ZERO))
        );
        assert_eq!(
            classify(503, &with_retry_after("Wed, 21 Oct 2015 07:30:00 GMT")),
            throttled(Some(Duration::from_secs(120)))
        );
    }

    #[test]
    fn h2_503_with_garbage_retry_after_is_transient_on_the_curve() {
        for garbage in ["soon", "-5", "1.5", ""] {
            assert_eq!(
                classify(503, &with_retry_after(garbage)),
                Verdict::TRANSIENT,
                "{garbage:?}"
            );
        }
        let opaque = HeaderValue::from_bytes(b"\xff\xfe").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, opaque);
        assert_eq!(classify(503, &headers), Verdict::TRANSIENT);
    }

    #[test]
    fn h2_503_uses_the_first_valid_retry_after() {
        let mut headers = HeaderMap::new();
        headers.append(RETRY_AFTER, HeaderValue::from_static("garbage"));
        headers.append(RETRY_AFTER, HeaderValue::from_static("4"));
        assert_eq!(
            classify(503, &headers),
            throttled(Some(Duration::from_secs(4)))
        );
    }

    #[test]
    fn h1_429_is_throttled_by_the_server_not_self_imposed() {
        let verdict = classify(429, &HeaderMap::new());
        assert_eq!(verdict, Verdict::THROTTLED);
        assert!(
            !verdict.is_self_imposed(),
            "a 429 is charged to the budget (B8, E6)"
        );
    }

    #[test]
    fn h1_429_carries_delta_seconds_retry_after() {
        assert_eq!(
            classify(429, &with_retry_after("7")),
            throttled(Some(Duration::from_secs(7)))
        );
    }

    #[test]
    fn h2_429_with_http_date_carries_date_minus_now() {
        assert_eq!(
            classify(429, &with_retry_after("Wed, 21 Oct 2015 07:29:30 GMT")),
            throttled(Some(Duration::from_secs(90)))
        );
        // A date already past: retry now, still throttled.
        assert_eq!(
            classify(429, &with_retry_after("Wed, 21 Oct 2015 07:00:00 GMT")),
            throttled(Some(Duration::ZERO))
        );
    }

    #[test]
    fn h2_429_with_garbage_retry_after_is_throttled_on_the_curve() {
        assert_eq!(classify(429, &with_retry_after("soon")), Verdict::THROTTLED);
    }

    #[test]
    fn h1_404_400_301_are_success_returned_not_retried() {
        let pushback = with_retry_after("5");
        for status in [404, 400, 301] {
            assert_eq!(
                classify(status, &HeaderMap::new()),
                Verdict::Success,
                "{status}"
            );
            // Retry-After on an answer is for the caller to read, not a reason to retry.
            assert_eq!(classify(status, &pushback), Verdict::Success, "{status}");
        }
    }

    #[test]
    fn h1_every_other_status_is_success() {
        for status in 100..=999 {
            let verdict = classify(status, &HeaderMap::new());
            let retryable = matches!(status, 408 | 429 | 500..=599);
            assert_eq!(verdict != Verdict::Success, retryable, "{status}");
            assert_eq!(
                is_retryable_status(StatusCode::from_u16(status).unwrap()),
                retryable,
                "{status}"
            );
            assert_ne!(verdict, Verdict::Permanent, "{status}");
        }
    }

    #[test]
    fn e1_http_classifier_reads_the_response_status_and_retry_after() {
        let response = |status: StatusCode, retry_after: Option<&'static str>| {
            let mut builder = Response::builder().status(status);
            if let Some(value) = retry_after {
                builder = builder.header(RETRY_AFTER, value);
            }
            Ok::<_, io::Error>(builder.body(()).unwrap())
        };
        let classifier = HttpClassifier::new();
        assert_eq!(
            classifier.classify(&response(StatusCode::OK, None)),
            Verdict::Success
        );
        assert_eq!(
            classifier.classify(&response(StatusCode::BAD_GATEWAY, None)),
            Verdict::TRANSIENT
        );
        assert_eq!(
            classifier.classify(&response(StatusCode::SERVICE_UNAVAILABLE, Some("2"))),
            throttled(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            classifier.classify(&response(StatusCode::TOO_MANY_REQUESTS, Some("1"))),
            throttled(Some(Duration::from_secs(1)))
        );
    }

    #[test]
    fn e1_http_classifier_measures_http_dates_from_the_wall_clock() {
        let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let response = Response::builder()
            .status(StatusCode::TOO_MANY_REQUESTS)
            .header(RETRY_AFTER, in_an_hour)
            .body(())
            .unwrap();
        let verdict = HttpClassifier::new().classify(&Ok::<_, io::Error>(response));
        let pushback = verdict.retry_after().unwrap();
        assert!(
            pushback > Duration::from_secs(3590) && pushback <= Duration::from_secs(3600),
            "{pushback:?}"
        );
    }
}
