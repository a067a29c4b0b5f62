use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::criticality::Criticality;

mod patience;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A dependency that has answered `per_slot` attempts in every 100 ms slot of the first
/// second, each after `latency`, so the tracker knows its completion rate; nothing held.
fn measured(control: OverloadControl, per_slot: u32, latency: Duration) -> (LoadTracker, Instant) {
    let start = Instant::now();
    let tracker = LoadTracker::new(control, start);
    let mut now = start;
    for _ in 0..10 {
        let tickets: Vec<_> = (0..per_slot)
            .map(|_| {
                tracker
                    .admit(now, None, Criticality::Normal)
                    .unwrap()
                    .ticket
            })
            .collect();
        now += ms(100);
        for ticket in tickets {
            tracker.answered(ticket, latency, Answer::Served, now - ms(1));
        }
    }
    (tracker, now)
}

/// The tickets of `count` attempts admitted at `now`, with no deadline.
fn admitted(tracker: &LoadTracker, count: usize, now: Instant) -> Vec<Ticket> {
    (0..count)
        .map(|_| {
            tracker
                .admit(now, None, Criticality::Normal)
                .unwrap()
                .ticket
        })
        .collect()
}

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

/// The limits a dependency answering every attempt after `latency` has over `seconds` of 100
/// calls a second (ten a slot), each with 30 s left, from the tracker's first attempt, and the
/// calls refused.
fn steady(latency: Duration, seconds: u32) -> (Vec<u32>, usize) {
    steady_within(latency, seconds, Duration::from_secs(30))
}

/// [`steady`], each call with `left` to wait.
fn steady_within(latency: Duration, seconds: u32, left: Duration) -> (Vec<u32>, usize) {
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new(), start);
    let mut held = std::collections::VecDeque::new();
    let (mut limits, mut refused) = (Vec::new(), 0);
    for slot in 0..seconds * 10 {
        let now = start + ms(100) * slot;
        while held.front().is_some_and(|&(sent, _)| sent + latency <= now) {
            let (_, ticket) = held.pop_front().unwrap();
            tracker.answered(ticket, latency, Answer::Served, now);
        }
        for _ in 0..10 {
            match tracker.admit(now, Some(left), Criticality::Normal) {
                Ok(admission) => held.push_back((now, admission.ticket)),
                Err(_) => refused += 1,
            }
        }
        limits.push(tracker.limit(now));
    }
    (limits, refused)
}

#[test]
fn o5_a_dependency_whose_attempts_take_seconds_is_not_limited_while_they_ramp_up() {
    // The attempts in flight ramp up to 100 a second times the latency: sent outruns answered
    // for that long, and then the dependency finishes more window after window until it
    // keeps pace. Neither a dependency not yet seen to finish anything nor one finishing more
    // each window is a queue.
    for latency in [ms(600), ms(1_500), ms(3_000), ms(8_000)] {
        let (limits, refused) = steady(latency, 20);
        assert!(
            limits.iter().all(|&limit| limit == 1_000) && refused == 0,
            "{latency:?}: {refused} refused, {limits:?}"
        );
    }
}

#[test]
fn o1_a_dependency_whose_attempts_take_seconds_is_not_refused_while_they_ramp_up() {
    // While the attempts in flight ramp up, the dependency has finished only those sent a
    // latency ago: the pace counts the busy time of the whole ramp over them, and the work
    // held at that pace looks like a wait of many latencies. Callers waiting twice the latency
    // lose nothing, then or once it has settled (its pace then one attempt per 10 ms: the
    // 100 a second times the latency held wait a latency).
    for latency in [ms(600), ms(1_500), ms(3_000), ms(8_000)] {
        let (_, refused) = steady_within(latency, 30, latency * 2);
        assert_eq!(refused, 0, "{latency:?}");
    }
}

/// The limits each second ends with and the calls refused, for 30 s of a healthy dependency
/// sent 100 attempts a second, one in `every` answered in 10 ms and the rest after `slow`,
/// each call with `left` to wait (`None`: no deadline).
fn bimodal(slow: Duration, every: u64, left: Option<Duration>) -> (Vec<u32>, usize) {
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new(), start);
    let mut held: Vec<(Instant, Duration, Ticket)> = Vec::new();
    let (mut limits, mut refused) = (Vec::new(), 0);
    // A fixed linear congruential sequence: the fast ones come at random, the same each run.
    let mut random = every;
    for slot in 0..300 {
        let now = start + ms(100) * slot;
        held.sort_by_key(|&(due, _, _)| std::cmp::Reverse(due));
        while held.last().is_some_and(|&(due, _, _)| due <= now) {
            let (_, latency, ticket) = held.pop().unwrap();
            tracker.answered(ticket, latency, Answer::Served, now);
        }
        for _ in 0..10 {
            random = random
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let latency = if (random >> 33).is_multiple_of(every) {
                ms(10)
            } else {
                slow
            };
            match tracker.admit(now, left, Criticality::Normal) {
                Ok(admission) => held.push((now + latency, latency, admission.ticket)),
                Err(_) => refused += 1,
            }
        }
        if slot % 10 == 9 {
            limits.push(tracker.limit(now));
        }
    }
    (limits, refused)
}

#[test]
fn o5_o1_a_dependency_answering_a_share_fast_and_the_rest_in_seconds_is_not_limited_while_they_ramp_up(
) {
    // While the slower attempts ramp up, the dependency answers only its fast share: work
    // accumulates as it would in a queue, and the pace counts the busy time of every attempt
    // over those answers. A queue's answers soon wait for the work ahead of them; these stay
    // fast until the slower share lands. Neither the limit (with no deadline) nor the expected
    // wait (callers waiting twice the slower latency) refuses anything.
    for slow in [ms(600), ms(1_500), ms(3_000), ms(8_000)] {
        for every in [2, 5, 10, 20] {
            let (limits, refused) = bimodal(slow, every, None);
            assert!(
                limits.iter().all(|&limit| limit == 1_000) && refused == 0,
                "{slow:?}, one in {every} fast, no deadline: {refused} refused, {limits:?}"
            );
            let (_, refused) = bimodal(slow, every, Some(slow * 2));
            assert_eq!(refused, 0, "{slow:?}, one in {every} fast");
        }
    }
}

/// The limit each second of 10 s ends with, for a dependency sent 100 attempts a second by
/// callers with no deadline, which answers one in `every` at once (10 ms) and queues the rest,
/// first in first out, finishing `per_second` of them.
fn queue_beside_a_fast_share(every: u64, per_second: f64) -> Vec<u32> {
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new(), start);
    let mut queue = std::collections::VecDeque::new();
    let mut fast = Vec::new();
    let (mut limits, mut credit, mut sent) = (Vec::new(), 0.0, 0u64);
    for slot in 0..100 {
        let now = start + ms(100) * slot;
        for ticket in fast.drain(..) {
            tracker.answered(ticket, ms(10), Answer::Served, now);
        }
        credit += per_second / 10.0;
        while credit >= 1.0 {
            let Some((at, ticket)) = queue.pop_front() else {
                break;
            };
            tracker.answered(ticket, now - at, Answer::Served, now);
            credit -= 1.0;
        }
        for _ in 0..10 {
            sent += 1;
            if let Ok(admission) = tracker.admit(now, None, Criticality::Normal) {
                if sent.is_multiple_of(every) {
                    fast.push(admission.ticket);
                } else {
                    queue.push_back((now, admission.ticket));
                }
            }
        }
        if slot % 10 == 9 {
            limits.push(tracker.limit(now));
        }
    }
    limits
}

#[test]
fn o5_a_queue_whose_callers_wait_is_limited_whatever_share_of_its_answers_come_at_once() {
    // Work accumulates and nobody gives up. The queue's answers take as long as the work ahead
    // of them, whatever share of answers bypasses it: not a ramp's survivors. The limit binds
    // once work has accumulated for two windows, and holds the queue there.
    for (every, per_second) in [(1_000, 50.0), (2, 15.0), (10, 45.0), (10, 5.0)] {
        let limits = queue_beside_a_fast_share(every, per_second);
        assert!(
            limits[3..].iter().all(|&limit| limit < 400),
            "one in {every} at once, {per_second} a second queued: {limits:?}"
        );
    }
}

/// The limit each 100 ms slot of four seconds ends with, for a queue 600 deep whose callers
/// send no more than leaves it: each slot the dependency answers the oldest 10 attempts, the
/// next 5 are given up on at their deadline (answered, when not `given_up`), and 5 new ones
/// are offered. What is held drains, so what is sent never outruns what is answered.
fn draining_queue(given_up: bool) -> Vec<u32> {
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new(), start);
    let mut held: std::collections::VecDeque<_> = admitted(&tracker, 600, start).into();
    let mut now = start;
    let mut limits = Vec::new();
    for _ in 0..40 {
        for ticket in held.drain(..10) {
            tracker.answered(ticket, ms(2_000), Answer::Served, now);
        }
        for ticket in held.drain(..5) {
            if given_up {
                tracker.abandoned(ticket, ms(2_000), true, now);
            } else {
                tracker.answered(ticket, ms(2_000), Answer::Served, now);
            }
        }
        let sent = (0..5).filter_map(|_| tracker.admit(now, None, Criticality::Normal).ok());
        held.extend(sent.map(|admission| admission.ticket));
        now += ms(100);
        limits.push(tracker.limit(now));
    }
    limits
}

#[test]
fn o5_a_queue_its_callers_give_up_on_binds_the_limit_though_nothing_more_is_sent_than_leaves() {
    // A third of what leaves the queue leaves unanswered, given up on by its callers: work
    // accumulates, though what is held drains. The limit binds after two windows of it.
    let limits = draining_queue(true);
    let bound = limits
        .iter()
        .position(|&limit| limit < 1_000)
        .unwrap_or_else(|| panic!("given up on, the queue binds the limit: {limits:?}"));
    assert!((19..=20).contains(&bound), "after two windows: {limits:?}");
    // 600 − 15 a slot + 5 a slot for 20 slots in flight, and the 5 cut last still held.
    assert!(
        (395..=410).contains(&limits[bound]),
        "bound at the work held: {limits:?}"
    );
    // The same queue answering all it lets go keeps pace: it is never limited.
    let limits = draining_queue(false);
    assert!(limits.iter().all(|&limit| limit == 1_000), "{limits:?}");
}

#[test]
fn o5_o7_a_probe_raises_a_binding_limit_a_tenth_of_the_raise_each_slot() {
    // Bound from the start at 100, a queue: the dependency finishes the oldest 20 attempts
    // each slot (100 ms), however many it holds, and the callers send until the limit
    // refuses. Keeping pace and bound for two windows, the limit is raised by a quarter to
    // see whether the dependency finishes more.
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new().initial(100), start);
    let mut now = start;
    let mut held = std::collections::VecDeque::new();
    let mut limits = Vec::new();
    for _ in 0..60 {
        let answered = held.len().min(20);
        for ticket in held.drain(..answered) {
            tracker.answered(ticket, ms(500), Answer::Served, now);
        }
        while let Ok(admission) = tracker.admit(now, None, Criticality::Normal) {
            held.push_back(admission.ticket);
        }
        limits.push(tracker.limit(now));
        now += ms(100);
    }
    // Bound at the work held, lowered while work accumulated as the queue filled, then
    // keeping pace.
    let base = limits[10];
    assert!(
        base < 100 && limits[10..20].iter().all(|&l| l == base),
        "{limits:?}"
    );
    let raised = 10
        + limits[10..]
            .iter()
            .position(|&limit| limit > base)
            .unwrap_or_else(|| panic!("a binding limit that keeps pace is probed: {limits:?}"));
    // The room comes a tenth of the raise a slot: all of it at once would go at once to the
    // calls waiting for it (O7), a burst at a dependency finishing no more than it is given.
    let ramp = &limits[raised - 1..raised + 10];
    let top = ramp[10];
    assert!(
        top >= base + base / 4 - 1,
        "raised by a quarter: {limits:?}"
    );
    assert!(
        ramp.windows(2)
            .all(|step| step[1] >= step[0] && step[1] - step[0] <= (top - base) / 10 + 1),
        "a tenth of the raise a slot: {ramp:?}"
    );
    // The queue finishes no more with more in flight: the raise does not stay.
    assert_eq!(limits.last(), Some(&base), "{limits:?}");
}

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

#[test]
fn o2_invalid_settings_are_refused_with_the_reason() {
    let cases = [
        (OverloadControl::new().floor(0), "floor must be at least 1"),
        (
            OverloadControl::new().floor(30).initial(20),
            "initial limit 20",
        ),
        (
            OverloadControl::new().max(10),
            "floor 20 is above the maximum 10",
        ),
        (
            OverloadControl::new().window(ms(10)),
            "window must be from 100 ms",
        ),
    ];
    for (control, reason) in cases {
        let error = control.validate().unwrap_err();
        assert!(error.to_string().contains(reason), "{error}");
    }
    assert!(OverloadControl::new().validate().is_ok());
}

/// One step of a tracker's life, drawn by the property tests.
#[derive(Debug, Clone)]
enum Op {
    Admit {
        left_ms: Option<u64>,
        criticality: Criticality,
    },
    Answer {
        which: usize,
        latency_ms: u64,
        served: bool,
    },
    Abandon {
        which: usize,
        cut: bool,
    },
    Wait {
        ms: u64,
    },
    /// A call refused by the limit asks again for room, or gives up waiting (O7).
    AskAgain {
        which: usize,
        give_up: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (proptest::option::of(0u64..3_000), 0usize..3).prop_map(|(left_ms, c)| Op::Admit {
            left_ms,
            criticality: Criticality::ALL[c],
        }),
        3 => (any::<usize>(), 0u64..2_000, any::<bool>())
            .prop_map(|(which, latency_ms, served)| Op::Answer { which, latency_ms, served }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(which, cut)| Op::Abandon { which, cut }),
        2 => (0u64..500).prop_map(|ms| Op::Wait { ms }),
        1 => (any::<usize>(), any::<bool>())
            .prop_map(|(which, give_up)| Op::AskAgain { which, give_up }),
    ]
}

/// H5: a dependency keeps its own tracker while it is used; a full table forgets the least
/// recently used one, which starts afresh when it comes back.
#[test]
fn h5_a_full_table_of_trackers_forgets_the_least_recently_used() {
    let now = Instant::now();
    let trackers = KeyedTrackers::new(OverloadControl::new(), 2);
    let db = trackers.tracker_for("db:5432", now);
    assert!(Arc::ptr_eq(&db, &trackers.tracker_for("db:5432", now)));
    trackers.tracker_for("a", now);
    trackers.tracker_for("b", now);
    assert_eq!(trackers.len(), 2);
    assert!(!Arc::ptr_eq(&db, &trackers.tracker_for("db:5432", now)));
}

proptest! {
    /// O1, O2, O5, O7: whatever happens, the limit stays within the floor and the maximum, an
    /// attempt with nothing awaited is sent, waiting or not, and the attempts held and the
    /// calls waiting are bounded.
    #[test]
    fn o2_the_limit_stays_in_bounds_and_nothing_awaited_is_never_refused(
        floor in 1u32..40,
        ops in proptest::collection::vec(op(), 1..400),
        algorithm in prop_oneof![
            Just(LimitAlgorithm::Accumulation), Just(LimitAlgorithm::Gradient),
            Just(LimitAlgorithm::Aimd), Just(LimitAlgorithm::Vegas)
        ],
        bound_from_the_start in any::<bool>(),
    ) {
        let mut control = OverloadControl::new().floor(floor).max(floor * 4).algorithm(algorithm);
        if bound_from_the_start {
            control = control.initial(floor);
        }
        let start = Instant::now();
        let tracker = LoadTracker::new(control, start);
        let mut now = start;
        let mut running: Vec<(Ticket, Instant)> = Vec::new();
        let mut waiting = Vec::new();
        for op in ops {
            match op {
                Op::Admit { left_ms, criticality } => {
                    let nothing_awaited = running.is_empty();
                    match tracker.admit(now, left_ms.map(ms), criticality) {
                        Ok(admission) => running.push((admission.ticket, now)),
                        Err(refused) => {
                            prop_assert!(!nothing_awaited, "refused with nothing awaited: {refused:?}");
                            if refused.room_in.is_some() {
                                let until = now + ms(left_ms.unwrap_or(1_000));
                                waiting.extend(
                                    tracker.wait(until, criticality).map(|t| (t, criticality)),
                                );
                            }
                        }
                    }
                }
                Op::AskAgain { which, give_up } if !waiting.is_empty() => {
                    let (ticket, criticality) = waiting.swap_remove(which % waiting.len());
                    if give_up {
                        tracker.stop_waiting(ticket);
                    } else {
                        let nothing_awaited = running.is_empty();
                        match tracker.admit_waiting(ticket, now, None, criticality) {
                            Ok(admission) => running.push((admission.ticket, now)),
                            Err(refused) => {
                                prop_assert!(!nothing_awaited, "refused with nothing awaited: {refused:?}");
                                waiting.push((ticket, criticality));
                            }
                        }
                    }
                }
                Op::Answer { which, latency_ms, served } if !running.is_empty() => {
                    let (ticket, _) = running.swap_remove(which % running.len());
                    let answer = if served { Answer::Served } else { Answer::Unserved };
                    tracker.answered(ticket, ms(latency_ms), answer, now);
                }
                Op::Abandon { which, cut } if !running.is_empty() => {
                    let (ticket, sent) = running.swap_remove(which % running.len());
                    tracker.abandoned(ticket, now - sent, cut, now);
                }
                Op::Wait { ms: wait } => now += ms(wait),
                _ => {}
            }
            let limit = tracker.limit(now);
            prop_assert!((floor..=floor * 4).contains(&limit), "limit {limit}");
            prop_assert!(tracker.held(now) as usize <= running.len() + 2 * (floor * 4) as usize);
            prop_assert!(tracker.waiting(now) <= waiting.len().min(2 * (floor * 4) as usize));
        }
        for (ticket, _) in waiting {
            tracker.stop_waiting(ticket);
        }
        prop_assert_eq!(tracker.waiting(now), 0);
    }

    /// H5, O1: however many dependencies a client meets, the trackers kept stay bounded.
    #[test]
    fn o1_keyed_trackers_stay_bounded(keys in proptest::collection::vec("[a-z]{1,4}", 1..200), max in 1usize..16) {
        let trackers = KeyedTrackers::new(OverloadControl::new(), max);
        let now = Instant::now();
        for key in &keys {
            trackers.tracker_for(key, now);
            prop_assert!(trackers.len() <= max);
        }
    }
}
