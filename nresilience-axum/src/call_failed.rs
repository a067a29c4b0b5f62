//! The answer of a hop whose call to its own dependency failed, with the chain's signals.

use std::fmt;
use std::time::Duration;

use axum_core::response::{IntoResponse, Response};
use http::header::HeaderMap;
use http::{Extensions, StatusCode};
use nresilience_core::call::Attempts;
use nresilience_core::chain::Signal;
use nresilience_core::{RetryError, StopReason};
use nresilience_wire as wire;

/// What a handler answers when a retrying call it made failed: the status that says why, and
/// the signal that keeps the caller's retrying client from piling on.
///
/// Made with `?` from a [`RetryError`] (and, with the feature `reqwest`, from the
/// `reqwest_middleware::Error` of `nresilience-client`'s middleware):
///
/// | the call | status | headers |
/// |---|---|---|
/// | refused by its retry budget or circuit breaker, or answered overloaded | `503` | `x-nresilience-overloaded: 1`, `Retry-After` (the refusal's hint in whole seconds, rounded up) when there is one |
/// | failed after retrying, or answered that its dependency had retried | `502` | `x-nresilience-retried: N`, N the attempts made |
/// | out of time | `504` | none |
/// | anything else | `502` | none |
///
/// ```
/// use axum_core::response::IntoResponse;
/// use http::StatusCode;
/// use nresilience_axum::CallFailed;
/// use nresilience_core::RetryPolicy;
///
/// async fn orders(policy: &RetryPolicy) -> Result<String, CallFailed> {
///     let row = policy.execute(|_| async { Err::<String, _>("db reset") }).await?;
///     Ok(row)
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = RetryPolicy::builder().build().unwrap();
/// let response = orders(&policy).await.unwrap_err().into_response();
/// assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
/// assert_eq!(response.headers()["x-nresilience-retried"], "3");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailed {
    reason: StopReason,
    attempts: u32,
    retry_after: Option<Duration>,
}

impl CallFailed {
    /// Why the call stopped.
    #[must_use]
    pub fn reason(&self) -> StopReason {
        self.reason
    }

    /// The signal the answer carries, by [`StopReason::signal`].
    #[must_use]
    pub fn signal(&self) -> Option<Signal> {
        self.reason.signal(self.attempts)
    }

    /// Whether the answer carries the overload signal.
    #[must_use]
    pub fn is_overloaded(&self) -> bool {
        self.signal() == Some(Signal::Overloaded)
    }

    /// The attempts the answer says were made, when it carries the retried signal.
    #[must_use]
    pub fn retried(&self) -> Option<u32> {
        match self.signal() {
            Some(Signal::Retried { attempts }) => Some(attempts),
            _ => None,
        }
    }

    /// The status of the answer.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        if self.is_overloaded() {
            StatusCode::SERVICE_UNAVAILABLE
        } else if self.reason == StopReason::DeadlineExceeded {
            StatusCode::GATEWAY_TIMEOUT
        } else {
            StatusCode::BAD_GATEWAY
        }
    }

    /// The headers of the answer: the chain's signal, and `Retry-After` with an overload.
    /// A gRPC server puts the same pairs in its `Status`'s metadata.
    #[must_use]
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(signal) = self.signal() {
            wire::write_signal(&mut headers, signal, self.retry_after);
        }
        headers
    }
}

impl<E> From<RetryError<E>> for CallFailed {
    fn from(error: RetryError<E>) -> Self {
        Self::of(&error)
    }
}

/// A failed call through `nresilience-client`'s reqwest middleware, with `?`: the
/// middleware's retry error says why the call stopped; any other error (a middleware in front
/// of it, a request that could not be built) answers `502` with no signal.
#[cfg(feature = "reqwest")]
impl From<reqwest_middleware::Error> for CallFailed {
    fn from(error: reqwest_middleware::Error) -> Self {
        match nresilience_client::reqwest::retry_error(&error) {
            Some(retry) => Self::of(retry),
            None => Self {
                reason: StopReason::Permanent,
                attempts: 1,
                retry_after: None,
            },
        }
    }
}

impl CallFailed {
    /// The answer for a dependency's response the handler cannot use (a `5xx`, say): a
    /// retrying client returns the last response when its attempts run out on a retryable
    /// status (H4), and the response's [`Attempts`] say why the call stopped and how many
    /// attempts it made, so the answer carries the signal a failed call's would — `502` with
    /// `x-nresilience-retried: N` after retrying, `503` with the overload signal for an
    /// overloaded answer. A response the call accepted, or one without [`Attempts`], answers
    /// `502` with no signal.
    ///
    /// ```
    /// use http::{Response, StatusCode};
    /// use nresilience_axum::CallFailed;
    ///
    /// // A response no retrying client returned: no attempts to tell of.
    /// let response = Response::builder().status(404).body(()).unwrap();
    /// let failed = CallFailed::from_response(&response);
    /// assert_eq!(failed.status(), StatusCode::BAD_GATEWAY);
    /// assert_eq!(failed.retried(), None);
    /// ```
    #[must_use]
    pub fn from_response<B>(response: &http::Response<B>) -> Self {
        Self::from_extensions(response.extensions())
    }

    /// [`from_response`](Self::from_response) by the response's extensions: a
    /// `reqwest::Response`'s, through `nresilience-client`'s middleware.
    #[must_use]
    pub fn from_extensions(extensions: &Extensions) -> Self {
        match extensions.get::<Attempts>() {
            Some(attempts) if attempts.failed() => Self {
                reason: attempts.reason(),
                attempts: attempts.made(),
                retry_after: None,
            },
            attempts => Self {
                reason: StopReason::Permanent,
                attempts: attempts.map_or(1, Attempts::made),
                retry_after: None,
            },
        }
    }

    fn of<E>(error: &RetryError<E>) -> Self {
        Self {
            reason: error.reason(),
            attempts: error.attempts(),
            retry_after: error.rejection().and_then(|rejected| rejected.retry_after),
        }
    }
}

impl IntoResponse for CallFailed {
    fn into_response(self) -> Response {
        let body = self.to_string();
        (self.status(), self.headers(), body).into_response()
    }
}

impl fmt::Display for CallFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a call to a dependency failed: {} after {} attempt(s)",
            self.reason, self.attempts
        )
    }
}

impl std::error::Error for CallFailed {}

/// The same answer for a gRPC server: `UNAVAILABLE` with the chain's signal as metadata, and
/// for an overload `grpc-retry-pushback-ms: -1`, which asks any gRPC client not to retry;
/// `DEADLINE_EXCEEDED` when out of time.
#[cfg(feature = "grpc")]
impl From<CallFailed> for tonic::Status {
    fn from(failed: CallFailed) -> Self {
        let code = if failed.reason == StopReason::DeadlineExceeded {
            tonic::Code::DeadlineExceeded
        } else {
            tonic::Code::Unavailable
        };
        let mut headers = HeaderMap::new();
        if let Some(signal) = failed.signal() {
            wire::write_grpc_signal(&mut headers, signal);
        }
        let metadata = tonic::metadata::MetadataMap::from_headers(headers);
        Self::with_metadata(code, failed.to_string(), metadata)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::header::RETRY_AFTER;
    use nresilience_core::{BudgetOptions, RetryBudget, RetryPolicy, RetryPolicyBuilder};
    #[cfg(feature = "grpc")]
    use nresilience_wire::GRPC_PUSHBACK;
    use nresilience_wire::{OVERLOADED, RETRIED};

    use super::*;

    async fn failed(policy: RetryPolicyBuilder) -> CallFailed {
        let policy = policy.build().unwrap();
        policy
            .execute(|_| async { Err::<(), _>("reset") })
            .await
            .unwrap_err()
            .into()
    }

    #[tokio::test(start_paused = true)]
    async fn c1_a_budget_refusal_answers_503_overloaded_with_the_hint_rounded_up() {
        let options = BudgetOptions::default()
            .minimum_per_second(4.0)
            .capacity(1.0);
        let budget = RetryBudget::automatic().with_options(options);
        let policy = RetryPolicy::builder().max_attempts(3).budget(budget);
        let failed = failed(policy).await;
        assert_eq!(failed.reason(), StopReason::BudgetExhausted);
        let response = failed.into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[OVERLOADED], "1");
        // The floor funds the token 150 ms after the pause: one whole second.
        assert_eq!(response.headers()[RETRY_AFTER], "1");
        assert!(response.headers().get(RETRIED).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn c6_a_call_that_retried_answers_502_retried_with_its_attempts() {
        let policy = RetryPolicy::builder()
            .max_attempts(4)
            .budget(RetryBudget::None);
        let response = failed(policy).await.into_response();
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(response.headers()[RETRIED], "4");
        assert!(response.headers().get(OVERLOADED).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn c6_a_single_attempt_and_a_deadline_carry_no_signal() {
        let single = failed(RetryPolicy::builder().max_attempts(1)).await;
        assert_eq!(single.status(), StatusCode::BAD_GATEWAY);
        assert!(single.headers().is_empty());
        let late = RetryPolicy::builder()
            .attempt_timeout(None)
            .deadline(Some(Duration::from_millis(10)));
        let late: CallFailed = late
            .build()
            .unwrap()
            .execute(|_| std::future::pending::<Result<(), ()>>())
            .await
            .unwrap_err()
            .into();
        assert_eq!(late.status(), StatusCode::GATEWAY_TIMEOUT);
        assert!(late.headers().is_empty());
    }

    #[cfg(feature = "grpc")]
    #[tokio::test(start_paused = true)]
    async fn c1_c6_a_grpc_server_answers_unavailable_with_the_signal_as_metadata() {
        let options = BudgetOptions::default()
            .minimum_per_second(0.0)
            .capacity(1.0);
        let budget = RetryBudget::automatic().with_options(options);
        let refused = tonic::Status::from(failed(RetryPolicy::builder().budget(budget)).await);
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        let metadata = refused.metadata();
        assert_eq!(metadata.get(GRPC_PUSHBACK.as_str()).unwrap(), "-1");
        assert_eq!(metadata.get(OVERLOADED.as_str()).unwrap(), "1");

        let retried = RetryPolicy::builder()
            .max_attempts(4)
            .budget(RetryBudget::None);
        let retried = tonic::Status::from(failed(retried).await);
        assert_eq!(retried.code(), tonic::Code::Unavailable);
        assert_eq!(retried.metadata().get(RETRIED.as_str()).unwrap(), "4");
        assert!(retried.metadata().get(GRPC_PUSHBACK.as_str()).is_none());
    }
}
