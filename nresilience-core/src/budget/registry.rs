use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use super::{BudgetOptions, InvalidBudget, TokenBucket};

type Registry = Mutex<HashMap<String, Arc<TokenBucket>>>;

fn registry() -> &'static Registry {
    static SHARED: OnceLock<Registry> = OnceLock::new();
    SHARED.get_or_init(Registry::default)
}

/// The process-wide bucket called `name`, created with `options` on first use.
///
/// The first caller's options win: later callers get the same bucket whatever options they
/// pass. Invalid options from the first caller are an error and register nothing.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::time::Instant;
/// use nresilience_core::budget::shared_bucket;
/// use nresilience_core::BudgetOptions;
///
/// let now = Instant::now();
/// let first = shared_bucket("doc-payments", BudgetOptions::default().capacity(5.0), now)?;
/// let second = shared_bucket("doc-payments", BudgetOptions::default(), now)?;
/// assert!(Arc::ptr_eq(&first, &second));
/// assert_eq!(second.capacity(), 5.0);
/// # Ok::<(), nresilience_core::InvalidBudget>(())
/// ```
pub fn shared_bucket(
    name: &str,
    options: BudgetOptions,
    now: Instant,
) -> Result<Arc<TokenBucket>, InvalidBudget> {
    let mut buckets = registry().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(bucket) = buckets.get(name) {
        return Ok(Arc::clone(bucket));
    }
    let bucket = Arc::new(TokenBucket::new(options, now)?);
    buckets.insert(name.to_owned(), Arc::clone(&bucket));
    Ok(bucket)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::RetryBudget;

    #[test]
    fn b10_same_name_same_bucket_first_options_win() {
        let now = Instant::now();
        let a =
            shared_bucket("b10-same-name", BudgetOptions::default().capacity(4.0), now).unwrap();
        let b =
            shared_bucket("b10-same-name", BudgetOptions::default().capacity(9.0), now).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(b.capacity(), 4.0);
        let other = shared_bucket("b10-other-name", BudgetOptions::default(), now).unwrap();
        assert!(!Arc::ptr_eq(&a, &other));
    }

    #[test]
    fn b10_invalid_first_options_register_nothing() {
        let now = Instant::now();
        let bad = BudgetOptions::default().fraction(2.0);
        assert!(shared_bucket("b10-invalid-first", bad, now).is_err());
        let good = shared_bucket("b10-invalid-first", BudgetOptions::default(), now).unwrap();
        assert_eq!(good.capacity(), 30.0);
    }

    #[test]
    fn b10_automatic_buckets_are_private_shared_are_not() {
        let now = Instant::now();
        let auto = RetryBudget::automatic();
        let a = auto.make_bucket(now).unwrap().unwrap();
        let b = auto.make_bucket(now).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&a, &b));

        let shared = RetryBudget::shared("b10-shared-placement");
        let c = shared.make_bucket(now).unwrap().unwrap();
        let d = shared.make_bucket(now).unwrap().unwrap();
        assert!(Arc::ptr_eq(&c, &d));

        assert!(RetryBudget::None.make_bucket(now).unwrap().is_none());
        assert_eq!(RetryBudget::default(), RetryBudget::automatic());
    }

    #[test]
    fn b10_with_options_keeps_placement() {
        let options = BudgetOptions::default().capacity(2.0);
        assert_eq!(RetryBudget::None.with_options(options), RetryBudget::None);
        assert_eq!(
            RetryBudget::shared("x").with_options(options).options(),
            Some(options)
        );
        assert!(RetryBudget::automatic()
            .with_options(BudgetOptions::default().fraction(0.0))
            .validate()
            .is_err());
    }
}
