//! The HTTP client's retry budgets: one bucket per host for an `Automatic` budget (SPEC H5).
//!
//! # Why per host
//!
//! A client talks to many dependencies. With one bucket for all of them, a storm against one
//! host spends the tokens that fund retries to every other: a single failing dependency
//! would stop the client from riding out a blip anywhere else. One bucket per host keeps
//! each dependency's retries funded by that dependency's own successes (B10). An explicit
//! budget (`Shared`, `None`) is the caller's decision and is used as given.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use nresilience_client::HostBudgets;
//! use nresilience_core::{BudgetOptions, Criticality, RetryBudget};
//!
//! let now = Instant::now();
//! let budget = RetryBudget::Automatic(BudgetOptions::default().minimum_per_second(0.0));
//! let budgets = HostBudgets::new(budget, 1024)?; // capacity 1: one banked retry per host
//!
//! let failing = budgets.bucket_for("db.internal:5432", now).expect("the budget is on");
//! let healthy = budgets.bucket_for("api.example.com", now).expect("the budget is on");
//! assert!(failing.try_withdraw(now, Criticality::Normal));
//! assert!(!failing.try_withdraw(now, Criticality::Normal)); // this host's budget is spent ...
//! assert!(healthy.try_withdraw(now, Criticality::Normal)); // ... the other host's is not
//!
//! // Hosts compare case-insensitively.
//! let same = budgets.bucket_for("API.Example.com", now).expect("the budget is on");
//! assert!(Arc::ptr_eq(&healthy, &same));
//! assert_eq!(budgets.hosts(), 2);
//! # Ok::<(), nresilience_core::InvalidBudget>(())
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use nresilience_core::{BudgetOptions, InvalidBudget, RetryBudget, TokenBucket};

/// How many hosts [`HostBudgets::default`] tracks.
pub const DEFAULT_MAX_HOSTS: usize = 1024;

/// The retry budgets of one HTTP client, by host (SPEC H5).
///
/// With [`RetryBudget::Automatic`], each host (the request's authority, `host[:port]`,
/// compared ASCII case-insensitively) gets its own bucket, created full (B4) from the
/// budget's options the first time it is asked for. Authorities are compared as given:
/// `example.com` and `example.com:443` are two hosts. With [`RetryBudget::Shared`] or
/// [`RetryBudget::None`], every host gets the one bucket the budget names, or none.
///
/// # Bounded
///
/// At most `max_hosts` buckets are tracked, so a client that talks to an unbounded set of
/// hosts does not grow without bound. When a new host arrives and the table is full, the
/// host **least recently used** (asked for) is forgotten: the hosts a client talks to
/// steadily keep their buckets, however many others come and go. A forgotten host that comes
/// back starts with a new, full bucket; callers still holding the old one keep using it until
/// they drop it. Choose `max_hosts` above the number of hosts the client talks to at once.
///
/// Finding a known host is one lock and one hash lookup, with no allocation when the
/// authority is already lower-case. Forgetting a host scans the table once (it is only done
/// when a new host arrives at a full table).
pub struct HostBudgets {
    budget: RetryBudget,
    placement: Placement,
}

enum Placement {
    /// `Automatic`: a bucket per host.
    PerHost {
        options: BudgetOptions,
        max_hosts: usize,
        hosts: Mutex<Hosts>,
    },
    /// `Shared` or `None`: the one bucket (or none) the budget names, made on first use so
    /// that it is made at the caller's `now`.
    Given(OnceLock<Option<Arc<TokenBucket>>>),
}

#[derive(Default)]
struct Hosts {
    buckets: HashMap<Box<str>, Tracked>,
    /// Counts uses; each use stamps its host with the next value, so stamps are unique and
    /// the smallest marks the least recently used host.
    clock: u64,
}

struct Tracked {
    bucket: Arc<TokenBucket>,
    last_used: u64,
}

// ===== impl HostBudgets =====

impl HostBudgets {
    /// A bucket per host for `policy`'s `Automatic` budget, shared by every clone of the
    /// caller; `None` for a `Shared` budget or none, which are used as given (H5).
    pub fn per_host(policy: &nresilience_core::RetryPolicy) -> Option<std::sync::Arc<Self>> {
        match policy.budget() {
            // The policy validated its options, so making the table cannot fail.
            budget @ RetryBudget::Automatic(_) => Self::new(budget.clone(), DEFAULT_MAX_HOSTS)
                .ok()
                .map(std::sync::Arc::new),
            _ => None,
        }
    }

    /// Budgets placed as `budget` says, tracking at most `max_hosts` hosts for an `Automatic`
    /// budget, or the reason the budget's options cannot work.
    ///
    /// The options are checked here, so [`bucket_for`](Self::bucket_for) cannot fail.
    /// `max_hosts` only matters for `Automatic`; a `0` is read as `1`.
    pub fn new(budget: RetryBudget, max_hosts: usize) -> Result<Self, InvalidBudget> {
        budget.validate()?;
        let placement = match &budget {
            RetryBudget::Automatic(options) => Placement::PerHost {
                options: *options,
                max_hosts: max_hosts.max(1),
                hosts: Mutex::new(Hosts::default()),
            },
            _ => Placement::Given(OnceLock::new()),
        };
        Ok(Self { budget, placement })
    }

    /// The bucket that funds retries to `authority`, or `None` when the budget is off.
    ///
    /// For an `Automatic` budget, `authority`'s own bucket, created full at `now` on first
    /// use; for `Shared`, the process-wide bucket of that name whatever the host; for `None`,
    /// `None`.
    pub fn bucket_for(&self, authority: &str, now: Instant) -> Option<Arc<TokenBucket>> {
        match &self.placement {
            Placement::PerHost {
                options,
                max_hosts,
                hosts,
            } => {
                let host = if authority.bytes().any(|byte| byte.is_ascii_uppercase()) {
                    Cow::Owned(authority.to_ascii_lowercase())
                } else {
                    Cow::Borrowed(authority)
                };
                lock(hosts).bucket_for(&host, *options, *max_hosts, now)
            }
            Placement::Given(bucket) => bucket
                .get_or_init(|| {
                    // The options were validated in `new`, so this is never an error.
                    self.budget.make_bucket(now).ok().flatten()
                })
                .clone(),
        }
    }

    /// How many hosts have a bucket: at most [`max_hosts`](Self::max_hosts), and always `0`
    /// for a `Shared` or `None` budget.
    pub fn hosts(&self) -> usize {
        match &self.placement {
            Placement::PerHost { hosts, .. } => lock(hosts).buckets.len(),
            Placement::Given(_) => 0,
        }
    }

    /// The most hosts tracked at once; `0` for a `Shared` or `None` budget, which tracks none.
    pub fn max_hosts(&self) -> usize {
        match &self.placement {
            Placement::PerHost { max_hosts, .. } => *max_hosts,
            Placement::Given(_) => 0,
        }
    }

    /// The budget these buckets are placed by.
    pub fn budget(&self) -> &RetryBudget {
        &self.budget
    }
}

/// An `Automatic` budget with the default options, tracking up to
/// [`DEFAULT_MAX_HOSTS`] (`1024`) hosts.
impl Default for HostBudgets {
    fn default() -> Self {
        Self {
            budget: RetryBudget::automatic(),
            placement: Placement::PerHost {
                options: BudgetOptions::default(),
                max_hosts: DEFAULT_MAX_HOSTS,
                hosts: Mutex::new(Hosts::default()),
            },
        }
    }
}

impl fmt::Debug for HostBudgets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBudgets")
            .field("budget", &self.budget)
            .field("hosts", &self.hosts())
            .field("max_hosts", &self.max_hosts())
            .finish()
    }
}

fn lock(hosts: &Mutex<Hosts>) -> MutexGuard<'_, Hosts> {
    // Nothing under the lock can leave the table inconsistent if it panics: a poisoned lock
    // still guards a usable table.
    hosts.lock().unwrap_or_else(PoisonError::into_inner)
}

// ===== impl Hosts =====

impl Hosts {
    fn bucket_for(
        &mut self,
        host: &str,
        options: BudgetOptions,
        max_hosts: usize,
        now: Instant,
    ) -> Option<Arc<TokenBucket>> {
        self.clock += 1;
        let stamp = self.clock;
        if let Some(tracked) = self.buckets.get_mut(host) {
            tracked.last_used = stamp;
            return Some(Arc::clone(&tracked.bucket));
        }
        // The options were validated in `HostBudgets::new`, so this is never an error.
        let bucket = Arc::new(TokenBucket::new(options, now).ok()?);
        if self.buckets.len() >= max_hosts {
            self.forget_least_recently_used();
        }
        self.buckets.insert(
            host.into(),
            Tracked {
                bucket: Arc::clone(&bucket),
                last_used: stamp,
            },
        );
        Some(bucket)
    }

    fn forget_least_recently_used(&mut self) {
        let oldest = self.buckets.values().map(|tracked| tracked.last_used).min();
        if let Some(oldest) = oldest {
            // Stamps are unique: this removes exactly one host.
            self.buckets
                .retain(|_, tracked| tracked.last_used != oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nresilience_core::budget::shared_bucket;
    use nresilience_core::Criticality;

    use super::*;

    fn drain(bucket: &TokenBucket, now: Instant) -> u32 {
        let mut granted = 0;
        while bucket.try_withdraw(now, Criticality::Normal) {
            granted += 1;
        }
        granted
    }

    fn automatic(max_hosts: usize) -> HostBudgets {
        HostBudgets::new(RetryBudget::automatic(), max_hosts).unwrap()
    }

    #[test]
    fn h5_a_storm_against_one_host_cannot_throttle_retries_to_another() {
        let now = Instant::now();
        let budgets = automatic(DEFAULT_MAX_HOSTS);
        let storm = budgets.bucket_for("db.internal:5432", now).unwrap();
        let calm = budgets.bucket_for("api.example.com", now).unwrap();
        assert!(!Arc::ptr_eq(&storm, &calm));
        assert_eq!(drain(&storm, now), 30);
        assert!(!storm.try_withdraw(now, Criticality::Normal));
        // The storm spent its own host's budget, and only that.
        let calm = budgets.bucket_for("api.example.com", now).unwrap();
        assert!(calm.try_withdraw(now, Criticality::Normal));
        assert_eq!(calm.balance(now), 29.0);
    }

    #[test]
    fn h5_same_host_gets_the_same_bucket() {
        let now = Instant::now();
        let budgets = automatic(DEFAULT_MAX_HOSTS);
        let first = budgets.bucket_for("api.example.com:443", now).unwrap();
        drain(&first, now);
        let again = budgets.bucket_for("api.example.com:443", now).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!again.try_withdraw(now, Criticality::Normal));
        assert_eq!(budgets.hosts(), 1);
    }

    #[test]
    fn h5_hosts_compare_case_insensitively() {
        let now = Instant::now();
        let budgets = automatic(DEFAULT_MAX_HOSTS);
        let upper = budgets.bucket_for("API.example.com:443", now).unwrap();
        let lower = budgets.bucket_for("api.example.com:443", now).unwrap();
        let mixed = budgets.bucket_for("Api.Example.COM:443", now).unwrap();
        assert!(Arc::ptr_eq(&upper, &lower));
        assert!(Arc::ptr_eq(&upper, &mixed));
        assert_eq!(budgets.hosts(), 1);
    }

    #[test]
    fn h5_authorities_are_compared_as_given_port_included() {
        let now = Instant::now();
        let budgets = automatic(DEFAULT_MAX_HOSTS);
        let bare = budgets.bucket_for("example.com", now).unwrap();
        let with_port = budgets.bucket_for("example.com:443", now).unwrap();
        assert!(!Arc::ptr_eq(&bare, &with_port));
    }

    #[test]
    fn b4_a_new_host_starts_with_a_full_bucket_from_the_options() {
        let now = Instant::now();
        let options = BudgetOptions::default().capacity(5.0);
        let budgets = HostBudgets::new(RetryBudget::Automatic(options), 8).unwrap();
        let bucket = budgets.bucket_for("a", now).unwrap();
        assert_eq!(bucket.capacity(), 5.0);
        assert_eq!(bucket.balance(now), 5.0);
    }

    #[test]
    fn h5_tracked_hosts_are_bounded() {
        let now = Instant::now();
        let budgets = automatic(3);
        for host in 0..100 {
            budgets.bucket_for(&format!("host-{host}"), now).unwrap();
            assert!(budgets.hosts() <= 3);
        }
        assert_eq!(budgets.hosts(), 3);
        assert_eq!(budgets.max_hosts(), 3);
    }

    #[test]
    fn h5_a_full_table_forgets_the_least_recently_used_host() {
        let now = Instant::now();
        let budgets = automatic(2);
        let a = budgets.bucket_for("a", now).unwrap();
        let b = budgets.bucket_for("b", now).unwrap();
        drain(&a, now);
        drain(&b, now);
        // `a` is used again, so `b` is the least recently used when `c` arrives.
        budgets.bucket_for("a", now).unwrap();
        budgets.bucket_for("c", now).unwrap();
        assert_eq!(budgets.hosts(), 2);
        let a_again = budgets.bucket_for("A", now).unwrap();
        assert!(Arc::ptr_eq(&a, &a_again), "the busy host keeps its bucket");
        assert!(!a_again.try_withdraw(now, Criticality::Normal));
        // `b` was forgotten: it comes back with a new, full bucket (and `c` is forgotten).
        let b_again = budgets.bucket_for("b", now).unwrap();
        assert!(!Arc::ptr_eq(&b, &b_again));
        assert_eq!(b_again.balance(now), 30.0);
        assert_eq!(budgets.hosts(), 2);
        let c_again = budgets.bucket_for("c", now).unwrap();
        assert_eq!(c_again.balance(now), 30.0);
    }

    #[test]
    fn h5_zero_max_hosts_is_read_as_one() {
        let now = Instant::now();
        let budgets = automatic(0);
        assert_eq!(budgets.max_hosts(), 1);
        let a = budgets.bucket_for("a", now).unwrap();
        assert!(Arc::ptr_eq(&a, &budgets.bucket_for("a", now).unwrap()));
        budgets.bucket_for("b", now).unwrap();
        assert_eq!(budgets.hosts(), 1);
    }

    #[test]
    fn h5_shared_budget_is_used_as_given_for_every_host() {
        let now = Instant::now();
        let budget = RetryBudget::shared("h5-host-budgets-shared");
        let budgets = HostBudgets::new(budget, DEFAULT_MAX_HOSTS).unwrap();
        let a = budgets.bucket_for("a.example.com", now).unwrap();
        let b = budgets
            .bucket_for("b.example.com", now + Duration::from_secs(1))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let registered =
            shared_bucket("h5-host-budgets-shared", BudgetOptions::default(), now).unwrap();
        assert!(Arc::ptr_eq(&a, &registered), "the process-wide bucket");
        assert_eq!(budgets.hosts(), 0);
    }

    #[test]
    fn h5_no_budget_is_used_as_given_for_every_host() {
        let now = Instant::now();
        let budgets = HostBudgets::new(RetryBudget::None, DEFAULT_MAX_HOSTS).unwrap();
        assert!(budgets.bucket_for("a.example.com", now).is_none());
        assert!(budgets.bucket_for("b.example.com", now).is_none());
        assert_eq!(budgets.hosts(), 0);
    }

    #[test]
    fn invalid_options_are_an_error_at_construction() {
        let bad = BudgetOptions::default().fraction(0.0);
        for budget in [
            RetryBudget::Automatic(bad),
            RetryBudget::Shared("h5-host-budgets-invalid".into(), bad),
        ] {
            let err = HostBudgets::new(budget, DEFAULT_MAX_HOSTS).unwrap_err();
            assert!(err.to_string().contains("fraction"), "{err}");
        }
    }

    #[test]
    fn default_is_automatic_with_1024_hosts() {
        let now = Instant::now();
        let budgets = HostBudgets::default();
        assert_eq!(budgets.budget(), &RetryBudget::automatic());
        assert_eq!(budgets.max_hosts(), 1024);
        let bucket = budgets.bucket_for("a", now).unwrap();
        assert_eq!(bucket.capacity(), 30.0);
    }

    #[test]
    fn debug_prints_the_number_of_hosts() {
        let now = Instant::now();
        let budgets = automatic(8);
        budgets.bucket_for("a", now);
        budgets.bucket_for("b", now);
        let text = format!("{budgets:?}");
        assert!(text.contains("hosts: 2"), "{text}");
        assert!(text.contains("max_hosts: 8"), "{text}");
    }

    #[test]
    fn h5_hosts_are_shared_across_threads() {
        let now = Instant::now();
        let budgets = Arc::new(automatic(DEFAULT_MAX_HOSTS));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let budgets = Arc::clone(&budgets);
                std::thread::spawn(move || {
                    (0..100)
                        .map(|i| {
                            budgets
                                .bucket_for(&format!("host-{}", i % 10), now)
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let seen: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(budgets.hosts(), 10);
        for buckets in &seen[1..] {
            for (mine, theirs) in buckets.iter().zip(&seen[0]) {
                assert!(Arc::ptr_eq(mine, theirs));
            }
        }
    }
}
