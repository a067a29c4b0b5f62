//! A policy made from its settings, keeping a previous policy's state (its buckets, its load
//! trackers, its latency estimate) where the settings that state depends on are unchanged.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::StdRng;

use super::{Buckets, Config, Inner, RetryPolicy, RetryPolicyBuilder};
use crate::budget::{per_call, RetryBudget, TokenBucket};
use crate::clock;
use crate::executor::latency::estimates::Estimates;
use crate::executor::latency::latest::Latest;
use crate::telemetry::Instruments;

impl RetryPolicy {
    /// A builder holding this policy's settings, whose `build` keeps this policy's state: a
    /// configuration reload that leaves the budget alone keeps its bucket and its traffic
    /// history, and one that leaves the ceiling and measured base alone keeps the
    /// latency estimate.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Instant;
    /// use nresilience_core::RetryPolicy;
    ///
    /// let now = Instant::now();
    /// let policy = RetryPolicy::builder().name("payments").build()?;
    /// let reloaded = policy.reconfigure().max_attempts(5).build()?;
    /// assert!(Arc::ptr_eq(policy.bucket(now).unwrap(), reloaded.bucket(now).unwrap()));
    /// # Ok::<(), nresilience_core::InvalidPolicy>(())
    /// ```
    pub fn reconfigure(&self) -> RetryPolicyBuilder {
        RetryPolicyBuilder::from_policy(self, true)
    }

    /// A builder holding this policy's settings and none of its state: its `build` makes a
    /// policy with new buckets and an empty latency estimate, as if built from the same
    /// settings anew (two policies from one preset do not share a bucket).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Instant;
    /// use nresilience_core::RetryPolicy;
    ///
    /// let now = Instant::now();
    /// let preset = RetryPolicy::builder().name("inventory").build()?;
    /// let other = preset.to_builder().build()?;
    /// assert_eq!(preset, other); // the same settings ...
    /// assert!(!Arc::ptr_eq(preset.bucket(now).unwrap(), other.bucket(now).unwrap())); // ... its own bucket
    /// # Ok::<(), nresilience_core::InvalidPolicy>(())
    /// ```
    pub fn to_builder(&self) -> RetryPolicyBuilder {
        RetryPolicyBuilder::from_policy(self, false)
    }

    pub(super) fn from_config(config: Config, previous: Option<&Self>) -> Self {
        let mut buckets = Arc::default();
        let mut trackers = Arc::default();
        let mut kept_estimates = None;
        let mut own_budget = matches!(config.budget, RetryBudget::Automatic(_));
        if let Some(previous) = previous.map(|p| &*p.inner) {
            if previous.config.budget == config.budget {
                buckets = Arc::clone(&previous.buckets);
                own_budget = false;
            }
            if previous.config.overload_control == config.overload_control {
                trackers = Arc::clone(&previous.trackers);
            }
            if previous.config.attempt_ceiling == config.attempt_ceiling
                && previous.config.backoff.measured_base() == config.backoff.measured_base()
                && previous.config.hedge.and_then(|h| h.quantile())
                    == config.hedge.and_then(|h| h.quantile())
            {
                kept_estimates = previous.estimates.clone();
            }
        }
        if own_budget {
            per_call::note_build(clock::now());
        }
        let estimates = kept_estimates.or_else(|| {
            Estimates::new(
                config.attempt_ceiling,
                config.backoff.measured_base(),
                config.hedge.and_then(|h| h.quantile()),
            )
            .map(|e| Arc::new(Latest::new(e)))
        });
        let rng = config
            .jitter_seed
            .map(|seed| Mutex::new(<StdRng as rand::SeedableRng>::seed_from_u64(seed)));
        let policy_tag = match &config.name {
            Some(Cow::Borrowed(name)) => opentelemetry::StringValue::from(*name),
            Some(Cow::Owned(name)) => {
                opentelemetry::StringValue::from(Arc::<str>::from(name.as_str()))
            }
            None => opentelemetry::StringValue::from("default"),
        };
        let utilization = {
            let (buckets, budget) = (Arc::downgrade(&buckets), config.budget.clone());
            move |observe: &mut dyn FnMut(Option<&str>, &TokenBucket)| {
                if let Some(buckets) = buckets.upgrade() {
                    buckets.each(&budget, clock::now(), observe);
                }
            }
        };
        Self {
            inner: Arc::new(Inner {
                config,
                buckets,
                estimates,
                rng,
                instruments: Instruments::new(policy_tag, Arc::new(utilization)),
                trackers,
            }),
        }
    }
}

impl Buckets {
    /// Each bucket at `now`, for the budget's gauges (B11, F3): the policy's own (made full
    /// now if no call has made it yet, as the first call would make it), then every keyed
    /// one.
    fn each(
        &self,
        budget: &RetryBudget,
        now: Instant,
        observe: &mut dyn FnMut(Option<&str>, &TokenBucket),
    ) {
        let own = self
            .own
            .get_or_init(|| budget.make_bucket(now).ok().flatten());
        if let Some(bucket) = own {
            observe(None, bucket);
        }
        if let Some(Some(keyed)) = self.keyed.get() {
            keyed.each(&mut |key, bucket| observe(Some(key), bucket));
        }
    }
}
