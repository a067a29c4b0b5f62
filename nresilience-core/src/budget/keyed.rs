use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::{BudgetOptions, InvalidBudget, TokenBucket};
use crate::keyed::KeyTable;

/// How many keys a policy's [`KeyedBuckets`] tracks.
pub const DEFAULT_MAX_KEYS: usize = 1024;

/// A bucket per key, for an `Automatic` budget that funds each dependency from its own
/// successes: an HTTP client keys its calls by host, so a storm against one host cannot
/// spend the retries of another.
///
/// Each key gets a bucket of its own, created full from the options the first time it is
/// asked for. Keys are compared as given (byte for byte).
///
/// # Bounded
///
/// At most `max_keys` buckets are tracked, so a client that talks to an unbounded set of
/// hosts does not grow without bound. When a new key arrives and the table is full, the key
/// **least recently used** (asked for) is forgotten: the keys a client uses steadily keep their
/// buckets, however many others come and go. A forgotten key that comes back starts with a
/// new, full bucket; callers still holding the old one keep using it until they drop it.
/// Choose `max_keys` above the number of keys in use at once.
///
/// Finding a known key is one lock and one hash lookup, with no allocation. Forgetting a key
/// scans the table once (only when a new key arrives at a full table).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::time::Instant;
/// use nresilience_core::budget::KeyedBuckets;
/// use nresilience_core::{BudgetOptions, Criticality};
///
/// let now = Instant::now();
/// let options = BudgetOptions::default().minimum_per_second(0.0); // capacity 1
/// let buckets = KeyedBuckets::new(options, 1024)?;
///
/// let failing = buckets.bucket_for("db.internal:5432", now);
/// let healthy = buckets.bucket_for("api.example.com", now);
/// assert!(failing.try_withdraw(now, Criticality::Normal));
/// assert!(!failing.try_withdraw(now, Criticality::Normal)); // this key's budget is spent ...
/// assert!(healthy.try_withdraw(now, Criticality::Normal)); // ... the other key's is not
///
/// assert!(Arc::ptr_eq(&healthy, &buckets.bucket_for("api.example.com", now)));
/// assert_eq!(buckets.len(), 2);
/// # Ok::<(), nresilience_core::InvalidBudget>(())
/// ```
pub struct KeyedBuckets {
    options: BudgetOptions,
    max_keys: usize,
    keys: Mutex<KeyTable<TokenBucket>>,
}

impl KeyedBuckets {
    /// An empty table of buckets made from `options`, tracking at most `max_keys` keys (a `0`
    /// is read as `1`), or the reason the options cannot work.
    ///
    /// The options are checked here, so [`bucket_for`](Self::bucket_for) cannot fail.
    pub fn new(options: BudgetOptions, max_keys: usize) -> Result<Self, InvalidBudget> {
        options.validate()?;
        Ok(Self {
            options,
            max_keys: max_keys.max(1),
            keys: Mutex::new(KeyTable::default()),
        })
    }

    /// The bucket of `key`, created full at `now` on its first use.
    pub fn bucket_for(&self, key: &str, now: Instant) -> Arc<TokenBucket> {
        let options = self.options;
        lock(&self.keys).get_or_make(key, self.max_keys, || {
            TokenBucket::new_unchecked(options, now)
        })
    }

    /// How many keys have a bucket: at most [`max_keys`](Self::max_keys).
    pub fn len(&self) -> usize {
        lock(&self.keys).len()
    }

    /// Whether no key has a bucket yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each key with its bucket's [`utilization`](TokenBucket::utilization) at `now`, in no
    /// particular order.
    ///
    /// ```
    /// # use std::time::Instant;
    /// # use nresilience_core::budget::KeyedBuckets;
    /// # use nresilience_core::{BudgetOptions, Criticality};
    /// let now = Instant::now();
    /// let options = BudgetOptions::default().minimum_per_second(0.0).capacity(2.0);
    /// let buckets = KeyedBuckets::new(options, 1024)?;
    /// assert!(buckets.bucket_for("db.internal", now).try_withdraw(now, Criticality::Normal));
    /// assert_eq!(buckets.utilization(now), [("db.internal".to_owned(), 0.5)]);
    /// # Ok::<(), nresilience_core::InvalidBudget>(())
    /// ```
    pub fn utilization(&self, now: Instant) -> Vec<(String, f64)> {
        lock(&self.keys)
            .iter()
            .map(|(key, bucket)| (key.to_owned(), bucket.utilization(now)))
            .collect()
    }

    /// Hands every bucket, with its key, to `visit`, under the table's lock: what the
    /// budget's gauges read at a collection.
    pub(crate) fn each(&self, visit: &mut dyn FnMut(&str, &TokenBucket)) {
        for (key, bucket) in lock(&self.keys).iter() {
            visit(key, bucket);
        }
    }

    /// The most keys tracked at once.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The options every bucket is made from.
    pub fn options(&self) -> BudgetOptions {
        self.options
    }
}

impl fmt::Debug for KeyedBuckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuckets")
            .field("options", &self.options)
            .field("keys", &self.len())
            .field("max_keys", &self.max_keys)
            .finish()
    }
}

fn lock(keys: &Mutex<KeyTable<TokenBucket>>) -> MutexGuard<'_, KeyTable<TokenBucket>> {
    // Nothing under the lock can leave the table inconsistent if it panics: a poisoned lock
    // still guards a usable table.
    keys.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criticality::Criticality;

    fn no_floor() -> BudgetOptions {
        BudgetOptions::default().minimum_per_second(0.0)
    }

    #[test]
    fn b10_each_key_has_its_own_full_bucket() {
        let now = Instant::now();
        let buckets = KeyedBuckets::new(no_floor(), 8).unwrap();
        let a = buckets.bucket_for("a", now);
        assert!(a.try_withdraw(now, Criticality::Normal));
        assert!(!a.try_withdraw(now, Criticality::Normal));
        let b = buckets.bucket_for("b", now);
        assert!(b.try_withdraw(now, Criticality::Normal), "b starts full");
        assert!(Arc::ptr_eq(&a, &buckets.bucket_for("a", now)));
    }

    #[test]
    fn b10_a_full_table_forgets_the_least_recently_used_key() {
        let now = Instant::now();
        let buckets = KeyedBuckets::new(no_floor(), 2).unwrap();
        let a = buckets.bucket_for("a", now);
        let b = buckets.bucket_for("b", now);
        // "a" used again: "b" is now the least recently used.
        assert!(Arc::ptr_eq(&a, &buckets.bucket_for("a", now)));
        buckets.bucket_for("c", now);
        assert_eq!(buckets.len(), 2);
        assert!(Arc::ptr_eq(&a, &buckets.bucket_for("a", now)), "kept");
        assert!(
            !Arc::ptr_eq(&b, &buckets.bucket_for("b", now)),
            "forgotten, new"
        );
    }

    #[test]
    fn b10_invalid_options_are_refused_and_zero_keys_is_one() {
        assert!(KeyedBuckets::new(BudgetOptions::default().fraction(2.0), 8).is_err());
        let buckets = KeyedBuckets::new(no_floor(), 0).unwrap();
        assert_eq!(buckets.max_keys(), 1);
        assert!(buckets.is_empty());
    }
}
