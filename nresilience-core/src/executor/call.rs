//! One call's retry decisions, as a state machine any driver runs.
//!
//! [`RetryPolicy::execute`](crate::RetryPolicy::execute) drives it with async closures; the
//! HTTP and gRPC middleware of `nresilience-client` drive it from their own futures. Every
//! driver is the same short loop: ask the [`Call`] for its next [`Step`], do what the step
//! says — run an attempt, start a hedge beside the ones in flight, wait, sleep, or return —
//! and hand back what happened to each attempt. The call holds every
//! rule between two attempts (the decision order, the budget, the breaker and limiter, the
//! rejection pause, what a stopped call returns), so a rule changes in one place for every
//! driver. It does no IO and never reads the clock: time comes in as an argument, so a test or
//! a simulation can drive it with any clock.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use nresilience_core::call::{Call, CallOptions, Step};
//! use nresilience_core::{Backoff, Jitter, RetryPolicy, Verdict};
//!
//! let policy = RetryPolicy::builder()
//!     .backoff(Backoff::default().with_jitter(Jitter::None))
//!     .build()?;
//! let now = Instant::now();
//! let mut call = Call::start(&policy, now, CallOptions::new());
//!
//! // The driver's loop, spelled out: run, fail, back off 100 ms, run again, succeed.
//! let Step::Run(first) = call.next::<u32>(now) else { unreachable!() };
//! assert_eq!(first.number(), 1);
//! let Step::Sleep(until) = call.attempted::<u32>(first, Err("reset"), Verdict::TRANSIENT, now)
//! else {
//!     unreachable!()
//! };
//! assert_eq!(until - now, Duration::from_millis(100));
//! let Step::Run(second) = call.next::<u32>(until) else { unreachable!() };
//! assert!(second.is_retry());
//! let Step::Done(result) = call.attempted(second, Ok(7), Verdict::Success, until) else {
//!     unreachable!()
//! };
//! assert_eq!(result.unwrap(), 7);
//! assert_eq!(call.attempts(), 2);
//! # Ok::<(), nresilience_core::InvalidPolicy>(())
//! ```
//!
//! # The driver's loop
//!
//! ```
//! use nresilience_core::call::{Call, CallOptions, Step};
//! use nresilience_core::{clock, RetryError, RetryPolicy, Verdict};
//!
//! async fn fetch(attempt: u32) -> Result<&'static str, std::io::Error> {
//!     if attempt < 3 { Err(std::io::ErrorKind::ConnectionReset.into()) } else { Ok("row") }
//! }
//!
//! async fn drive(policy: &RetryPolicy) -> Result<&'static str, RetryError<std::io::Error>> {
//!     let mut call = Call::start(policy, clock::now(), CallOptions::new());
//!     let mut step = call.next(clock::now());
//!     loop {
//!         step = match step {
//!             // (A real driver also cuts the attempt at `attempt.cut_at()`, and one whose
//!             // policy hedges runs `Step::Hedge` attempts beside it: see `execute`.)
//!             Step::Run(attempt) => {
//!                 let result = fetch(attempt.number()).await;
//!                 let verdict = if result.is_ok() { Verdict::Success } else { Verdict::TRANSIENT };
//!                 call.attempted(attempt, result, verdict, clock::now())
//!             }
//!             Step::Hedge(_) | Step::Wait => unreachable!("the default policy does not hedge"),
//!             Step::Sleep(until) => {
//!                 tokio::time::sleep_until(until.into()).await;
//!                 call.next(clock::now())
//!             }
//!             Step::Done(result) => return result,
//!         };
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! assert_eq!(drive(&RetryPolicy::default()).await.unwrap(), "row");
//! # }
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{field, Level, Span};

use crate::backoff::{NextAttempt, RetryKind};
use crate::budget::TokenBucket;
use crate::chain::learned;
use crate::chain::{self, Inbound};
use crate::clock;
use crate::criticality::Criticality;
use crate::executor::error::{CallRejected, LastAttempt, RetryError};
use crate::executor::policy::{Estimate, RetryPolicy};
use crate::guards::breaker::{BreakerOutcome, BreakerPermit};
use crate::nesting::{self, NestingSource};
use crate::outcome::{RejectReason, StopReason};
use crate::telemetry::CANCELLED;
use crate::verdict::Verdict;

pub use crate::executor::timer::Timer;

/// How a call is started: whether it may retry at all, what it targets, and which bucket
/// funds its retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallOptions<'a> {
    single_attempt: bool,
    marked: bool,
    target: Option<&'a str>,
    method: Option<&'a str>,
    key: Option<&'a str>,
}

impl<'a> CallOptions<'a> {
    /// A call that may retry as far as its policy allows, charged to the policy's bucket.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes this one call a single attempt (a request that cannot be replayed, a
    /// non-idempotent method) when `false`. It still deposits on success, and it is never
    /// reported as a nested retry. Defaults to `true` (the call may retry).
    pub fn may_retry(mut self, may_retry: bool) -> Self {
        self.single_attempt = !may_retry;
        self
    }

    /// The request already carries the nested-retry marker (its headers were forwarded from
    /// a request whose sender may retry it): when the call may retry, it is reported as
    /// nested, with the source `header`, even outside any nesting context. Defaults to
    /// `false`.
    pub fn marked(mut self, marked: bool) -> Self {
        self.marked = marked;
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

    /// Charges the call to the bucket of `key` (a host, say) when the policy's budget is
    /// `Automatic`: each key has a bucket of its own, so a storm against one key cannot spend
    /// the retries of another. A `Shared` budget is the one bucket whatever the key.
    /// Defaults to the policy's own bucket.
    pub fn key(mut self, key: &'a str) -> Self {
        self.key = Some(key);
        self
    }
}

/// One attempt the call has admitted: the driver runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
    timeout: Option<Duration>,
    cut_at: Option<Instant>,
    started: Instant,
    /// Whether a cut at its timeout is a latency sample the ceiling learns from (E7): the
    /// measured ceiling cuts it, or a deadline (the caller's, under C2) that is above the
    /// typical attempt.
    censors: bool,
    hedge: bool,
}

impl Attempt {
    /// The attempt's number: 1 for the first, 2 for the first retry.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Whether this attempt is a retry or a hedge: any attempt after the first.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// Whether this attempt is a hedge, started beside attempts still in flight (HG1).
    pub fn is_hedge(&self) -> bool {
        self.hedge
    }

    /// The time this attempt may take, if bounded: the attempt timeout, the measured
    /// ceiling and the deadline, whichever comes first.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// When the driver cuts the attempt (then [`Call::timed_out`]), if ever.
    pub fn cut_at(&self) -> Option<Instant> {
        self.cut_at
    }
}

/// What the driver does next.
#[derive(Debug)]
#[must_use]
pub enum Step<T, E> {
    /// Run this attempt, cut at [`Attempt::cut_at`]; then report it with
    /// [`Call::attempted`] or [`Call::timed_out`]. While it runs, ask [`Call::next`] again
    /// at [`Call::hedge_at`], if that comes first.
    Run(Attempt),
    /// Start this attempt beside the ones in flight, which go on (a hedge, HG1); report each
    /// as it answers or is cut.
    Hedge(Attempt),
    /// Nothing to start: keep waiting on the attempts in flight, and ask [`Call::next`] again
    /// at [`Call::hedge_at`], if that comes before they answer.
    Wait,
    /// Sleep until this instant (a backoff, or the rejection pause before a refusal), then
    /// ask [`Call::next`].
    Sleep(Instant),
    /// The call is over: return this.
    Done(Result<T, RetryError<E>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The next attempt may start.
    Ready,
    /// Attempts are running.
    Attempting,
    /// The rejection pause before this refusal is returned.
    Refusing(RejectReason),
    Done,
}

/// The state of one call under a policy: the attempts made, the last one's outcome, the
/// budget token held for a retry, the breaker permit of the attempt running.
///
/// Dropping an unfinished call — its caller cancelled it — returns a token withdrawn for a
/// retry that never went out and a breaker probe slot it held, and records the outcome
/// `cancelled`.
pub struct Call<E> {
    policy: RetryPolicy,
    bucket: Option<Arc<TokenBucket>>,
    started: Instant,
    deadline: Option<Instant>,
    max_attempts: u32,
    attempts: u32,
    /// When the latest attempt started: a hedge follows it by the hedge's delay.
    attempt_started: Instant,
    in_flight: u32,
    /// Whether this call may hedge at all (HG1–HG3).
    may_hedge: bool,
    /// Whether this call sends no more hedges: the budget refused one, or the dependency
    /// throttled.
    hedging_stopped: bool,
    /// When the attempts in flight are hedged, as fitted when the latest one started.
    hedge_due: Option<Instant>,
    estimate: Estimate,
    /// The breaker permit of attempt `permit_of`.
    permit: Option<BreakerPermit>,
    permit_of: u32,
    /// What only a call that hedged keeps, out of line.
    hedged: Option<Box<Hedged>>,
    /// A token withdrawn for the next retry: spent when the retry goes out, returned if the
    /// call ends first (B13).
    token: bool,
    /// Whether this call's success refilled a bucket that was short of full: the budget's
    /// gauge then follows the refill, not only the retries that drained it.
    refilled: bool,
    phase: Phase,
    last: Option<LastAttempt<E>>,
    /// Rare, and kept out of line so the call a driver moves stays small.
    nested: Option<Box<Nested>>,
    span: Span,
    /// This call's place in the chain: one more than the request being served said.
    depth: u32,
    /// The attempts that could reach the dependency through the calls above this one, as
    /// the request being served said: `1` outside any.
    attempts_above: u32,
    /// How much the caller waits on this call: the policy's, or the request's when the
    /// policy takes it from there (B9).
    criticality: Criticality,
}

impl<E> Call<E> {
    /// Starts a call at `now` (read before calling).
    ///
    /// When the call may retry and the nesting context says it runs inside a retrying
    /// context (or its request carries the marker), it is reported once, by its first
    /// attempt: a `NestedRetry` span and the `nresilience.nested_retries` counter. Nothing
    /// else changes.
    pub fn start(policy: &RetryPolicy, now: Instant, options: CallOptions<'_>) -> Self {
        let max_attempts = if options.single_attempt {
            1
        } else {
            policy.max_attempts()
        };
        let bucket = match options.key {
            Some(key) => policy.keyed_bucket(key, now),
            None => policy.bucket(now).cloned(),
        };
        // What the request being served said about the chain above, read once.
        let inbound = chain::inbound().unwrap_or_default();
        // Read now, in the caller's context; reported by the first attempt, by which time
        // the call knows whether it may really retry (its body may prove unreplayable).
        let source = nesting::current().or(options.marked.then_some(NestingSource::Header));
        let nested = source.filter(|_| max_attempts > 1).map(|source| {
            Box::new(Nested {
                source,
                target: options.target.map(str::to_owned),
                method: options.method.map(str::to_owned),
                span: Span::none(),
            })
        });
        let criticality = inbound
            .criticality
            .filter(|_| policy.ambient_criticality())
            .unwrap_or(policy.criticality());
        let may_hedge =
            policy.hedge().is_some() && max_attempts > 1 && criticality != Criticality::Sheddable;
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
            deadline: deadline(policy, now, &inbound),
            depth: inbound.depth.saturating_add(1),
            attempts_above: inbound.attempts,
            criticality,
            max_attempts,
            attempts: 0,
            attempt_started: now,
            in_flight: 0,
            may_hedge,
            hedging_stopped: false,
            hedge_due: None,
            estimate: Estimate::default(),
            permit: None,
            permit_of: 0,
            hedged: None,
            token: false,
            refilled: false,
            phase: Phase::Ready,
            last: None,
            nested,
            span,
        }
    }

    /// Drops the call to a single attempt, before its first one: its request proved
    /// unreplayable. It is then neither stamped nor reported as nested.
    pub fn single_attempt(&mut self) {
        if self.attempts == 0 {
            self.max_attempts = 1;
            self.may_hedge = false;
            self.nested = None;
        }
    }

    /// Whether this call may make more than one attempt: a driver runs it inside the
    /// in-process nesting context, so a retrying call made inside it is nested.
    pub fn may_retry(&self) -> bool {
        self.max_attempts > 1
    }

    /// Attempts made so far, counting one this process's rate limiter refused.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The call's span (`resilience {policy}`); attempts run inside it.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// How much the caller waits on this call, for `x-nresilience-criticality`: the policy's,
    /// or the request's when the policy takes it from there.
    pub fn criticality(&self) -> Criticality {
        self.criticality
    }

    /// This call's depth in the chain, for `x-nresilience-depth`: one more than the request
    /// being served said, `1` outside any.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The attempts that could reach the dependency through this call and every call above
    /// it, for `x-nresilience-attempts`: what the request being served said, times this
    /// call's maximum attempts.
    pub fn potential_attempts(&self) -> u32 {
        self.attempts_above.saturating_mul(self.max_attempts)
    }

    /// What to do next, at `now`: at the start, after every [`Step::Sleep`], and at
    /// [`Call::hedge_at`] while attempts run.
    ///
    /// Admits the next attempt if the breaker and limiter let it go: an open
    /// breaker refuses the call — after the rejection pause, a [`Step::Sleep`] — while a
    /// limiter refusal is a self-imposed throttle that waits for the limiter and tries again.
    ///
    /// While attempts run, it hedges once [`hedge_at`](Self::hedge_at) has come and the
    /// budget pays for it (HG2): a [`Step::Hedge`]. Otherwise, a refused hedge included, the
    /// attempts in flight go on: a [`Step::Wait`].
    ///
    /// # Panics
    ///
    /// After the call is done: the driver must not go on after [`Step::Done`].
    pub fn next<T>(&mut self, now: Instant) -> Step<T, E> {
        match self.phase {
            Phase::Ready => self.begin(now),
            Phase::Refusing(reason) => self.refuse(reason, now),
            Phase::Attempting => self.hedge(now),
            Phase::Done => panic!("Call::next after the call was done"),
        }
    }

    /// When the attempts in flight are hedged if none has answered (HG1): the latest one's
    /// start plus the hedge's delay, or its quantile of recent latency once the window holds
    /// its samples. `None` when the policy does not hedge, no attempt runs, the attempts are
    /// used up, the call is `Sheddable`, its hedging stopped, or the hedge would start at or
    /// after the deadline.
    #[inline]
    pub fn hedge_at(&self) -> Option<Instant> {
        if !matches!(self.phase, Phase::Attempting) || self.hedging_stopped {
            return None;
        }
        self.hedge_due
    }

    /// Whether this call may hedge at all: its policy hedges, it may make more than one
    /// attempt, and it is not `Sheddable` (HG1–HG3). A driver that runs one attempt at a time
    /// more cheaply keeps to that when this is `false`.
    #[inline]
    pub fn may_hedge(&self) -> bool {
        self.may_hedge
    }

    /// How many attempts are running.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Reports the attempt's result and its verdict at `now`, and decides what follows. In
    /// order: a success ends the call, a permanent verdict stops it, then come the attempts
    /// left, the deadline, the budget (a self-imposed throttle is not charged to it), and
    /// whether the delay before the retry, plus a typical attempt, still fits before the
    /// deadline.
    ///
    /// When the call stops on a value the classifier did not accept (attempts used up, or a
    /// permanent verdict), that value is the call's `Ok` answer: the caller gets the last
    /// response, not an error.
    ///
    /// While other attempts are in flight, a success or a final answer ends the call (the
    /// driver drops the others), and a transient or throttled failure is a [`Step::Wait`]:
    /// the others go on.
    ///
    /// # Panics
    ///
    /// When no attempt is running.
    pub fn attempted<T>(
        &mut self,
        attempt: Attempt,
        result: Result<T, E>,
        verdict: Verdict,
        now: Instant,
    ) -> Step<T, E> {
        let duration = self.end_attempt(&attempt, verdict, now);
        let mut verdict = verdict;
        if let Some(hedged) = self.hedged.as_deref_mut() {
            if self.in_flight > 0 {
                if verdict.is_retryable() {
                    // The dependency asking for less stops the hedges too, and its hint holds
                    // for the retry after the last attempt in flight.
                    if matches!(verdict, Verdict::Throttled { .. }) {
                        self.hedging_stopped = true;
                        hedged.pushback = Some(stronger(hedged.pushback, verdict));
                    }
                    self.last = Some(match result {
                        Ok(_) => LastAttempt::Unsuccessful,
                        Err(error) => LastAttempt::Error(error),
                    });
                    return Step::Wait;
                }
                self.cancel_others();
            } else if verdict.is_retryable() {
                verdict = stronger(hedged.pushback.take(), verdict);
            }
        }
        let sample = match self.hedged.as_deref_mut() {
            Some(hedged) => hedged.sample(&attempt, duration, now),
            None => duration,
        };
        match result {
            Ok(value) => match self.decide(verdict, sample, now) {
                Decision::Stop(reason) if answers(reason) => {
                    // A call whose last attempt started with it lasted as long as that attempt.
                    let elapsed = (self.attempt_started == self.started).then_some(duration);
                    self.finish(reason, now, elapsed);
                    Step::Done(Ok(value))
                }
                decision => {
                    self.last = Some(LastAttempt::Unsuccessful);
                    self.step(decision, now)
                }
            },
            Err(error) => {
                self.last = Some(LastAttempt::Error(error));
                let decision = self.decide(verdict, sample, now);
                self.step(decision, now)
            }
        }
    }

    /// Reports that the driver cut `attempt` at [`Attempt::cut_at`]: a transient failure.
    /// While other attempts are in flight, they go on: a [`Step::Wait`].
    ///
    /// # Panics
    ///
    /// When no attempt is running.
    pub fn timed_out<T>(&mut self, attempt: Attempt, now: Instant) -> Step<T, E> {
        let duration = self.end_attempt(&attempt, Verdict::TRANSIENT, now);
        if attempt.censors {
            self.policy.record_cut(duration, now);
        }
        self.last = Some(LastAttempt::TimedOut);
        if self.in_flight > 0 {
            return Step::Wait;
        }
        let pushback = self.hedged.as_deref_mut().and_then(|h| h.pushback.take());
        let decision = self.decide(stronger(pushback, Verdict::TRANSIENT), duration, now);
        self.step(decision, now)
    }

    // ===== one attempt =====

    fn begin<T>(&mut self, now: Instant) -> Step<T, E> {
        // A caller that has given up already gets no attempt (C2): a deadline inherited from
        // the request being served may be gone before the call starts.
        let left = self.time_left(now);
        if left.is_some_and(|left| left.is_zero()) {
            self.last.get_or_insert(LastAttempt::TimedOut);
            return self.step(Decision::Stop(StopReason::DeadlineExceeded), now);
        }
        if self.attempts == 0 {
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
            self.last = Some(LastAttempt::Refused);
            let verdict = Verdict::Throttled {
                self_imposed: true,
                retry_after: Some(retry_after),
            };
            let decision = self.decide(verdict, Duration::ZERO, now);
            return self.step(decision, now);
        }
        // The token, if any, paid for this retry: it goes out.
        self.token = false;
        if let Some(hedged) = self.hedged.as_deref_mut() {
            hedged.first = Some((self.attempts, now));
            hedged.pushback = None;
        }
        Step::Run(self.admit(now, left, false))
    }

    /// Starts the attempt numbered `self.attempts` at `now`, bounded by the attempt timeout,
    /// the measured ceiling and the time `left`.
    #[inline(always)]
    fn admit(&mut self, now: Instant, left: Option<Duration>, hedge: bool) -> Attempt {
        tracing::event!(parent: &self.span, Level::DEBUG, attempt = i64::from(self.attempts), hedge, "nresilience.attempt");
        self.estimate = self.policy.estimate(now);
        let mut timeout = self.policy.attempt_timeout();
        let mut censors = false;
        if let Some(ceiling) = self.estimate.ceiling {
            censors = timeout.is_none_or(|t| ceiling < t);
            timeout = Some(timeout.map_or(ceiling, |t| t.min(ceiling)));
            if let Some(left) = left.filter(|&left| timeout.is_none_or(|t| left < t)) {
                // Cut by the deadline, the attempt still took at least `left`. Served under a
                // caller's deadline (C2), that cut is often the only sign of a slower
                // dependency: ignored, it held each hop's ceiling at the one above it, and a
                // queue that outgrew them both failed every attempt after the fault. A bound
                // below the typical attempt says nothing the window lacks, and would drag the
                // ceiling down.
                censors = self.estimate.typical.is_some_and(|typical| left >= typical);
            }
        }
        if let Some(left) = left {
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        self.attempt_started = now;
        if self.may_hedge {
            self.hedge_due = self.hedge_instant(now);
        }
        self.in_flight += 1;
        self.phase = Phase::Attempting;
        Attempt {
            number: self.attempts,
            timeout,
            cut_at: timeout.map(|t| clock::after(now, t)),
            started: now,
            censors,
            hedge,
        }
    }

    /// When attempts in flight from `now` are hedged: never once the attempts are used up, nor
    /// at or past the deadline.
    fn hedge_instant(&self, now: Instant) -> Option<Instant> {
        if self.attempts >= self.max_attempts {
            return None;
        }
        let hedge = self.policy.hedge()?;
        let at = clock::after(now, hedge.delay().or(self.estimate.hedge)?);
        match self.deadline {
            Some(deadline) if at >= deadline => None,
            _ => Some(at),
        }
    }

    /// Starts a hedge beside the attempts in flight, once it is due and paid for (HG1, HG2).
    fn hedge<T>(&mut self, now: Instant) -> Step<T, E> {
        if self.hedge_at().is_none_or(|at| now < at) {
            return Step::Wait;
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
                return Step::Wait;
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
        let hedged = self
            .hedged
            .get_or_insert_with(|| Hedged::new(self.attempts, self.attempt_started));
        self.attempts += 1;
        if let Some(permit) = permit {
            hedged.permits.push((self.attempts, permit));
        }
        self.policy.instruments().hedge(true);
        let left = self.time_left(now);
        Step::Hedge(self.admit(now, left, true))
    }

    /// No more hedges for this call: its driver cannot send one (its service failed to get
    /// ready, say). The attempts in flight go on.
    pub fn stop_hedging(&mut self) {
        self.hedging_stopped = true;
    }

    /// No more hedges for this call; the token withdrawn for the one that will not go out
    /// goes back.
    #[cold]
    fn refuse_hedge<T>(&mut self) -> Step<T, E> {
        self.hedging_stopped = true;
        if let Some(bucket) = &self.bucket {
            bucket.refund();
        }
        Step::Wait
    }

    /// The call answers while other attempts are in flight: the driver drops them, and the
    /// breaker slots they held go back unrecorded (G4).
    #[cold]
    fn cancel_others(&mut self) {
        self.policy.instruments().cancelled_attempts(self.in_flight);
        self.in_flight = 0;
        self.phase = Phase::Ready;
        self.permit = None;
        if let Some(hedged) = self.hedged.as_deref_mut() {
            hedged.permits.clear();
        }
    }

    /// Closes `attempt`: its duration, metrics and breaker outcome.
    #[inline(always)]
    fn end_attempt(&mut self, attempt: &Attempt, verdict: Verdict, now: Instant) -> Duration {
        assert!(
            matches!(self.phase, Phase::Attempting) && self.in_flight > 0,
            "no attempt is running"
        );
        self.in_flight -= 1;
        if self.in_flight == 0 {
            self.phase = Phase::Ready;
        }
        if let Some(hedged) = self.hedged.as_deref_mut() {
            if hedged
                .first
                .is_some_and(|(first, _)| first == attempt.number)
            {
                hedged.first = None;
            }
        }
        let duration = now.saturating_duration_since(attempt.started);
        self.policy
            .instruments()
            .attempt(verdict, duration.as_secs_f64());
        // Only a transient failure is evidence against the dependency: a throttle means it is
        // defending itself, a permanent failure is the caller's own (G2).
        let outcome = match verdict {
            Verdict::Success => BreakerOutcome::Success,
            Verdict::Transient { .. } | Verdict::RetriedBelow => BreakerOutcome::Failure,
            Verdict::Throttled { .. } | Verdict::Permanent | Verdict::Overloaded { .. } => {
                BreakerOutcome::Ignored
            }
        };
        self.settle_permit(attempt.number, outcome, now);
        duration
    }

    #[inline]
    fn settle_permit(&mut self, attempt: u32, outcome: BreakerOutcome, now: Instant) {
        let Some(breaker) = self.policy.circuit_breaker() else {
            return;
        };
        let permit = match self.hedged.as_deref_mut() {
            _ if self.permit_of == attempt => self.permit.take(),
            Some(hedged) => {
                let at = hedged.permits.iter().position(|(n, _)| *n == attempt);
                at.map(|at| hedged.permits.swap_remove(at).1)
            }
            None => None,
        };
        if let Some(permit) = permit {
            breaker.record(permit, outcome, now);
        }
    }

    /// What follows an attempt with `verdict`, in the order of SPEC E6. The caller's
    /// cancellation, second in that order, is the driver dropping the call.
    #[inline]
    fn decide(&mut self, verdict: Verdict, duration: Duration, now: Instant) -> Decision {
        if verdict == Verdict::Success {
            if let Some(bucket) = &self.bucket {
                self.refilled = bucket.deposit(now);
            }
            self.policy.record_success(duration, now);
            return Decision::Stop(StopReason::Succeeded);
        }
        self.decide_after_failure(verdict, now)
    }

    /// What follows an attempt that did not succeed.
    fn decide_after_failure(&mut self, verdict: Verdict, now: Instant) -> Decision {
        match verdict {
            Verdict::Overloaded { retry_after } => {
                // The request being served passes the dependency's hint on (C7).
                learned::call_ended(StopReason::Overloaded, self.attempts, retry_after);
                return Decision::Stop(StopReason::Overloaded);
            }
            Verdict::RetriedBelow => return Decision::Stop(StopReason::RetriedBelow),
            _ if !verdict.is_retryable() => return Decision::Stop(StopReason::Permanent),
            _ => {}
        }
        if self.attempts >= self.max_attempts {
            return Decision::Stop(StopReason::AttemptsExhausted);
        }
        let left = self.time_left(now).unwrap_or(Duration::MAX);
        if left.is_zero() {
            return Decision::Stop(StopReason::DeadlineExceeded);
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
        let kind = match verdict {
            Verdict::Throttled { .. } => RetryKind::Throttled,
            _ => RetryKind::Transient,
        };
        let mut next = NextAttempt::new(self.attempts + 1, kind);
        if let Some(after) = verdict.retry_after() {
            next = next.with_retry_after(after);
        }
        let delay = self.policy.delay(&next, self.estimate.measured);
        let needed = delay.saturating_add(self.estimate.typical.unwrap_or_default());
        if self.deadline.is_some() && needed >= left {
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

    fn step<T>(&mut self, decision: Decision, now: Instant) -> Step<T, E> {
        match decision {
            Decision::Stop(reason) => {
                self.stop(reason, now);
                Step::Done(Err(self.error(reason, None)))
            }
            Decision::Sleep(until) => Step::Sleep(until),
            Decision::Refuse(reason) => self.refusing(reason, now),
        }
    }

    // ===== refusals =====

    /// The budget or the breaker refused the call: announce it now, return it after the
    /// rejection pause (B7, G1).
    fn refusing<T>(&mut self, reason: RejectReason, now: Instant) -> Step<T, E> {
        self.return_token();
        self.phase = Phase::Refusing(reason);
        let pause = self.policy.rejection_pause();
        let pause = self.time_left(now).map_or(pause, |left| pause.min(left));
        self.policy
            .instruments()
            .rejection(reason.as_str(), self.criticality);
        let (attempt, pause_ms) = (i64::from(self.attempts), pause.as_millis() as u64);
        // The budget or breaker at work is not a fault: INFO, and the call's span carries
        // the outcome.
        match reason {
            RejectReason::BudgetExhausted => tracing::event!(
                parent: &self.span,
                Level::INFO,
                attempt,
                pause_ms,
                "nresilience.budget_exhausted"
            ),
            RejectReason::BreakerOpen => tracing::event!(
                parent: &self.span,
                Level::INFO,
                attempt,
                pause_ms,
                "nresilience.breaker_open"
            ),
        }
        Step::Sleep(clock::after(now, pause))
    }

    /// Ends a refused call after its pause. The hint is read now, after the pause: the time
    /// the budget's floor needs from here, or the rest of the break (B7, G1).
    fn refuse<T>(&mut self, reason: RejectReason, now: Instant) -> Step<T, E> {
        let retry_after = match reason {
            RejectReason::BudgetExhausted => self
                .bucket
                .as_ref()
                .and_then(|b| b.retry_after_for(now, self.criticality)),
            RejectReason::BreakerOpen => self
                .policy
                .circuit_breaker()
                .and_then(|breaker| breaker.retry_after(now)),
        };
        let stop = reason.stop_reason();
        learned::call_ended(stop, self.attempts, retry_after);
        self.stop(stop, now);
        let rejected = CallRejected::new(reason, retry_after);
        Step::Done(Err(self.error(stop, Some(rejected))))
    }

    #[inline]
    fn return_token(&mut self) {
        if std::mem::take(&mut self.token) {
            if let Some(bucket) = &self.bucket {
                bucket.refund();
            }
        }
    }

    // ===== the end =====

    fn error(&mut self, reason: StopReason, rejected: Option<CallRejected>) -> RetryError<E> {
        let last = self.last.take().unwrap_or(LastAttempt::Refused);
        RetryError::new(reason, self.attempts, last, rejected)
    }

    fn time_left(&self, now: Instant) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(now))
    }

    fn stop(&mut self, reason: StopReason, now: Instant) {
        self.finish(reason, now, None);
    }

    /// Ends the call at `now`; `elapsed` is its duration when already known.
    #[inline]
    fn finish(&mut self, reason: StopReason, now: Instant, elapsed: Option<Duration>) {
        // A retry that will never go out does not keep its token (B13).
        self.return_token();
        // The request being served learns how its calls failed (C7); a refusal or an
        // overloaded answer has told it already, with its hint.
        if !matches!(
            reason,
            StopReason::Succeeded
                | StopReason::BudgetExhausted
                | StopReason::BreakerOpen
                | StopReason::Overloaded
        ) {
            learned::call_ended(reason, self.attempts, None);
        }
        self.phase = Phase::Done;
        let elapsed = elapsed.unwrap_or_else(|| now.saturating_duration_since(self.started));
        self.record_end(Some(reason), elapsed, now);
    }

    /// Records the call's end: `None` when its caller dropped it unfinished.
    #[inline]
    fn record_end(&self, reason: Option<StopReason>, elapsed: Duration, now: Instant) {
        let instruments = self.policy.instruments();
        instruments.call(reason, self.criticality, elapsed.as_secs_f64());
        if self.attempts > 1 || self.refilled || reason == Some(StopReason::BudgetExhausted) {
            if let Some(bucket) = &self.bucket {
                instruments.utilization(bucket.utilization(now));
            }
        }
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
    fn report_nested(&mut self) {
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

impl<E> Drop for Call<E> {
    fn drop(&mut self) {
        self.return_token();
        // A probe slot held by a cancelled attempt goes back when its permit drops (G4).
        if !matches!(self.phase, Phase::Done)
            && (self.attempts > 0 || !matches!(self.phase, Phase::Ready))
        {
            let now = clock::now();
            let elapsed = now.saturating_duration_since(self.started);
            self.record_end(None, elapsed, now);
        }
    }
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

/// What follows an attempt.
#[derive(Debug, Clone, Copy)]
enum Decision {
    Stop(StopReason),
    Sleep(Instant),
    Refuse(RejectReason),
}

/// The call's deadline: its policy's, or the caller's when the request being served says the
/// caller gives up sooner and the policy inherits it.
#[inline]
fn deadline(policy: &RetryPolicy, now: Instant, inbound: &Inbound) -> Option<Instant> {
    let own = policy.deadline().map(|d| clock::after(now, d));
    let inbound = inbound.deadline.filter(|_| policy.inherits_deadline());
    match (own, inbound) {
        (Some(own), Some(inbound)) => Some(own.min(inbound)),
        (own, inbound) => own.or(inbound),
    }
}

/// Whether a call that stops for `reason` answers with the last attempt's value: a value the
/// classifier did not accept is still the caller's answer when nothing more can be done
/// with it (H4). A refusal or a deadline is an error whatever the last attempt returned.
fn answers(reason: StopReason) -> bool {
    matches!(
        reason,
        StopReason::Succeeded
            | StopReason::AttemptsExhausted
            | StopReason::Permanent
            | StopReason::Overloaded
            | StopReason::RetriedBelow
    )
}

/// What a call that hedged keeps.
#[derive(Debug)]
struct Hedged {
    /// The number and start of the attempt the hedges run beside, while it runs.
    first: Option<(u32, Instant)>,
    /// The breaker permits of hedges in flight.
    permits: Vec<(u32, BreakerPermit)>,
    /// The strongest throttle answered while other attempts were in flight: the retry after
    /// the last of them honours it.
    pushback: Option<Verdict>,
}

impl Hedged {
    #[cold]
    fn new(first: u32, started: Instant) -> Box<Self> {
        Box::new(Self {
            first: Some((first, started)),
            permits: Vec::new(),
            pushback: None,
        })
    }

    /// The latency sample a success of `attempt` after `duration` gives the window. A hedge
    /// that wins while the first attempt still runs says that attempt took at least as long as
    /// it has waited: the window keeps the tail the hedge hid, and the trigger stays put.
    fn sample(&mut self, attempt: &Attempt, duration: Duration, now: Instant) -> Duration {
        let first = self.first.take();
        match first {
            Some((number, started)) if attempt.hedge && number != attempt.number => {
                now.saturating_duration_since(started)
            }
            _ => duration,
        }
    }
}

/// The retry-deciding verdict of two failures: a throttle over a transient failure, and of two
/// throttles the one asking for the longer wait.
fn stronger(earlier: Option<Verdict>, latest: Verdict) -> Verdict {
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

/// A retrying call started inside a retrying context, and what it targets.
#[derive(Debug)]
struct Nested {
    source: NestingSource,
    target: Option<String>,
    method: Option<String>,
    /// The `NestedRetry` span, once the first attempt reported it.
    span: Span,
}
