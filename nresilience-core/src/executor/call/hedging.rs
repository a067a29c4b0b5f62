//! Attempts beside the one in flight (HG1–HG3): when the next is due, what it costs, and
//! what a call that hedged keeps.

use std::time::{Duration, Instant};

use tracing::Level;

use super::{Attempt, Call, Phase, Step};
use crate::clock;
use crate::guards::breaker::BreakerPermit;
use crate::verdict::Verdict;

impl<E> Call<E> {
    /// When attempts in flight from `now` are hedged: never once the attempts are used up, nor
    /// at or past the deadline.
    pub(super) fn hedge_instant(&self, now: Instant) -> Option<Instant> {
        if self.attempts >= self.max_attempts {
            return None;
        }
        let hedge = self.policy.hedge()?;
        let at = clock::after(now, hedge.delay().or(self.estimate.hedge())?);
        match self.deadline {
            Some(deadline) if at >= deadline => None,
            _ => Some(at),
        }
    }

    /// Starts a hedge beside the attempts in flight, once it is due and paid for (HG1, HG2).
    pub(super) fn start_hedge<T>(&mut self, now: Instant) -> Step<T, E> {
        if self.hedge_at().is_none_or(|at| now < at) {
            return Step::KeepWaiting;
        }
        // Charged like a retry (B5): spent at once, since it goes out now.
        if let Some(bucket) = &self.bucket {
            if !bucket.try_withdraw(now, self.criticality) {
                self.hedging_stopped = true;
                self.policy.instruments().hedge(false);
                tracing::event!(
                    name: "HedgeSuppressed",
                    parent: &self.span,
                    Level::INFO,
                    attempt = i64::from(self.attempts),
                    "HedgeSuppressed"
                );
                return Step::KeepWaiting;
            }
        }
        // A duplicate goes out only past a closed breaker, and within this process's limiter:
        // a half-open breaker admits probes, not copies of one.
        let permit = match self.policy.circuit_breaker().map(|b| b.try_acquire(now)) {
            Some(Ok(permit)) if !permit.is_probe() => Some(permit),
            None => None,
            Some(_) => return self.refuse_hedge(),
        };
        let limited = self
            .policy
            .rate_limiter()
            .is_some_and(|limiter| !limiter.try_acquire(now));
        if limited {
            return self.refuse_hedge();
        }
        // A copy of an attempt the dependency cannot serve in time helps no one (O1, O2).
        let left = self.time_left(now);
        let admission = match self
            .load
            .as_ref()
            .map(|load| load.admit_hedge(now, left, self.criticality))
        {
            Some(Ok(admission)) => Some(admission),
            None => None,
            Some(Err(_)) => return self.refuse_hedge(),
        };
        let concurrent = self
            .concurrent
            .get_or_insert_with(|| HedgeState::new(self.attempts, self.attempt_started));
        self.attempts += 1;
        if let Some(permit) = permit {
            concurrent.permits.push((self.attempts, permit));
        }
        self.policy.instruments().hedge(true);
        self.tally.hedged();
        let paid = self.bucket.is_some();
        Step::Hedge(self.admit(now, left, true, admission, paid))
    }

    /// No more hedges for this call: its driver cannot send one (its service failed to get
    /// ready, say). The attempts in flight go on.
    pub fn stop_hedging(&mut self) {
        self.hedging_stopped = true;
    }

    /// No more hedges for this call; the token withdrawn for the one that will not go out
    /// goes back.
    #[cold]
    pub(super) fn refuse_hedge<T>(&mut self) -> Step<T, E> {
        self.hedging_stopped = true;
        self.refund();
        Step::KeepWaiting
    }

    /// The call answers while other attempts are in flight: the driver drops them, and the
    /// breaker slots they held go back unrecorded (G4).
    #[cold]
    pub(super) fn cancel_others(&mut self, now: Instant) {
        self.policy.instruments().cancelled_attempts(self.in_flight);
        self.abandon_in_flight(now, true);
        self.phase = Phase::Ready;
        self.permit = None;
        if let Some(concurrent) = self.concurrent.as_deref_mut() {
            concurrent.permits.clear();
        }
    }
}

/// What only a call that hedged keeps, out of line: most calls never hedge.
#[derive(Debug)]
pub(super) struct HedgeState {
    /// The number and start of the attempt the hedges run beside, while it runs.
    pub(super) first: Option<(u32, Instant)>,
    /// The breaker permits of hedges in flight.
    pub(super) permits: Vec<(u32, BreakerPermit)>,
    /// The strongest throttle answered while other attempts were in flight: the retry after
    /// the last of them honours it.
    pub(super) pushback: Option<Verdict>,
}

impl HedgeState {
    #[cold]
    pub(super) fn new(first: u32, started: Instant) -> Box<Self> {
        Box::new(Self {
            first: Some((first, started)),
            permits: Vec::new(),
            pushback: None,
        })
    }

    /// The latency sample a success of `attempt` after `duration` gives the window. A hedge
    /// that wins while the first attempt still runs says that attempt took at least as long as
    /// it has waited: the window keeps the tail the hedge hid, and the trigger stays put.
    pub(super) fn sample(
        &mut self,
        attempt: &Attempt,
        duration: Duration,
        now: Instant,
    ) -> Duration {
        let first = self.first.take();
        match first {
            Some((number, started)) if attempt.hedge && number != attempt.number => {
                now.saturating_duration_since(started)
            }
            _ => duration,
        }
    }
}
