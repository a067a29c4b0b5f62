//! The storm simulator: your policy against a modelled dependency on a virtual clock,
//! measuring the load it puts on the dependency and the availability it buys.
//!
//! The policy runs on the **shipping** executor, [`RetryPolicy::execute`], unchanged: the budget,
//! the backoff, the measured attempt ceiling and the classifier are the real ones. Four things
//! are fake: the clock (a paused current-thread tokio runtime, which jumps to the next timer
//! whenever every task waits), the random source (seeded; the policy's jitter through
//! [`jitter_seed`](nresilience_core::RetryPolicyBuilder::jitter_seed)), the [`Dependency`] and the
//! [`Load`]. Nothing sleeps in real time, so five simulated minutes cost a few seconds.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use simulator::{Dependency, Load, Simulation};
//! use nresilience_core::{RetryBudget, RetryPolicy};
//!
//! let (ms, s) = (Duration::from_millis, Duration::from_secs);
//! let api = RetryPolicy::builder().deadline(Some(s(10))).build()?;
//! let slowing = Dependency::healthy(ms(20), ms(200)).brownout(s(5), 8.0, s(10));
//! let run = |policy: &RetryPolicy| {
//!     Simulation::policy(policy.clone())
//!         .against(slowing.clone())
//!         .under(Load::constant(100.0))
//!         .for_duration(s(20))
//!         .run(42)
//! };
//!
//! let budgeted = run(&api)?;
//! let unbudgeted = run(&api.reconfigure().budget(RetryBudget::None).build()?)?;
//! // The same seed offers the same calls; only the policy differs.
//! assert_eq!(budgeted.calls, unbudgeted.calls);
//! assert!(budgeted.load_multiplier() <= unbudgeted.load_multiplier());
//! // Deterministic: the same seed, the same report.
//! assert_eq!(format!("{budgeted:?}"), format!("{:?}", run(&api)?));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The model
//!
//! - **Load**: open loop; each call is its own task, arriving after a gap uniform in
//!   `[0, 2 / rate)`, until the run's duration. Calls in flight then are allowed to finish.
//! - **Attempts**: the attempt closure sleeps the latency the dependency drew and returns
//!   `Ok(())` or an error the default classifier calls transient. An attempt the policy cuts
//!   (its timeout or measured ceiling) is dropped, and stops occupying the dependency, unless
//!   the dependency has [`workers`](Dependency::workers): their work goes on without its
//!   caller.
//! - **Fleets**: with [`Simulation::fleet`], every member is a client of its own (its own
//!   policy and load) calling the one dependency; they meet only in its capacity.
//! - **Chains**: with [`Simulation::chain`], each policy's attempt is a request to the next
//!   hop, served by a call under the next policy in a task of its own; a caller that gives up
//!   does not cancel it (a server does not see its client leave).
//! - **Time** moves in tokio's timer ticks, whole milliseconds: arrivals, latencies and
//!   timeouts land on the next millisecond.
//!
//! # Determinism
//!
//! A seed fixes every draw: arrivals, latencies and jitter come from separate streams, so two
//! runs that differ in one setting offer the same calls. The simulation starts the policy
//! afresh (a full bucket, an empty latency window, its own limiter and breaker), so running it
//! never touches the policy you pass in, and a policy that has served traffic simulates like a
//! new one. The report is byte-identical for a seed on one build and platform, provided the
//! attempt ceiling's refresh interval and window are whole milliseconds. (The latency window's
//! bucket arithmetic uses the platform's `log2`, so another platform may differ.)

#![forbid(unsafe_code)]

mod dependency;
mod engine;
mod load;
mod report;
mod rng;
mod workers;

use std::error::Error;
use std::fmt;
use std::time::Duration;

pub use dependency::{Dependency, Tail};
pub use load::Load;
pub use report::{load_multiplier, HopReport, Second, SimulationReport};

use engine::Shape;
use nresilience_core::RetryPolicy;

/// A simulation being set up: a policy (or a chain of them) with a load, or a fleet of
/// policies each with its own load; a dependency; and a duration. Every setter returns the simulation, so a half-built one can be cloned and varied.
#[derive(Debug, Clone)]
#[must_use]
pub struct Simulation {
    policies: Vec<RetryPolicy>,
    shape: Shape,
    /// A fleet's loads, one per member; a chain's load comes from `under`.
    fleet_loads: Vec<Load>,
    dependency: Option<Dependency>,
    load: Option<Load>,
    duration: Option<Duration>,
    chain_rules: bool,
    coordinated: Option<f64>,
}

impl Simulation {
    /// Simulates `policy` calling the dependency directly.
    pub fn policy(policy: RetryPolicy) -> Self {
        Self::chain([policy])
    }

    /// Simulates a chain of services: the load calls the first policy's service, each policy's
    /// attempts are requests to the next service, and the last policy's reach the dependency.
    /// Each policy is its own process (its own bucket and latency estimate).
    ///
    /// ```
    /// use std::time::Duration;
    /// use simulator::{Dependency, Load, Simulation};
    /// use nresilience_core::{RetryBudget, RetryPolicy};
    ///
    /// let s = Duration::from_secs;
    /// // Retry layers with neither a budget nor overload control: what they multiply.
    /// let hop = RetryPolicy::builder()
    ///     .budget(RetryBudget::None)
    ///     .overload_control(None)
    ///     .build()?;
    /// let chain = Simulation::chain([hop.clone(), hop.clone(), hop])
    ///     .against(Dependency::healthy(Duration::from_millis(5), Duration::from_millis(5)).outage(s(1), s(1)))
    ///     .under(Load::constant(50.0))
    ///     .for_duration(s(3));
    /// let deaf = chain.clone().chain_rules(false).run(7)?;
    /// assert_eq!(deaf.hops.len(), 3);
    /// // Three layers of three attempts: up to 27 at the bottom for each failing call.
    /// assert!(deaf.amplification > 9.0, "{deaf}");
    /// // Hops that pass their deadline on and say when they retried are retried at one
    /// // layer: at most three attempts at the bottom for each call.
    /// let report = chain.run(7)?;
    /// assert!(report.load_multiplier() <= 3.0, "{report}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn chain(policies: impl IntoIterator<Item = RetryPolicy>) -> Self {
        Self {
            policies: policies.into_iter().collect(),
            shape: Shape::Chain,
            fleet_loads: Vec::new(),
            dependency: None,
            load: None,
            duration: None,
            chain_rules: true,
            coordinated: None,
        }
    }

    /// Simulates a fleet: many clients, each with its own policy (its own bucket) and its own
    /// load, calling one dependency side by side. The report's calls and attempts are the
    /// fleet's; [`SimulationReport::hops`] holds each member's, in order. Every member is
    /// simulated, so a member's load takes no [`peers`](Load::peers); the loads replace
    /// [`under`](Self::under).
    ///
    /// ```
    /// use std::time::Duration;
    /// use simulator::{Dependency, Load, Simulation};
    /// use nresilience_core::RetryPolicy;
    ///
    /// let (ms, s) = (Duration::from_millis, Duration::from_secs);
    /// let client = RetryPolicy::builder().build()?;
    /// let fleet = (1..=4).map(|n| (client.clone(), Load::constant(f64::from(n) * 25.0)));
    /// let report = Simulation::fleet(fleet)
    ///     .against(Dependency::healthy(ms(5), ms(20)).failing(0.5))
    ///     .for_duration(s(20))
    ///     .run(3)?;
    /// assert_eq!(report.hops.len(), 4);
    /// assert_eq!(report.calls, report.hops.iter().map(|h| h.calls).sum::<u64>());
    /// // Half the first attempts fail, yet each client's budget holds its retries near a
    /// // tenth of its successes plus the floor: far below the 1.75× that three attempts allow.
    /// assert!(report.load_multiplier() < 1.4, "{report}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fleet(members: impl IntoIterator<Item = (RetryPolicy, Load)>) -> Self {
        let (policies, fleet_loads) = members.into_iter().unzip();
        Self {
            policies,
            shape: Shape::Fleet,
            fleet_loads,
            dependency: None,
            load: None,
            duration: None,
            chain_rules: true,
            coordinated: None,
        }
    }

    /// The dependency the (last) policy calls. Required.
    pub fn against(mut self, dependency: Dependency) -> Self {
        self.dependency = Some(dependency);
        self
    }

    /// The load offered to a chain's first policy. Required for a chain; a fleet's members
    /// bring their own.
    pub fn under(mut self, load: Load) -> Self {
        self.load = Some(load);
        self
    }

    /// How long load is offered. Required, and longer than zero.
    pub fn for_duration(mut self, duration: Duration) -> Self {
        self.duration = Some(duration);
        self
    }

    /// Whether the hops of a chain behave as one system, as real nresilience hops do: each
    /// attempt tells the next hop how long it will wait, and that hop's call gives up no
    /// later; a hop whose call was refused by its budget or breaker answers overloaded, one
    /// whose call failed after retrying answers retried, and a policy retries neither
    /// answer. Defaults to `true`; `false` makes each hop deaf to its caller and every failed
    /// call a plain failure its caller retries, as hops without these rules would.
    pub fn chain_rules(mut self, on: bool) -> Self {
        self.chain_rules = on;
        self
    }

    /// Whether the dependency counts the retries reaching it and advises its callers how
    /// much of their budgets to use (F2, F3), accepting `accepted` retries per first attempt,
    /// as a service behind `NestedRetryLayer` with fleet coordination does; each caller's
    /// bucket follows the advice on every answer. `None`, the default, is a dependency that
    /// says nothing.
    pub fn coordinated(mut self, accepted: Option<f64>) -> Self {
        self.coordinated = accepted;
        self
    }

    /// Runs the simulation on a thread of its own and reports what happened; the same seed
    /// gives the same report. Callable from inside an async runtime.
    pub fn run(&self, seed: u64) -> Result<SimulationReport, InvalidSimulation> {
        if self.policies.is_empty() {
            return Err(InvalidSimulation::new(
                "a simulation needs at least one policy".to_owned(),
            ));
        }
        let dependency = self.dependency.as_ref().ok_or_else(|| {
            InvalidSimulation::new("the simulation has no dependency: call against()".to_owned())
        })?;
        let chain_load;
        let loads: &[Load] = match self.shape {
            Shape::Chain => {
                chain_load = [self.load.ok_or_else(|| {
                    InvalidSimulation::new("the simulation has no load: call under()".to_owned())
                })?];
                &chain_load
            }
            Shape::Fleet => {
                if self.load.is_some() {
                    return Err(InvalidSimulation::new(
                        "a fleet's members bring their own loads: pass (policy, load) pairs to \
                         fleet() instead of calling under()"
                            .to_owned(),
                    ));
                }
                if self.fleet_loads.iter().any(|load| load.peers != 1) {
                    return Err(InvalidSimulation::new(
                        "every fleet member is simulated: add members instead of peers".to_owned(),
                    ));
                }
                &self.fleet_loads
            }
        };
        let duration = self.duration.filter(|d| !d.is_zero()).ok_or_else(|| {
            InvalidSimulation::new(
                "the simulation needs a duration longer than zero: call for_duration()".to_owned(),
            )
        })?;
        if self
            .coordinated
            .is_some_and(|accepted| !(0.0..=1.0).contains(&accepted))
        {
            return Err(InvalidSimulation::new(
                "the share of retries the dependency accepts must be between 0 and 1".to_owned(),
            ));
        }
        dependency.validate()?;
        for load in loads {
            load.validate()?;
        }
        if dependency.pool().is_some() && loads.iter().any(|load| load.peers != 1) {
            return Err(InvalidSimulation::new(
                "peers are not simulated, so they cannot wait in the dependency's queue: \
                 simulate them as a fleet"
                    .to_owned(),
            ));
        }
        engine::run(
            engine::Setup {
                policies: &self.policies,
                shape: self.shape,
                loads,
                dependency,
                duration,
                chain_rules: self.chain_rules,
                coordinated: self.coordinated,
            },
            seed,
        )
    }
}

/// A simulation that cannot run, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSimulation {
    reason: String,
}

impl InvalidSimulation {
    fn new(reason: String) -> Self {
        Self { reason }
    }

    /// Why the simulation cannot run.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for InvalidSimulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid simulation: {}", self.reason)
    }
}

impl Error for InvalidSimulation {}
