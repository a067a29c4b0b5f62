//! Where a load tracker records its limit (O4, F4): the event that moves the limit records
//! it, so no attempt has to ask whether it moved.

use std::fmt;
use std::sync::Arc;

use opentelemetry::metrics::Gauge;
use opentelemetry::{KeyValue, StringValue};

use super::DEPENDENCY;

/// A limit's gauge and the tags of its series.
#[derive(Clone)]
pub(crate) struct LimitGauge {
    gauge: Gauge<u64>,
    tags: Arc<[KeyValue]>,
}

impl LimitGauge {
    pub(crate) fn new(gauge: Gauge<u64>, tags: Vec<KeyValue>) -> Self {
        Self {
            gauge,
            tags: tags.into(),
        }
    }

    /// The same gauge, for the series of the dependency `key` (H5).
    pub(crate) fn of_dependency(&self, key: &Arc<str>) -> Self {
        let mut tags = self.tags.to_vec();
        tags.push(KeyValue::new(
            DEPENDENCY,
            StringValue::from(Arc::clone(key)),
        ));
        Self::new(self.gauge.clone(), tags)
    }

    pub(crate) fn record(&self, limit: u32) {
        self.gauge.record(u64::from(limit), &self.tags);
    }
}

impl fmt::Debug for LimitGauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitGauge")
            .field("tags", &self.tags)
            .finish_non_exhaustive()
    }
}
