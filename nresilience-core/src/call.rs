//! One call's retry decisions, as a state machine any driver can run (SPEC E6).
//!
//! [`RetryPolicy::execute`](crate::RetryPolicy::execute) drives it with async closures; a
//! tower middleware drives it from its own named future. Both get the same decisions: the
//! machine holds the policy's rules, the driver only runs attempts and sleeps.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use nresilience_core::call::{Admission, Call, CallOptions, Decision};
//! use nresilience_core::{Backoff, Jitter, RetryPolicy, StopReason, Verdict};
//!
//! let policy = RetryPolicy::builder()
//!     .backoff(Backoff::default().with_jitter(Jitter::None))
//!     .build()
//!     .expect("valid policy");
//! let now = Instant::now();
//! let mut call = Call::start(&policy, now, CallOptions::new());
//!
//! assert!(matches!(call.begin_attempt(now), Admission::Run { .. }));
//! let decision = call.end_attempt(Verdict::TRANSIENT, now);
//! assert_eq!(decision, Decision::Retry(Duration::from_millis(100)));
//!
//! call.begin_attempt(now);
//! assert_eq!(call.end_attempt(Verdict::Success, now), Decision::Stop(StopReason::Succeeded));
//! assert_eq!(call.attempts(), 2);
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{field, Level, Span};

use crate::breaker::{BreakerOutcome, BreakerPermit};
use crate::nesting::{self, NestingSource};
use crate::policy::RetryPolicy;
use crate::{
    CallRejected, LastAttempt, NextAttempt, RetryError, RetryKind, StopReason, TokenBucket, Verdict,
};

/// The current time on tokio's clock as a [`std::time::Instant`]: real time normally,
/// virtual time under a paused test runtime. Every driver of a [`Call`] reads time here.
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// `at + delay` on tokio's clock, saturating far in the future instead of overflowing: a
/// server may ask for any wait, and an uncapped curve may grow without bound.
pub fn instant_after(at: Instant, delay: Duration) -> tokio::time::Instant {
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    let at = tokio::time::Instant::from_std(at);
    at.checked_add(delay)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// What a stopped call returns, given its last attempt's result (`None` when it was cut or
/// refused, which `last` then says).
///
/// A value the classifier did not accept is still the caller's answer when the call stopped
/// because attempts ran out or the verdict was permanent: the last response, not an error
/// (H4). A budget refusal or a deadline is an error whatever the last attempt returned.
pub fn outcome<T, E>(
    reason: StopReason,
    attempts: u32,
    result: Option<Result<T, E>>,
    last: LastAttempt<E>,
) -> Result<T, RetryError<E>> {
    let answered = matches!(
        reason,
        StopReason::Succeeded | StopReason::AttemptsExhausted | StopReason::Permanent
    );
    let last = match result {
        Some(Ok(value)) if answered => return Ok(value),
        Some(Ok(_)) => LastAttempt::Rejected,
        Some(Err(error)) => LastAttempt::Error(error),
        None => last,
    };
    Err(RetryError::new(reason, attempts, last, None))
}

/// How a call is started: whether it may retry at all, and what it targets.
#[derive(Debug, Clone, Default)]
pub struct CallOptions<'a> {
    single_attempt: bool,
    target: Option<&'a str>,
    method: Option<&'a str>,
    bucket: Option<Option<Arc<TokenBucket>>>,
}

impl<'a> CallOptions<'a> {
    /// A call that may retry as far as its policy allows, charged to the policy's bucket.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes this one call a single attempt (a request that cannot be replayed, a
    /// non-idempotent method). It still deposits on success, and it is never reported as a
    /// nested retry. Defaults to `true` (the call may retry).
    pub fn may_retry(mut self, may_retry: bool) -> Self {
        self.single_attempt = !may_retry;
        self
    }

    /// What the call targets (a host), for the `NestedRetry` span. Defaults to none.
    pub fn target(mut self, target: &'a str) -> Self {
        self.target = Some(target);
        self
    }

    /// The call's method (an HTTP method, a gRPC path), for the `NestedRetry` span.
    /// Defaults to none.
    pub fn method(mut self, method: &'a str) -> Self {
        self.method = Some(method);
        self
    }

    /// Charges the call to `bucket` instead of the policy's own (a per-host bucket; `None`
    /// for no budget). Defaults to the policy's bucket.
    pub fn bucket(mut self, bucket: Option<Arc<TokenBucket>>) -> Self {
        self.bucket = Some(bucket);
        self
    }
}

/// Whether the next attempt may run.
#[derive(Debug)]
#[must_use]
pub enum Admission {
    /// Run it, cut after `timeout` (the attempt timeout, the measured ceiling and the
    /// deadline, whichever is first). A cut attempt is [`Verdict::TRANSIENT`].
    Run {
        /// The attempt's time limit, if any.
        timeout: Option<Duration>,
    },
    /// This process's own limiter or breaker refused it: do not run it, and end it with
    /// this verdict (self-imposed, B8).
    Refused {
        /// The self-imposed verdict to pass to [`Call::end_attempt`].
        verdict: Verdict,
    },
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Decision {
    /// The call is over.
    Stop(StopReason),
    /// Sleep this long, then run the next attempt.
    Retry(Duration),
    /// The budget refused the retry: sleep this long (the rejection pause, never past the
    /// deadline), then call [`Call::reject`].
    Reject(Duration),
}

/// The state of one call under a policy.
#[derive(Debug)]
pub struct Call {
    policy: RetryPolicy,
    bucket: Option<Arc<TokenBucket>>,
    started: Instant,
    deadline: Option<Instant>,
    max_attempts: u32,
    attempts: u32,
    attempt_started: Instant,
    measured: Option<Duration>,
    typical: Option<Duration>,
    permit: Option<BreakerPermit>,
    nested: Option<Nested>,
    nested_span: Span,
    span: Span,
    finished: bool,
}

impl Call {
    /// Starts a call at `now` (read before calling).
    ///
    /// When the call may retry and the nesting context says it runs inside a retrying
    /// context, it is reported once, by its first [`begin_attempt`](Self::begin_attempt):
    /// a `NestedRetry` span and the `nresilience.nested_retries` counter (N5). Nothing
    /// else changes.
    pub fn start(policy: &RetryPolicy, now: Instant, options: CallOptions<'_>) -> Self {
        let max_attempts = if options.single_attempt {
            1
        } else {
            policy.max_attempts()
        };
        let bucket = match options.bucket {
            Some(bucket) => bucket,
            None => policy.bucket(now).cloned(),
        };
        // Read now, in the caller's context; reported by the first attempt, by which time
        // the call knows whether it may really retry (its body may prove unreplayable).
        let nested = if max_attempts > 1 {
            nesting::current().map(|source| Nested {
                source,
                target: options.target.map(str::to_owned),
                method: options.method.map(str::to_owned),
            })
        } else {
            None
        };
        let span = tracing::info_span!(
            "resilience",
            otel.name = field::display(format_args!("resilience {}", policy.name())),
            nresilience.policy = policy.name(),
            nresilience.attempts = field::Empty,
            nresilience.outcome = field::Empty,
        );
        Self {
            policy: policy.clone(),
            bucket,
            started: now,
            deadline: policy.deadline().and_then(|d| now.checked_add(d)),
            max_attempts,
            attempts: 0,
            attempt_started: now,
            measured: None,
            typical: None,
            permit: None,
            nested,
            nested_span: Span::none(),
            span,
            finished: false,
        }
    }

    /// Drops the call to a single attempt, before its first one: its request proved
    /// unreplayable. It is then neither stamped nor reported as nested (N1, N5).
    pub fn single_attempt(&mut self) {
        if self.attempts == 0 {
            self.max_attempts = 1;
            self.nested = None;
        }
    }

    /// Reports a nested retry once, before the first attempt (N5).
    fn report_nested(&mut self) {
        let Some(nested) = &self.nested else {
            return;
        };
        let source = nested.source.as_str();
        self.policy.instruments().nested(source);
        let span = tracing::info_span!(
            parent: &self.span,
            "NestedRetry",
            nresilience.source = source,
            nresilience.policy = self.policy.name(),
            nresilience.target = nested.target.as_deref(),
            nresilience.method = nested.method.as_deref(),
            nresilience.attempts = field::Empty,
            nresilience.outcome = field::Empty,
        );
        tracing::event!(
            parent: &span,
            Level::INFO,
            nresilience.source = source,
            "nresilience.nested_retry"
        );
        self.nested_span = span;
    }

    /// Whether this call may make more than one attempt: the span of its whole run should
    /// set the in-process nesting context (N5).
    pub fn may_retry(&self) -> bool {
        self.max_attempts > 1
    }

    /// Where the nesting context came from, when this call is reported as nested.
    pub fn nested(&self) -> Option<NestingSource> {
        self.nested.as_ref().map(|n| n.source)
    }

    /// Attempts started so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The call's span (`resilience {policy}`); attempts run inside it.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The bucket this call is charged to.
    pub fn bucket(&self) -> Option<&Arc<TokenBucket>> {
        self.bucket.as_ref()
    }

    /// Starts the next attempt at `now`: the breaker and limiter admit it or not (B8), and
    /// its timeout is fixed.
    pub fn begin_attempt(&mut self, now: Instant) -> Admission {
        if self.attempts == 0 {
            self.report_nested();
        }
        self.attempts += 1;
        self.attempt_started = now;
        tracing::event!(parent: &self.span, Level::DEBUG, attempt = i64::from(self.attempts), "nresilience.attempt");
        if let Some(breaker) = self.policy.circuit_breaker() {
            match breaker.try_acquire(now) {
                Ok(permit) => self.permit = Some(permit),
                Err(open) => return refused(open.retry_after()),
            }
        }
        if let Some(limiter) = self.policy.rate_limiter() {
            if !limiter.try_acquire(now) {
                return refused(Some(limiter.retry_after(now)));
            }
        }
        let estimate = self.policy.estimate(now);
        self.measured = estimate.measured;
        self.typical = estimate.typical;
        let mut timeout = self.policy.attempt_timeout();
        if let Some(ceiling) = estimate.ceiling {
            timeout = Some(timeout.map_or(ceiling, |t| t.min(ceiling)));
        }
        if let Some(left) = self.time_left(now) {
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        Admission::Run { timeout }
    }

    /// Ends the current attempt with its verdict at `now`, and decides what follows, in
    /// the order of SPEC E6.
    pub fn end_attempt(&mut self, verdict: Verdict, now: Instant) -> Decision {
        let duration = now.saturating_duration_since(self.attempt_started);
        let instruments = self.policy.instruments();
        if !verdict.is_self_imposed() {
            instruments.attempt(verdict.as_str(), duration.as_secs_f64());
        }
        if let Some(permit) = self.permit.take() {
            if let Some(breaker) = self.policy.circuit_breaker() {
                let outcome = match verdict {
                    Verdict::Success | Verdict::Permanent => BreakerOutcome::Success,
                    v if v.is_self_imposed() => BreakerOutcome::SelfImposed,
                    _ => BreakerOutcome::Failure,
                };
                breaker.record(permit, outcome, now);
            }
        }

        if verdict == Verdict::Success {
            if let Some(bucket) = &self.bucket {
                bucket.deposit(now);
            }
            self.policy.record_success(duration, now);
            return self.stop(StopReason::Succeeded, now);
        }
        if !verdict.is_retryable() {
            return self.stop(StopReason::Permanent, now);
        }
        if self.attempts >= self.max_attempts {
            return self.stop(StopReason::AttemptsExhausted, now);
        }
        let left = self.time_left(now).unwrap_or(Duration::MAX);
        if left.is_zero() {
            return self.stop(StopReason::DeadlineExceeded, now);
        }
        if !verdict.is_self_imposed() {
            if let Some(bucket) = &self.bucket {
                if !bucket.try_withdraw(now, self.policy.criticality()) {
                    instruments.rejection(crate::RejectReason::BudgetExhausted.as_str());
                    return Decision::Reject(self.policy.rejection_pause().min(left));
                }
            }
        }
        let kind = match verdict {
            Verdict::Throttled { .. } => RetryKind::Throttled,
            _ => RetryKind::Transient,
        };
        let mut next = NextAttempt::new(self.attempts + 1, kind);
        if let Some(after) = verdict.retry_after() {
            next = next.with_retry_after(after);
        }
        let delay = self.policy.delay(&next, self.measured);
        let needed = delay.saturating_add(self.typical.unwrap_or_default());
        if self.deadline.is_some() && needed >= left {
            return self.stop(StopReason::DeadlineExceeded, now);
        }
        tracing::event!(
            parent: &self.span,
            Level::INFO,
            attempt = i64::from(self.attempts),
            verdict = verdict.as_str(),
            delay_ms = delay.as_millis() as u64,
            "nresilience.retrying"
        );
        Decision::Retry(delay)
    }

    /// Ends a call whose retry the budget refused, after the rejection pause, at `now`.
    ///
    /// The hint is read now, after the pause, and the bucket refills first: it is the time
    /// the floor needs from here, not from before the pause (B7).
    pub fn reject(&mut self, now: Instant) -> CallRejected {
        let hint = self
            .bucket
            .as_ref()
            .and_then(|b| b.retry_after_for(now, self.policy.criticality()));
        // The budget doing its job, not a fault: the call's span carries the outcome.
        tracing::event!(
            parent: &self.span,
            Level::INFO,
            attempt = i64::from(self.attempts),
            retry_after_ms = hint.map(|h| h.as_millis() as u64),
            "nresilience.budget_exhausted"
        );
        let _ = self.stop(StopReason::BudgetExhausted, now);
        CallRejected::budget_exhausted(hint)
    }

    fn time_left(&self, now: Instant) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(now))
    }

    fn stop(&mut self, reason: StopReason, now: Instant) -> Decision {
        if !self.finished {
            self.finished = true;
            let elapsed = now.saturating_duration_since(self.started);
            let instruments = self.policy.instruments();
            instruments.call(reason.as_str(), elapsed.as_secs_f64());
            if self.attempts > 1 || reason == StopReason::BudgetExhausted {
                if let Some(bucket) = &self.bucket {
                    instruments.utilization(bucket.utilization(now));
                }
            }
            for span in [&self.span, &self.nested_span] {
                // i64: unsigned 32-bit fields reach OpenTelemetry as strings.
                span.record("nresilience.attempts", i64::from(self.attempts));
                span.record("nresilience.outcome", reason.as_str());
            }
        }
        Decision::Stop(reason)
    }
}

/// A retrying call started inside a retrying context, and what it targets.
#[derive(Debug)]
struct Nested {
    source: NestingSource,
    target: Option<String>,
    method: Option<String>,
}

fn refused(retry_after: Option<Duration>) -> Admission {
    Admission::Refused {
        verdict: Verdict::Throttled {
            self_imposed: true,
            retry_after,
        },
    }
}
