//! One attempt: what the driver runs, and its life in the call — admitted past the breaker
//! and limiter, bounded, and closed.

use std::time::{Duration, Instant};

use tracing::Level;

use super::decide::{attempt_bound, breaker_outcome, Decision};
use super::{Call, Phase, Step, Waiting};
use crate::clock;
use crate::executor::error::LastAttempt;
use crate::guards::breaker::BreakerOutcome;
use crate::outcome::{RejectReason, StopReason};
use crate::overload::{Admission, LoadTracker, Saturated, Ticket};
use crate::verdict::Verdict;

/// One attempt the call has admitted: the driver runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    pub(super) number: u32,
    pub(super) timeout: Option<Duration>,
    pub(super) cut_at: Option<Instant>,
    pub(super) started: Instant,
    /// Whether a cut at its timeout is a latency sample the ceiling learns from (E7): the
    /// measured ceiling cuts it, or a deadline (the caller's, under C2) that is above the
    /// typical attempt.
    pub(super) censors: bool,
    /// Whether its timeout is the measured ceiling: a cut there is the ceiling's guess about
    /// this attempt, not a sign that the dependency falls behind what it is sent (O5).
    pub(super) by_ceiling: bool,
    pub(super) hedge: bool,
    /// Its place in the dependency's load, when overload control is on.
    pub(super) ticket: Ticket,
    /// Whether a token of the budget paid for it: a retry or a hedge, with a budget (B5).
    pub(super) paid: bool,
}

impl Attempt {
    /// The attempt's number: 1 for the first, 2 for the first retry.
    #[must_use]
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Whether this attempt is a retry or a hedge: any attempt after the first.
    #[must_use]
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// Whether this attempt is a hedge, started beside attempts still in flight (HG1).
    #[must_use]
    pub fn is_hedge(&self) -> bool {
        self.hedge
    }

    /// The time this attempt may take, if bounded: the attempt timeout, the measured
    /// ceiling and the deadline, whichever comes first.
    #[must_use]
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// When the driver cuts the attempt, if ever: then
    /// [`Call::timed_out`](crate::call::Call::timed_out).
    #[must_use]
    pub fn cut_at(&self) -> Option<Instant> {
        self.cut_at
    }
}

/// The shortest wait for room under the limit: a timer's resolution.
const MIN_WAIT: Duration = Duration::from_millis(1);

impl<E> Call<E> {
    pub(super) fn begin<T>(&mut self, now: Instant) -> Step<T, E> {
        // A caller that has given up already gets no attempt (C2): a deadline inherited from
        // the request being served may be gone before the call starts.
        let left = self.time_left(now);
        if left.is_some_and(|left| left.is_zero()) {
            self.last.get_or_insert(LastAttempt::TimedOut);
            return self.step(Decision::Stop(StopReason::DeadlineExceeded), now);
        }
        if self.attempts == 0 && self.waiting.is_none() {
            self.report_nested();
        }
        if let Some(breaker) = self.policy.circuit_breaker() {
            match breaker.try_acquire(now) {
                Ok(permit) => {
                    self.permit = Some(permit);
                    self.permit_of = self.attempts + 1;
                }
                Err(_) => return self.refusing(RejectReason::BreakerOpen, now),
            }
        }
        // Nothing is sent that the dependency cannot serve before the caller gives up (O1),
        // nor past its adaptive limit (O2).
        let admission = match (self.load.as_deref(), self.waiting.as_deref()) {
            (None, _) => None,
            (Some(load), None) => match load.admit(now, left, self.criticality) {
                Ok(admission) => Some(admission),
                Err(saturated) => return self.refused_load(saturated, now, left),
            },
            (Some(load), Some(waiting)) => {
                match load.admit_waiting(waiting.ticket, now, left, self.criticality) {
                    Ok(admission) => {
                        self.waiting = None;
                        Some(admission)
                    }
                    Err(saturated) => return self.refused_load(saturated, now, left),
                }
            }
        };
        self.attempts += 1;
        let limited = self
            .policy
            .rate_limiter()
            .filter(|limiter| !limiter.try_acquire(now))
            .map(|limiter| limiter.retry_after(now));
        if let Some(retry_after) = limited {
            // Self-imposed: it never went out, so it records no outcome anywhere (B8). A token
            // withdrawn for it stays held: it pays for the retry when that retry goes out.
            self.settle_permit(self.attempts, BreakerOutcome::Ignored, now);
            if let (Some(load), Some(admission)) = (&self.load, admission) {
                load.withdraw(admission.ticket, now);
            }
            self.last = Some(LastAttempt::Refused);
            let verdict = Verdict::Throttled {
                self_imposed: true,
                retry_after: Some(retry_after),
            };
            let decision = self.decide(verdict, Duration::ZERO, now);
            return self.step(decision, now);
        }
        // The token, if any, paid for this retry: it goes out.
        let paid = std::mem::take(&mut self.token);
        self.tally.wakes(now);
        if let Some(concurrent) = self.concurrent.as_deref_mut() {
            concurrent.first = Some((self.attempts, now));
            concurrent.pushback = None;
        }
        Step::Run(self.admit(now, left, false, admission, paid))
    }

    /// The limit refused the attempt at `now`: it waits for room, or the call ends (O7).
    #[cold]
    fn refused_load<T>(
        &mut self,
        saturated: Saturated,
        now: Instant,
        left: Option<Duration>,
    ) -> Step<T, E> {
        self.settle_permit(self.attempts + 1, BreakerOutcome::Ignored, now);
        if let Some(load) = self.load.clone() {
            if let Some(until) = self.room_worth_waiting_for(&saturated, &load, now, left) {
                self.tally.sleeps(now);
                return Step::Sleep(until);
            }
        }
        self.stop_waiting();
        self.saturated(saturated, now)
    }

    /// The call gives up its place among the calls waiting for room, if it has one (O7).
    pub(super) fn stop_waiting(&mut self) {
        if let (Some(waiting), Some(load)) = (self.waiting.take(), &self.load) {
            load.stop_waiting(waiting.ticket);
        }
    }

    /// When to ask again for room the limit refused (O7): an attempt over the limit waits for
    /// it while its call has time for the wait and a typical attempt after it. `None` when it
    /// cannot wait: refused by its expected wait, with no deadline to bound the wait, or out
    /// of time.
    #[cold]
    fn room_worth_waiting_for(
        &mut self,
        saturated: &Saturated,
        load: &LoadTracker,
        now: Instant,
        left: Option<Duration>,
    ) -> Option<Instant> {
        let room_in = saturated.room_in?.max(MIN_WAIT);
        let until = if let Some(waiting) = self.waiting.as_deref() {
            waiting.until
        } else {
            let margin = self.policy.estimate(now).typical().unwrap_or(MIN_WAIT);
            clock::after(now, left?.checked_sub(margin)?)
        };
        let next = clock::after(now, room_in).min(until);
        if next >= until {
            return None;
        }
        if self.waiting.is_none() {
            let ticket = load.wait(until, self.criticality)?;
            self.waiting = Some(Box::new(Waiting { ticket, until }));
        }
        Some(next)
    }

    /// Starts the attempt numbered `self.attempts` at `now`, bounded by the attempt timeout,
    /// the measured ceiling and the time `left`.
    #[inline(always)]
    pub(super) fn admit(
        &mut self,
        now: Instant,
        left: Option<Duration>,
        hedge: bool,
        admission: Option<Admission>,
        paid: bool,
    ) -> Attempt {
        tracing::event!(parent: &self.span, Level::DEBUG, attempt = i64::from(self.attempts), hedge, "nresilience.attempt");
        self.estimate = self.policy.estimate(now);
        // Under a load this process measures (work queued ahead, or nothing finished for
        // anyone), the ceiling would cut attempts the dependency will serve anyway, and the
        // retries would queue behind them: the measured ceiling (E5) defers to the expected
        // wait (O1); a wait shorter than the ceiling lengthens it by the part beyond a
        // typical attempt (`Admission::ceiling`).
        let typical = self.estimate.typical();
        let ceiling = self.estimate.ceiling().and_then(|ceiling| match admission {
            Some(admission) => admission.ceiling(ceiling, typical),
            None => Some(ceiling),
        });
        let ticket = admission.map(|a| a.ticket).unwrap_or_default();
        let (timeout, censors) =
            attempt_bound(self.policy.attempt_timeout(), ceiling, typical, left);
        self.attempt_started = now;
        if self.may_hedge {
            self.hedge_due = self.hedge_instant(now);
        }
        self.in_flight += 1;
        self.phase = Phase::Attempting;
        self.ticket = ticket;
        Attempt {
            number: self.attempts,
            timeout,
            cut_at: timeout.map(|t| clock::after(now, t)),
            started: now,
            censors,
            by_ceiling: ceiling.is_some() && timeout == ceiling,
            hedge,
            ticket,
            paid,
        }
    }

    /// The attempts in flight are dropped unanswered at `now`, `superseded` by another
    /// attempt's answer or given up with their call: the dependency may still be working on
    /// them, so they stay in its load until it has finished them (O1).
    #[cold]
    pub(super) fn abandon_in_flight(&mut self, now: Instant, superseded: bool) {
        if let Some(load) = &self.load {
            for _ in 0..self.in_flight {
                if superseded {
                    load.superseded(self.ticket, now);
                } else {
                    load.abandoned(self.ticket, Duration::ZERO, false, now);
                }
            }
        }
        self.in_flight = 0;
    }

    /// Reports that the driver did not send `attempt` and will not: the call is dropped while
    /// the attempt waits to go out (a service not ready for it yet). The attempt gives back
    /// what it held — its token (B13), its place in the dependency's load (O1: it is not work
    /// the dependency holds), its breaker permit, unrecorded — and is not counted among the
    /// call's attempts.
    ///
    /// # Panics
    ///
    /// When no attempt is running.
    pub fn unsent(&mut self, attempt: Attempt, now: Instant) {
        self.leave_flight();
        if attempt.number == self.attempts {
            self.attempts -= 1;
        }
        self.settle_permit(attempt.number, BreakerOutcome::Ignored, now);
        if let Some(load) = &self.load {
            load.withdraw(attempt.ticket, now);
        }
        if attempt.paid {
            self.refund();
        }
    }

    /// Closes `attempt`: its duration, metrics and breaker outcome.
    #[inline(always)]
    pub(super) fn end_attempt(
        &mut self,
        attempt: &Attempt,
        verdict: Verdict,
        now: Instant,
    ) -> Duration {
        self.leave_flight();
        if let Some(concurrent) = self.concurrent.as_deref_mut() {
            if concurrent
                .first
                .is_some_and(|(first, _)| first == attempt.number)
            {
                concurrent.first = None;
            }
        }
        let duration = now.saturating_duration_since(attempt.started);
        self.policy
            .instruments()
            .attempt(verdict, duration.as_secs_f64());
        let outcome = breaker_outcome(verdict);
        self.settle_permit(attempt.number, outcome, now);
        duration
    }

    /// One attempt fewer in flight: with none, the next may start.
    #[inline(always)]
    fn leave_flight(&mut self) {
        assert!(
            matches!(self.phase, Phase::Attempting) && self.in_flight > 0,
            "no attempt is running"
        );
        self.in_flight -= 1;
        if self.in_flight == 0 {
            self.phase = Phase::Ready;
        }
    }

    #[inline]
    pub(super) fn settle_permit(&mut self, attempt: u32, outcome: BreakerOutcome, now: Instant) {
        let Some(breaker) = self.policy.circuit_breaker() else {
            return;
        };
        let permit = match self.concurrent.as_deref_mut() {
            _ if self.permit_of == attempt => self.permit.take(),
            Some(concurrent) => {
                let at = concurrent.permits.iter().position(|(n, _)| *n == attempt);
                at.map(|at| concurrent.permits.swap_remove(at).1)
            }
            None => None,
        };
        if let Some(permit) = permit {
            breaker.record(permit, outcome, now);
        }
    }
}
