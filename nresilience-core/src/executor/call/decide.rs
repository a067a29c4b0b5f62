//! What follows an attempt, in the decision order (E6: success, cancellation, a permanent
//! failure, attempts used up, the deadline, the budget, a delay past the deadline, else a
//! retry): the call's side (the budget, the estimate, the events) over the pure rules below
//! it, each tested on its own.

use std::time::{Duration, Instant};

use tracing::Level;

use super::{Call, Step};
use crate::backoff::{NextAttempt, RetryKind};
use crate::chain::learned;
use crate::clock;
use crate::guards::breaker::BreakerOutcome;
use crate::outcome::{RejectReason, StopReason};
use crate::verdict::Verdict;

impl<E> Call<E> {
    /// What follows an attempt with `verdict`, in the decision order (E6). The caller's
    /// cancellation, second in that order, is the driver dropping the call.
    #[inline]
    pub(super) fn decide(
        &mut self,
        verdict: Verdict,
        duration: Duration,
        now: Instant,
    ) -> Decision {
        if verdict == Verdict::Success {
            if let Some(bucket) = &self.bucket {
                bucket.deposit(now);
            }
            self.policy.record_success(duration, now);
            return Decision::Stop(StopReason::Succeeded);
        }
        self.decide_after_failure(verdict, now)
    }

    /// What follows an attempt that did not succeed.
    pub(super) fn decide_after_failure(&mut self, verdict: Verdict, now: Instant) -> Decision {
        let left = self.time_left(now);
        if let Some(reason) = stop_before_retry(verdict, self.attempts, self.max_attempts, left) {
            let reason = match reason {
                StopReason::AttemptsExhausted if self.unreplayable => StopReason::NotReplayable,
                reason => reason,
            };
            if let Verdict::Overloaded { retry_after } = verdict {
                // The request being served passes the dependency's hint on (C7).
                learned::call_ended(reason, self.attempts, retry_after);
            }
            return Decision::Stop(reason);
        }
        // This process's own refusals cost the budget nothing (B8); the server's throttles do.
        if !verdict.is_self_imposed() {
            if let Some(bucket) = &self.bucket {
                if !bucket.try_withdraw(now, self.criticality) {
                    return Decision::Refuse(RejectReason::BudgetExhausted);
                }
                self.token = true;
            }
        }
        let mut next = NextAttempt::new(self.attempts + 1, retry_kind(verdict));
        if let Some(after) = verdict.retry_after() {
            next = next.with_retry_after(after);
        }
        let mut delay = self.policy.delay(&next, self.estimate.measured());
        if self.unavailable(verdict, now) {
            let attempts_left = self.max_attempts - self.attempts;
            delay = delay.max(spread(left, attempts_left, self.estimate.typical()));
        }
        if misses_deadline(delay, self.estimate.typical(), left) {
            return Decision::Stop(StopReason::DeadlineExceeded);
        }
        tracing::event!(
            parent: &self.span,
            Level::INFO,
            attempt = i64::from(self.attempts),
            verdict = verdict.as_str(),
            delay_ms = delay.as_millis() as u64,
            "nresilience.retrying"
        );
        Decision::Sleep(clock::after(now, delay))
    }

    /// Whether the attempt that failed with `verdict` met a dependency that is not there to
    /// serve it: it refused the connection, or it finishes nothing (O7).
    fn unavailable(&self, verdict: Verdict, now: Instant) -> bool {
        match verdict {
            Verdict::Unreachable => true,
            Verdict::Transient { .. } => self.load.as_ref().is_some_and(|load| load.stalled(now)),
            _ => false,
        }
    }

    pub(super) fn step<T>(&mut self, decision: Decision, now: Instant) -> Step<T, E> {
        match decision {
            Decision::Stop(reason) => {
                self.stop(reason, now);
                Step::Done(Err(self.error(reason, None)))
            }
            Decision::Sleep(until) => {
                self.tally.sleeps(now);
                Step::Sleep(until)
            }
            Decision::Refuse(reason) => self.refusing(reason, now),
        }
    }
}

/// What follows an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    Stop(StopReason),
    Sleep(Instant),
    Refuse(RejectReason),
}

/// Why a call that failed with `verdict` after `attempts` of `max_attempts` stops before the
/// budget is asked, if it does: an overloaded or retried answer (C1, C6), a permanent failure,
/// the attempts used up, or a deadline already passed, with `left` the time until it.
#[inline]
pub(super) fn stop_before_retry(
    verdict: Verdict,
    attempts: u32,
    max_attempts: u32,
    left: Option<Duration>,
) -> Option<StopReason> {
    match verdict {
        Verdict::Overloaded { .. } => Some(StopReason::Overloaded),
        Verdict::RetriedBelow => Some(StopReason::RetriedBelow),
        _ if !verdict.is_retryable() => Some(StopReason::Permanent),
        _ if attempts >= max_attempts => Some(StopReason::AttemptsExhausted),
        _ if left.is_some_and(|left| left.is_zero()) => Some(StopReason::DeadlineExceeded),
        _ => None,
    }
}

/// The backoff curve a retry after `verdict` follows: the throttled one for a throttle.
#[inline]
pub(super) fn retry_kind(verdict: Verdict) -> RetryKind {
    match verdict {
        Verdict::Throttled { .. } => RetryKind::Throttled,
        _ => RetryKind::Transient,
    }
}

/// Whether a retry after `delay` would not finish before the deadline, `left` away: the
/// delay plus a `typical` attempt reaches it (E4). Never without a deadline.
#[inline]
pub(super) fn misses_deadline(
    delay: Duration,
    typical: Option<Duration>,
    left: Option<Duration>,
) -> bool {
    let needed = delay.saturating_add(typical.unwrap_or_default());
    left.is_some_and(|left| needed >= left)
}

/// The delay before the next of `attempts_left` attempts that spreads them over the time
/// `left`, the last starting two `typical` attempts (at least 10 ms each, a timer's slack)
/// before the deadline (O7): a dependency that is unavailable for a moment is tried again
/// when it may be back, not in the first few hundred milliseconds. Nothing to spread without
/// a deadline.
#[inline]
pub(super) fn spread(
    left: Option<Duration>,
    attempts_left: u32,
    typical: Option<Duration>,
) -> Duration {
    const SLACK: Duration = Duration::from_millis(10);
    let Some(left) = left else {
        return Duration::ZERO;
    };
    let margin = typical.unwrap_or_default().max(SLACK).saturating_mul(2);
    left.saturating_sub(margin) / attempts_left.max(1)
}

/// How long an attempt may take — the attempt `timeout`, the measured `ceiling` and the
/// time `left` before the deadline, whichever is least — and whether a cut at that bound is a
/// latency sample the ceiling learns from (E5, E7): the ceiling is the bound, or the deadline
/// is and is no shorter than a `typical` attempt.
#[inline]
pub(super) fn attempt_bound(
    timeout: Option<Duration>,
    ceiling: Option<Duration>,
    typical: Option<Duration>,
    left: Option<Duration>,
) -> (Option<Duration>, bool) {
    let mut timeout = timeout;
    let mut censors = false;
    if let Some(ceiling) = ceiling {
        censors = timeout.is_none_or(|t| ceiling < t);
        timeout = Some(timeout.map_or(ceiling, |t| t.min(ceiling)));
        if let Some(left) = left.filter(|&left| timeout.is_none_or(|t| left < t)) {
            // Cut by the deadline, the attempt still took at least `left`. Served under a
            // caller's deadline (C2), that cut is often the only sign of a slower
            // dependency: ignored, it held each hop's ceiling at the one above it, and a
            // queue that outgrew them both failed every attempt after the fault. A bound
            // below the typical attempt says nothing the window lacks, and would drag the
            // ceiling down.
            censors = typical.is_some_and(|typical| left >= typical);
        }
    }
    if let Some(left) = left {
        timeout = Some(timeout.map_or(left, |t| t.min(left)));
    }
    (timeout, censors)
}

/// The call's deadline: its policy's `own`, or the `caller`'s (C2) when that comes first.
#[inline]
pub(super) fn deadline(own: Option<Instant>, caller: Option<Instant>) -> Option<Instant> {
    match (own, caller) {
        (Some(own), Some(caller)) => Some(own.min(caller)),
        (own, caller) => own.or(caller),
    }
}

/// Whether a call that stops for `reason` answers with the last attempt's value: a value the
/// classifier did not accept is still the caller's answer when nothing more can be done
/// with it (H4). A refusal or a deadline is an error whatever the last attempt returned.
#[inline]
pub(super) fn answers(reason: StopReason) -> bool {
    matches!(
        reason,
        StopReason::Succeeded
            | StopReason::AttemptsExhausted
            | StopReason::NotReplayable
            | StopReason::Permanent
            | StopReason::Overloaded
            | StopReason::RetriedBelow
    )
}

/// What an attempt with `verdict` tells the breaker: only a transient failure is evidence
/// against the dependency; a throttle means it is defending itself, a permanent failure is
/// the caller's own (G2).
#[inline]
pub(super) fn breaker_outcome(verdict: Verdict) -> BreakerOutcome {
    match verdict {
        Verdict::Success => BreakerOutcome::Success,
        Verdict::Transient { .. } | Verdict::Unreachable | Verdict::RetriedBelow => {
            BreakerOutcome::Failure
        }
        Verdict::Throttled { .. } | Verdict::Permanent | Verdict::Overloaded { .. } => {
            BreakerOutcome::Ignored
        }
    }
}

/// The retry-deciding verdict of two failures: a throttle over a transient failure, and of two
/// throttles the one asking for the longer wait.
#[inline]
pub(super) fn stronger(earlier: Option<Verdict>, latest: Verdict) -> Verdict {
    match earlier {
        Some(earlier)
            if !matches!(latest, Verdict::Throttled { .. })
                || earlier.retry_after() > latest.retry_after() =>
        {
            earlier
        }
        _ => latest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const THROTTLED: Verdict = Verdict::Throttled {
        self_imposed: false,
        retry_after: None,
    };

    fn throttled_for(after: u64) -> Verdict {
        Verdict::Throttled {
            self_imposed: false,
            retry_after: Some(ms(after)),
        }
    }

    #[test]
    fn o7_the_attempts_left_share_the_time_left_the_last_leaving_two_typical_attempts() {
        // 2 s left, two attempts to go, 100 ms typical: 1.8 s to share.
        assert_eq!(spread(Some(ms(2_000)), 2, Some(ms(100))), ms(900));
        // A typical attempt too quick to see still leaves a timer's slack.
        assert_eq!(spread(Some(ms(1_000)), 1, None), ms(980));
        assert_eq!(spread(Some(ms(10)), 3, Some(ms(100))), Duration::ZERO);
        assert_eq!(
            spread(None, 3, Some(ms(100))),
            Duration::ZERO,
            "no deadline"
        );
    }

    #[test]
    fn e6_a_final_answer_stops_before_the_attempts_left_and_the_deadline_are_read() {
        // Even with attempts and time left.
        let left = Some(ms(1_000));
        for (verdict, reason) in [
            (
                Verdict::Overloaded { retry_after: None },
                StopReason::Overloaded,
            ),
            (Verdict::RetriedBelow, StopReason::RetriedBelow),
            (Verdict::Permanent, StopReason::Permanent),
        ] {
            assert_eq!(stop_before_retry(verdict, 1, 3, left), Some(reason));
            // And before them when they are gone too: the answer says why.
            assert_eq!(stop_before_retry(verdict, 3, 3, Some(ms(0))), Some(reason));
        }
    }

    #[test]
    fn e6_attempts_used_up_come_before_a_passed_deadline() {
        assert_eq!(
            stop_before_retry(Verdict::TRANSIENT, 3, 3, Some(Duration::ZERO)),
            Some(StopReason::AttemptsExhausted)
        );
        assert_eq!(
            stop_before_retry(THROTTLED, 2, 3, Some(Duration::ZERO)),
            Some(StopReason::DeadlineExceeded)
        );
    }

    #[test]
    fn e6_a_retryable_failure_with_attempts_and_time_left_goes_on_to_the_budget() {
        for verdict in [Verdict::TRANSIENT, THROTTLED] {
            assert_eq!(stop_before_retry(verdict, 1, 3, Some(ms(1))), None);
            assert_eq!(stop_before_retry(verdict, 2, 3, None), None, "no deadline");
        }
    }

    #[test]
    fn e1_a_throttle_backs_off_on_the_throttled_base_anything_else_on_the_transient() {
        assert_eq!(retry_kind(THROTTLED), RetryKind::Throttled);
        assert_eq!(retry_kind(throttled_for(5)), RetryKind::Throttled);
        assert_eq!(retry_kind(Verdict::TRANSIENT), RetryKind::Transient);
    }

    #[test]
    fn k14_a_retry_whose_delay_and_typical_attempt_reach_the_deadline_is_not_made() {
        assert!(misses_deadline(ms(60), Some(ms(40)), Some(ms(100))));
        assert!(!misses_deadline(ms(59), Some(ms(40)), Some(ms(100))));
        assert!(
            misses_deadline(ms(100), None, Some(ms(100))),
            "no estimate: the delay alone"
        );
        assert!(
            !misses_deadline(Duration::MAX, Some(ms(40)), None),
            "no deadline"
        );
    }

    #[test]
    fn e5_an_attempt_is_bounded_by_the_least_of_timeout_ceiling_and_deadline() {
        let bound = |timeout, ceiling, left| attempt_bound(timeout, ceiling, None, left).0;
        assert_eq!(bound(None, None, None), None);
        assert_eq!(bound(Some(ms(500)), None, None), Some(ms(500)));
        assert_eq!(bound(Some(ms(500)), Some(ms(200)), None), Some(ms(200)));
        assert_eq!(
            bound(Some(ms(100)), Some(ms(200)), None),
            Some(ms(100)),
            "the ceiling only ever tightens the timeout"
        );
        assert_eq!(
            bound(Some(ms(500)), Some(ms(200)), Some(ms(80))),
            Some(ms(80))
        );
        assert_eq!(bound(None, None, Some(ms(80))), Some(ms(80)));
    }

    #[test]
    fn e7_a_cut_teaches_the_ceiling_when_the_ceiling_or_a_deadline_above_a_typical_attempt_cuts() {
        let censors =
            |timeout, ceiling, typical, left| attempt_bound(timeout, ceiling, typical, left).1;
        let typical = Some(ms(30));
        assert!(censors(Some(ms(500)), Some(ms(200)), typical, None));
        assert!(
            !censors(Some(ms(100)), Some(ms(200)), typical, None),
            "the configured timeout cuts"
        );
        assert!(
            !censors(Some(ms(500)), None, typical, Some(ms(80))),
            "no ceiling yet"
        );
        assert!(
            censors(Some(ms(500)), Some(ms(200)), typical, Some(ms(80))),
            "a deadline (C2) above the typical attempt"
        );
        assert!(
            !censors(Some(ms(500)), Some(ms(200)), typical, Some(ms(20))),
            "a deadline below it says nothing"
        );
        assert!(
            censors(Some(ms(500)), Some(ms(200)), typical, Some(ms(300))),
            "the deadline is further than the ceiling: the ceiling cuts"
        );
    }

    #[test]
    fn c2_the_callers_deadline_counts_when_it_comes_first() {
        let now = Instant::now();
        let (soon, late) = (now + ms(100), now + ms(900));
        assert_eq!(deadline(Some(late), Some(soon)), Some(soon));
        assert_eq!(deadline(Some(soon), Some(late)), Some(soon));
        assert_eq!(deadline(None, Some(late)), Some(late));
        assert_eq!(deadline(Some(late), None), Some(late));
        assert_eq!(deadline(None, None), None);
    }

    #[test]
    fn h4_a_call_that_can_do_no_more_answers_with_the_last_value_a_refusal_or_deadline_does_not() {
        for reason in [
            StopReason::Succeeded,
            StopReason::AttemptsExhausted,
            StopReason::Permanent,
            StopReason::Overloaded,
            StopReason::RetriedBelow,
        ] {
            assert!(answers(reason), "{reason}");
        }
        for reason in [
            StopReason::BudgetExhausted,
            StopReason::BreakerOpen,
            StopReason::DeadlineExceeded,
        ] {
            assert!(!answers(reason), "{reason}");
        }
    }

    #[test]
    fn g2_only_a_transient_failure_counts_against_the_dependency() {
        assert_eq!(breaker_outcome(Verdict::Success), BreakerOutcome::Success);
        assert_eq!(breaker_outcome(Verdict::TRANSIENT), BreakerOutcome::Failure);
        assert_eq!(
            breaker_outcome(Verdict::RetriedBelow),
            BreakerOutcome::Failure
        );
        for verdict in [
            THROTTLED,
            Verdict::Permanent,
            Verdict::Overloaded { retry_after: None },
        ] {
            assert_eq!(
                breaker_outcome(verdict),
                BreakerOutcome::Ignored,
                "{verdict:?}"
            );
        }
    }

    #[test]
    fn hg1_the_retry_after_concurrent_failures_honours_the_longest_throttle() {
        assert_eq!(stronger(None, Verdict::TRANSIENT), Verdict::TRANSIENT);
        assert_eq!(stronger(Some(THROTTLED), Verdict::TRANSIENT), THROTTLED);
        assert_eq!(stronger(Some(Verdict::TRANSIENT), THROTTLED), THROTTLED);
        assert_eq!(
            stronger(Some(throttled_for(500)), throttled_for(100)),
            throttled_for(500)
        );
        assert_eq!(
            stronger(Some(throttled_for(100)), throttled_for(500)),
            throttled_for(500)
        );
    }
}
