//! Overload control through a call (O1, O2): an attempt the dependency cannot take ends its
//! call at once, self-imposed (B8), keyed as the budgets are (H5), and seen (O4).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use nresilience_core::call::{Call, CallOptions, Step};
use nresilience_core::overload::OverloadControl;
use nresilience_core::{RejectReason, RetryPolicy, StopReason, Verdict};

/// A policy whose dependencies take one attempt at a time: the second is over the limit.
fn one_at_a_time() -> RetryPolicy {
    RetryPolicy::builder()
        .overload_control(Some(OverloadControl::new().floor(1).initial(1)))
        .build()
        .unwrap()
}

#[test]
fn o2_b8_a_call_over_the_limit_ends_at_once_spending_and_depositing_nothing() {
    let policy = one_at_a_time();
    let now = Instant::now();
    let full = policy.bucket(now).unwrap().balance(now);
    let mut first = Call::<&str>::start(&policy, now, CallOptions::new());
    let Step::Run(attempt) = first.next::<()>(now) else {
        panic!("the first attempt goes: nothing is awaited")
    };

    let mut second = Call::<&str>::start(&policy, now, CallOptions::new());
    let Step::Done(Err(error)) = second.next::<()>(now) else {
        panic!("refused at once, without the rejection pause")
    };
    assert_eq!(error.reason(), StopReason::Saturated);
    assert_eq!(error.attempts(), 0, "nothing was sent");
    let rejected = error.rejection().unwrap();
    assert_eq!(rejected.reason, RejectReason::Saturated);
    assert!(rejected.retry_after.is_some(), "a hint comes with it");
    drop(second);
    assert_eq!(
        policy.bucket(now).unwrap().balance(now),
        full,
        "no budget spent"
    );

    let later = now + Duration::from_millis(10);
    let Step::Done(Ok(())) = first.attempted(attempt, Ok(()), Verdict::Success, later) else {
        panic!("the first call succeeds")
    };
    let mut third = Call::<&str>::start(&policy, later, CallOptions::new());
    assert!(
        matches!(third.next::<()>(later), Step::Run(_)),
        "the answered attempt left room"
    );
}

#[test]
fn h5_o1_each_dependency_has_its_own_load() {
    let policy = one_at_a_time();
    let now = Instant::now();
    let mut busy = Call::<&str>::start(&policy, now, CallOptions::new().key("db:5432"));
    assert!(matches!(busy.next::<()>(now), Step::Run(_)));
    let mut same = Call::<&str>::start(&policy, now, CallOptions::new().key("db:5432"));
    assert!(matches!(same.next::<()>(now), Step::Done(Err(_))));
    let mut other = Call::<&str>::start(&policy, now, CallOptions::new().key("api:443"));
    assert!(
        matches!(other.next::<()>(now), Step::Run(_)),
        "a busy db does not refuse calls to another host"
    );
}

#[test]
fn o1_a_cancelled_call_leaves_its_attempt_held_while_the_dependency_works_on_it() {
    let policy = one_at_a_time();
    let now = Instant::now();
    let tracker = policy.load_tracker(None, now).unwrap();
    let mut call = Call::<&str>::start(&policy, now, CallOptions::new());
    assert!(matches!(call.next::<()>(now), Step::Run(_)));
    assert_eq!(tracker.held(now), 1);
    drop(call);
    assert_eq!(
        tracker.held(now),
        1,
        "the dependency does not see its caller go away"
    );
}

#[test]
fn o3_overload_control_is_off_unless_asked_for() {
    let policy = RetryPolicy::default();
    assert!(policy.overload_control().is_none());
    assert!(policy.load_tracker(None, Instant::now()).is_none());
}
