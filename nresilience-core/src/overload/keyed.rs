//! A [`LoadTracker`] per dependency, bounded as the keyed budgets are.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::{LoadTracker, OverloadControl};
use crate::keyed::KeyTable;
use crate::telemetry::LimitGauge;

/// A [`LoadTracker`] per key (an HTTP client keys by host, as its budgets are keyed, H5): the
/// load on one dependency says nothing about another's.
///
/// At most `max_keys` are tracked; a new key at a full table forgets the least recently used
/// one, which starts afresh if it comes back.
pub(crate) struct KeyedTrackers {
    control: OverloadControl,
    max_keys: usize,
    keys: Mutex<KeyTable<LoadTracker>>,
    /// Where each tracker records its limit, in the series of its key.
    gauge: Option<LimitGauge>,
}

impl KeyedTrackers {
    /// An empty table of trackers made from `control` (valid: a policy checks it), tracking at
    /// most `max_keys` keys (a `0` is read as `1`).
    pub(crate) fn new(control: OverloadControl, max_keys: usize) -> Self {
        Self {
            control,
            max_keys: max_keys.max(1),
            keys: Mutex::new(KeyTable::default()),
            gauge: None,
        }
    }

    /// The table, each of its trackers recording its limit in `gauge`, in its key's series
    /// (O4).
    pub(crate) fn reporting_to(mut self, gauge: LimitGauge) -> Self {
        self.gauge = Some(gauge);
        self
    }

    /// The tracker of `key`, made at `now` on its first use.
    pub(crate) fn tracker_for(&self, key: &str, now: Instant) -> Arc<LoadTracker> {
        let control = self.control;
        self.lock().get_or_make(key, self.max_keys, || {
            LoadTracker::keyed(control, key, self.gauge.as_ref(), now)
        })
    }

    /// How many keys have a tracker: at most `max_keys`.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, KeyTable<LoadTracker>> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for KeyedTrackers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedTrackers")
            .field("control", &self.control)
            .field("keys", &self.len())
            .field("max_keys", &self.max_keys)
            .finish()
    }
}
