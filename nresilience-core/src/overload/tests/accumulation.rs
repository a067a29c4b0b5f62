//! O5 with O1: the limit binds on work accumulating, and neither it nor the expected wait
//! refuses attempts ramping up to a long latency; a bound limit is raised only as far as the
//! dependency then finishes more.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{admitted, ms};
use crate::criticality::Criticality;
use crate::overload::{Answer, LoadTracker, OverloadControl, Ticket};

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
    let mut held = VecDeque::new();
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
    let mut queue = VecDeque::new();
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
    let mut held = VecDeque::new();
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
