//! O5 with O1: work its callers' patience holds back still accumulates.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::ms;
use crate::criticality::Criticality;
use crate::overload::{Answer, LoadTracker, OverloadControl, SaturatedBy, Ticket};

/// What a run saw each 100 ms slot: the limit, and the calls refused by their expected wait.
struct Run {
    limits: Vec<u32>,
    turned_away: Vec<u32>,
}

/// A dependency that finishes every attempt sent to it for 2 s, twenty a slot, then only the
/// oldest `serves` a slot, first in first out, for 4 s: a queue. Twenty attempts come each
/// slot, the `i`th waiting what `attempt(i)` says, a hedge when it says so; none is given up
/// on, so nothing is cut or abandoned.
fn queue_behind_patience(serves: usize, attempt: impl Fn(usize) -> (Duration, bool)) -> Run {
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new(), start);
    let mut queue: VecDeque<(Instant, Ticket)> = VecDeque::new();
    let mut run = Run {
        limits: Vec::new(),
        turned_away: Vec::new(),
    };
    for slot in 0..60 {
        let now = start + ms(100) * slot;
        let finishes = if slot < 20 { queue.len() } else { serves };
        for (sent, ticket) in queue.drain(..finishes.min(queue.len())) {
            tracker.answered(ticket, now - sent, Answer::Served, now);
        }
        let mut turned_away = 0;
        for i in 0..20 {
            let (left, hedge) = attempt(i);
            let admitted = if hedge {
                tracker.admit_hedge(now, Some(left), Criticality::Normal)
            } else {
                tracker.admit(now, Some(left), Criticality::Normal)
            };
            match admitted {
                Ok(admission) => queue.push_back((now, admission.ticket)),
                Err(refused) if refused.cause == SaturatedBy::Wait => turned_away += 1,
                Err(_) => {}
            }
        }
        run.limits.push(tracker.limit(now));
        run.turned_away.push(turned_away);
    }
    run
}

#[test]
fn o5_o1_a_queue_its_callers_patience_holds_full_binds_the_limit_by_the_calls_it_turns_away() {
    // Twenty calls a slot against eight finished: the queue fills until its wait is the
    // callers' 2 s, and from then the expected wait (O1) sends only what leaves it. Nothing is
    // given up on and what is sent is answered, yet work accumulates: the calls turned away
    // are work the dependency cannot take. The limit binds on them one to two windows after
    // the first is turned away, at the work then held, the 160 attempts that are the callers'
    // 2 s at eight a slot, and holds there (the run ends before a bound limit is probed).
    let run = queue_behind_patience(8, |_| (ms(2_000), false));
    let first = run
        .turned_away
        .iter()
        .position(|&n| n > 0)
        .unwrap_or_else(|| panic!("the queue fills to the callers' 2 s: {:?}", run.turned_away));
    let bound = run
        .limits
        .iter()
        .position(|&limit| limit < 1_000)
        .unwrap_or_else(|| panic!("turned away, the work binds the limit: {:?}", run.limits));
    assert!(
        (first + 10..=first + 20).contains(&bound),
        "bound within two windows of the first turned away ({first}): {:?}",
        run.limits
    );
    assert!(
        run.limits[bound..]
            .iter()
            .all(|&limit| (155..=165).contains(&limit)),
        "{:?}",
        run.limits
    );
}

#[test]
fn o5_o1_callers_with_less_time_than_a_dependency_takes_do_not_bind_the_limit() {
    // A dependency that keeps pace, answering every attempt after 200 ms, no queue behind it.
    // Half the callers wait 100 ms: the expected wait turns them away, rightly, from the
    // second the pace tells it. Their refusals say nothing of accumulation — a dependency
    // serving at its latency could not have answered them in time — so the callers who wait
    // 2 s are never refused, and the limit never binds.
    let start = Instant::now();
    let tracker = LoadTracker::new(OverloadControl::new(), start);
    let mut held: VecDeque<(Instant, Ticket)> = VecDeque::new();
    let (mut short_refused, mut long_refused) = (0, 0);
    for slot in 0..100 {
        let now = start + ms(100) * slot;
        while held.front().is_some_and(|&(sent, _)| sent + ms(200) <= now) {
            let (_, ticket) = held.pop_front().unwrap();
            tracker.answered(ticket, ms(200), Answer::Served, now);
        }
        for call in 0..20 {
            let left = if call % 2 == 0 { ms(100) } else { ms(2_000) };
            match tracker.admit(now, Some(left), Criticality::Normal) {
                Ok(admission) => held.push_back((now, admission.ticket)),
                Err(refused) if left == ms(100) => {
                    assert_eq!(refused.cause, SaturatedBy::Wait);
                    short_refused += 1;
                }
                Err(_) => long_refused += 1,
            }
        }
        assert_eq!(tracker.limit(now), 1_000, "slot {slot}");
    }
    assert!(
        short_refused > 500,
        "O1 turns the short calls away: {short_refused}"
    );
    assert_eq!(long_refused, 0);
}

#[test]
fn o5_o1_a_hedge_turned_away_is_no_work_offered() {
    // The same queue, sent eight first attempts a slot by callers who wait 30 s — what it
    // finishes — and twelve hedges of calls that wait 2 s. The hedges fill it to their 2 s and
    // are turned away from then: each copies an attempt already sent, and nothing piles up
    // behind it. The limit never binds.
    let run = queue_behind_patience(8, |i| {
        if i < 8 {
            (ms(30_000), false)
        } else {
            (ms(2_000), true)
        }
    });
    assert!(
        run.turned_away.iter().sum::<u32>() > 100,
        "the hedges are turned away: {:?}",
        run.turned_away
    );
    assert!(
        run.limits.iter().all(|&limit| limit == 1_000),
        "{:?}",
        run.limits
    );
}
