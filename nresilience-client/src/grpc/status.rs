//! What a failed call reports in gRPC.

use std::sync::Arc;

use nresilience_core::{LastAttempt, RetryError, StopReason};
use tonic::{Code, Status};

use crate::body::TransportError;

/// The status a failed call reports, with the [`RetryError`] as its source.
///
/// A call stopped by the deadline, or whose last attempt timed out, is `DEADLINE_EXCEEDED`;
/// one the budget, a breaker or this process's own limiter refused is `UNAVAILABLE`. Any
/// other failure is what tonic makes of the last attempt's error (a connection that could not
/// be made is `UNAVAILABLE`). A call that ended on a gRPC answer is not here: the caller gets
/// that answer (H4), and tonic reads its status.
pub(super) fn into_status(error: RetryError<TransportError>) -> Status {
    let code = match (error.reason(), error.last_attempt()) {
        (StopReason::DeadlineExceeded, _) | (_, LastAttempt::TimedOut) => Code::DeadlineExceeded,
        (StopReason::BudgetExhausted | StopReason::BreakerOpen | StopReason::Saturated, _)
        | (_, LastAttempt::Refused) => Code::Unavailable,
        _ => return Status::from_error(Box::new(error)),
    };
    let mut status = Status::new(code, error.to_string());
    status.set_source(Arc::new(error));
    status
}

#[cfg(test)]
mod tests {
    use std::future::pending;
    use std::io;
    use std::sync::Arc;
    use std::time::Duration;

    use nresilience_core::breaker::{BreakerOptions, CircuitBreaker};
    use nresilience_core::limiter::RateLimiter;
    use nresilience_core::{
        clock, BudgetOptions, RetryBudget, RetryPolicy, RetryPolicyBuilder, Verdict,
    };

    use super::*;

    fn policy() -> RetryPolicyBuilder {
        RetryPolicy::builder()
            .deadline(None)
            .attempt_timeout(None)
            .attempt_ceiling(None)
            .budget(RetryBudget::None)
    }

    fn reset() -> TransportError {
        TransportError::new(io::Error::from(io::ErrorKind::ConnectionReset))
    }

    /// Runs a call under `policy` whose attempts all fail with a reset, and returns its error.
    async fn failing(policy: RetryPolicyBuilder) -> RetryError<TransportError> {
        let policy = policy.build().unwrap();
        policy
            .execute(|_| async { Err::<(), _>(reset()) })
            .await
            .unwrap_err()
    }

    /// Runs a call under `policy` whose attempts never answer, and returns its error.
    async fn stalled(policy: &RetryPolicy) -> RetryError<TransportError> {
        policy
            .execute(|_| pending::<Result<(), TransportError>>())
            .await
            .unwrap_err()
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_and_timeouts_are_deadline_exceeded() {
        let policy = policy()
            .deadline(Some(Duration::from_millis(50)))
            .build()
            .unwrap();
        let error = stalled(&policy).await;
        assert_eq!(error.reason(), StopReason::DeadlineExceeded);
        assert_eq!(into_status(error).code(), Code::DeadlineExceeded);

        let policy = policy
            .reconfigure()
            .deadline(None)
            .attempt_timeout(Some(Duration::from_millis(10)))
            .max_attempts(1)
            .build()
            .unwrap();
        let error = stalled(&policy).await;
        assert_eq!(error.reason(), StopReason::AttemptsExhausted);
        assert_eq!(into_status(error).code(), Code::DeadlineExceeded);
    }

    #[tokio::test(start_paused = true)]
    async fn b7_a_budget_refusal_is_unavailable_and_carries_the_retry_error() {
        let options = BudgetOptions::default().minimum_per_second(0.0);
        let error = failing(
            policy()
                .budget(RetryBudget::automatic().with_options(options))
                .max_attempts(5),
        )
        .await;
        assert_eq!(error.reason(), StopReason::BudgetExhausted);
        let status = into_status(error);
        assert_eq!(status.code(), Code::Unavailable);
        let source = std::error::Error::source(&status).unwrap();
        let error = source.downcast_ref::<RetryError<TransportError>>().unwrap();
        assert_eq!(error.reason(), StopReason::BudgetExhausted);
        assert_eq!(error.attempts(), 2, "the banked token paid for one retry");
    }

    #[tokio::test(start_paused = true)]
    async fn g1_an_open_breaker_is_unavailable() {
        let breaker = CircuitBreaker::new(
            BreakerOptions::default().consecutive_failures(Some(1)),
            clock::now(),
        )
        .unwrap();
        let policy = policy().circuit_breaker(Arc::new(breaker));
        failing(policy.clone()).await;
        let error = failing(policy).await;
        assert_eq!(error.reason(), StopReason::BreakerOpen);
        assert_eq!(into_status(error).code(), Code::Unavailable);
    }

    #[tokio::test(start_paused = true)]
    async fn b8_a_refusal_by_this_process_is_unavailable() {
        let limiter = RateLimiter::new(1e-6, 1, clock::now()).unwrap();
        assert!(limiter.try_acquire(clock::now()));
        let error = failing(policy().rate_limiter(Arc::new(limiter)).max_attempts(1)).await;
        assert!(matches!(error.last_attempt(), LastAttempt::Refused));
        assert_eq!(into_status(error).code(), Code::Unavailable);
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_in_the_last_error_is_the_calls_status() {
        let policy = policy().build().unwrap();
        let error = policy
            .execute_with(
                &|_: &Result<(), TransportError>| Verdict::Permanent,
                |_| async { Err(TransportError::new(Status::unauthenticated("who?"))) },
            )
            .await
            .unwrap_err();
        let status = into_status(error);
        assert_eq!(status.code(), Code::Unauthenticated);
        assert_eq!(status.message(), "who?");
    }

    #[tokio::test(start_paused = true)]
    async fn any_other_error_is_unknown_and_carries_the_retry_error() {
        let error = failing(policy().backoff(nresilience_core::Backoff::none())).await;
        assert_eq!(error.reason(), StopReason::AttemptsExhausted);
        let status = into_status(error);
        assert_eq!(status.code(), Code::Unknown);
        let source = std::error::Error::source(&status).unwrap();
        assert!(source.is::<RetryError<TransportError>>());
    }
}
