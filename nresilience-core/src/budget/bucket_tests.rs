use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

fn bucket(options: BudgetOptions, now: Instant) -> TokenBucket {
    TokenBucket::new(options, now).expect("valid options")
}

fn drain(bucket: &TokenBucket, now: Instant) -> u32 {
    let mut granted = 0;
    while bucket.try_withdraw(now, Criticality::Normal) {
        granted += 1;
    }
    granted
}

#[test]
fn b4_new_bucket_starts_full() {
    let now = Instant::now();
    let bucket = bucket(BudgetOptions::default(), now);
    assert_eq!(bucket.balance(now), 30.0);
    assert_eq!(bucket.utilization(now), 0.0);
    assert_eq!(drain(&bucket, now), 30);
}

#[test]
fn b1_ten_deposits_of_a_tenth_fund_exactly_one_retry() {
    let now = Instant::now();
    let bucket = bucket(BudgetOptions::default().minimum_per_second(0.0), now);
    assert_eq!(drain(&bucket, now), 1);
    for _ in 0..9 {
        bucket.deposit(now);
    }
    assert!(
        !bucket.try_withdraw(now, Criticality::Normal),
        "nine deposits fund nothing"
    );
    bucket.deposit(now);
    assert!(
        bucket.try_withdraw(now, Criticality::Normal),
        "the tenth funds one retry"
    );
    assert_eq!(bucket.balance(now), 0.0);
}

#[test]
fn b1_b12_a_deposit_says_whether_it_found_the_bucket_short_of_full() {
    let now = Instant::now();
    let bucket = bucket(BudgetOptions::default().minimum_per_second(0.0), now);
    assert!(!bucket.deposit(now), "full: nothing changes");
    assert!(bucket.try_withdraw(now, Criticality::Normal));
    for _ in 0..10 {
        assert!(bucket.deposit(now), "short of full: the level rises");
    }
    assert!(!bucket.deposit(now), "full again");
}

#[test]
fn b1_thousand_deposits_fund_exactly_hundred_retries() {
    let now = Instant::now();
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(1000.0);
    let bucket = bucket(options, now);
    assert_eq!(drain(&bucket, now), 1000);
    for _ in 0..1000 {
        bucket.deposit(now);
    }
    assert_eq!(drain(&bucket, now), 100);
}

#[test]
fn b1_deposits_are_capped_at_capacity() {
    let now = Instant::now();
    let bucket = bucket(BudgetOptions::default().capacity(2.0), now);
    for _ in 0..100 {
        bucket.deposit(now);
    }
    assert_eq!(bucket.balance(now), 2.0);
}

#[test]
fn b2_floor_refills_at_a_constant_rate() {
    let start = Instant::now();
    let bucket = bucket(BudgetOptions::default(), start);
    drain(&bucket, start);
    let later = start + Duration::from_secs(2);
    assert_eq!(bucket.balance(later), 6.0);
    assert_eq!(drain(&bucket, later), 6);
    // A fractional floor accrues exactly over many small steps.
    let slow = TokenBucket::new(BudgetOptions::default().minimum_per_second(0.3), start).unwrap();
    drain(&slow, start);
    let mut now = start;
    for _ in 0..1000 {
        now += Duration::from_millis(7);
        slow.balance(now);
    }
    assert!(
        (slow.balance(now) - 0.3 * 7.0).abs() < 1e-8,
        "{}",
        slow.balance(now)
    );
}

#[test]
fn b2_zero_floor_never_refills_by_time() {
    let start = Instant::now();
    let bucket = bucket(BudgetOptions::default().minimum_per_second(0.0), start);
    drain(&bucket, start);
    assert_eq!(bucket.balance(start + Duration::from_secs(3600)), 0.0);
}

#[test]
fn b3_floor_refill_stops_at_capacity() {
    let start = Instant::now();
    let bucket = bucket(BudgetOptions::default(), start);
    drain(&bucket, start);
    assert_eq!(bucket.balance(start + Duration::from_secs(9)), 27.0);
    assert_eq!(bucket.balance(start + Duration::from_secs(1_000_000)), 30.0);
}

#[test]
fn b5_one_token_per_retry() {
    let now = Instant::now();
    let bucket = bucket(BudgetOptions::default().capacity(3.0), now);
    assert!(bucket.try_withdraw(now, Criticality::Critical));
    assert_eq!(bucket.balance(now), 2.0);
    assert!(bucket.try_withdraw(now, Criticality::Normal));
    assert_eq!(bucket.balance(now), 1.0);
}

#[test]
fn b6_time_at_or_before_the_refill_point_accrues_nothing_and_does_not_rewind() {
    let start = Instant::now();
    let bucket = bucket(BudgetOptions::default(), start);
    drain(&bucket, start);
    let later = start + Duration::from_secs(1);
    assert_eq!(bucket.balance(later), 3.0);
    // A thread that read the clock earlier arrives late: nothing accrues, nothing rewinds.
    assert_eq!(bucket.balance(start), 3.0);
    assert_eq!(bucket.balance(later), 3.0);
    assert!(bucket.try_withdraw(start + Duration::from_millis(500), Criticality::Normal));
    assert_eq!(bucket.balance(later), 2.0);
    // Had the refill point moved back to +500 ms, +1 s would accrue 1.5 tokens again.
    assert_eq!(bucket.balance(later + Duration::from_millis(1)), 2.003);
}

#[test]
fn b7_hint_is_the_floors_time_to_the_missing_token() {
    let start = Instant::now();
    let bucket = bucket(BudgetOptions::default().minimum_per_second(4.0), start);
    drain(&bucket, start);
    assert_eq!(bucket.retry_after(start), Some(Duration::from_millis(250)));
    // The hint refills first: 100 ms later only 150 ms remain.
    let later = start + Duration::from_millis(100);
    assert_eq!(bucket.retry_after(later), Some(Duration::from_millis(150)));
    assert_eq!(
        bucket.retry_after(start + Duration::from_millis(250)),
        Some(Duration::ZERO)
    );
}

#[test]
fn b7_zero_floor_gives_no_hint() {
    let now = Instant::now();
    let bucket = bucket(BudgetOptions::default().minimum_per_second(0.0), now);
    assert_eq!(bucket.retry_after(now), Some(Duration::ZERO));
    drain(&bucket, now);
    assert_eq!(bucket.retry_after(now), None);
}

#[test]
fn b9_sheddable_retry_leaves_half_the_bucket() {
    let now = Instant::now();
    let bucket = bucket(
        BudgetOptions::default()
            .minimum_per_second(0.0)
            .capacity(10.0),
        now,
    );
    let mut granted = 0;
    while bucket.try_withdraw(now, Criticality::Sheddable) {
        granted += 1;
    }
    // 10 → 6 tokens: each grant needed at least 1 + 10/2 = 6 before it.
    assert_eq!(granted, 5);
    assert_eq!(bucket.balance(now), 5.0);
    assert!(bucket
        .retry_after_for(now, Criticality::Sheddable)
        .is_none());
    // Other levels still spend the rest.
    assert!(bucket.try_withdraw(now, Criticality::Normal));
    assert!(bucket.try_withdraw(now, Criticality::Critical));
    assert_eq!(drain(&bucket, now), 3);
}

#[test]
fn b9_sheddable_hint_counts_the_half_it_must_leave() {
    let start = Instant::now();
    let bucket = bucket(BudgetOptions::default(), start); // floor 3/s, capacity 30
    drain(&bucket, start);
    assert_eq!(
        bucket.retry_after_for(start, Criticality::Sheddable),
        Some(Duration::from_secs(16) / 3 + Duration::from_nanos(1))
    );
}

#[test]
fn b11_utilization_reads_zero_to_one() {
    let now = Instant::now();
    let bucket = bucket(
        BudgetOptions::default()
            .minimum_per_second(0.0)
            .capacity(4.0),
        now,
    );
    assert_eq!(bucket.utilization(now), 0.0);
    bucket.try_withdraw(now, Criticality::Normal);
    assert_eq!(bucket.utilization(now), 0.25);
    drain(&bucket, now);
    assert_eq!(bucket.utilization(now), 1.0);
}

#[test]
fn debug_prints_the_balance() {
    let now = Instant::now();
    let bucket = bucket(BudgetOptions::default(), now);
    let text = format!("{bucket:?}");
    assert!(text.contains("balance: 30.0"), "{text}");
    assert!(text.contains("capacity: 30.0"), "{text}");
}

#[test]
fn invalid_options_are_an_error_at_construction() {
    let now = Instant::now();
    let err = TokenBucket::new(BudgetOptions::default().fraction(0.0), now).unwrap_err();
    assert!(err.to_string().contains("RetryBudget::None"));
}

#[test]
fn two_threads_never_over_generate() {
    // Each operation takes a virtual timestamp from a shared counter, so timestamps reach
    // the lock out of order, as real clock reads do, and the bound is exact to compute.
    const OPS: u64 = 200_000;
    let start = Instant::now();
    let options = BudgetOptions::default();
    let bucket = Arc::new(bucket(options, start));
    let clock = Arc::new(AtomicU64::new(0));
    let worker = |seed: u64| {
        let bucket = Arc::clone(&bucket);
        let clock = Arc::clone(&clock);
        std::thread::spawn(move || {
            let (mut granted, mut deposits) = (0u64, 0u64);
            for i in 0..OPS {
                let now = start + Duration::from_micros(clock.fetch_add(1, Ordering::Relaxed));
                if (i + seed).is_multiple_of(4) {
                    bucket.deposit(now);
                    deposits += 1;
                } else if bucket.try_withdraw(now, Criticality::Normal) {
                    granted += 1;
                }
            }
            (granted, deposits)
        })
    };
    let (a, b) = (worker(0), worker(1));
    let (ga, da) = a.join().unwrap();
    let (gb, db) = b.join().unwrap();
    let elapsed = Duration::from_micros(clock.load(Ordering::Relaxed)).as_secs_f64();
    let bound = 30.0 + 0.1 * (da + db) as f64 + 3.0 * elapsed + 1.0;
    let granted = (ga + gb) as f64;
    assert!(granted <= bound, "granted {granted} > bound {bound}");
    // Withdrawals outnumber the funding, so the bucket runs dry near the bound; late
    // timestamps forgo only the accrual between two clock reads (B6).
    assert!(
        granted >= 0.99 * bound,
        "granted {granted} far below bound {bound}"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Deposit,
    Withdraw(Criticality),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Deposit),
        3 => prop_oneof![
            Just(Criticality::Critical),
            Just(Criticality::Normal),
            Just(Criticality::Sheddable)
        ]
        .prop_map(Op::Withdraw),
        2 => (0u64..3_000_000).prop_map(Op::Advance),
    ]
}

fn options() -> impl Strategy<Value = BudgetOptions> {
    (
        0.01f64..=1.0,
        0.0f64..20.0,
        proptest::option::of(1.0f64..100.0),
    )
        .prop_map(|(fraction, floor, capacity)| {
            let options = BudgetOptions::default()
                .fraction(fraction)
                .minimum_per_second(floor);
            match capacity {
                Some(capacity) => options.capacity(capacity),
                None => options,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40_000))]

    /// B1–B5, B9 (the Finagle `RetryBudgetTest` bound): over any sequence, retries granted
    /// never exceed capacity + fraction·successes + floor·elapsed, and the balance stays
    /// within [0, capacity].
    #[test]
    fn granted_retries_never_exceed_the_bound(
        options in options(),
        ops in proptest::collection::vec(op(), 1..150),
    ) {
        let start = Instant::now();
        let bucket = bucket(options, start);
        let (mut now, mut granted, mut successes) = (start, 0u64, 0u64);
        for op in ops {
            match op {
                Op::Deposit => { bucket.deposit(now); successes += 1; }
                Op::Withdraw(c) => if bucket.try_withdraw(now, c) { granted += 1 },
                Op::Advance(micros) => now += Duration::from_micros(micros),
            }
            let balance = bucket.balance(now);
            prop_assert!(balance >= 0.0 && balance <= options.effective_capacity() + 1e-9);
            let utilization = bucket.utilization(now);
            prop_assert!((0.0..=1.0).contains(&utilization));
        }
        let elapsed = (now - start).as_secs_f64();
        let bound = options.effective_capacity()
            + options.fraction * successes as f64
            + options.minimum_per_second * elapsed
            + 1.0;
        prop_assert!(granted as f64 <= bound, "granted {} > bound {}", granted, bound);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40_000))]

    /// B1, B2: a caller that retries whenever it may reaches the bound (less one token for
    /// the fraction of a token left over, and a nano-token for each deposit's rounding and
    /// each refill's: the balance is whole nano-tokens), so the budget is a bound, not a
    /// throttle.
    #[test]
    fn saturating_caller_reaches_the_bound(
        fraction in 0.01f64..=1.0,
        floor in 0.0f64..5.0,
        steps in proptest::collection::vec((0u32..5, 0u64..2_000_000), 1..100),
    ) {
        // A roomy bucket, drained every step, is never capped: every token is spendable.
        let options = BudgetOptions::default()
            .fraction(fraction)
            .minimum_per_second(floor)
            .capacity(50.0);
        let start = Instant::now();
        let bucket = bucket(options, start);
        let (mut now, mut granted, mut successes) = (start, u64::from(drain(&bucket, start)), 0u64);
        let steps_taken = steps.len() as u64;
        for (deposits, micros) in steps {
            now += Duration::from_micros(micros);
            for _ in 0..deposits {
                bucket.deposit(now);
                successes += 1;
            }
            granted += u64::from(drain(&bucket, now));
        }
        let elapsed = (now - start).as_secs_f64();
        let bound = 50.0 + fraction * successes as f64 + floor * elapsed;
        prop_assert!(granted as f64 <= bound + 1.0, "granted {} > bound {}", granted, bound);
        let rounding = (steps_taken + successes) as f64 / UNIT as f64;
        prop_assert!(
            granted as f64 >= bound - 1.0 - rounding,
            "granted {} < bound {} - 1 - {}", granted, bound, rounding
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(30_000))]

    /// B7: the hint is exactly the floor's time to the missing token: one nanosecond less
    /// is not enough, the hint itself is.
    #[test]
    fn hint_is_exact(floor in 0.01f64..50.0, spent_micros in 0u64..10_000_000) {
        let start = Instant::now();
        let bucket = bucket(BudgetOptions::default().minimum_per_second(floor).capacity(1.0), start);
        drain(&bucket, start);
        let now = start + Duration::from_micros(spent_micros);
        let hint = bucket.retry_after(now).expect("a floor gives a hint");
        if hint > Duration::ZERO {
            let probe = TokenBucket::new(BudgetOptions::default().minimum_per_second(floor).capacity(1.0), start).unwrap();
            drain(&probe, start);
            probe.balance(now);
            prop_assert!(!probe.try_withdraw(now + hint - Duration::from_nanos(1), Criticality::Normal));
            prop_assert!(bucket.try_withdraw(now + hint, Criticality::Normal));
        }
    }
}

#[test]
fn b7_b9_no_hint_for_a_sheddable_retry_a_small_bucket_can_never_fund() {
    // A floor of 0.05/s sizes the bucket at one token; a sheddable retry needs 1.5.
    let now = Instant::now();
    let options = BudgetOptions::default().minimum_per_second(0.05);
    let bucket = bucket(options, now);
    assert_eq!(bucket.capacity(), 1.0);
    assert!(bucket.try_withdraw(now, Criticality::Normal));
    assert_eq!(bucket.retry_after_for(now, Criticality::Sheddable), None);
    assert_eq!(
        bucket.retry_after_for(now, Criticality::Normal),
        Some(Duration::from_secs(20))
    );
    let later = now + Duration::from_secs(3_600);
    assert!(
        !bucket.try_withdraw(later, Criticality::Sheddable),
        "never funded"
    );
}
