//! The load tracker under contention (O1, O2, O7): threads admitting, answering and abandoning
//! attempts on one tracker and waiting for room under its limit, their timestamps taken from a
//! shared counter so that they reach it out of order, as real clock reads do. However the
//! operations interleave, the limit stays within its floor and maximum, and once every attempt
//! has ended and its answer time has passed, the tracker holds nothing, nobody waits, and it
//! admits the next attempt.
//!
//! Also run under Miri (`cargo +nightly miri test -p nresilience-core --test
//! overload_contention`), which checks the tracker's shared state for data races and
//! undefined behaviour on a few hundred operations per thread.

#![allow(clippy::unwrap_used)]

mod draws;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nresilience_core::overload::OverloadControl;
use nresilience_core::test_support::{Answer, LoadTracker};
use nresilience_core::Criticality;

use draws::Draws;

/// Operations per thread: 10⁵ natively, a few hundred under Miri.
const OPERATIONS: u64 = if cfg!(miri) { 200 } else { 100_000 };

#[test]
fn o1_o2_contended_threads_keep_the_trackers_rules_and_leave_nothing_held() {
    let control = OverloadControl::new().floor(4).initial(8).max(64);
    for threads in [2u64, 4, 8] {
        let start = Instant::now();
        let tracker = Arc::new(LoadTracker::new(control, start));
        let clock = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..threads)
            .map(|seed| {
                let (tracker, clock) = (Arc::clone(&tracker), Arc::clone(&clock));
                std::thread::spawn(move || {
                    let mut draws = Draws(seed.wrapping_mul(0x5851_F42D_4C95_7F2D) ^ threads);
                    // Threads of every criticality share the limit and the waiting room (O6).
                    let criticality = Criticality::ALL[seed as usize % 3];
                    let mut mine = Vec::new();
                    let mut waiting = Vec::new();
                    for _ in 0..OPERATIONS {
                        let draw = draws.next();
                        let now = start
                            + Duration::from_micros(clock.fetch_add(draw % 500, Ordering::Relaxed));
                        match (draw >> 16) % 4 {
                            0 | 1 => {
                                let left = Duration::from_micros((draw >> 24) % 200_000);
                                match tracker.admit(now, Some(left), criticality) {
                                    Ok(admission) => mine.push((admission.ticket, now)),
                                    Err(refused) if refused.room_in.is_some() => {
                                        waiting.extend(tracker.wait(now + left, criticality));
                                    }
                                    Err(_) => {}
                                }
                            }
                            2 if !waiting.is_empty() && draw & 2 == 0 => {
                                let ticket = waiting.swap_remove(0);
                                if draw & 4 == 0 {
                                    tracker.stop_waiting(ticket);
                                } else if let Ok(admission) =
                                    tracker.admit_waiting(ticket, now, None, criticality)
                                {
                                    mine.push((admission.ticket, now));
                                } else {
                                    waiting.push(ticket);
                                }
                            }
                            2 if !mine.is_empty() => {
                                let (ticket, sent) =
                                    mine.swap_remove((draw >> 32) as usize % mine.len());
                                tracker.answered(
                                    ticket,
                                    now.saturating_duration_since(sent),
                                    Answer::Served,
                                    now,
                                );
                            }
                            3 if !mine.is_empty() => {
                                let (ticket, sent) =
                                    mine.swap_remove((draw >> 32) as usize % mine.len());
                                tracker.abandoned(
                                    ticket,
                                    now.saturating_duration_since(sent),
                                    draw & 1 == 0,
                                    now,
                                );
                            }
                            _ => {}
                        }
                        let limit = tracker.limit(now);
                        assert!((4..=64).contains(&limit), "limit {limit}");
                    }
                    let now = start + Duration::from_micros(clock.load(Ordering::Relaxed));
                    for ticket in waiting {
                        tracker.stop_waiting(ticket);
                    }
                    for (ticket, sent) in mine {
                        tracker.answered(
                            ticket,
                            now.saturating_duration_since(sent),
                            Answer::Served,
                            now,
                        );
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let end = start + Duration::from_micros(clock.load(Ordering::Relaxed));
        // Every attempt ended; the abandoned ones are let go by their answer time at the latest.
        assert_eq!(
            tracker.held(end + Duration::from_secs(61)),
            0,
            "{threads} threads"
        );
        assert_eq!(
            tracker.waiting(end),
            0,
            "{threads} threads: every waiter left"
        );
        assert!(tracker
            .admit(
                end + Duration::from_secs(61),
                Some(Duration::ZERO),
                Criticality::Normal,
            )
            .is_ok());
    }
}
