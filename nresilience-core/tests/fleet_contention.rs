//! Fleet coordination's shared state under contention (F2–F4): threads counting attempts on
//! one service's `RetryShare`, threads spending one client's bucket while its dependency's
//! advice changes under them, and threads admitting and handing back requests on one
//! service's `ServerAdmission`.
//!
//! Also run under Miri (`cargo +nightly miri test -p nresilience-core --test
//! fleet_contention`), which checks the atomics for data races and undefined behaviour on a
//! few hundred operations per thread.

#![allow(clippy::unwrap_used)]

mod draws;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nresilience_core::fleet::{Allowance, RetryShare, ServerAdmission};
use nresilience_core::overload::OverloadControl;
use nresilience_core::{BudgetOptions, Criticality, TokenBucket};

use draws::Draws;

const OPERATIONS: u64 = if cfg!(miri) { 600 } else { 400_000 };

#[test]
fn f3_advice_changing_under_contended_threads_never_grants_more_than_the_budget() {
    for options in [
        BudgetOptions::default(),
        BudgetOptions::default().fraction(0.5).capacity(5.0),
    ] {
        for threads in [2_u64, 4] {
            let start = Instant::now();
            let bucket = Arc::new(TokenBucket::new(options, start).unwrap());
            let clock = Arc::new(AtomicU64::new(0));
            let workers: Vec<_> = (0..threads)
                .map(|seed| {
                    let (bucket, clock) = (Arc::clone(&bucket), Arc::clone(&clock));
                    std::thread::spawn(move || {
                        let mut draws = Draws(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ threads);
                        let (mut granted, mut deposits) = (0_u64, 0_u64);
                        for _ in 0..OPERATIONS / threads {
                            let draw = draws.next();
                            let micros = clock.fetch_add(draw % 50, Ordering::Relaxed);
                            let now = start + Duration::from_micros(micros);
                            match (draw >> 8) % 6 {
                                0 | 1 => {
                                    bucket.deposit(now);
                                    deposits += 1;
                                }
                                2 => {
                                    let share = ((draw >> 16) % 1_001) as f64 / 1_000.0;
                                    bucket.follow(Allowance::new(share), now);
                                }
                                _ => {
                                    granted +=
                                        u64::from(bucket.try_withdraw(now, Criticality::Normal));
                                }
                            }
                        }
                        (granted, deposits)
                    })
                })
                .collect();
            let (mut granted, mut deposits) = (0, 0);
            for worker in workers {
                let (g, d) = worker.join().unwrap();
                granted += g;
                deposits += d;
            }
            let elapsed = Duration::from_micros(clock.load(Ordering::Relaxed));
            // What the bucket may grant unadvised (as budget_contention bounds it): advice
            // only ever takes away.
            let bound = options.effective_capacity()
                + options.fraction * deposits as f64
                + options.minimum_per_second * elapsed.as_secs_f64()
                + 1.0;
            assert!(
                granted as f64 <= bound,
                "{threads} threads, {options:?}: granted {granted} > the unadvised bound {bound}"
            );
            let now = start + elapsed;
            assert!(bucket.balance(now) <= bucket.capacity(), "{bucket:?}");
        }
    }
}

#[test]
fn f2_attempts_counted_by_contended_threads_are_read_whole() {
    let start = Instant::now();
    let share = Arc::new(RetryShare::new(0.1, start).unwrap());
    let threads = 4_u64;
    let workers: Vec<_> = (0..threads)
        .map(|thread| {
            let share = Arc::clone(&share);
            std::thread::spawn(move || {
                // One retry in every five attempts: a quarter of the first attempts.
                for i in 0..OPERATIONS / threads {
                    let now = start + Duration::from_micros(i);
                    share.record((i + thread) % 5 == 0, now);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let advice = share.advice(start);
    // A reading counts 200 first attempts; a count that lands between its two swaps moves
    // an attempt from one reading to the next, never loses one.
    assert!(
        (0.2..=0.3).contains(&advice.retries()),
        "{advice:?} after {share:?}"
    );
    assert!(advice.allowance() < Allowance::WHOLE, "{advice:?}");
}

#[test]
fn f4_requests_admitted_and_handed_back_by_contended_threads_leave_nothing_held() {
    let start = Instant::now();
    // A limit bound from the start at 20 requests in the handlers.
    let control = OverloadControl::new().floor(10).initial(20).max(20);
    let service = Arc::new(ServerAdmission::with_control(control, start).unwrap());
    let clock = Arc::new(AtomicU64::new(0));
    let threads = 4_u64;
    let workers: Vec<_> = (0..threads)
        .map(|seed| {
            let (service, clock) = (Arc::clone(&service), Arc::clone(&clock));
            std::thread::spawn(move || {
                let mut draws = Draws(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xF4);
                let mut held = Vec::new();
                for _ in 0..OPERATIONS / threads / 4 {
                    let draw = draws.next();
                    let micros = clock.fetch_add(draw % 200, Ordering::Relaxed);
                    let now = start + Duration::from_micros(micros);
                    let criticality = Criticality::ALL[(draw >> 8) as usize % 3];
                    if held.len() < 4 && !(draw >> 12).is_multiple_of(3) {
                        let retry = (draw >> 16).is_multiple_of(4);
                        if let Ok(admitted) = service.admit(retry, criticality, None, now) {
                            held.push(admitted);
                        }
                    } else if let Some(admitted) = held.pop() {
                        if (draw >> 20).is_multiple_of(5) {
                            service.cancelled(admitted, now);
                        } else {
                            service.finished(admitted, now);
                        }
                    }
                }
                let now = start + Duration::from_micros(clock.load(Ordering::Relaxed));
                for admitted in held {
                    service.finished(admitted, now);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    // Every place handed back: a critical first attempt finds the whole limit free, once the
    // refusals' slot has passed.
    let now = start + Duration::from_micros(clock.load(Ordering::Relaxed)) + Duration::from_secs(1);
    let limit = service.limit(now);
    for i in 0..limit {
        let admitted = service.admit(false, Criticality::Critical, None, now);
        assert!(
            admitted.is_ok(),
            "request {i} of a limit of {limit} refused: {service:?}"
        );
    }
}
