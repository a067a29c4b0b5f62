//! A service's gauges of its fleet's retries (F2): taken from the global meter provider
//! when its layer is built.

use std::sync::{Arc, Weak};

use opentelemetry::global;
use opentelemetry::metrics::{AsyncInstrument, ObservableGauge};

use super::{FLEET_ACCEPTED, FLEET_ALLOWANCE, FLEET_RETRIES};
use crate::clock;
use crate::fleet::{Advice, RetryShare};

/// The gauges of a service's [`RetryShare`] (F2): the share of retries it sees among the
/// first attempts reaching it, the share it accepts and the allowance it advises, observed at
/// every collection while this value lives. Observes nothing once the share is gone.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Instant;
/// use nresilience_core::fleet::RetryShare;
/// use nresilience_core::telemetry::FleetGauges;
///
/// let share = Arc::new(RetryShare::new(0.1, Instant::now()).expect("a share"));
/// let gauges = FleetGauges::new(&share); // keep it beside the share
/// # drop(gauges);
/// ```
#[must_use = "the gauges are observed only while this value lives"]
pub struct FleetGauges {
    _gauges: [ObservableGauge<f64>; 3],
}

impl FleetGauges {
    /// Gauges of `share`, [`FLEET_RETRIES`], [`FLEET_ACCEPTED`] and [`FLEET_ALLOWANCE`].
    pub fn new(share: &Arc<RetryShare>) -> Self {
        let gauge = |name: &'static str, description: &'static str, read: fn(&Advice) -> f64| {
            let share = Arc::downgrade(share);
            global::meter("nresilience")
                .f64_observable_gauge(name)
                .with_description(description)
                .with_callback(move |gauge: &dyn AsyncInstrument<f64>| {
                    if let Some(share) = Weak::upgrade(&share) {
                        gauge.observe(read(&share.advice(clock::now())), &[]);
                    }
                })
                .build()
        };
        Self {
            _gauges: [
                gauge(
                    FLEET_RETRIES,
                    "retries per first attempt reaching the service, as last read (F2)",
                    Advice::retries,
                ),
                gauge(
                    FLEET_ACCEPTED,
                    "retries per first attempt the service accepts (F2)",
                    Advice::accepted,
                ),
                gauge(
                    FLEET_ALLOWANCE,
                    "share of their own retry budgets the service advises its callers (F2)",
                    |advice| advice.allowance().share(),
                ),
            ],
        }
    }
}

impl std::fmt::Debug for FleetGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetGauges").finish_non_exhaustive()
    }
}
