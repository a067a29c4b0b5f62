//! The budget's gauge, observed when the reader collects rather than recorded by calls: a
//! healthy policy retries nothing, and its series must exist all the same (B11).

use opentelemetry::metrics::{AsyncInstrument, Meter, ObservableGauge};
use opentelemetry::{KeyValue, StringValue};

use super::{BUDGET_UTILIZATION, DEPENDENCY, POLICY};

/// Reads every bucket of a policy at a collection: `observe(None, u)` for the policy's own
/// bucket, `observe(Some(key), u)` for a keyed one. Reads nothing once the policy is gone.
pub(crate) type Utilization = dyn Fn(&mut dyn FnMut(Option<&str>, f64)) + Send + Sync;

/// The gauge [`BUDGET_UTILIZATION`] of the policy tagged `policy`.
pub(super) fn gauge(
    meter: &Meter,
    policy: StringValue,
    utilization: Box<Utilization>,
) -> ObservableGauge<f64> {
    meter
        .f64_observable_gauge(BUDGET_UTILIZATION)
        .with_description("share of the retry budget spent, 0 full to 1 empty")
        .with_callback(move |gauge: &dyn AsyncInstrument<f64>| {
            let policy = KeyValue::new(POLICY, policy.clone());
            utilization(&mut |key, value| match key {
                None => gauge.observe(value, std::slice::from_ref(&policy)),
                Some(key) => {
                    let key = KeyValue::new(DEPENDENCY, key.to_owned());
                    gauge.observe(value, &[policy.clone(), key]);
                }
            });
        })
        .build()
}
