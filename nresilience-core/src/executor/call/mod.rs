//! One call's retry decisions, as a state machine any driver runs.
//!
//! [`RetryPolicy::execute`](crate::RetryPolicy::execute) drives it with async closures; the
//! HTTP and gRPC middleware of `nresilience-client` drive it from their own futures. Every
//! driver is the same short loop: ask the [`Call`] for its next [`Step`], do what the step
//! says through [`Flights`] — run an attempt, start a hedge beside the ones in flight, let
//! them go on, sleep, or return — and hand back what [`Flights`] reports landed. The call
//! holds every rule between two attempts (the decision order, the budget, the breaker and
//! limiter, the rejection pause, what a stopped call returns), and [`Flights`] every timing
//! rule (which attempt answered first, the earliest cut, when to wake), so a rule changes in
//! one place for every driver. The call does no IO and never reads the clock: time comes in as
//! an argument, so a test or a simulation can drive it with any clock. A driver that holds an
//! attempt before sending it (a tower service not ready yet) and is dropped there hands it back
//! with [`Call::unsent`].
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
//! use std::future::poll_fn;
//! use std::pin::pin;
//! use nresilience_core::call::{Call, CallOptions, Flights, FlightEvent, Step};
//! use nresilience_core::{clock, RetryError, RetryPolicy, Verdict};
//!
//! async fn fetch(attempt: u32) -> Result<&'static str, std::io::Error> {
//!     if attempt < 3 { Err(std::io::ErrorKind::ConnectionReset.into()) } else { Ok("row") }
//! }
//!
//! async fn drive(policy: &RetryPolicy) -> Result<&'static str, RetryError<std::io::Error>> {
//!     let mut call = Call::start(policy, clock::now(), CallOptions::new());
//!     let mut flights = pin!(Flights::new());
//!     let mut step = call.next(clock::now());
//!     loop {
//!         match step {
//!             Step::Run(attempt) => flights.as_mut().run(attempt, (), fetch(attempt.number())),
//!             Step::Hedge(attempt) => flights.as_mut().hedge(attempt, (), fetch(attempt.number())),
//!             Step::KeepWaiting => {}
//!             Step::Sleep(until) => flights.as_mut().sleep(until),
//!             Step::Done(result) => return result,
//!         }
//!         let landed = poll_fn(|cx| flights.as_mut().poll_landed(cx, call.hedge_at())).await;
//!         step = match landed {
//!             FlightEvent::Answered { attempt, output, .. } => {
//!                 let verdict = if output.is_ok() { Verdict::Success } else { Verdict::TRANSIENT };
//!                 call.attempted(attempt, output, verdict, clock::now())
//!             }
//!             FlightEvent::Cut { attempt, .. } => call.timed_out(attempt, clock::now()),
//!             FlightEvent::HedgeDue(at) => call.next(at),
//!             FlightEvent::Woke => call.next(clock::now()),
//!         };
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! assert_eq!(drive(&RetryPolicy::default()).await.unwrap(), "row");
//! # }
//! ```

use std::sync::Arc;
use std::time::Instant;

use tracing::{field, Span};

use crate::budget::TokenBucket;
use crate::chain;
use crate::clock;
use crate::criticality::Criticality;
use crate::executor::error::LastAttempt;
use crate::executor::policy::{Estimate, RetryPolicy};
use crate::fleet::Allowance;
use crate::guards::breaker::BreakerPermit;
use crate::nesting::{self, NestingSource};
use crate::outcome::RejectReason;
use crate::overload::{Answer, LoadTracker, Ticket, WaitTicket};
use crate::verdict::Verdict;

mod attempt;
mod attempts;
mod decide;
mod hedging;
mod report;
mod step;

pub use crate::executor::flights::{AttemptScope, FlightEvent, Flights};
pub use crate::executor::timer::Timer;
pub use attempt::Attempt;
pub use attempts::Attempts;
pub use step::{CallOptions, Step};

use attempts::Tally;
use decide::{answers, deadline, stronger, Decision};
use hedging::HedgeState;
use report::Nested;

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
    /// Whether the call was dropped to one attempt because its request could not be sent
    /// again (H7).
    unreplayable: bool,
    /// When the attempts in flight are hedged, as fitted when the latest one started.
    hedge_due: Option<Instant>,
    estimate: Estimate,
    /// The breaker permit of attempt `permit_of`.
    permit: Option<BreakerPermit>,
    permit_of: u32,
    /// What only a call that hedged keeps, out of line.
    concurrent: Option<Box<HedgeState>>,
    /// A token withdrawn for the next retry: spent when the retry goes out (the attempt is
    /// then `paid`), returned if the call ends first (B13).
    token: bool,
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
    /// The dependency's load, when overload control is on (O1, O2).
    load: Option<Arc<LoadTracker>>,
    /// The latest attempt's place in it: attempts abandoned together count from there.
    ticket: Ticket,
    /// The call's place among those waiting for room under the limit, while it waits (O7).
    waiting: Option<Box<Waiting>>,
    /// What its answer says of its attempts (H8).
    tally: Tally,
}

/// A call waiting for room under its dependency's limit.
#[derive(Debug)]
struct Waiting {
    ticket: WaitTicket,
    /// When it stops waiting: a typical attempt before its deadline.
    until: Instant,
}

impl<E> Call<E> {
    /// Starts a call at `now` (read before calling).
    ///
    /// When the call may retry and the nesting context says it runs inside a retrying
    /// context (or its request carries the marker), it is reported once, by its first
    /// attempt: a `NestedRetry` span and the `nresilience.nested_retries` counter. Nothing
    /// else changes.
    pub fn start(policy: &RetryPolicy, now: Instant, options: CallOptions<'_>) -> Self {
        let max_attempts = if !options.may_retry {
            1
        } else {
            policy.max_attempts()
        };
        let bucket = match options.key {
            Some(key) => policy.keyed_bucket(key, now),
            None => policy.bucket(now).cloned(),
        };
        let load = policy.load_tracker(options.key, now);
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
                caller_attempt: (source == NestingSource::Header).then_some(inbound.attempt),
                span: Span::none(),
            })
        });
        let criticality = inbound
            .criticality
            .filter(|_| policy.ambient_criticality())
            .unwrap_or(policy.criticality());
        let may_hedge = options.may_hedge
            && policy.hedge().is_some()
            && max_attempts > 1
            && criticality != Criticality::Sheddable;
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
            deadline: deadline(
                policy.deadline().map(|d| clock::after(now, d)),
                inbound.deadline.filter(|_| policy.inherits_deadline()),
            ),
            depth: inbound.depth.saturating_add(1),
            attempts_above: inbound.attempts,
            criticality,
            max_attempts,
            attempts: 0,
            attempt_started: now,
            in_flight: 0,
            may_hedge,
            hedging_stopped: false,
            unreplayable: false,
            hedge_due: None,
            estimate: Estimate::default(),
            permit: None,
            permit_of: 0,
            concurrent: None,
            token: false,
            phase: Phase::Ready,
            last: None,
            nested,
            span,
            load,
            ticket: Ticket::default(),
            waiting: None,
            tally: Tally::default(),
        }
    }

    /// Drops the call to a single attempt, before its first one: its request proved
    /// unreplayable. It is then neither stamped nor reported as nested, and if that attempt
    /// fails in a way a retry could fix, the call stops with
    /// [`StopReason::NotReplayable`](crate::StopReason::NotReplayable)
    /// (H7). A call that could not retry anyway is left alone.
    pub fn single_attempt(&mut self) {
        if self.attempts == 0 && self.max_attempts > 1 {
            self.unreplayable = true;
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

    /// Follows the dependency's advice heard on an answer at `now` (F3): the bucket this
    /// call's retries are charged to (the host's own, under a keyed budget) uses `allowance`
    /// of its budget until the advice lapses. A call without a budget ignores it.
    pub fn follow_fleet(&self, allowance: Allowance, now: Instant) {
        if let Some(bucket) = &self.bucket {
            bucket.follow(allowance, now);
        }
    }

    /// Attempts made so far, counting one this process's rate limiter refused.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The call's span (`resilience {policy}`); attempts run inside it.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// How much the caller waits on this call, for `x-nresilience-chain`: the policy's,
    /// or the request's when the policy takes it from there.
    pub fn criticality(&self) -> Criticality {
        self.criticality
    }

    /// This call's depth in the chain, for `x-nresilience-chain`: one more than the request
    /// being served said, `1` outside any.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The attempts that could reach the dependency through this call and every call above
    /// it, for `x-nresilience-chain`: what the request being served said, times this
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
    /// attempts in flight go on: a [`Step::KeepWaiting`].
    ///
    /// # Panics
    ///
    /// After the call is done: the driver must not go on after [`Step::Done`].
    pub fn next<T>(&mut self, now: Instant) -> Step<T, E> {
        match self.phase {
            Phase::Ready => self.begin(now),
            Phase::Refusing(reason) => self.refuse(reason, now),
            Phase::Attempting => self.start_hedge(now),
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
    /// driver drops the others), and a transient or throttled failure is a [`Step::KeepWaiting`]:
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
        if attempt.paid && verdict == Verdict::Unreachable {
            // Refused a connection, it never reached the dependency: not sent (B13).
            self.refund();
        }
        if let Some(load) = &self.load {
            let answer = match verdict {
                Verdict::Success | Verdict::Permanent | Verdict::RetriedBelow => Answer::Served,
                _ => Answer::Unserved,
            };
            load.answered(attempt.ticket, duration, answer, now);
        }
        let mut verdict = verdict;
        if let Some(concurrent) = self.concurrent.as_deref_mut() {
            if self.in_flight > 0 {
                if verdict.is_retryable() {
                    // The dependency asking for less stops the hedges too, and its hint holds
                    // for the retry after the last attempt in flight.
                    if matches!(verdict, Verdict::Throttled { .. }) {
                        self.hedging_stopped = true;
                        concurrent.pushback = Some(stronger(concurrent.pushback, verdict));
                    }
                    self.last = Some(match result {
                        Ok(_) => LastAttempt::Unsuccessful,
                        Err(error) => LastAttempt::Error(error),
                    });
                    return Step::KeepWaiting;
                }
                self.cancel_others(now);
            } else if verdict.is_retryable() {
                verdict = stronger(concurrent.pushback.take(), verdict);
            }
        }
        let sample = match self.concurrent.as_deref_mut() {
            Some(concurrent) => concurrent.sample(&attempt, duration, now),
            None => duration,
        };
        match result {
            Ok(value) => match self.decide(verdict, sample, now) {
                Decision::Stop(reason) if answers(reason) => {
                    self.tally.answered(attempt.number, reason);
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
    /// While other attempts are in flight, they go on: a [`Step::KeepWaiting`].
    ///
    /// # Panics
    ///
    /// When no attempt is running.
    pub fn timed_out<T>(&mut self, attempt: Attempt, now: Instant) -> Step<T, E> {
        let duration = self.end_attempt(&attempt, Verdict::TRANSIENT, now);
        if let Some(load) = &self.load {
            if attempt.by_ceiling {
                load.cut_by_ceiling(attempt.ticket, duration, now);
            } else {
                load.abandoned(attempt.ticket, duration, true, now);
            }
        }
        if attempt.censors {
            self.policy.record_cut(duration, now);
        }
        self.last = Some(LastAttempt::TimedOut);
        if self.in_flight > 0 {
            return Step::KeepWaiting;
        }
        let pushback = self
            .concurrent
            .as_deref_mut()
            .and_then(|h| h.pushback.take());
        let decision = self.decide(stronger(pushback, Verdict::TRANSIENT), duration, now);
        self.step(decision, now)
    }
}
