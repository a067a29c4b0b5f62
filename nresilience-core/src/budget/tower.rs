//! The retry budget as tower's [`Budget`](tower::retry::budget::Budget) (feature `tower`), so
//! that tower's own `Retry` middleware can spend it.
//!
//! tower's trait takes no clock: the bucket reads the library's clock
//! ([`clock::now`](crate::clock::now), tokio's, so a paused runtime drives it in tests), where
//! every other method of [`TokenBucket`] takes the time from its caller. A withdrawal is a
//! retry of [`Criticality::Normal`]. The bucket's own `deposit` takes the time, so call tower's
//! through the trait: `Budget::deposit(&*bucket)`.

use tower::retry::budget::Budget;

use super::TokenBucket;
use crate::clock;
use crate::criticality::Criticality;

impl Budget for TokenBucket {
    /// A success: deposits a fraction of a token, as
    /// [`TokenBucket::deposit`](TokenBucket::deposit) does, now.
    fn deposit(&self) {
        Self::deposit(self, clock::now());
    }

    /// A retry: withdraws a token now, `false` when the bucket refuses it.
    fn withdraw(&self) -> bool {
        self.try_withdraw(clock::now(), Criticality::Normal)
    }
}
