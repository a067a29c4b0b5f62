use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::budget::{BudgetOptions, TokenBucket};
use crate::criticality::Criticality;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Records `firsts` first attempts with `retries` retries spread among them, at `now`.
fn attempts(share: &RetryShare, firsts: u64, retries: u64, now: Instant) {
    for i in 0..firsts {
        if i < retries {
            share.record(true, now);
        }
        share.record(false, now);
    }
}

#[test]
fn f2_a_share_outside_zero_to_one_is_refused() {
    let now = Instant::now();
    assert!(RetryShare::new(-0.1, now).is_none());
    assert!(RetryShare::new(1.5, now).is_none());
    assert!(RetryShare::new(f64::NAN, now).is_none());
    assert!(RetryShare::new(0.0, now).is_some());
}

#[test]
fn f2_no_reading_before_enough_first_attempts_and_the_whole_budget_meanwhile() {
    let now = Instant::now();
    let share = RetryShare::new(0.1, now).unwrap();
    attempts(&share, 199, 150, now);
    let advice = share.advice(now + secs(1));
    assert_eq!(advice.allowance(), Allowance::WHOLE);
    assert_eq!(advice.retries(), 0.0);
    assert_eq!(advice.accepted(), 0.1);
}

#[test]
fn f2_f3_over_its_share_the_fleet_is_advised_down_in_proportion_the_floor_first() {
    let now = Instant::now();
    let share = RetryShare::new(0.1, now).unwrap();
    attempts(&share, 200, 80, now); // 40 %: four times the share
    let first = share.advice(now);
    assert_eq!(first.retries(), 0.4);
    assert_eq!(first.allowance().floor_share(), 0.25);
    assert_eq!(first.allowance().fraction_share(), 1.0);
    attempts(&share, 200, 80, now);
    assert_eq!(share.advice(now).allowance().floor_share(), 0.0625);
    // A quarter of that is less of the floor than funds anything: it is gone.
    attempts(&share, 200, 80, now);
    assert_eq!(share.advice(now).allowance(), Allowance::new(0.5));
    // Then the fraction falls, in proportion as the floor did.
    attempts(&share, 200, 80, now);
    assert_eq!(share.advice(now).allowance().fraction_share(), 0.25);
}

#[test]
fn f2_f3_under_its_share_the_fleet_is_advised_back_up_in_steps() {
    let now = Instant::now();
    let share = RetryShare::new(0.1, now).unwrap();
    attempts(&share, 200, 200, now); // 100 %: a tenth of the floor left
    let low = share.advice(now).allowance().floor_share();
    assert!((low - 0.1).abs() < 1e-5, "{low}");
    attempts(&share, 200, 10, now); // 5 %, half the share: the most a reading rises
    let risen = share.advice(now).allowance().floor_share();
    assert!((risen - low * 1.1).abs() < 1e-5, "{low} → {risen}");
    attempts(&share, 200, 20, now); // at the share: left as it is
    assert_eq!(share.advice(now).allowance().floor_share(), risen);
    for _ in 0..30 {
        attempts(&share, 200, 10, now);
    }
    assert_eq!(share.advice(now).allowance(), Allowance::WHOLE);
}

#[test]
fn f2_f3_a_fleet_that_retries_nothing_is_whole_again_in_fourteen_readings() {
    let now = Instant::now();
    let share = RetryShare::new(0.1, now).unwrap();
    for _ in 0..4 {
        attempts(&share, 200, 200, now); // the floor, then the fraction, cut to a tenth
    }
    assert_eq!(share.advice(now).allowance(), Allowance::NONE);
    // No retry at all: the advice holds nothing back, and each part doubles a reading.
    // The fraction from 0.02 to whole in seven, then the floor in seven.
    let mut readings = 0;
    while share.advice(now).allowance() < Allowance::WHOLE {
        attempts(&share, 200, 0, now);
        readings += 1;
        assert!(readings <= 14, "{:?}", share.advice(now));
    }
    assert_eq!(readings, 14);
}

#[test]
fn f2_from_nothing_the_allowance_still_rises() {
    let now = Instant::now();
    let share = RetryShare::new(0.0, now).unwrap();
    attempts(&share, 200, 1, now); // the floor goes
    attempts(&share, 200, 1, now); // then the fraction
    assert_eq!(share.advice(now).allowance(), Allowance::NONE);
    attempts(&share, 200, 0, now);
    assert_eq!(share.advice(now).allowance().fraction_share(), 0.02);
}

/// F3: 200 clients of 2 calls a second, failing one call in five, each with a floor of 3
/// retries a second and a fraction that funds 0.16 (a tenth of its 1.6 successes): the floors
/// fund their retries. Hearing each reading's advice as the next begins, the fleet's share
/// settles near the accepted tenth and stays there. Stepping the allowance itself rather than
/// the floor, a tenth more allowance was a tenth of every floor, and the fleet swung between a
/// fifth of its first attempts and a sixteenth.
#[test]
fn f3_a_fleet_its_floors_fund_settles_near_the_share_without_swinging() {
    let now = Instant::now();
    let share = RetryShare::new(0.1, now).unwrap();
    let mut shares = Vec::new();
    for _ in 0..80 {
        let heard = share.advice(now).allowance();
        // Retries a second each: what its failures ask, at most what its budget funds.
        let funded = 0.16 * heard.fraction_share() + 3.0 * heard.floor_share();
        // A reading is 200 first attempts: half a second of the fleet's 400 calls.
        let retries = (200.0 * 0.5 * funded.min(0.4)).round() as u64;
        attempts(&share, 200, retries, now);
        shares.push(retries as f64 / 200.0);
    }
    let settled = &shares[40..];
    assert!(
        settled.iter().all(|share| (0.06..=0.14).contains(share)),
        "{settled:?}"
    );
}

#[test]
fn f2_a_quiet_service_reads_what_it_saw_after_the_longest_span() {
    let now = Instant::now();
    let share = RetryShare::new(0.1, now).unwrap();
    attempts(&share, 20, 10, now); // 50 %, too few to read at once
    assert_eq!(share.advice(now + secs(9)).allowance(), Allowance::WHOLE);
    let advice = share.advice(now + secs(10));
    assert_eq!(advice.retries(), 0.5);
    assert!(advice.allowance() < Allowance::WHOLE);
}

#[test]
fn f3_the_floor_goes_first_then_the_fraction() {
    assert_eq!(Allowance::WHOLE.floor_share(), 1.0);
    assert_eq!(Allowance::new(0.75).floor_share(), 0.5);
    assert_eq!(Allowance::new(0.75).fraction_share(), 1.0);
    assert_eq!(Allowance::new(0.5).floor_share(), 0.0);
    assert_eq!(Allowance::new(0.25).fraction_share(), 0.5);
    assert_eq!(Allowance::NONE.fraction_share(), 0.0);
    assert_eq!(Allowance::new(f64::NAN), Allowance::WHOLE);
    assert_eq!(Allowance::new(-1.0), Allowance::NONE);
    assert_eq!(Allowance::new(0.4204).to_string(), "0.420");
}

#[test]
fn f3_an_advised_bucket_refills_at_its_advised_floor() {
    let now = Instant::now();
    let bucket = TokenBucket::new(BudgetOptions::default(), now).unwrap(); // 30, 3/s
    bucket.follow(Allowance::new(0.75), now); // half the floor, a second of it banked
    assert_eq!(bucket.balance(now), 1.5);
    while bucket.try_withdraw(now, Criticality::Normal) {}
    // Half of 3 a second: a token in two thirds of a second.
    assert_eq!(
        bucket.retry_after(now),
        Some(Duration::from_nanos(333_333_334))
    );
    assert!(bucket.try_withdraw(now + Duration::from_millis(700), Criticality::Normal));
}

#[test]
fn f3_advice_that_lapses_leaves_the_budget_as_it_was() {
    let now = Instant::now();
    let bucket = TokenBucket::new(BudgetOptions::default(), now).unwrap();
    bucket.follow(Allowance::NONE, now);
    assert_eq!(bucket.allowance(now + secs(10)), Allowance::NONE);
    assert_eq!(bucket.allowance(now + secs(11)), Allowance::WHOLE);
    // Heard again, it holds again.
    bucket.follow(Allowance::NONE, now + secs(11));
    assert_eq!(bucket.allowance(now + secs(12)), Allowance::NONE);
}

#[derive(Debug, Clone)]
enum Op {
    Deposit,
    Withdraw(Criticality),
    Follow(u32),
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Deposit),
        3 => prop_oneof![
            Just(Criticality::Critical),
            Just(Criticality::Normal),
            Just(Criticality::Sheddable)
        ]
        .prop_map(Op::Withdraw),
        1 => (0_u32..=1_000_000).prop_map(Op::Follow),
        2 => (0_u64..2_000).prop_map(Op::Wait),
    ]
}

proptest! {
    /// F3: whatever the fleet's readings, a reading over the accepted share never raises the
    /// allowance and one at or under it never lowers it; the floor goes first (the fraction is
    /// cut only once none of it is left) and comes back last (none of it before the fraction is
    /// whole). Hedges count as retries, so a reading may see more retries than first attempts.
    #[test]
    fn f3_each_reading_moves_the_allowance_the_way_the_share_says(
        readings in proptest::collection::vec(0_u64..=400, 1..80),
        accepted in prop_oneof![Just(0.0), Just(0.1), 0.0_f64..=1.0],
    ) {
        let now = Instant::now();
        let share = RetryShare::new(accepted, now).unwrap();
        for retries in readings {
            let before = share.advice(now).allowance();
            for _ in 0..retries {
                share.record(true, now);
            }
            attempts(&share, 200, 0, now);
            let after = share.advice(now).allowance();
            if retries as f64 / 200.0 > accepted {
                prop_assert!(after <= before, "{before:?} → {after:?}");
                if before.floor_share() > 0.0 {
                    prop_assert_eq!(after.fraction_share(), 1.0);
                }
            } else {
                prop_assert!(after >= before, "{before:?} → {after:?}");
                if before.fraction_share() < 1.0 {
                    prop_assert_eq!(after.floor_share(), 0.0);
                }
            }
        }
    }

    /// F3: whatever the advice and however it changes, an advised bucket never grants a
    /// retry its unadvised twin, fed the same successes at the same instants, would refuse.
    #[test]
    fn f3_advice_never_raises_a_bucket_above_its_own_budget(
        ops in proptest::collection::vec(op(), 1..300),
        floor in prop_oneof![Just(0.0), Just(3.0), 0.0_f64..20.0],
    ) {
        let start = Instant::now();
        let options = BudgetOptions::default().minimum_per_second(floor);
        let advised = TokenBucket::new(options, start).unwrap();
        let unadvised = TokenBucket::new(options, start).unwrap();
        let mut now = start;
        for op in ops {
            match op {
                Op::Deposit => {
                    advised.deposit(now);
                    unadvised.deposit(now);
                }
                Op::Withdraw(criticality) => {
                    let granted = advised.try_withdraw(now, criticality);
                    let twin = unadvised.try_withdraw(now, criticality);
                    prop_assert!(!granted || twin, "advised granted what the budget refused");
                    // Keep the twins' spending equal, so the comparison stays one of budgets.
                    if twin && !granted {
                        unadvised.refund();
                    }
                }
                Op::Follow(parts) => advised.follow(Allowance::from_parts(parts), now),
                Op::Wait(millis) => now += Duration::from_millis(millis),
            }
            prop_assert!(advised.balance(now) <= unadvised.balance(now) + 1e-9);
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn f3_no_allowance_refuses_retries_and_never_a_first_attempt() {
    use crate::{RetryPolicy, StopReason};
    let policy = RetryPolicy::builder().name("advised").build().unwrap();
    let now = crate::clock::now();
    policy.bucket(now).unwrap().follow(Allowance::NONE, now);
    let mut reasons = Vec::new();
    for _ in 0..5 {
        let mut made = 0;
        let error = policy
            .execute(|_| {
                made += 1;
                async { Err::<(), _>("down") }
            })
            .await
            .unwrap_err();
        assert!(made >= 1, "no first attempt");
        reasons.push((made, error.reason()));
    }
    // The one token an advised bucket keeps funds one retry; then retries are refused.
    assert_eq!(reasons[0].0, 2, "{reasons:?}");
    assert!(
        reasons[1..]
            .iter()
            .all(|&(made, reason)| made == 1 && reason == StopReason::BudgetExhausted),
        "{reasons:?}"
    );
}
