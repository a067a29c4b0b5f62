//! The hot paths of the budget and the latency window never touch the heap (SPEC B6, E5).
//!
//! The allocator counts every thread, so the checks share one test: tests running in
//! parallel would count each other's allocations.

use std::alloc::System;
use std::time::{Duration, Instant};

use nresilience_core::latency::LatencyWindow;
use nresilience_core::{BudgetOptions, Criticality, TokenBucket};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn b6_e5_hot_paths_do_not_allocate() {
    budget_deposit_and_withdraw();
    latency_window_record();
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
        for criticality in [Criticality::Critical, Criticality::Normal, Criticality::Sheddable] {
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
