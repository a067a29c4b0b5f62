//! E5 with O1 and O5: the measured ceiling does not cut what the dependency's load makes
//! slow, and a stall, which no ceiling or wait bounds, is bounded by the limit.

use std::time::{Duration, Instant};

use super::{admitted, measured, ms};
use crate::criticality::Criticality;
use crate::overload::{Admission, Answer, LoadTracker, OverloadControl, SaturatedBy};

/// An attempt admitted behind twenty held at a dependency that answered ten a slot after
/// 100 ms each, under a limit of 100: its expected wait is a few hundred milliseconds.
fn behind_twenty() -> Admission {
    let control = OverloadControl::new().floor(100).initial(100);
    let (tracker, now) = measured(control, 10, ms(100));
    admitted(&tracker, 20, now);
    tracker.admit(now, None, Criticality::Normal).unwrap()
}

#[test]
fn e5_a_ceiling_below_the_expected_wait_does_not_cut_the_attempt() {
    let admission = behind_twenty();
    assert!(admission.outlasts(ms(50)), "{admission:?}");
    assert!(!admission.outlasts(ms(500)), "{admission:?}");
}

#[test]
fn e5_o1_the_ceiling_is_lengthened_by_the_wait_beyond_a_typical_attempt() {
    let admission = behind_twenty();
    let wait = admission
        .expected_wait()
        .expect("a measured dependency has a wait");
    assert!(wait > ms(100) && wait < ms(500), "{wait:?}");
    assert_eq!(admission.ceiling(ms(50), Some(ms(100))), None, "outlasted");
    assert_eq!(
        admission.ceiling(ms(500), Some(ms(100))),
        Some(ms(500) + wait - ms(100)),
        "the ceiling, then the wait a typical attempt does not account for"
    );
    assert_eq!(admission.ceiling(ms(500), None), Some(ms(500) + wait));
    assert_eq!(
        admission.ceiling(ms(500), Some(wait + ms(1))),
        Some(ms(500)),
        "a wait shorter than a typical attempt leaves the ceiling as it is"
    );
    let fresh = LoadTracker::new(OverloadControl::new(), Instant::now());
    let unknown = fresh
        .admit(Instant::now(), None, Criticality::Normal)
        .unwrap();
    assert_eq!(unknown.expected_wait(), None);
    assert_eq!(
        unknown.ceiling(ms(50), Some(ms(10))),
        Some(ms(50)),
        "no wait told"
    );
}

/// A tracker, made at `origin`, of a dependency that served one attempt in 10 ms then.
fn seen_to_serve(origin: Instant) -> LoadTracker {
    let tracker = LoadTracker::new(OverloadControl::new(), origin);
    let seen = tracker.admit(origin, None, Criticality::Normal).unwrap();
    tracker.answered(seen.ticket, ms(10), Answer::Served, origin + ms(10));
    tracker
}

/// A window from `start` in which every attempt sent to `tracker`, one each 10 ms, is
/// answered in 2 ms with an error (busy for 200 ms of it); the instant it ends.
fn answering_errors_for_a_window(tracker: &LoadTracker, start: Instant) -> Instant {
    let mut now = start;
    while now < start + Duration::from_secs(1) {
        let refused = tracker.admit(now, None, Criticality::Normal).unwrap();
        tracker.answered(refused.ticket, ms(2), Answer::Unserved, now + ms(2));
        now += ms(10);
    }
    now
}

#[test]
fn e5_o1_a_dependency_serving_nothing_while_it_answers_errors_is_not_cut_by_the_ceiling() {
    let origin = Instant::now();
    let tracker = seen_to_serve(origin);
    let start = origin + Duration::from_secs(1);
    // Its queue full for a whole window: twenty attempts held in it, every later one refused
    // at once with an error.
    let held = admitted(&tracker, 20, start);
    let now = answering_errors_for_a_window(&tracker, start);
    assert!(!tracker.stalled(now), "it answers: no stall");
    let admission = tracker.admit(now, None, Criticality::Normal).unwrap();
    assert_eq!(
        admission.expected_wait(),
        None,
        "it served nothing: no pace told"
    );
    assert!(
        admission.outlasts(ms(50)),
        "served for nobody, its healthy latency says nothing of the next attempt's (E5)"
    );
    assert_eq!(admission.ceiling(ms(50), Some(ms(10))), None);
    // Serving again while an attempt is awaited: its healthy latency is a measure again.
    let mut held = held.into_iter().chain([admission.ticket]);
    let still = held.next().unwrap();
    for ticket in held {
        tracker.answered(ticket, ms(1_000), Answer::Served, now);
    }
    let admission = tracker.admit(now, None, Criticality::Normal).unwrap();
    assert!(!admission.outlasts(ms(50)), "{admission:?}");
    assert_eq!(admission.ceiling(ms(50), Some(ms(10))), Some(ms(50)));
    tracker.answered(still, ms(1_000), Answer::Served, now);
    // Answering errors only, with nothing else awaited, a slow attempt is stuck alone: the
    // ceiling cuts it. One admitted beside it is not cut.
    let quiet = seen_to_serve(origin);
    let now = answering_errors_for_a_window(&quiet, start);
    let alone = quiet.admit(now, None, Criticality::Normal).unwrap();
    assert!(!alone.outlasts(ms(50)), "{alone:?}");
    let beside = quiet.admit(now, None, Criticality::Normal).unwrap();
    assert!(beside.outlasts(ms(50)), "{beside:?}");
}

#[test]
fn e5_o1_o5_a_stall_is_no_queue_and_is_bounded_by_the_limit_once_work_accumulates() {
    let origin = Instant::now();
    let tracker = seen_to_serve(origin);
    let start = origin + Duration::from_secs(1);
    // Forty attempts sent and none answered for a whole window: a stall.
    for _ in 0..40 {
        tracker.admit(start, None, Criticality::Normal).unwrap();
    }
    let mut now = start + Duration::from_secs(1);
    let admission = tracker.admit(now, None, Criticality::Normal).unwrap();
    assert!(
        admission.outlasts(ms(50)),
        "stuck for everyone: a retry meets the same stall, no ceiling cuts it (E5)"
    );
    assert!(tracker.stalled(now));
    // No wait can be told from a dependency that finishes nothing: O1 does not refuse.
    assert!(tracker
        .admit(now, Some(ms(500)), Criticality::Normal)
        .is_ok());
    assert_eq!(tracker.limit(now), 1_000, "unbound until work accumulates");
    // Held for two windows with nothing finished, the work accumulates: the limit binds at
    // what is held (O5), lower each slot it goes on, and the next attempt is refused by it.
    let mut slots = 0;
    while tracker.limit(now) == 1_000 {
        now += ms(100);
        slots += 1;
        assert!(slots <= 20, "bound within two windows of the stall showing");
    }
    assert!(
        slots >= 19,
        "after two windows of accumulation, not {slots} slots"
    );
    let held = tracker.held(now);
    assert_eq!(tracker.limit(now), held, "bound where the work stood");
    now += ms(100);
    assert_eq!(
        tracker.limit(now),
        held * 9 / 10,
        "lower while nothing is answered"
    );
    for _ in 0..40 {
        now += ms(100);
        assert!(tracker.limit(now) >= 20, "never below the floor");
    }
    let refused = tracker
        .admit(now, Some(ms(500)), Criticality::Normal)
        .unwrap_err();
    assert_eq!(refused.cause, SaturatedBy::Limit);
}
