//! Runs a simulation: a current-thread tokio runtime with paused time, one task per call,
//! the shipping [`RetryPolicy::execute`] in each, and a modelled dependency behind the attempts.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use tokio::task::{JoinHandle, LocalSet};
use tokio::time::Instant;

use super::dependency::{Admission, Dependency};
use super::load::Load;
use super::report::{worst_second, HopReport, Second, SimulationReport, Totals};
use super::rng::SplitMix64;
use super::workers::Pool;
use super::InvalidSimulation;
use nresilience_core::breaker::CircuitBreaker;
use nresilience_core::chain::{self, Inbound};
use nresilience_core::fleet::RetryShare;
use nresilience_core::limiter::RateLimiter;
use nresilience_core::{InvalidPolicy, RetryBudget, RetryError, RetryPolicy, StopReason, Verdict};

/// tokio's timer resolution: every timer fires on a whole millisecond of the virtual clock.
const TICK: Duration = Duration::from_millis(1);

/// Everything a run needs, borrowed from the [`Simulation`](super::Simulation).
#[derive(Debug, Clone, Copy)]
pub(super) struct Setup<'a> {
    pub(super) policies: &'a [RetryPolicy],
    /// How the policies are arranged: one after another, or side by side.
    pub(super) shape: Shape,
    /// The load into each entry: the first policy of a chain, every member of a fleet.
    pub(super) loads: &'a [Load],
    pub(super) dependency: &'a Dependency,
    pub(super) duration: Duration,
    /// Whether a hop answers its caller with the chain's signals, and the caller honours them.
    pub(super) chain_rules: bool,
    /// The share of retries the dependency accepts, when it counts them and advises its
    /// callers (F2, F3); `None` when it says nothing, as every third-party service.
    pub(super) coordinated: Option<f64>,
}

/// A chain (each policy's attempts are calls under the next) or a fleet (every policy is a
/// client of its own, calling the dependency with its own load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Chain,
    Fleet,
}

pub(super) fn run(setup: Setup<'_>, seed: u64) -> Result<SimulationReport, InvalidSimulation> {
    // A thread of its own: callable from inside another runtime, and no task-local (a nesting
    // context) of the caller leaks into the simulated calls.
    std::thread::scope(
        |scope| match scope.spawn(move || run_on_this_thread(setup, seed)).join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        },
    )
}

fn run_on_this_thread(setup: Setup<'_>, seed: u64) -> Result<SimulationReport, InvalidSimulation> {
    let mut seeds = SplitMix64::new(seed);
    let arrivals = seeds.next_u64();
    let dependency = seeds.next_u64();
    let jitter: Vec<u64> = setup.policies.iter().map(|_| seeds.next_u64()).collect();
    // The first entry's stream is drawn first and the others after the jitter seeds, so a
    // chain (one entry) draws what a single policy does.
    let mut arrival_streams = vec![arrivals];
    arrival_streams.extend(setup.loads.iter().skip(1).map(|_| seeds.next_u64()));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| InvalidSimulation::new(format!("cannot start a runtime: {e}")))?;
    LocalSet::new().block_on(&runtime, async {
        let zero = Instant::now();
        let policies = setup
            .policies
            .iter()
            .zip(&jitter)
            .map(|(policy, &seed)| fresh(policy, seed, zero.into_std()))
            .collect::<Result<Vec<_>, _>>()?;
        // Each policy's latency estimate counts its refresh slices from the first instant it
        // sees: the instant the simulated processes are built, a tick before they start.
        for policy in &policies {
            policy.start_estimates(zero.into_std());
        }
        tokio::time::sleep_until(zero + TICK).await;
        let world = Rc::new(World::new(policies, setup, SplitMix64::new(dependency)));
        Ok(drive(world, setup, &arrival_streams, seed).await)
    })
}

/// The same settings as `policy`, with none of its state: a full bucket, an empty latency
/// window, its own limiter and breaker, the simulation's jitter seed. A `Shared` budget becomes
/// the policy's own, since the simulated process holds nothing else that could share it.
fn fresh(
    policy: &RetryPolicy,
    jitter_seed: u64,
    now: std::time::Instant,
) -> Result<RetryPolicy, InvalidSimulation> {
    let budget = match policy.budget() {
        RetryBudget::Shared(_, options) => RetryBudget::Automatic(*options),
        budget => budget.clone(),
    };
    let mut builder = policy.to_builder().budget(budget).jitter_seed(jitter_seed);
    if let Some(limiter) = policy.rate_limiter() {
        let limiter = RateLimiter::new(limiter.permits_per_second(), limiter.burst(), now)
            .map_err(|e| InvalidSimulation::new(e.to_string()))?;
        builder = builder.rate_limiter(Arc::new(limiter));
    }
    if let Some(breaker) = policy.circuit_breaker() {
        let breaker = CircuitBreaker::new(*breaker.options(), now)
            .map_err(|e| InvalidSimulation::new(e.to_string()))?;
        builder = builder.circuit_breaker(Arc::new(breaker));
    }
    Ok(builder.build()?)
}

impl From<InvalidPolicy> for InvalidSimulation {
    fn from(error: InvalidPolicy) -> Self {
        Self::new(error.to_string())
    }
}

/// Offers each entry its load until the run's end, then waits for every call to finish.
async fn drive(
    world: Rc<World>,
    setup: Setup<'_>,
    arrival_streams: &[u64],
    seed: u64,
) -> SimulationReport {
    let entries = setup.loads.iter().zip(arrival_streams);
    let others: Vec<_> = (entries.clone().enumerate().skip(1))
        .map(|(entry, (&load, &stream))| {
            tokio::task::spawn_local(arrive(
                Rc::clone(&world),
                entry,
                load,
                SplitMix64::new(stream),
                setup.duration,
            ))
        })
        .collect();
    // The first entry's arrivals run inline, as a single policy's always have: spawning them
    // would reorder the tasks and change a chain's figures.
    if let Some((&load, &stream)) = entries.clone().next() {
        arrive(
            Rc::clone(&world),
            0,
            load,
            SplitMix64::new(stream),
            setup.duration,
        )
        .await;
    }
    for other in others {
        if let Err(error) = other.await {
            if error.is_panic() {
                std::panic::resume_unwind(error.into_panic());
            }
        }
    }
    poll_fn(|cx| {
        let mut state = world.state.borrow_mut();
        if state.outstanding == 0 {
            Poll::Ready(())
        } else {
            state.waiter = Some(cx.waker().clone());
            Poll::Pending
        }
    })
    .await;
    assert!(
        !world.state.borrow().panicked,
        "a simulated call panicked; its message is above"
    );
    world.report(setup.duration, seed)
}

/// Starts calls under the policy `entry` at the load's arrival times until `duration`.
async fn arrive(
    world: Rc<World>,
    entry: usize,
    load: Load,
    mut arrivals: SplitMix64,
    duration: Duration,
) {
    let mut at = load.gap(&mut arrivals);
    loop {
        // Arrivals are continuous; tokio's timers fire on whole milliseconds.
        let since_start = Duration::from_millis(at.div_ceil(1_000_000));
        if since_start >= duration {
            break;
        }
        let arrival = world.origin + since_start;
        if arrival > Instant::now() {
            tokio::time::sleep_until(arrival).await;
        }
        drop(spawn(&world, entry, None));
        at = at.saturating_add(load.gap(&mut arrivals));
    }
}

/// A call under the policy of `hop`, as its own task: a caller that gives up on it (its
/// attempt was cut) does not stop it, as a server that does not watch for disconnects would
/// not stop.
fn spawn(world: &Rc<World>, hop: usize, caller_waits: Option<Instant>) -> JoinHandle<Answer> {
    let outstanding = Outstanding::new(world);
    let call = call(Rc::clone(world), hop);
    // A hop told how long its caller waits gives up with it, as a real hop reading
    // `x-nresilience-deadline-ms` does.
    let call: Pin<Box<dyn Future<Output = Answer>>> = match caller_waits {
        Some(deadline) if world.chain_rules => {
            let inbound = Inbound::new().deadline(Some(deadline.into_std()));
            Box::pin(chain::serving(inbound, call))
        }
        _ => Box::pin(call),
    };
    tokio::task::spawn_local(async move {
        let _outstanding = outstanding;
        call.await
    })
}

async fn call(world: Rc<World>, hop: usize) -> Answer {
    let started = Instant::now();
    world.with(|state| state.hops[hop].second(world.since(started)).calls += 1);
    let result = world.policies[hop]
        .execute_with(&classify, |this| {
            attempt(Rc::clone(&world), hop, this.cut_at(), this.number() > 1)
        })
        .await;
    let failed = result.as_ref().err();
    world.call_ended(hop, started, failed.map(RetryError::reason));
    match failed {
        None => Answer::Ok,
        Some(_) if !world.chain_rules => Answer::Failed,
        Some(error) => match error.reason() {
            // A refusal, or an overload answered from below: this hop is shedding load too.
            StopReason::BudgetExhausted
            | StopReason::BreakerOpen
            | StopReason::Saturated
            | StopReason::Overloaded => Answer::Overloaded,
            StopReason::AttemptsExhausted if error.attempts() > 1 => Answer::Retried,
            StopReason::RetriedBelow => Answer::Retried,
            _ => Answer::Failed,
        },
    }
}

/// What a hop answers its caller, as a real nresilience hop would: the chain's signals are
/// what `NestedRetryLayer` stamps on a `5xx` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Ok,
    Failed,
    Overloaded,
    Retried,
}

/// The verdict a caller's classifier gives each answer.
// The executor hands a classifier the answer by reference, whatever its size.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn classify(result: &Result<(), Answer>) -> Verdict {
    match result {
        Ok(()) | Err(Answer::Ok) => Verdict::Success,
        Err(Answer::Failed) => Verdict::TRANSIENT,
        Err(Answer::Overloaded) => Verdict::OVERLOADED,
        Err(Answer::Retried) => Verdict::RetriedBelow,
    }
}

/// One attempt of `hop`: a request to the next hop, or the dependency serving it.
async fn attempt(
    world: Rc<World>,
    hop: usize,
    cut_at: Option<std::time::Instant>,
    retry: bool,
) -> Result<(), Answer> {
    let now = Instant::now();
    world.with(|state| {
        let tally = &mut state.hops[hop];
        tally.attempts += 1;
        tally.second(world.since(now)).attempts += 1;
    });
    let answer = if let Some(next) = world.next(hop) {
        // A panicked downstream call is reported when the run ends.
        spawn(&world, next, cut_at.map(Instant::from_std))
            .await
            .unwrap_or(Answer::Failed)
    } else {
        if let Some(share) = &world.share {
            share.record(retry, now.into_std());
        }
        let (served, _in_flight) = world.serve(now);
        if !served.latency.is_zero() {
            tokio::time::sleep(served.latency).await;
        }
        world.advise(hop);
        if served.fails {
            Answer::Failed
        } else {
            Answer::Ok
        }
    };
    world.with(|state| state.hops[hop].answered += 1);
    match answer {
        Answer::Ok => Ok(()),
        failed => Err(failed),
    }
}

// ===== impl World =====

/// The run's shared state; one thread, so a `RefCell`, never borrowed across an await.
struct World {
    origin: Instant,
    policies: Vec<RetryPolicy>,
    shape: Shape,
    dependency: Dependency,
    peers: u64,
    chain_rules: bool,
    /// The dependency's count of the retries reaching it, when it advises its callers.
    share: Option<RetryShare>,
    state: RefCell<State>,
}

struct State {
    rng: SplitMix64,
    in_flight: u64,
    /// The dependency's workers and queue, when it has them.
    pool: Option<Pool>,
    /// The pool's queue and refusals, per second.
    pool_seconds: Vec<PoolSecond>,
    hops: Vec<HopTally>,
    latencies: Vec<Duration>,
    outstanding: usize,
    waiter: Option<Waker>,
    panicked: bool,
}

/// What the dependency's pool saw in one second.
#[derive(Debug, Clone, Copy, Default)]
struct PoolSecond {
    queue: u64,
    shed: u64,
}

#[derive(Default)]
struct HopTally {
    calls: u64,
    succeeded: u64,
    attempts: u64,
    answered: u64,
    budget_refusals: u64,
    saturated: u64,
    seconds: Vec<Second>,
}

impl HopTally {
    fn second(&mut self, since_start: Duration) -> &mut Second {
        let index = usize::try_from(since_start.as_secs()).unwrap_or(usize::MAX);
        if self.seconds.len() <= index {
            self.seconds.resize(index + 1, Second::default());
        }
        &mut self.seconds[index]
    }
}

impl World {
    fn new(policies: Vec<RetryPolicy>, setup: Setup<'_>, rng: SplitMix64) -> Self {
        let hops = policies.iter().map(|_| HopTally::default()).collect();
        // A fleet simulates every client; a chain's load may stand for peers that are not.
        let peers = match setup.shape {
            Shape::Chain => setup.loads.first().map_or(1, |load| load.peers),
            Shape::Fleet => 1,
        };
        Self {
            origin: Instant::now(),
            policies,
            shape: setup.shape,
            dependency: setup.dependency.clone(),
            peers: u64::from(peers),
            chain_rules: setup.chain_rules,
            share: setup
                .coordinated
                .and_then(|accepted| RetryShare::new(accepted, Instant::now().into_std())),
            state: RefCell::new(State {
                rng,
                in_flight: 0,
                pool: setup.dependency.pool(),
                pool_seconds: Vec::new(),
                hops,
                latencies: Vec::new(),
                outstanding: 0,
                waiter: None,
                panicked: false,
            }),
        }
    }

    /// The policy serving `hop`'s attempts, or `None` when they reach the dependency.
    fn next(&self, hop: usize) -> Option<usize> {
        match self.shape {
            Shape::Chain => Some(hop + 1).filter(|&next| next < self.policies.len()),
            Shape::Fleet => None,
        }
    }

    /// Whether the load calls `hop` directly (its calls are the run's calls).
    fn is_entry(&self, hop: usize) -> bool {
        self.shape == Shape::Fleet || hop == 0
    }

    fn reaches_dependency(&self, hop: usize) -> bool {
        self.next(hop).is_none()
    }

    /// The dependency's advice on its answer, followed by `hop`'s bucket, as a client reading
    /// `x-nresilience-fleet` does (F3).
    fn advise(&self, hop: usize) {
        if let Some(share) = &self.share {
            let now = Instant::now().into_std();
            if let Some(bucket) = self.policies[hop].bucket(now) {
                bucket.follow(share.advice(now).allowance(), now);
            }
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.borrow_mut())
    }

    fn since(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.origin)
    }

    /// The dependency's answer to an attempt starting `now`, and the attempt's place in flight,
    /// held until it is answered or cut.
    fn serve(self: &Rc<Self>, now: Instant) -> (super::dependency::Answer, InFlight) {
        let answer = self.with(|state| {
            state.in_flight += 1;
            let since_start = self.since(now);
            let State {
                rng,
                pool,
                pool_seconds,
                in_flight,
                ..
            } = state;
            let Some(pool) = pool else {
                let offered = in_flight.saturating_mul(self.peers);
                return self.dependency.serve(since_start, offered, rng);
            };
            // The pool books the attempt's worker now; cutting the attempt later leaves the
            // booking standing, which is the point of the model.
            let (answer, admission) = self.dependency.serve_from(pool, since_start, rng);
            let index = usize::try_from(since_start.as_secs()).unwrap_or(usize::MAX);
            if pool_seconds.len() <= index {
                pool_seconds.resize(index + 1, PoolSecond::default());
            }
            let second = &mut pool_seconds[index];
            // Between arrivals the queue only shrinks, so its peak is seen at an arrival.
            let queued = u64::try_from(pool.queued(since_start)).unwrap_or(u64::MAX);
            second.queue = second.queue.max(queued);
            if admission == Admission::Shed {
                second.shed += 1;
            }
            answer
        });
        (answer, InFlight(Rc::clone(self)))
    }

    /// Counts a call that ended, `failed` for the reason, if it did.
    fn call_ended(&self, hop: usize, started: Instant, failed: Option<StopReason>) -> bool {
        let succeeded = failed.is_none();
        let now = Instant::now();
        self.with(|state| {
            if self.is_entry(hop) {
                state.latencies.push(now.saturating_duration_since(started));
            }
            let tally = &mut state.hops[hop];
            tally.calls += 1;
            if succeeded {
                tally.succeeded += 1;
            } else {
                tally.second(self.since(started)).failed += 1;
            }
            match failed {
                Some(StopReason::BudgetExhausted) => tally.budget_refusals += 1,
                Some(StopReason::Saturated) => tally.saturated += 1,
                _ => {}
            }
        });
        succeeded
    }

    fn report(&self, duration: Duration, seed: u64) -> SimulationReport {
        let mut state = self.state.borrow_mut();
        let hops: Vec<HopReport> = state
            .hops
            .iter()
            .map(|tally| HopReport {
                calls: tally.calls,
                succeeded: tally.succeeded,
                attempts: tally.attempts,
                attempts_cut: tally.attempts - tally.answered,
                budget_refusals: tally.budget_refusals,
                saturated: tally.saturated,
                amplification: worst_second(
                    tally.seconds.iter().map(|s| (s.calls, s.attempts)),
                    duration,
                )
                .0,
            })
            .collect();
        let entries: Vec<&HopTally> = (state.hops.iter().enumerate())
            .filter(|&(hop, _)| self.is_entry(hop))
            .map(|(_, tally)| tally)
            .collect();
        let reaching: Vec<&HopTally> = (state.hops.iter().enumerate())
            .filter(|&(hop, _)| self.reaches_dependency(hop))
            .map(|(_, tally)| tally)
            .collect();
        let length = state
            .hops
            .iter()
            .map(|t| t.seconds.len())
            .chain([state.pool_seconds.len()])
            .max()
            .unwrap_or(0);
        let seconds = (0..length)
            .map(|i| {
                let sum = |tallies: &[&HopTally], field: fn(&Second) -> u64| {
                    tallies
                        .iter()
                        .filter_map(|t| t.seconds.get(i))
                        .map(field)
                        .sum()
                };
                let pool = state.pool_seconds.get(i).copied().unwrap_or_default();
                Second {
                    calls: sum(&entries, |s| s.calls),
                    attempts: sum(&reaching, |s| s.attempts),
                    failed: sum(&entries, |s| s.failed),
                    queue: pool.queue,
                    shed: pool.shed,
                }
            })
            .collect();
        let totals = Totals {
            calls: entries.iter().map(|t| t.calls).sum(),
            succeeded: entries.iter().map(|t| t.succeeded).sum(),
            attempts: reaching.iter().map(|t| t.attempts).sum(),
            attempts_cut: reaching.iter().map(|t| t.attempts - t.answered).sum(),
        };
        SimulationReport::new(
            seed,
            duration,
            hops,
            totals,
            seconds,
            std::mem::take(&mut state.latencies),
        )
    }
}

/// An attempt being served by the dependency; cutting the attempt drops it.
struct InFlight(Rc<World>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut state) = self.0.state.try_borrow_mut() {
            state.in_flight -= 1;
        }
    }
}

/// A spawned call the run must wait for, counted from the moment it is spawned.
struct Outstanding(Rc<World>);

impl Outstanding {
    fn new(world: &Rc<World>) -> Self {
        world.with(|state| state.outstanding += 1);
        Self(Rc::clone(world))
    }
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        let Ok(mut state) = self.0.state.try_borrow_mut() else {
            return;
        };
        state.outstanding -= 1;
        state.panicked |= std::thread::panicking();
        if state.outstanding == 0 {
            if let Some(waiter) = state.waiter.take() {
                waiter.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests;
