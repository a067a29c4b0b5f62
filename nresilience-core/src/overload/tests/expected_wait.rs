//! O1 and O2: what the expected wait and the limit refuse, and the work they count held.

use std::time::{Duration, Instant};

use super::{admitted, measured, ms};
use crate::criticality::Criticality;
use crate::overload::{Answer, LoadTracker, OverloadControl, SaturatedBy};

#[test]
fn o1_an_attempt_whose_wait_outlasts_its_call_is_not_sent() {
    // 10 answers per 100 ms of busy time: 100 a second. 30 held: 300 ms to drain.
    let control = OverloadControl::new().floor(100).initial(100);
    let (tracker, now) = measured(control, 10, ms(100));
    for _ in 0..30 {
        tracker.admit(now, None, Criticality::Normal).unwrap();
    }
    let refused = tracker
        .admit(now, Some(ms(200)), Criticality::Normal)
        .unwrap_err();
    assert_eq!(refused.cause, SaturatedBy::Wait);
    let wait = refused.retry_after.as_secs_f64();
    assert!((0.25..0.35).contains(&wait), "expected wait {wait}");
    // A call with time enough is sent, and a call with no deadline always is.
    assert!(tracker
        .admit(now, Some(ms(400)), Criticality::Normal)
        .is_ok());
    assert!(tracker.admit(now, None, Criticality::Normal).is_ok());
}

#[test]
fn o1_an_abandoned_attempt_stays_held_until_a_later_one_is_answered() {
    let (tracker, now) = measured(OverloadControl::new(), 10, ms(50));
    let early = tracker
        .admit(now, None, Criticality::Normal)
        .unwrap()
        .ticket;
    let late = tracker
        .admit(now, None, Criticality::Normal)
        .unwrap()
        .ticket;
    tracker.abandoned(early, ms(20), true, now + ms(20));
    assert_eq!(
        tracker.held(now + ms(20)),
        2,
        "the dependency still works on it"
    );
    tracker.answered(late, ms(30), Answer::Served, now + ms(30));
    assert_eq!(
        tracker.held(now + ms(30)),
        0,
        "answered after it: it was finished first"
    );
}

#[test]
fn o1_an_abandoned_attempt_is_let_go_once_its_answer_would_have_come() {
    let (tracker, now) = measured(OverloadControl::new(), 10, ms(50));
    let ticket = tracker
        .admit(now, None, Criticality::Normal)
        .unwrap()
        .ticket;
    tracker.abandoned(ticket, ms(10), false, now + ms(10));
    assert_eq!(tracker.held(now + ms(10)), 1);
    assert_eq!(tracker.held(now + Duration::from_secs(61)), 0);
}

#[test]
fn o1_answers_without_the_work_do_not_count_as_completions() {
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new(), start);
    let mut now = start;
    // A second of fast refusals: no completion rate to speak of.
    for _ in 0..100 {
        let ticket = tracker
            .admit(now, None, Criticality::Normal)
            .unwrap()
            .ticket;
        now += ms(10);
        tracker.answered(ticket, ms(1), Answer::Unserved, now);
    }
    // Nothing awaited: sent. A second of answers without one completion: no rate of work to
    // tell a wait from, and a dependency that finishes nothing is stalled, not queueing.
    let admission = tracker
        .admit(now, Some(ms(1)), Criticality::Normal)
        .unwrap();
    assert_eq!(admission.expected_wait(), None, "{admission:?}");
}

#[test]
fn o1_work_found_finished_by_a_late_answer_counts_while_it_was_done() {
    // A dependency finishing 100 attempts a second, first in first out. 50 attempts are
    // abandoned and one behind them is answered 450 ms later: the 50 were finished while it
    // waited. Counted in the slot of its answer they would make the dependency look three
    // times as fast, and the next attempts' wait a third of what it is.
    let (tracker, start) = measured(OverloadControl::new(), 10, ms(99));
    let ahead = admitted(&tracker, 50, start);
    let late = tracker
        .admit(start, None, Criticality::Normal)
        .unwrap()
        .ticket;
    for ticket in ahead {
        tracker.abandoned(ticket, ms(1), false, start + ms(1));
    }
    let answered = start + ms(450);
    tracker.answered(late, ms(450), Answer::Served, answered);
    let now = answered + ms(200);
    let _awaited = tracker.admit(now, None, Criticality::Normal).unwrap();
    let admission = tracker.admit(now, None, Criticality::Normal).unwrap();
    let each = admission.expected_wait().unwrap().as_secs_f64() / 2.0;
    assert!(
        (0.006..0.02).contains(&each),
        "{each} s an attempt, where the dependency takes 0.01"
    );
}

#[test]
fn o2_attempts_at_the_limit_are_refused_at_once() {
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new().floor(3).initial(3), start);
    for _ in 0..3 {
        tracker.admit(start, None, Criticality::Normal).unwrap();
    }
    let refused = tracker.admit(start, None, Criticality::Normal).unwrap_err();
    assert_eq!(refused.cause, SaturatedBy::Limit);
}
