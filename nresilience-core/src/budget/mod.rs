//! The retry budget: retries bounded as a fraction of successful traffic.
//!
//! A maximum attempt count bounds one call; it cannot bound a fleet, because attempts
//! multiply across layers (three retries at each of three hops is 64 attempts at the
//! bottom). A budget funded by 10 % of successes bounds the retries a process adds to
//! 10 % of its traffic, whatever the topology, with no coordination between processes.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use nresilience_core::{BudgetOptions, Criticality, TokenBucket};
//!
//! let start = Instant::now();
//! let bucket = TokenBucket::new(BudgetOptions::default(), start)?;
//! assert_eq!(bucket.balance(start), 30.0); // starts full
//!
//! while bucket.try_withdraw(start, Criticality::Normal) {}
//! assert_eq!(bucket.utilization(start), 1.0); // retries are being refused
//!
//! // The floor (3 tokens/s) needs a third of a second for the next token.
//! assert_eq!(bucket.retry_after(start), Some(Duration::from_nanos(333_333_334)));
//! # Ok::<(), nresilience_core::InvalidBudget>(())
//! ```

mod bucket;
mod keyed;
mod options;
pub(crate) mod per_call;
mod registry;
#[cfg(feature = "tower")]
mod tower;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

pub use bucket::{TokenBucket, ADVICE_LAPSES_AFTER};
pub use keyed::{KeyedBuckets, DEFAULT_MAX_KEYS};
pub use options::{BudgetOptions, InvalidBudget, MAX_CAPACITY, MAX_MINIMUM_PER_SECOND};
pub use registry::shared_bucket;

/// Where a policy's token bucket lives.
///
/// Defaults to [`RetryBudget::Automatic`] with [`BudgetOptions::default`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RetryBudget {
    /// A bucket private to each policy instance and its clones — or, for calls started with
    /// a [key](crate::call::CallOptions::key), one per key (each host of an HTTP client), in
    /// a bounded [`KeyedBuckets`] table. Two policies built from one preset do not share it,
    /// so a storm against one dependency cannot throttle retries to another.
    Automatic(BudgetOptions),
    /// A process-wide bucket looked up by name: every policy naming it shares one bucket,
    /// and the first caller's options win.
    Shared(Cow<'static, str>, BudgetOptions),
    /// No budget: retries are bounded by the attempt count alone. Right only when the
    /// dependency is known not to be shared.
    None,
}

impl RetryBudget {
    /// A private bucket with the default options.
    #[must_use]
    pub const fn automatic() -> Self {
        Self::Automatic(BudgetOptions::new())
    }

    /// The process-wide bucket called `name`, with the default options.
    pub fn shared(name: impl Into<Cow<'static, str>>) -> Self {
        Self::Shared(name.into(), BudgetOptions::new())
    }

    /// The same placement with other options; `None` stays `None`.
    #[must_use]
    pub fn with_options(self, options: BudgetOptions) -> Self {
        match self {
            Self::Automatic(_) => Self::Automatic(options),
            Self::Shared(name, _) => Self::Shared(name, options),
            Self::None => Self::None,
        }
    }

    /// The bucket options, if the budget is on.
    #[must_use]
    pub fn options(&self) -> Option<BudgetOptions> {
        match self {
            Self::Automatic(options) | Self::Shared(_, options) => Some(*options),
            Self::None => None,
        }
    }

    /// Checks the options of a budget that is on.
    pub fn validate(&self) -> Result<(), InvalidBudget> {
        self.options().map_or(Ok(()), |options| options.validate())
    }

    /// A bucket for this placement: a new private one for `Automatic`, the named process-wide
    /// one for `Shared`, nothing for `None`.
    ///
    /// Callers that own an `Automatic` budget create its bucket once and keep it; calling
    /// this again makes another private bucket.
    pub fn make_bucket(&self, now: Instant) -> Result<Option<Arc<TokenBucket>>, InvalidBudget> {
        match self {
            Self::Automatic(options) => TokenBucket::new(*options, now).map(|b| Some(Arc::new(b))),
            Self::Shared(name, options) => shared_bucket(name, *options, now).map(Some),
            Self::None => Ok(None),
        }
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::automatic()
    }
}
