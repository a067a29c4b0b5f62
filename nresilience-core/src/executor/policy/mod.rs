//! The retry policy: what to retry, how often, how fast and within which budget.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use nresilience_core::{Backoff, RetryPolicy, StopReason};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let policy = RetryPolicy::builder()
//!     .name("inventory")
//!     .backoff(Backoff::constant(Duration::from_millis(10)))
//!     .build()
//!     .expect("valid policy");
//!
//! let mut failures = 2;
//! let value = policy
//!     .execute(|_attempt| {
//!         let fail = failures > 0;
//!         failures -= 1;
//!         async move { if fail { Err("reset") } else { Ok(42) } }
//!     })
//!     .await
//!     .expect("the third attempt succeeds");
//! assert_eq!(value, 42);
//!
//! let error = policy.execute(|_| async { Err::<(), _>("down") }).await.unwrap_err();
//! assert_eq!(error.reason(), StopReason::AttemptsExhausted);
//! assert_eq!(error.attempts(), 3); // the default: 3 attempts in all
//! # }
//! ```

mod assembly;
mod builder;

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;

pub(crate) use crate::executor::latency::estimates::Estimate;
use crate::executor::latency::latest::Latest;
pub use builder::RetryPolicyBuilder;

use crate::backoff::{Backoff, NextAttempt};
use crate::budget::{KeyedBuckets, RetryBudget, TokenBucket, DEFAULT_MAX_KEYS};
use crate::criticality::Criticality;
use crate::executor::hedge::Hedge;
use crate::executor::latency::ceiling::AttemptCeiling;
use crate::guards::breaker::CircuitBreaker;
use crate::guards::limiter::RateLimiter;
use crate::overload::{KeyedTrackers, LoadTracker, OverloadControl};
use crate::telemetry::Instruments;

/// A retry policy. Cheap to clone; clones share the policy's buckets and latency estimate.
///
/// Two policies built separately never share an `Automatic` bucket, even from the same
/// settings. Equality compares the settings only: a bucket created lazily by the
/// first call does not change it.
#[derive(Clone)]
pub struct RetryPolicy {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    /// Shared with policies reconfigured from this one while their budget is the same.
    buckets: Arc<Buckets>,
    estimates: Option<Arc<Latest>>,
    rng: Option<Mutex<StdRng>>,
    instruments: Instruments,
    /// Shared with policies reconfigured from this one while their overload control is the
    /// same.
    trackers: Arc<Trackers>,
}

/// The load on the policy's dependencies, made on first use (O1, O2).
#[derive(Default)]
struct Trackers {
    /// Calls that name no dependency.
    own: OnceLock<Arc<LoadTracker>>,
    /// One per key, for keyed calls.
    keyed: OnceLock<KeyedTrackers>,
}

/// Where a policy's retries are funded from, made on first use so that a bucket starts
/// full at the `now` of the call that first needs it.
#[derive(Default)]
struct Buckets {
    /// The policy's own bucket: private for `Automatic`, the named one for `Shared`.
    own: OnceLock<Option<Arc<TokenBucket>>>,
    /// One per key, for keyed calls under an `Automatic` budget.
    keyed: OnceLock<Option<KeyedBuckets>>,
}

#[derive(Clone, PartialEq)]
struct Config {
    name: Option<Cow<'static, str>>,
    max_attempts: u32,
    deadline: Option<Duration>,
    inherit_deadline: bool,
    attempt_timeout: Option<Duration>,
    attempt_ceiling: Option<AttemptCeiling>,
    backoff: Backoff,
    budget: RetryBudget,
    criticality: Criticality,
    ambient_criticality: bool,
    rejection_pause: Duration,
    rate_limiter: Option<Shared<RateLimiter>>,
    circuit_breaker: Option<Shared<CircuitBreaker>>,
    jitter_seed: Option<u64>,
    hedge: Option<Hedge>,
    overload_control: Option<OverloadControl>,
}

/// A component shared by reference: equal when it is the same instance.
struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl RetryPolicy {
    /// A builder starting from the defaults: 3 attempts, a 30 s deadline, a 10 s attempt
    /// timeout, the measured attempt ceiling, `Backoff::default()`, an automatic budget.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::new()
    }

    /// The policy's name, used on spans and as the `nresilience.policy` tag.
    #[must_use]
    pub fn name(&self) -> &str {
        self.inner.config.name.as_deref().unwrap_or("default")
    }

    /// The most attempts a call makes, the first included.
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.inner.config.max_attempts
    }

    /// Whether a call under this policy may retry at all.
    #[must_use]
    pub fn may_retry(&self) -> bool {
        self.inner.config.max_attempts > 1
    }

    /// The overall deadline of a call, if any.
    #[must_use]
    pub fn deadline(&self) -> Option<Duration> {
        self.inner.config.deadline
    }

    /// Whether a call inherits the deadline of the request being served.
    #[must_use]
    pub fn inherits_deadline(&self) -> bool {
        self.inner.config.inherit_deadline
    }

    /// The timeout of one attempt, if any (before the measured ceiling tightens it).
    #[must_use]
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.inner.config.attempt_timeout
    }

    /// The measured attempt ceiling, if on.
    #[must_use]
    pub fn attempt_ceiling(&self) -> Option<AttemptCeiling> {
        self.inner.config.attempt_ceiling
    }

    /// The backoff curve.
    #[must_use]
    pub fn backoff(&self) -> &Backoff {
        &self.inner.config.backoff
    }

    /// Where the policy's bucket lives.
    #[must_use]
    pub fn budget(&self) -> &RetryBudget {
        &self.inner.config.budget
    }

    /// The criticality of the policy's calls.
    #[must_use]
    pub fn criticality(&self) -> Criticality {
        self.inner.config.criticality
    }

    /// Whether a call takes its criticality from the request being served.
    #[must_use]
    pub fn ambient_criticality(&self) -> bool {
        self.inner.config.ambient_criticality
    }

    /// The policy's own bucket, created full at `now` on first use; `None` when the budget
    /// is off.
    ///
    /// For `Automatic` this bucket is private to this policy and its clones; for `Shared` it
    /// is the process-wide bucket of that name.
    #[inline]
    #[must_use]
    pub fn bucket(&self, now: Instant) -> Option<&Arc<TokenBucket>> {
        self.inner
            .buckets
            .own
            // The options were validated when the policy was built: never an error here.
            .get_or_init(|| self.inner.config.budget.make_bucket(now).ok().flatten())
            .as_ref()
    }

    /// The bucket that funds the retries of calls keyed `key` (a host, say): with an
    /// `Automatic` budget, `key`'s own, from a table of at most 1,024 keys shared by this
    /// policy's clones (the least recently used key is forgotten first); otherwise the
    /// policy's [`bucket`](Self::bucket).
    #[must_use]
    pub fn keyed_bucket(&self, key: &str, now: Instant) -> Option<Arc<TokenBucket>> {
        let keyed = self
            .inner
            .buckets
            .keyed
            .get_or_init(|| match &self.inner.config.budget {
                RetryBudget::Automatic(options) => {
                    KeyedBuckets::new(*options, DEFAULT_MAX_KEYS).ok()
                }
                _ => None,
            });
        match keyed {
            Some(keyed) => Some(keyed.bucket_for(key, now)),
            None => self.bucket(now).cloned(),
        }
    }

    pub(crate) fn rejection_pause(&self) -> Duration {
        self.inner.config.rejection_pause
    }

    /// This process's rate limiter in front of every attempt, if any.
    #[must_use]
    pub fn rate_limiter(&self) -> Option<&RateLimiter> {
        self.inner.config.rate_limiter.as_ref().map(|s| &*s.0)
    }

    /// The circuit breaker in front of every attempt, if any.
    #[must_use]
    pub fn circuit_breaker(&self) -> Option<&CircuitBreaker> {
        self.inner.config.circuit_breaker.as_ref().map(|s| &*s.0)
    }

    /// Overload control for the policy's dependencies, if on (O1, O2).
    #[must_use]
    pub fn overload_control(&self) -> Option<&OverloadControl> {
        self.inner.config.overload_control.as_ref()
    }

    /// The load tracker of the dependency keyed `key` (a host, say), from a table of at most
    /// 1,024 keys shared by this policy's clones, or the policy's own when `key` is `None`;
    /// made at `now` on first use. `None` when overload control is off.
    #[inline]
    pub(crate) fn load_tracker(&self, key: Option<&str>, now: Instant) -> Option<Arc<LoadTracker>> {
        // Every call asks: the policy's own tracker, once made, is one load away.
        let control = self.inner.config.overload_control.as_ref()?;
        match (key, self.inner.trackers.own.get()) {
            (None, Some(own)) => Some(Arc::clone(own)),
            _ => Some(self.tracker_of(control, key, now)),
        }
    }

    #[cold]
    fn tracker_of(
        &self,
        control: &OverloadControl,
        key: Option<&str>,
        now: Instant,
    ) -> Arc<LoadTracker> {
        let control = *control;
        let trackers = &self.inner.trackers;
        match key {
            Some(key) => trackers
                .keyed
                .get_or_init(|| {
                    KeyedTrackers::new(control, DEFAULT_MAX_KEYS)
                        .reporting_to(self.inner.instruments.overload_limit())
                })
                .tracker_for(key, now),
            None => Arc::clone(trackers.own.get_or_init(|| {
                let gauge = self.inner.instruments.overload_limit();
                Arc::new(LoadTracker::new(control, now).reporting_to(gauge))
            })),
        }
    }

    pub(crate) fn instruments(&self) -> &Instruments {
        &self.inner.instruments
    }

    /// When a call under this policy hedges (HG1), if it does.
    #[must_use]
    pub fn hedge(&self) -> Option<Hedge> {
        self.inner.config.hedge
    }

    /// Reads the latency estimate at `now`, as every attempt does; the first read starts its
    /// refresh slices. For a driver on a clock of its own — the storm simulator's paused one —
    /// so that the slices count from the instant its simulated processes are built, not from
    /// their first attempt.
    pub fn start_estimates(&self, now: Instant) {
        self.estimate(now);
    }

    /// The latency estimate as of `now`, refitted when its refresh interval has passed. The
    /// first `now` it sees starts its refresh slices.
    pub(crate) fn estimate(&self, now: Instant) -> Estimate {
        match &self.inner.estimates {
            Some(estimates) => estimates.estimate(now),
            None => Estimate::default(),
        }
    }

    /// Feeds a successful attempt's duration to the ceiling and the measured base (E5, K4).
    pub(crate) fn record_success(&self, duration: Duration, now: Instant) {
        if let Some(estimates) = &self.inner.estimates {
            estimates.estimates().record(duration, now);
        }
    }

    /// Feeds an attempt the measured ceiling cut after `duration` to the ceiling, when it
    /// learns from its cuts (E7).
    pub(crate) fn record_cut(&self, duration: Duration, now: Instant) {
        if let Some(estimates) = &self.inner.estimates {
            estimates.estimates().record_cut(duration, now);
        }
    }

    /// The delay before `next`, from the curve and the measured base.
    pub(crate) fn delay(&self, next: &NextAttempt, measured: Option<Duration>) -> Duration {
        let backoff = &self.inner.config.backoff;
        match &self.inner.rng {
            Some(rng) => backoff.compute_with_base(next, measured, &mut *lock(rng)),
            None => backoff.compute_with_base(next, measured, &mut rand::rng()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PartialEq for RetryPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.inner.config == other.inner.config
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.inner.config;
        f.debug_struct("RetryPolicy")
            .field("name", &self.name())
            .field("max_attempts", &c.max_attempts)
            .field("deadline", &c.deadline)
            .field("attempt_timeout", &c.attempt_timeout)
            .field("attempt_ceiling", &c.attempt_ceiling)
            .field("backoff", &c.backoff)
            .field("budget", &c.budget)
            .field("criticality", &c.criticality)
            .field("rate_limiter", &c.rate_limiter.is_some())
            .field("circuit_breaker", &c.circuit_breaker.is_some())
            .field("hedge", &c.hedge)
            .field("overload_control", &c.overload_control)
            .finish()
    }
}

impl Default for RetryPolicy {
    /// The default policy; see [`RetryPolicy::builder`]. Its budget is its own and its
    /// clones': build it once per dependency and clone it, never per call — a budget built per
    /// call bounds nothing, and more than a hundred built in a second are reported once with a
    /// `tracing` warning and counted in `nresilience.budget.per_call`.
    fn default() -> Self {
        Self::from_config(builder::default_config(), None)
    }
}
