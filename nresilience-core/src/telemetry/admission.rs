//! A service admission's instruments (F4): taken from the global meter provider when the
//! admission is built.

use opentelemetry::metrics::{Counter, Gauge};
use opentelemetry::{global, KeyValue};

use super::{LimitGauge, ADMISSION_LIMIT, ADMISSION_REFUSALS, ATTEMPT_KIND, CAUSE, CRITICALITY};
use crate::criticality::Criticality;
use crate::fleet::Refusal;

/// A [`ServerAdmission`](crate::fleet::ServerAdmission)'s instruments (F4): its refusals,
/// counted by cause, by whether the request was a retry and by its criticality, and its limit.
pub(crate) struct AdmissionInstruments {
    refusals: Counter<u64>,
    limit: Gauge<u64>,
}

impl AdmissionInstruments {
    pub(crate) fn new() -> Self {
        let meter = global::meter("nresilience");
        Self {
            refusals: meter
                .u64_counter(ADMISSION_REFUSALS)
                .with_description("requests the service refused over its capacity (F4)")
                .build(),
            limit: meter
                .u64_gauge(ADMISSION_LIMIT)
                .with_description("the service's limit on requests in its handlers (F4)")
                .build(),
        }
    }

    /// A request refused: not on the path of an admitted one.
    #[cold]
    pub(crate) fn refused(&self, cause: Refusal, retry: bool, criticality: Criticality) {
        let kind = if retry { "retry" } else { "first" };
        self.refusals.add(
            1,
            &[
                KeyValue::new(CAUSE, cause.as_str()),
                KeyValue::new(ATTEMPT_KIND, kind),
                KeyValue::new(CRITICALITY, criticality.as_str()),
            ],
        );
    }

    /// Where the admission's tracker records its limit.
    pub(crate) fn limit(&self) -> LimitGauge {
        LimitGauge::new(self.limit.clone(), Vec::new())
    }
}
