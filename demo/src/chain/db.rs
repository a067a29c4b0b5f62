//! The db: a fixed number of workers, a bounded queue in front of them, and queries that
//! run to the end whether or not their caller is still waiting (SPEC D3).
//!
//! A database does not see its client go away: a query it has queued or started keeps its
//! place and its worker after the caller's connection closes. That is what lets a retry storm
//! outlive the fault that set it off: every retry of an abandoned query is a second query
//! queued behind the first.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rand::Rng;
use tokio::sync::{oneshot, Semaphore};

use super::args::DbArgs;
use super::hops::serve_layers;
use super::stats::{Hop, Stats};

#[derive(Clone)]
struct Db {
    stats: Arc<Stats>,
    settings: DbArgs,
    started: Instant,
    /// One permit per worker, handed out first come, first served.
    workers: Arc<Semaphore>,
    /// Queries waiting for a worker.
    waiting: Arc<AtomicU32>,
}

/// db as an axum app, its clock starting now.
pub fn db_app(stats: Arc<Stats>, settings: DbArgs) -> Router {
    let db = Db {
        stats,
        settings,
        started: Instant::now(),
        workers: Arc::new(Semaphore::new(settings.db_workers as usize)),
        waiting: Arc::default(),
    };
    let app = Router::new().route("/", get(query)).with_state(db);
    serve_layers(app, Hop::Db)
}

/// What a finished query answers.
enum Outcome {
    Row,
    Failed,
}

async fn query(State(db): State<Db>) -> Response {
    db.stats.received(Hop::Db);
    let limit = db.settings.db_queue;
    let admitted = db
        .waiting
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
            (waiting < limit).then_some(waiting + 1)
        });
    let Ok(before) = admitted else {
        db.stats.db_refused();
        return (StatusCode::SERVICE_UNAVAILABLE, "db: queue full").into_response();
    };
    db.stats.db_queue(u64::from(before) + 1);
    let (answer, answered) = oneshot::channel();
    // Spawned, so that it runs to the end when the caller leaves and this handler is dropped.
    tokio::spawn(run(db, answer));
    match answered.await {
        Ok(Outcome::Row) => "row".into_response(),
        Ok(Outcome::Failed) => {
            (StatusCode::SERVICE_UNAVAILABLE, "db: query failed").into_response()
        }
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "db: query lost").into_response(),
    }
}

/// Waits for a worker, holds it for the query's time, and answers whoever still listens.
async fn run(db: Db, answer: oneshot::Sender<Outcome>) {
    let Ok(_worker) = db.workers.acquire().await else {
        return;
    };
    db.waiting.fetch_sub(1, Ordering::AcqRel);
    let (start, end) = db.settings.fault_window();
    let now = db.started.elapsed();
    let faulty = now >= start && now < end;
    let healthy = Duration::from_millis(db.settings.db_query_ms);
    let took = if faulty {
        healthy.mul_f64(db.settings.fault_slowdown)
    } else {
        healthy
    };
    tokio::time::sleep(took).await;
    let failed = faulty && rand::rng().random_bool(db.settings.fault_error_rate);
    let _ = answer.send(if failed {
        Outcome::Failed
    } else {
        Outcome::Row
    });
}
