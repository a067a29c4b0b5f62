//! db's capacity on the paused clock (SPEC D3): a bounded queue in front of its workers, a
//! full queue refused at once, and work that keeps its worker after its caller has left.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use demo::chain::{db_app, DbArgs, FaultArgs, Stats};
use tokio::time::Instant;
use tower::ServiceExt;

/// One worker, `queue` places in the queue, 100 ms a query, no fault.
fn one_worker(stats: &Arc<Stats>, queue: u32) -> axum::Router {
    let settings = DbArgs {
        db_workers: 1,
        db_queue: queue,
        db_query_ms: 100,
        fault: FaultArgs {
            fault_start: 86_400,
            fault_length: 0,
            ..FaultArgs::default()
        },
    };
    db_app(Arc::clone(stats), settings)
}

fn query(db: &axum::Router) -> tokio::task::JoinHandle<(StatusCode, Duration)> {
    let db = db.clone();
    tokio::spawn(async move {
        let start = Instant::now();
        let request = Request::get("/").body(Body::empty()).unwrap();
        let answer = db.oneshot(request).await.unwrap();
        (answer.status(), start.elapsed())
    })
}

#[tokio::test(start_paused = true)]
async fn d3_abandoned_work_keeps_its_worker_and_a_full_queue_refuses_at_once() {
    let stats = Arc::new(Stats::new());
    let db = one_worker(&stats, 1);

    // The first caller leaves after 10 ms; its query goes on to 100 ms.
    let abandoned = query(&db);
    tokio::time::sleep(Duration::from_millis(10)).await;
    abandoned.abort();
    // The next waits in the queue for the worker the abandoned query still holds.
    let queued = query(&db);
    tokio::time::sleep(Duration::from_millis(10)).await;
    // The queue is full: refused at once.
    let (status, took) = query(&db).await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(took, Duration::ZERO);

    let (status, took) = queued.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    // Queued at 10 ms, served from 100 ms (when the abandoned query ended) to 200 ms.
    assert_eq!(took, Duration::from_millis(190));
    assert_eq!(stats.db_queue_peak(), 1);
    assert_eq!(stats.db_refused_total(), 1);
}

#[tokio::test(start_paused = true)]
async fn d3_queued_queries_are_served_first_come_first_served() {
    let stats = Arc::new(Stats::new());
    let db = one_worker(&stats, 10);
    let mut queries = Vec::new();
    for _ in 0..4 {
        queries.push(query(&db));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut took = Vec::new();
    for query in queries {
        took.push(query.await.unwrap().1.as_millis());
    }
    // Each waits for those before it: 100, 199, 298, 397 ms after it arrived.
    assert_eq!(took, [100, 199, 298, 397]);
}
