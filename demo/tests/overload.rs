//! Overload control in the chain, end to end on loopback, in real time (SPEC O1, O2, O4):
//! through a fault db cannot keep up with, the hops send it only what their users wait for,
//! and say so in the summary and every second.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use demo::chain::{
    self, Ceiling, ChainArgs, DbArgs, FaultArgs, FaultKind, Overload, RetryArgs, Rules, Stack,
    Stats, Summary,
};

/// Five seconds at 100 calls a second, users waiting 1 s; db serves 200 a second until it is
/// ten times slower from 1 s to 4 s, when it serves 20.
fn args(overload: Overload) -> ChainArgs {
    ChainArgs {
        duration: Some(5),
        rps: 100,
        user_timeout_ms: 1_000,
        budget: None,
        json: true,
        retry: RetryArgs {
            attempts: Some(4),
            ceiling: Some(Ceiling::Learning),
            chain_rules: Some(Rules::On),
            deadline_ms: Some(30_000),
            overload: Some(overload),
        },
        db: DbArgs {
            db_workers: 2,
            db_queue: 1_000,
            db_query_ms: 10,
            fault: FaultArgs {
                fault: FaultKind::Slow,
                fault_start: 1,
                fault_length: 3,
                fault_slowdown: Some(10.0),
                ..FaultArgs::default()
            },
        },
        ..ChainArgs::default()
    }
}

async fn run(overload: Overload) -> Summary {
    chain::run(&args(overload), Stack::Nresilience, Arc::new(Stats::new()))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o1_o2_o4_the_hops_send_db_what_their_users_wait_for_and_say_so() {
    let on = run(Overload::On).await;
    let off = run(Overload::Off).await;
    let json = serde_json::to_value(&on).unwrap();

    // Without it db's queue fills with queries whose users have left; with it the queue stays
    // short, and the calls db can serve are served.
    assert!(
        off.db_peak_queue >= 100,
        "{}",
        serde_json::to_value(&off).unwrap()
    );
    assert!(on.db_peak_queue < 100, "{json}");
    let during = |summary: &Summary| summary.success.during.unwrap();
    assert!(during(&on) > during(&off), "{json}");
    assert!(during(&on) >= 0.1, "db could serve a fifth: {json}");
    assert_eq!(
        on.success.before,
        Some(1.0),
        "nothing healthy is refused: {json}"
    );

    // O4: the refusals are counted per hop and per second; the row without it has none.
    let saturated = on.saturated.as_ref().unwrap();
    assert!(saturated.frontend + saturated.backend > 0, "{json}");
    assert!(on.seconds[1..4].iter().any(|s| s.saturated > 0), "{json}");
    assert_eq!(on.seconds[0].saturated, 0, "{json}");
    let none = off.saturated.as_ref().unwrap();
    assert_eq!(none.frontend + none.backend, 0);
}
