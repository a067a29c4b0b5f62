//! O7 with O6: the calls waiting for room, and the order room goes to them.

use std::time::Instant;

use super::{admitted, ms};
use crate::criticality::Criticality;
use crate::overload::{Answer, LoadTracker, OverloadControl, SaturatedBy};

#[test]
fn o7_room_comes_at_the_pace_a_dependency_finishes_work_again_after_a_stall() {
    // Bound at 10, of which a normal call may fill 9 (a tenth is kept for critical calls,
    // O6): nine attempts held through a stall of seven slots; then the dependency finishes
    // nine a slot (90 a second) for three slots, and is sent nine more each time.
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new().floor(10).initial(10), start);
    let mut held = admitted(&tracker, 9, start);
    let mut now = start + ms(790);
    for _ in 0..3 {
        for ticket in held.drain(..) {
            tracker.answered(ticket, ms(90), Answer::Served, now);
        }
        held = admitted(&tracker, 9, now);
        now += ms(100);
    }
    // One must finish before the next has room. At the window's pace, 27 in a second, that
    // is 37 ms; at the pace of the last slots, the one the expected wait counts on, 11 ms. A
    // call told 37 ms sleeps through the room, or gives up on it when its deadline is nearer.
    let refused = tracker
        .admit(now - ms(90), None, Criticality::Normal)
        .unwrap_err();
    assert_eq!(refused.cause, SaturatedBy::Limit);
    let room_in = refused.room_in.expect("refused by the limit");
    assert!(
        (ms(9)..=ms(14)).contains(&room_in),
        "room in {room_in:?}, where the dependency finishes one attempt in 11 ms"
    );
}

#[test]
fn o7_calls_that_waited_through_a_stall_get_room_oldest_first_once_it_serves_again() {
    // Bound at 10, of which a normal call may fill 9 (O6): nine attempts held through a
    // stall; two calls refused in it wait for room.
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new().floor(10).initial(10), start);
    let mut held = admitted(&tracker, 9, start);
    let waiter = |at: Instant| {
        let refused = tracker.admit(at, None, Criticality::Normal).unwrap_err();
        assert_eq!(refused.cause, SaturatedBy::Limit);
        tracker
            .wait(at + ms(1_000), Criticality::Normal)
            .expect("room to wait")
    };
    let older = waiter(start + ms(790));
    let newer = waiter(start + ms(795));
    // It serves one: room for one. The calls that waited through the stall go first, the
    // oldest of them first; a new call that can wait comes after them.
    let now = start + ms(800);
    tracker.answered(held.remove(0), ms(800), Answer::Served, now);
    let new_call = tracker
        .admit(now, Some(ms(2_000)), Criticality::Normal)
        .unwrap_err();
    assert_eq!(new_call.cause, SaturatedBy::Limit);
    let refused = tracker
        .admit_waiting(newer, now, None, Criticality::Normal)
        .unwrap_err();
    assert!(tracker
        .admit_waiting(older, now, None, Criticality::Normal)
        .is_ok());
    // The pace measured over the stall is none; room for the newer waiter comes as fast as
    // the limit's attempts finish at the latency seen lately, 800 ms over 10, not in 800 ms.
    let room_in = refused.room_in.expect("refused by the limit");
    assert!(room_in <= ms(80), "room in {room_in:?}");
    // A call with no deadline cannot wait: it is no waiter, and goes before them.
    let now = start + ms(810);
    tracker.answered(held.remove(0), ms(810), Answer::Served, now);
    assert!(tracker.admit(now, None, Criticality::Normal).is_ok());
}

#[test]
fn o6_o7_the_stalls_less_critical_waiters_do_not_go_before_a_more_critical_call() {
    // Bound at 10: a sheddable call may fill half of it, a normal one 9 (O6). Nine attempts
    // held through a stall; five sheddable calls refused in it wait for room.
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new().floor(10).initial(10), start);
    let mut held = admitted(&tracker, 9, start);
    assert!(
        tracker.stalled(start + ms(790)),
        "they begin waiting in a stall"
    );
    let waiters: Vec<_> = (0..5)
        .map(|i| {
            let at = start + ms(790 + i);
            let refused = tracker.admit(at, None, Criticality::Sheddable).unwrap_err();
            assert_eq!(refused.cause, SaturatedBy::Limit);
            tracker
                .wait(at + ms(1_000), Criticality::Sheddable)
                .expect("room to wait")
        })
        .collect();
    // It serves three: six held. The sheddable waiters cannot take the room (their half is
    // full), and they do not keep it from more critical calls, which go before them.
    let now = start + ms(800);
    for ticket in held.drain(..3) {
        tracker.answered(ticket, ms(800), Answer::Served, now);
    }
    let left = Some(ms(2_000));
    assert!(tracker.admit(now, left, Criticality::Critical).is_ok());
    assert!(tracker.admit(now, left, Criticality::Normal).is_ok());
    for waiter in waiters {
        let refused = tracker
            .admit_waiting(waiter, now, left, Criticality::Sheddable)
            .unwrap_err();
        assert_eq!(refused.cause, SaturatedBy::Limit);
    }
    assert_eq!(tracker.waiting(now), 5);
}

#[test]
fn o7_calls_that_waited_behind_work_get_room_newest_first_after_new_calls() {
    // Bound at 10 (9 for a normal call), the dependency finishing work: three of nine
    // attempts answered, three more sent; two calls refused then wait for room.
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new().floor(10).initial(10), start);
    let mut held = admitted(&tracker, 9, start);
    for ticket in held.drain(..3) {
        tracker.answered(ticket, ms(150), Answer::Served, start + ms(150));
    }
    held.extend(admitted(&tracker, 3, start + ms(150)));
    let waiter = |at: Instant| {
        tracker.admit(at, None, Criticality::Normal).unwrap_err();
        tracker
            .wait(at + ms(1_000), Criticality::Normal)
            .expect("room to wait")
    };
    let older = waiter(start + ms(160));
    let newer = waiter(start + ms(170));
    // Room for one goes to a new call; the next to the newest waiter.
    tracker.answered(held.remove(0), ms(180), Answer::Served, start + ms(180));
    assert!(tracker
        .admit(start + ms(180), None, Criticality::Normal)
        .is_ok());
    let now = start + ms(190);
    tracker.answered(held.remove(0), ms(190), Answer::Served, now);
    assert!(tracker
        .admit_waiting(older, now, None, Criticality::Normal)
        .is_err());
    assert!(tracker
        .admit_waiting(newer, now, None, Criticality::Normal)
        .is_ok());
}
