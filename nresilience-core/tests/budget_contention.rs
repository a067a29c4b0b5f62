//! The budget's bound under contention (SPEC B1–B3, B6): threads hammering one bucket with
//! deposits and withdrawals of every criticality, their timestamps taken from a shared
//! counter so that they reach the bucket out of order, as real clock reads do. However the
//! operations interleave, the retries granted never exceed what funded them:
//! `capacity + fraction × deposits + floor × elapsed`, plus one for the token a withdrawal
//! may round into.
//!
//! Also run under Miri (`cargo +nightly miri test -p nresilience-core --test
//! budget_contention`), which checks the bucket's atomics for data races and undefined
//! behaviour on a few hundred operations per thread.

#![allow(clippy::unwrap_used)]

mod draws;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nresilience_core::{BudgetOptions, Criticality, TokenBucket};

use draws::Draws;

/// Operations in all, shared by the threads: 10⁶ natively, a few hundred per thread under
/// Miri, which interprets every instruction.
const OPERATIONS: u64 = if cfg!(miri) { 600 } else { 1_000_000 };

/// What the threads did together.
#[derive(Default)]
struct Tally {
    granted: u64,
    deposits: u64,
}

/// `threads` threads share `OPERATIONS` operations on one bucket with `options`; each
/// operation advances the shared clock by up to 50 µs and is a deposit (2 in 5) or a
/// withdrawal of a random criticality. Returns the tally and the virtual time elapsed.
fn hammer(threads: u64, options: BudgetOptions) -> (Tally, Duration) {
    let start = Instant::now();
    let bucket = Arc::new(TokenBucket::new(options, start).unwrap());
    let clock = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|seed| {
            let (bucket, clock) = (Arc::clone(&bucket), Arc::clone(&clock));
            std::thread::spawn(move || {
                let mut draws = Draws(seed.wrapping_mul(0x5851_F42D_4C95_7F2D) ^ threads);
                let mut tally = Tally::default();
                for _ in 0..OPERATIONS / threads {
                    let draw = draws.next();
                    let micros = clock.fetch_add(draw % 50, Ordering::Relaxed);
                    let now = start + Duration::from_micros(micros);
                    match (draw >> 8) % 5 {
                        0 | 1 => {
                            bucket.deposit(now);
                            tally.deposits += 1;
                        }
                        kind => {
                            let criticality = match kind {
                                2 => Criticality::Critical,
                                3 => Criticality::Normal,
                                _ => Criticality::Sheddable,
                            };
                            tally.granted += u64::from(bucket.try_withdraw(now, criticality));
                        }
                    }
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::default();
    for worker in workers {
        let tally = worker.join().unwrap();
        total.granted += tally.granted;
        total.deposits += tally.deposits;
    }
    (total, Duration::from_micros(clock.load(Ordering::Relaxed)))
}

/// The most the bucket may grant: its capacity, the deposits' fraction, the floor's accrual,
/// and one for rounding.
fn bound(options: &BudgetOptions, tally: &Tally, elapsed: Duration) -> f64 {
    options.effective_capacity()
        + options.fraction * tally.deposits as f64
        + options.minimum_per_second * elapsed.as_secs_f64()
        + 1.0
}

#[test]
fn b1_b3_contended_threads_never_get_more_than_the_bucket_was_funded_with() {
    for options in [
        BudgetOptions::default(),
        BudgetOptions::default().minimum_per_second(0.0),
        BudgetOptions::default()
            .minimum_per_second(0.0)
            .capacity(10.0),
        BudgetOptions::default().fraction(0.5).capacity(5.0),
    ] {
        for threads in [2, 4, 8] {
            let (tally, elapsed) = hammer(threads, options);
            let bound = bound(&options, &tally, elapsed);
            let granted = tally.granted as f64;
            assert!(
                granted <= bound,
                "{threads} threads, {options:?}: granted {granted} > bound {bound}"
            );
            // Three withdrawals for every two deposits: the bucket runs dry, so what it
            // grants is near what funded it, not merely below it. Sheddable withdrawals
            // leave half the bucket unspent (B9), so "near" is within a tenth. A one-token
            // bucket does not run dry: ten deposits fill it, and the deposits that arrive
            // before the next withdrawal find it full and add nothing (B1's cap), about one
            // in eleven even on one thread, so the check is for larger buckets.
            if !cfg!(miri) && options.effective_capacity() > 1.0 {
                assert!(
                    granted >= 0.9 * bound,
                    "{threads} threads, {options:?}: granted {granted}, far below {bound}"
                );
            }
        }
    }
}
