//! The load tracker (O1, O2, O5–O7, E5, H5): the helpers its tests share, the settings it
//! refuses, the table of trackers (H5), and the properties that hold whatever happens.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::criticality::Criticality;

mod accumulation;
mod ceiling;
mod expected_wait;
mod patience;
mod waiters;

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
