use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use super::{Config, RetryPolicy, Shared};
use crate::backoff::Backoff;
use crate::budget::RetryBudget;
use crate::criticality::Criticality;
use crate::executor::error::InvalidPolicy;
use crate::executor::hedge::Hedge;
use crate::executor::latency::ceiling::AttemptCeiling;
use crate::guards::breaker::CircuitBreaker;
use crate::guards::limiter::RateLimiter;
use crate::overload::OverloadControl;

/// Builds a [`RetryPolicy`]; every setter has a default, and [`build`](Self::build) checks
/// them all.
#[derive(Clone)]
#[must_use]
pub struct RetryPolicyBuilder {
    config: Config,
    previous: Option<RetryPolicy>,
}

pub(super) fn default_config() -> Config {
    Config {
        name: None,
        max_attempts: 3,
        deadline: Some(Duration::from_secs(30)),
        inherit_deadline: true,
        attempt_timeout: Some(Duration::from_secs(10)),
        attempt_ceiling: Some(AttemptCeiling::new()),
        backoff: Backoff::default(),
        budget: RetryBudget::automatic(),
        criticality: Criticality::Normal,
        ambient_criticality: false,
        rejection_pause: Duration::from_millis(100),
        rate_limiter: None,
        circuit_breaker: None,
        jitter_seed: None,
        hedge: None,
        overload_control: Some(OverloadControl::new()),
    }
}

impl RetryPolicyBuilder {
    pub(super) fn new() -> Self {
        Self {
            config: default_config(),
            previous: None,
        }
    }

    /// A builder with `policy`'s settings, whose `build` keeps its state when `keep_state`.
    pub(super) fn from_policy(policy: &RetryPolicy, keep_state: bool) -> Self {
        Self {
            config: policy.inner.config.clone(),
            previous: keep_state.then(|| policy.clone()),
        }
    }

    /// The name on spans and the `nresilience.policy` metric tag. Defaults to `default`.
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.config.name = Some(name.into());
        self
    }

    /// The most attempts a call makes, counting the first; `1` turns retries off.
    /// It is only a maximum: the budget bounds retries across calls. Defaults to `3`.
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.config.max_attempts = max_attempts;
        self
    }

    /// The overall deadline of a call, delays included; `None` for none. Defaults to 30 s.
    pub fn deadline(mut self, deadline: Option<Duration>) -> Self {
        self.config.deadline = deadline;
        self
    }

    /// Whether a call started while serving a request that said how long its caller will
    /// wait ([`chain::Inbound`](crate::chain::Inbound)) gives up no later than that caller.
    /// Defaults to `true`; `false` keeps the policy's own deadline only.
    pub fn inherit_deadline(mut self, inherit: bool) -> Self {
        self.config.inherit_deadline = inherit;
        self
    }

    /// The timeout of each attempt; `None` for none. Defaults to 10 s.
    pub fn attempt_timeout(mut self, attempt_timeout: Option<Duration>) -> Self {
        self.config.attempt_timeout = attempt_timeout;
        self
    }

    /// The measured attempt ceiling; `None` turns it off. Defaults to
    /// [`AttemptCeiling::default`].
    pub fn attempt_ceiling(mut self, attempt_ceiling: Option<AttemptCeiling>) -> Self {
        self.config.attempt_ceiling = attempt_ceiling;
        self
    }

    /// The backoff curve. Defaults to [`Backoff::default`].
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// Where the retry budget lives. Defaults to [`RetryBudget::Automatic`] with the default
    /// options.
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.config.budget = budget;
        self
    }

    /// The criticality of the policy's calls: a `Sheddable` retry must leave half the bucket
    /// behind. Defaults to [`Criticality::Normal`].
    pub fn criticality(mut self, criticality: Criticality) -> Self {
        self.config.criticality = criticality;
        self
    }

    /// Whether a call takes its criticality from the request being served
    /// (the `criticality` of `x-nresilience-chain`, read by the server layer), falling back to
    /// [`criticality`](Self::criticality) when the request says none: a backfill two hops up
    /// stays sheddable here. Only a policy that retries under a budget has a use for it, so
    /// `build` refuses it with one attempt or no budget. Defaults to `false`.
    pub fn ambient_criticality(mut self, ambient: bool) -> Self {
        self.config.ambient_criticality = ambient;
        self
    }

    /// The pause before a refusal by the budget or a breaker is returned, never past the
    /// deadline: a caller that retries at once on a refusal is slowed to one try per pause.
    /// Defaults to 100 ms.
    pub fn rejection_pause(mut self, rejection_pause: Duration) -> Self {
        self.config.rejection_pause = rejection_pause;
        self
    }

    /// This process's own rate limiter for attempts; its refusals are self-imposed and cost
    /// the budget nothing. Share one `Arc` across policies to share the limit.
    /// Defaults to none.
    pub fn rate_limiter(mut self, rate_limiter: Arc<RateLimiter>) -> Self {
        self.config.rate_limiter = Some(Shared(rate_limiter));
        self
    }

    /// A circuit breaker in front of every attempt: while it is open, calls are refused at
    /// once (after the rejection pause) with the rest of the break as their hint. Defaults
    /// to none.
    pub fn circuit_breaker(mut self, circuit_breaker: Arc<CircuitBreaker>) -> Self {
        self.config.circuit_breaker = Some(Shared(circuit_breaker));
        self
    }

    /// Seeds the jitter's random source, for simulations and tests that must replay.
    /// Defaults to the thread's random generator.
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.config.jitter_seed = Some(seed);
        self
    }

    /// Hedges an attempt that has not answered in time with another beside it (HG1), each
    /// hedge paid for by the budget (HG2). Defaults to `None`: no hedging.
    pub fn hedge(mut self, hedge: Option<Hedge>) -> Self {
        self.config.hedge = hedge;
        self
    }

    /// Overload control for the policy's dependencies (O1, O2): an attempt whose expected
    /// wait is longer than the time its call has left is not sent, and once work accumulates
    /// at a dependency the attempts in flight are held to a limit; either refusal ends the call
    /// at once with `StopReason::Saturated`. `None` turns it off. Defaults to
    /// `Some(OverloadControl::new())`: on (O3).
    pub fn overload_control(mut self, control: Option<OverloadControl>) -> Self {
        self.config.overload_control = control;
        self
    }

    /// The policy, or the first setting that cannot work.
    pub fn build(self) -> Result<RetryPolicy, InvalidPolicy> {
        let c = &self.config;
        if c.max_attempts == 0 {
            return Err(InvalidPolicy::new(
                "max_attempts must be at least 1 (the first attempt always runs)".to_owned(),
            ));
        }
        if c.deadline.is_some_and(|d| d.is_zero()) {
            return Err(InvalidPolicy::new(
                "deadline must be longer than zero; use None for no deadline".to_owned(),
            ));
        }
        if c.attempt_timeout.is_some_and(|d| d.is_zero()) {
            return Err(InvalidPolicy::new(
                "attempt_timeout must be longer than zero; use None for no timeout".to_owned(),
            ));
        }
        if c.ambient_criticality && (c.max_attempts == 1 || c.budget == RetryBudget::None) {
            return Err(InvalidPolicy::new(
                "ambient_criticality only decides when a budget refuses a retry: it needs \
                 max_attempts above 1 and a budget"
                    .to_owned(),
            ));
        }
        if let Some(hedge) = &c.hedge {
            hedge.validate()?;
            if c.max_attempts == 1 {
                return Err(InvalidPolicy::new(
                    "hedge needs max_attempts above 1: a hedge is a second attempt".to_owned(),
                ));
            }
            if c.criticality == Criticality::Sheddable && !c.ambient_criticality {
                return Err(InvalidPolicy::new(
                    "hedge on a Sheddable policy never sends one: Sheddable calls are never \
                     hedged (HG2)"
                        .to_owned(),
                ));
            }
        }
        c.backoff.validate()?;
        c.budget.validate()?;
        if let Some(control) = &c.overload_control {
            control
                .validate()
                .map_err(|error| InvalidPolicy::new(error.to_string()))?;
        }
        if let Some(ceiling) = &c.attempt_ceiling {
            ceiling.validate()?;
        }
        Ok(RetryPolicy::from_config(
            self.config,
            self.previous.as_ref(),
        ))
    }
}

impl std::fmt::Debug for RetryPolicyBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicyBuilder")
            .field("name", &self.config.name)
            .field("max_attempts", &self.config.max_attempts)
            .finish_non_exhaustive()
    }
}
