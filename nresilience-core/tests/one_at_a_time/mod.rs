//! A policy whose overload limit admits one attempt at a time to `db:5432`, for the tests of
//! what a refusal records (O4).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Instant;

use nresilience_core::call::{Call, CallOptions, Step};
use nresilience_core::overload::OverloadControl;
use nresilience_core::RetryPolicy;

/// The dependency the calls go to.
pub const DEPENDENCY: &str = "db:5432";

/// A policy named `name` whose limit admits one attempt in flight at most, with no deadline to
/// wait for room within (O7), and a call of it running from `now`: hold it to keep the limit
/// full.
pub fn one_running(name: &'static str, now: Instant) -> (RetryPolicy, Call<()>) {
    let policy = RetryPolicy::builder()
        .name(name)
        .deadline(None)
        .overload_control(Some(OverloadControl::new().floor(1).initial(1)))
        .build()
        .unwrap();
    let mut running = Call::<()>::start(&policy, now, CallOptions::new().key(DEPENDENCY));
    assert!(matches!(running.next::<()>(now), Step::Run(_)));
    (policy, running)
}

/// Starts another call of `policy` at `now`, which its full limit refuses.
pub fn refused(policy: &RetryPolicy, now: Instant) {
    let mut refused = Call::<()>::start(policy, now, CallOptions::new().key(DEPENDENCY));
    assert!(matches!(refused.next::<()>(now), Step::Done(Err(_))));
}
