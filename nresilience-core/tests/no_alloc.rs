//! The hot paths never touch the heap: the budget (B6), the latency window (E5) and a
//! successful call through the executor.
//!
//! The counting allocator sees every thread, so this test runs without the test harness:
//! no other thread allocates while a region is measured.

use std::alloc::System;
use std::time::{Duration, Instant};

use nresilience_core::test_support::LatencyWindow;
use nresilience_core::{BudgetOptions, Criticality, RetryPolicy, TokenBucket};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    let checks: [(&str, fn()); 3] = [
        (
            "b6_budget_deposit_and_withdraw_do_not_allocate",
            budget_deposit_and_withdraw,
        ),
        (
            "e5_latency_window_record_does_not_allocate",
            latency_window_record,
        ),
        ("successful_execute_does_not_allocate", successful_execute),
    ];
    for (name, check) in checks {
        check();
        println!("test {name} ... ok");
    }
    println!("{} passed, 0 failed", checks.len());
}

fn budget_deposit_and_withdraw() {
    let start = Instant::now();
    let bucket = TokenBucket::new(BudgetOptions::default(), start).expect("valid options");
    let region = Region::new(GLOBAL);
    let mut now = start;
    let mut granted = 0u32;
    for i in 0..10_000u64 {
        now += Duration::from_micros(i % 7);
        bucket.deposit(now);
        for criticality in [
            Criticality::Critical,
            Criticality::Normal,
            Criticality::Sheddable,
        ] {
            granted += u32::from(bucket.try_withdraw(now, criticality));
        }
        std::hint::black_box(bucket.retry_after(now));
        std::hint::black_box(bucket.utilization(now));
    }
    let stats = region.change();
    assert!(granted > 0);
    assert_eq!(stats.allocations, 0, "budget: {stats:?}");
    assert_eq!(stats.reallocations, 0, "budget: {stats:?}");
}

fn latency_window_record() {
    let start = Instant::now();
    let mut window = LatencyWindow::new(Duration::from_secs(300), start);
    let region = Region::new(GLOBAL);
    for i in 0..100_000u64 {
        let now = start + Duration::from_millis(i * 7);
        window.record(Duration::from_micros(1 + i % 5_000), now);
        if i % 1_000 == 0 {
            std::hint::black_box(window.quantile(0.95, now));
        }
    }
    let stats = region.change();
    assert!(window.count(start + Duration::from_millis(700_000)) > 0);
    assert_eq!(stats.allocations, 0, "latency window: {stats:?}");
}

fn successful_execute() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let policy = RetryPolicy::builder()
        .name("no-alloc")
        .build()
        .expect("valid policy");
    runtime.block_on(async {
        let call = || policy.execute(|_| async { Ok::<u32, ()>(1) });
        // Warm up: the lazily created bucket and the runtime's timer structures.
        for _ in 0..100 {
            call().await.expect("success");
        }
        let region = Region::new(GLOBAL);
        let mut sum = 0;
        for _ in 0..10_000 {
            sum += call().await.expect("success");
        }
        let stats = region.change();
        assert_eq!(sum, 10_000);
        assert_eq!(stats.allocations, 0, "execute: {stats:?}");
    });
}
