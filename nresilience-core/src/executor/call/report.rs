//! How a call ends and is seen: its refusals, its error, its metrics and spans, and the
//! nested retry it reports.

use std::time::{Duration, Instant};

use tracing::{field, Level, Span};

use super::{Call, Phase, Step};
use crate::chain::learned;
use crate::clock;
use crate::executor::error::{CallRejected, LastAttempt, RetryError};
use crate::nesting::NestingSource;
use crate::outcome::{RejectReason, StopReason};
use crate::overload::{Saturated, SaturatedBy};
use crate::telemetry::CANCELLED;

/// A call dropped unfinished — its caller cancelled it — gives back what it holds and is
/// recorded as cancelled.
impl<E> Drop for Call<E> {
    fn drop(&mut self) {
        self.return_token();
        self.stop_waiting();
        // A probe slot held by a cancelled attempt goes back when its permit drops (G4).
        if !matches!(self.phase, Phase::Done)
            && (self.attempts > 0 || !matches!(self.phase, Phase::Ready))
        {
            let now = clock::now();
            self.abandon_in_flight(now, false);
            let elapsed = now.saturating_duration_since(self.started);
            self.record_end(None, elapsed);
        }
    }
}

impl<E> Call<E> {
    /// The budget or the breaker refused the call: announce it now, return it after the
    /// rejection pause (B7, G1).
    pub(super) fn refusing<T>(&mut self, reason: RejectReason, now: Instant) -> Step<T, E> {
        self.return_token();
        // A call waiting for room under the limit (O7) waits no more: over its pause it would
        // count ahead of calls that can go.
        self.stop_waiting();
        self.phase = Phase::Refusing(reason);
        let pause = self.policy.rejection_pause();
        let pause = self.time_left(now).map_or(pause, |left| pause.min(left));
        self.policy
            .instruments()
            .rejection(reason, self.criticality);
        let (attempt, pause_ms) = (i64::from(self.attempts), pause.as_millis() as u64);
        // The budget or breaker at work is not a fault: INFO, and the call's span carries
        // the outcome.
        if reason == RejectReason::BudgetExhausted {
            tracing::event!(
                parent: &self.span,
                Level::INFO,
                attempt,
                pause_ms,
                "nresilience.budget_exhausted"
            )
        } else {
            tracing::event!(
                parent: &self.span,
                Level::INFO,
                attempt,
                pause_ms,
                "nresilience.breaker_open"
            )
        }
        Step::Sleep(clock::after(now, pause))
    }

    /// Overload control refused the next attempt (O1, O2): the call ends now, with no pause —
    /// the dependency is busy, not broken, and a caller waiting longer only holds its own
    /// caller longer. Nothing is spent or deposited; the hint is the expected wait.
    #[cold]
    pub(super) fn saturated<T>(&mut self, saturated: Saturated, now: Instant) -> Step<T, E> {
        let reason = RejectReason::Saturated;
        let instruments = self.policy.instruments();
        instruments.rejection(reason, self.criticality);
        let cause = match saturated.cause {
            SaturatedBy::Wait => "wait",
            SaturatedBy::Limit => "limit",
        };
        if let Some(load) = &self.load {
            load.record_limit_at(now);
            instruments.overload_refusal(cause, self.criticality, load.dependency());
        }
        tracing::event!(
            parent: &self.span,
            Level::INFO,
            attempt = i64::from(self.attempts),
            cause,
            expected_wait_ms = saturated.retry_after.as_millis() as u64,
            "nresilience.saturated"
        );
        self.end_refused(reason, Some(saturated.retry_after), now)
    }

    /// Ends a refused call after its pause. The hint is read now, after the pause: the time
    /// the budget's floor needs from here, or the rest of the break (B7, G1).
    pub(super) fn refuse<T>(&mut self, reason: RejectReason, now: Instant) -> Step<T, E> {
        let retry_after = match reason {
            RejectReason::BudgetExhausted => self
                .bucket
                .as_ref()
                .and_then(|b| b.retry_after_for(now, self.criticality)),
            RejectReason::BreakerOpen => self
                .policy
                .circuit_breaker()
                .and_then(|breaker| breaker.retry_after(now)),
            // Never paused: `saturated` ends the call itself.
            _ => None,
        };
        self.end_refused(reason, retry_after, now)
    }

    fn end_refused<T>(
        &mut self,
        reason: RejectReason,
        retry_after: Option<Duration>,
        now: Instant,
    ) -> Step<T, E> {
        let stop = reason.stop_reason();
        learned::call_ended(stop, self.attempts, retry_after);
        self.stop(stop, now);
        let rejected = CallRejected::new(reason, retry_after);
        Step::Done(Err(self.error(stop, Some(rejected))))
    }

    /// Returns the token held for the next retry, if any: that retry will not go out (B13).
    #[inline]
    pub(super) fn return_token(&mut self) {
        if std::mem::take(&mut self.token) {
            self.refund();
        }
    }

    /// Gives a token back to the budget, for a retry or hedge not sent (B13).
    #[inline]
    pub(super) fn refund(&self) {
        if let Some(bucket) = &self.bucket {
            bucket.refund();
        }
    }

    pub(super) fn error(
        &mut self,
        reason: StopReason,
        rejected: Option<CallRejected>,
    ) -> RetryError<E> {
        let last = self.last.take().unwrap_or(LastAttempt::Refused);
        RetryError::new(reason, self.attempts, last, rejected)
    }

    pub(super) fn time_left(&self, now: Instant) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(now))
    }

    pub(super) fn stop(&mut self, reason: StopReason, now: Instant) {
        self.finish(reason, now, None);
    }

    /// Ends the call at `now`; `elapsed` is its duration when already known.
    #[inline]
    pub(super) fn finish(&mut self, reason: StopReason, now: Instant, elapsed: Option<Duration>) {
        // A retry that will never go out does not keep its token (B13).
        self.return_token();
        // The request being served learns how its calls failed (C7); a refusal or an
        // overloaded answer has told it already, with its hint.
        if reason != StopReason::Succeeded && !reason.is_overload() {
            learned::call_ended(reason, self.attempts, None);
        }
        self.phase = Phase::Done;
        let elapsed = elapsed.unwrap_or_else(|| now.saturating_duration_since(self.started));
        self.record_end(Some(reason), elapsed);
    }

    /// Records the call's end: `None` when its caller dropped it unfinished.
    #[inline]
    pub(super) fn record_end(&self, reason: Option<StopReason>, elapsed: Duration) {
        self.policy
            .instruments()
            .call(reason, self.criticality, elapsed.as_secs_f64());
        let nested_span = self.nested.as_ref().map(|nested| &nested.span);
        // A span no subscriber took costs a lookup of each field by name to record nothing.
        for span in std::iter::once(&self.span).chain(nested_span) {
            if !span.is_disabled() {
                // i64: unsigned 32-bit fields reach OpenTelemetry as strings.
                span.record("nresilience.attempts", i64::from(self.attempts));
                let outcome = reason.map_or(CANCELLED, StopReason::as_str);
                span.record("nresilience.outcome", outcome);
            }
        }
    }

    /// Reports a nested retry once, before the first attempt (N5).
    pub(super) fn report_nested(&mut self) {
        let potential_attempts = self.potential_attempts();
        let Some(nested) = &mut self.nested else {
            return;
        };
        let source = nested.source.as_str();
        self.policy
            .instruments()
            .nested(source, self.depth, potential_attempts);
        let span = tracing::info_span!(
            parent: &self.span,
            "NestedRetry",
            nresilience.source = source,
            nresilience.policy = self.policy.name(),
            nresilience.target = nested.target.as_deref(),
            nresilience.method = nested.method.as_deref(),
            nresilience.nesting.depth = i64::from(self.depth),
            nresilience.potential_attempts = i64::from(potential_attempts),
            nresilience.caller_attempt = nested.caller_attempt.map(i64::from),
            nresilience.attempts = field::Empty,
            nresilience.outcome = field::Empty,
        );
        tracing::event!(
            parent: &span,
            Level::INFO,
            nresilience.source = source,
            "nresilience.nested_retry"
        );
        nested.span = span;
    }
}

/// A retrying call started inside a retrying context, and what it targets.
#[derive(Debug)]
pub(super) struct Nested {
    pub(super) source: NestingSource,
    pub(super) target: Option<String>,
    pub(super) method: Option<String>,
    /// Which attempt of its caller's call the request being served is (F1), when the
    /// nesting came from its marker.
    pub(super) caller_attempt: Option<u32>,
    /// The `NestedRetry` span, once the first attempt reported it.
    pub(super) span: Span,
}

impl<E> std::fmt::Debug for Call<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("policy", &self.policy.name())
            .field("attempts", &self.attempts)
            .field("max_attempts", &self.max_attempts)
            .field("phase", &self.phase)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
