//! Overload control through a call (O1, O2, O7): an attempt the dependency cannot take ends its
//! call at once, self-imposed (B8), keyed as the budgets are (H5), and seen (O4); one it can
//! take is not cut by a ceiling its load outlasts, nor for the wait its load adds (E5, O1); one
//! over the limit waits for room, and a dependency refusing connections is tried again across
//! the time the call has left (O7).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nresilience_core::breaker::{BreakerOptions, BreakerOutcome, CircuitBreaker};
use nresilience_core::call::{Call, CallOptions, Step};
use nresilience_core::overload::OverloadControl;
use nresilience_core::test_support::{self, Answer};
use nresilience_core::{
    clock, Criticality, RejectReason, RetryBudget, RetryPolicy, StopReason, Verdict,
};
use support::Capture;

/// A policy whose calls have 100 ms.
fn hurried() -> RetryPolicy {
    RetryPolicy::builder()
        .deadline(Some(Duration::from_millis(100)))
        .overload_control(Some(OverloadControl::new()))
        .build()
        .unwrap()
}

/// A second in which the dependency `key` finished 100 attempts of `policy`'s, then 15 held:
/// the next attempt waits 150 ms. Returns the time then.
fn busy(policy: &RetryPolicy, key: Option<&str>, start: Instant) -> Instant {
    let tracker = test_support::load_tracker(policy, key, start).unwrap();
    let ms = Duration::from_millis;
    let mut now = start;
    for _ in 0..10 {
        let sent: Vec<_> = (0..10)
            .map(|_| {
                tracker
                    .admit(now, None, Criticality::Normal)
                    .unwrap()
                    .ticket
            })
            .collect();
        now += ms(100);
        for ticket in sent {
            tracker.answered(ticket, ms(99), Answer::Served, now - ms(1));
        }
    }
    for _ in 0..15 {
        tracker.admit(now, None, Criticality::Normal).unwrap();
    }
    now
}

/// The defaults with one attempt, no budget, no deadline and a 10 s attempt timeout: the
/// bound the measured ceiling puts on an attempt is its timeout.
fn one_attempt() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(1)
        .budget(RetryBudget::None)
        .deadline(None)
        .attempt_timeout(Some(Duration::from_secs(10)))
        .build()
        .unwrap()
}

/// Twenty successes of 10 ms through `policy`, in paused time, and a slot idle, so that its
/// load tracker's window has counted them all: its measured ceiling is then its 50 ms floor
/// (E5), and an attempt's expected wait 10 ms for each attempt held.
async fn healthy_at_10_ms(policy: &RetryPolicy) {
    for _ in 0..20 {
        let answer = policy.execute(|_| async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok::<(), ()>(())
        });
        answer.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[test]
fn o1_b8_a_call_its_dependency_cannot_serve_in_time_ends_at_once_spending_nothing() {
    let capture = Capture::install();
    let policy = hurried();
    let start = Instant::now();
    let now = busy(&policy, None, start);
    let full = policy.bucket(now).unwrap().balance(now);

    let mut call = Call::<&str>::start(&policy, now, CallOptions::new());
    let Step::Done(Err(error)) = call.next::<()>(now) else {
        panic!("refused at once, without the rejection pause")
    };
    assert_eq!(error.reason(), StopReason::Saturated);
    assert_eq!(error.attempts(), 0, "nothing was sent");
    let rejected = error.rejection().unwrap();
    assert_eq!(rejected.reason, RejectReason::Saturated);
    let hint = rejected.retry_after.unwrap();
    assert!(
        hint > Duration::from_millis(100),
        "the expected wait: {hint:?}"
    );
    drop(call);
    assert_eq!(
        policy.bucket(now).unwrap().balance(now),
        full,
        "no budget spent"
    );
    // O4: the operator sees why, on the call's span.
    let events = capture.events_named("nresilience.saturated");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].field("cause"), Some("wait"));
    assert_eq!(
        capture.spans_named("resilience")[0].field("nresilience.outcome"),
        Some("saturated")
    );

    // A call with time enough goes.
    let patient = policy
        .to_builder()
        .deadline(Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let now = busy(&patient, None, start);
    let mut call = Call::<&str>::start(&patient, now, CallOptions::new());
    assert!(matches!(call.next::<()>(now), Step::Run(_)));
}

#[test]
fn h5_o1_each_dependency_has_its_own_load() {
    let policy = hurried();
    let now = busy(&policy, Some("db:5432"), Instant::now());
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
    let policy = hurried();
    let now = Instant::now();
    let tracker = test_support::load_tracker(&policy, None, now).unwrap();
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
fn o1_b13_a_retry_its_driver_never_sent_holds_nothing_and_returns_its_token() {
    let policy = RetryPolicy::builder()
        .budget(
            RetryBudget::automatic()
                .with_options(nresilience_core::BudgetOptions::default().minimum_per_second(0.0)),
        )
        .build()
        .unwrap();
    let now = Instant::now();
    let tracker = test_support::load_tracker(&policy, None, now).unwrap();
    let bucket = policy.bucket(now).unwrap();
    let full = bucket.balance(now);
    let mut call = Call::<&str>::start(&policy, now, CallOptions::new());
    let Step::Run(first) = call.next::<()>(now) else {
        panic!("the first attempt runs")
    };
    let mut at = now + Duration::from_millis(10);
    if let Step::Sleep(until) = call.attempted::<()>(first, Err("503"), Verdict::TRANSIENT, at) {
        at = until;
    }
    let Step::Run(retry) = call.next::<()>(at) else {
        panic!("the retry runs")
    };
    assert_eq!(bucket.balance(at), full - 1.0, "the retry was paid for");
    assert_eq!(tracker.held(at), 1);
    // Its service never got ready, and the caller went away: it was not sent.
    call.unsent(retry, at);
    assert_eq!(call.attempts(), 1, "only the first attempt was made");
    assert_eq!(tracker.held(at), 0, "the dependency holds nothing of it");
    assert_eq!(bucket.balance(at), full, "its token is back");
    drop(call);
    assert_eq!(tracker.held(at), 0, "nothing is left to abandon");
    assert_eq!(bucket.balance(at), full);
}

#[test]
fn o3_overload_control_is_on_by_default_and_one_call_turns_it_off() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.overload_control(), Some(&OverloadControl::new()));
    assert!(test_support::load_tracker(&policy, None, Instant::now()).is_some());
    let off = RetryPolicy::builder()
        .overload_control(None)
        .build()
        .unwrap();
    assert!(off.overload_control().is_none());
    assert!(test_support::load_tracker(&off, None, Instant::now()).is_none());
}

#[tokio::test(start_paused = true)]
async fn e5_o1_under_a_measured_queue_the_ceiling_does_not_cut_what_the_dependency_will_serve() {
    let (ms, timeout) = (Duration::from_millis, Duration::from_secs(10));
    let policy = RetryPolicy::builder()
        .max_attempts(1)
        .budget(RetryBudget::None)
        .deadline(None)
        .attempt_timeout(Some(timeout))
        .overload_control(Some(OverloadControl::new().floor(100).initial(100)))
        .build()
        .unwrap();
    healthy_at_10_ms(&policy).await;
    let now = clock::now();
    let mut healthy = Call::<()>::start(&policy, now, CallOptions::new());
    let Step::Run(attempt) = healthy.next::<()>(now) else {
        panic!("sent")
    };
    assert_eq!(
        attempt.timeout(),
        Some(ms(50)),
        "healthy, the ceiling bounds it"
    );

    // 150 ms of work ahead of the next attempt: the ceiling would cut a query db will still
    // run, and its retry would queue behind it. The attempt timeout bounds it instead.
    let now = busy(&policy, None, now);
    let mut queued = Call::<()>::start(&policy, now, CallOptions::new());
    let Step::Run(attempt) = queued.next::<()>(now) else {
        panic!("sent: no deadline to outlast")
    };
    assert_eq!(attempt.timeout(), Some(timeout));
}

#[tokio::test(start_paused = true)]
async fn e5_o1_an_attempt_behind_work_it_waits_for_gets_the_ceiling_past_that_wait() {
    let ms = Duration::from_millis;
    let policy = one_attempt();
    healthy_at_10_ms(&policy).await;
    // Three attempts held ahead of it, at the 10 ms each the dependency has been taking: it
    // expects to wait 40 ms, 30 more than a typical attempt, inside the ceiling's 50 ms. Cut
    // at 50 ms, it would be cut for the work ahead of it, not for being stuck.
    let now = clock::now();
    let tracker = test_support::load_tracker(&policy, None, now).unwrap();
    for _ in 0..3 {
        tracker.admit(now, None, Criticality::Normal).unwrap();
    }
    let mut queued = Call::<()>::start(&policy, now, CallOptions::new());
    let Step::Run(attempt) = queued.next::<()>(now) else {
        panic!("sent")
    };
    // The typical attempt is read from a histogram, 10 ms to within a few percent.
    let timeout = attempt.timeout().unwrap();
    assert!(
        (ms(79)..=ms(81)).contains(&timeout),
        "the ceiling's 50 ms past the 30 ms it waits beyond a typical attempt, not {timeout:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn e5_c1_an_overload_signal_does_not_stop_the_ceiling_cutting_an_attempt_slowed_alone() {
    let ms = Duration::from_millis;
    let policy = one_attempt();
    assert!(policy.overload_control().is_some(), "the defaults (O3)");
    healthy_at_10_ms(&policy).await;
    // A hop whose budget refused a retry below answers at once with the signal (C1): it tells
    // its caller not to retry that answer, not that the next attempt will wait behind a queue.
    let signalled = |result: &Result<(), &str>| match result {
        Ok(()) => Verdict::Success,
        Err(_) => Verdict::OVERLOADED,
    };
    let answer = policy
        .execute_with(&signalled, |_| async { Err("503") })
        .await;
    assert_eq!(answer.unwrap_err().reason(), StopReason::Overloaded);

    let now = clock::now();
    let mut next = Call::<()>::start(&policy, now, CallOptions::new());
    let Step::Run(attempt) = next.next::<()>(now) else {
        panic!("sent")
    };
    assert_eq!(
        attempt.timeout(),
        Some(ms(50)),
        "nothing held ahead of it: the measured ceiling still bounds it"
    );
}

#[tokio::test(start_paused = true)]
async fn o7_a_dependency_refusing_connections_is_tried_again_across_the_time_left() {
    let ms = Duration::from_millis;
    let policy = RetryPolicy::builder()
        .deadline(Some(Duration::from_secs(2)))
        .build()
        .unwrap();
    let start = clock::now();
    // Nothing listens for the first 1.2 s, then the dependency is back.
    let back = start + ms(1_200);
    let mut sent = Vec::new();
    let refused = |result: &Result<(), &str>| match result {
        Ok(()) => Verdict::Success,
        Err(_) => Verdict::Unreachable,
    };
    let answer = policy
        .execute_with(&refused, |_| {
            let now = clock::now();
            sent.push(now - start);
            async move {
                if now >= back {
                    Ok(())
                } else {
                    Err("refused")
                }
            }
        })
        .await;
    assert!(answer.is_ok(), "attempts at {sent:?}: {answer:?}");
    // Spent at the backoff's pace (100 ms, then 200 ms), all three would have met the outage.
    assert!(
        sent[1] >= ms(900),
        "the next attempt waits for a share of the time left: {sent:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn o7_an_attempt_over_the_limit_waits_for_room_within_its_deadline() {
    let ms = Duration::from_millis;
    // A limit of one attempt in flight, bound from the start.
    let policy = RetryPolicy::builder()
        .deadline(Some(Duration::from_secs(1)))
        .overload_control(Some(OverloadControl::new().floor(1).initial(1).max(10)))
        .build()
        .unwrap();
    let start = clock::now();
    let first = policy.execute(|_| async {
        tokio::time::sleep(ms(300)).await;
        Ok::<_, ()>(clock::now())
    });
    let second = async {
        tokio::time::sleep(ms(10)).await;
        policy
            .execute(|_| async { Ok::<_, ()>(clock::now()) })
            .await
    };
    let (first, second) = tokio::join!(first, second);
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(
        second >= first,
        "sent once the first left room: {:?} after {:?}",
        second - start,
        first - start
    );
    assert!(
        second - start < ms(700),
        "not long after: {:?}",
        second - start
    );

    // A call whose deadline comes before the room does fails as a saturated one (O1, B8).
    let hurried = RetryPolicy::builder()
        .deadline(Some(ms(100)))
        .overload_control(Some(OverloadControl::new().floor(1).initial(1).max(10)))
        .build()
        .unwrap();
    let long = hurried.execute(|_| async {
        tokio::time::sleep(ms(300)).await;
        Ok::<_, ()>(())
    });
    let refused = async {
        tokio::time::sleep(ms(10)).await;
        hurried.execute(|_| async { Ok::<_, ()>(()) }).await
    };
    let (_, refused) = tokio::join!(long, refused);
    assert_eq!(refused.unwrap_err().reason(), StopReason::Saturated);
}

#[test]
fn o7_g1_a_waiting_call_the_breaker_refuses_leaves_the_waiting_room_at_once() {
    let ms = Duration::from_millis;
    let start = Instant::now();
    let breaker = Arc::new(
        CircuitBreaker::new(
            BreakerOptions::default().consecutive_failures(Some(1)),
            start,
        )
        .unwrap(),
    );
    // A limit of one attempt in flight, bound from the start.
    let policy = RetryPolicy::builder()
        .deadline(Some(Duration::from_secs(1)))
        .overload_control(Some(OverloadControl::new().floor(1).initial(1).max(10)))
        .circuit_breaker(Arc::clone(&breaker))
        .build()
        .unwrap();
    let mut first = Call::<&str>::start(&policy, start, CallOptions::new());
    assert!(matches!(first.next::<()>(start), Step::Run(_)));
    let now = start + ms(10);
    let mut waiting = Call::<&str>::start(&policy, now, CallOptions::new());
    let Step::Sleep(wake) = waiting.next::<()>(now) else {
        panic!("over the limit, the call waits for room");
    };
    let tracker = test_support::load_tracker(&policy, None, now).unwrap();
    assert_eq!(tracker.waiting(now), 1);
    // The breaker opens while it waits: woken, the call is refused and pauses (G1), and
    // counts ahead of no other call over that pause.
    let permit = breaker.try_acquire(now).unwrap();
    breaker.record(permit, BreakerOutcome::Failure, now);
    let Step::Sleep(paused) = waiting.next::<()>(wake) else {
        panic!("refused by the breaker, the call pauses");
    };
    assert_eq!(tracker.waiting(wake), 0);
    let Step::Done(Err(error)) = waiting.next::<()>(paused) else {
        panic!("the call ends refused");
    };
    assert_eq!(error.reason(), StopReason::BreakerOpen);
}
