//! The budget's gauges, observed when the reader collects rather than recorded by calls: a
//! healthy policy retries nothing, and its series must exist all the same (B11).

use std::sync::Arc;
use std::time::Instant;

use opentelemetry::metrics::{AsyncInstrument, Meter, ObservableGauge};
use opentelemetry::{KeyValue, StringValue};

use super::{BUDGET_ALLOWANCE, BUDGET_UTILIZATION, DEPENDENCY, POLICY};
use crate::budget::TokenBucket;
use crate::clock;

/// Hands every bucket of a policy to its observer at a collection: `observe(None, b)` for the
/// policy's own bucket, `observe(Some(key), b)` for a keyed one. Hands none once the policy
/// is gone.
pub(crate) type Buckets = dyn Fn(&mut dyn FnMut(Option<&str>, &TokenBucket)) + Send + Sync;

/// The gauges [`BUDGET_UTILIZATION`] and [`BUDGET_ALLOWANCE`] of the policy tagged `policy`.
pub(super) fn gauges(
    meter: &Meter,
    policy: &StringValue,
    buckets: Arc<Buckets>,
) -> [ObservableGauge<f64>; 2] {
    let utilization = gauge(
        meter,
        BUDGET_UTILIZATION,
        "share of the retry budget spent, 0 full to 1 empty",
        policy.clone(),
        Arc::clone(&buckets),
        |bucket, now| bucket.utilization(now),
    );
    let allowance = gauge(
        meter,
        BUDGET_ALLOWANCE,
        "share of its own retry budget the dependency advises the client to use (F3)",
        policy.clone(),
        buckets,
        |bucket, now| bucket.allowance(now).share(),
    );
    [utilization, allowance]
}

fn gauge(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
    policy: StringValue,
    buckets: Arc<Buckets>,
    read: fn(&TokenBucket, Instant) -> f64,
) -> ObservableGauge<f64> {
    meter
        .f64_observable_gauge(name)
        .with_description(description)
        .with_callback(move |gauge: &dyn AsyncInstrument<f64>| {
            let policy = KeyValue::new(POLICY, policy.clone());
            let now = clock::now();
            buckets(&mut |key, bucket| match key {
                None => gauge.observe(read(bucket, now), std::slice::from_ref(&policy)),
                Some(key) => {
                    let key = KeyValue::new(DEPENDENCY, key.to_owned());
                    gauge.observe(read(bucket, now), &[policy.clone(), key]);
                }
            });
        })
        .build()
}
