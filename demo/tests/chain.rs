//! The chain end to end on loopback, in real time, a few seconds long (SPEC D1, N4, N5).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use demo::chain::{
    self, Budget, Ceiling, ChainArgs, CurrentRun, DbArgs, FaultArgs, FaultKind, Hop, NestedCounter,
    Overload, RetryArgs, Rules, Stack, Stats,
};
use tracing_subscriber::layer::SubscriberExt;

/// Three seconds at 100 calls a second; in the second second db fails every query.
fn args(budget: Budget) -> ChainArgs {
    ChainArgs {
        duration: Some(3),
        rps: 100,
        user_timeout_ms: 2_000,
        budget: Some(budget),
        json: true,
        retry: RetryArgs {
            attempts: Some(4),
            ceiling: Some(Ceiling::Learning),
            chain_rules: Some(Rules::On),
            deadline_ms: Some(30_000),
            overload: Some(Overload::On),
        },
        db: DbArgs {
            db_workers: 100,
            db_queue: 1_000,
            db_query_ms: 2,
            fault: FaultArgs {
                fault: FaultKind::Errors,
                fault_start: 1,
                fault_length: 1,
                fault_error_rate: Some(1.0),
                ..FaultArgs::default()
            },
        },
        ..ChainArgs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_the_chain_retries_nests_and_the_budget_bounds_db_load() {
    let stats = Arc::new(Stats::new());
    let current = Arc::new(CurrentRun::new(Arc::clone(&stats)));
    let subscriber = tracing_subscriber::registry().with(NestedCounter::new(current));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let summary = chain::run(&args(Budget::On), Stack::Nresilience, Arc::clone(&stats))
        .await
        .unwrap();
    let json = serde_json::to_value(&summary).unwrap();
    let calls = json["calls"].as_u64().unwrap();
    assert!(calls >= 250, "{json}");
    // Every call reached the frontend; the backend's retries nest under the frontend's
    // marked requests, so the middle hop reports them (N5), and only it.
    assert_eq!(stats.received_total(Hop::Frontend), calls);
    assert!(stats.nested_total(Hop::Backend) > 0, "{json}");
    assert_eq!(stats.nested_total(Hop::Frontend), 0);
    // During the one-second outage every db request fails: without a budget each call
    // would reach db 4 × 4 = 16 times. The budget keeps the whole run near 1.1×, and the
    // refusals show it at work.
    let db = stats.received_total(Hop::Db) as f64;
    assert!(
        db / (calls as f64) < 2.0,
        "db load ×{} {json}",
        db / calls as f64
    );
    assert!(
        stats.refusals(Hop::Backend) + stats.refusals(Hop::Frontend) > 0,
        "{json}"
    );
}
