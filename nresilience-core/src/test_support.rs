//! The executor's own parts, reachable here only for the workspace's tests (the allocation,
//! contention and Miri checks): no part of the public API, and no promise of stability.
//! Behind the `test-support` feature, which a user of the library never needs.

use std::sync::Arc;
use std::time::Instant;

pub use crate::executor::latency::LatencyWindow;
use crate::executor::policy::RetryPolicy;
pub use crate::overload::admission::{Admission, Answer, Saturated, SaturatedBy, Ticket};
pub use crate::overload::tracker::LoadTracker;
pub use crate::overload::waiting::WaitTicket;

/// The load tracker `policy`'s calls to the dependency keyed `key` share (the policy's own
/// when `key` is `None`), made at `now` on first use; `None` when overload control is off.
#[must_use]
pub fn load_tracker(
    policy: &RetryPolicy,
    key: Option<&str>,
    now: Instant,
) -> Option<Arc<LoadTracker>> {
    policy.load_tracker(key, now)
}
