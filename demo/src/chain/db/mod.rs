//! The db: a fixed number of workers, a bounded queue in front of them, and queries that
//! run to the end whether or not their caller is still waiting (D3); and each kind of
//! fault made real inside it (P3).
//!
//! A database does not see its client go away: a query it has queued or started keeps its
//! place and its worker after the caller's connection closes. That is what lets a retry storm
//! outlive the fault that set it off: every retry of an abandoned query is a second query
//! queued behind the first.

mod outage;
mod query_time;
mod throttle;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rand::Rng;
use tokio::sync::{oneshot, Semaphore};
use tokio::time::Instant;

use super::args::DbArgs;
use super::fault::{Fault, FaultKind};
use super::hops::serve_layers;
use super::stats::{Hop, Stats};
use throttle::Throttle;

/// db: its settings, its clock, its workers and its queue. Clones share them.
#[derive(Debug, Clone)]
pub struct Db(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    stats: Arc<Stats>,
    settings: DbArgs,
    fault: Fault,
    /// Where the fault's window is counted from.
    started: Instant,
    /// One permit per worker, handed out first come, first served; none in a brownout, where
    /// db has no capacity limit.
    workers: Option<Semaphore>,
    /// Queries waiting for a worker.
    waiting: AtomicU32,
    throttle: Throttle,
}

impl Db {
    /// db with `settings`, its clock starting now.
    pub fn new(stats: Arc<Stats>, settings: DbArgs) -> Self {
        let fault = settings.fault();
        let unbounded = fault.kind == FaultKind::Brownout;
        Self(Arc::new(Inner {
            stats,
            settings,
            fault,
            started: Instant::now(),
            workers: (!unbounded).then(|| Semaphore::new(settings.db_workers as usize)),
            waiting: AtomicU32::new(0),
            throttle: Throttle::default(),
        }))
    }

    /// db as an axum app.
    pub fn app(&self) -> Router {
        let app = Router::new()
            .route("/", get(query))
            .with_state(self.clone());
        serve_layers(app, Hop::Db)
    }

    /// Serves `app` (db's, and whatever a process adds to it) on `addr` until `stop`
    /// completes; during a `down` fault nothing listens there and every connection is
    /// dropped. Returns the address bound.
    pub async fn serve(
        &self,
        app: Router,
        addr: SocketAddr,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> super::Result<SocketAddr> {
        if self.0.fault.kind == FaultKind::Down {
            let (start, end) = (self.0.fault.start, self.0.fault.end);
            let outage = (self.0.started + start, self.0.started + end);
            outage::serve(app, addr, outage, stop).await
        } else {
            super::serve_until(app, addr, stop).await
        }
    }

    fn elapsed(&self) -> Duration {
        self.0.started.elapsed()
    }
}

/// db as an axum app, its clock starting now.
pub fn db_app(stats: Arc<Stats>, settings: DbArgs) -> Router {
    Db::new(stats, settings).app()
}

/// What a finished query answers.
enum Outcome {
    Row,
    Lost,
}

async fn query(State(db): State<Db>) -> Response {
    let inner = &db.0;
    inner.stats.received(Hop::Db);
    let now = db.elapsed();
    let fault = inner.fault;
    if fault.acts_at(now) {
        match fault.kind {
            FaultKind::Errors if rand::rng().random_bool(fault.factor()) => {
                return (StatusCode::INTERNAL_SERVER_ERROR, "db: query failed").into_response();
            }
            FaultKind::Throttle if !inner.throttle.admit(now, fault.factor()) => {
                inner.stats.db_refused();
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, throttle::RETRY_AFTER)],
                    "db: over its rate",
                )
                    .into_response();
            }
            _ => {}
        }
    }
    if inner.workers.is_some() {
        let limit = inner.settings.db_queue;
        let admitted = inner
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
                (waiting < limit).then_some(waiting + 1)
            });
        let Ok(before) = admitted else {
            inner.stats.db_refused();
            return (StatusCode::SERVICE_UNAVAILABLE, "db: queue full").into_response();
        };
        inner.stats.db_queue(u64::from(before) + 1);
    }
    let (answer, answered) = oneshot::channel();
    // Spawned, so that it runs to the end when the caller leaves and this handler is dropped.
    tokio::spawn(run(db, answer));
    match answered.await {
        Ok(Outcome::Row) => "row".into_response(),
        Ok(Outcome::Lost) | Err(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "db: query lost").into_response()
        }
    }
}

/// Waits for a worker, holds it for the query's time, and answers whoever still listens.
async fn run(db: Db, answer: oneshot::Sender<Outcome>) {
    let inner = &db.0;
    let _worker = match &inner.workers {
        Some(workers) => {
            let Ok(worker) = workers.acquire().await else {
                let _ = answer.send(Outcome::Lost);
                return;
            };
            inner.waiting.fetch_sub(1, Ordering::AcqRel);
            Some(worker)
        }
        None => None,
    };
    let began = db.elapsed();
    let fault = inner.fault;
    let healthy = Duration::from_millis(inner.settings.db_query_ms);
    let took = match fault.kind {
        FaultKind::Slow | FaultKind::Brownout if fault.acts_at(began) => {
            healthy.mul_f64(fault.factor())
        }
        FaultKind::Tail => query_time::heavy_tailed(healthy, &mut rand::rng()),
        _ => healthy,
    };
    let mut done = began + took;
    // A stalled db finishes nothing in its window: what would end in it ends when it does.
    if fault.kind == FaultKind::Stall && fault.acts_at(done) {
        done = fault.end;
    }
    tokio::time::sleep_until(inner.started + done).await;
    let _ = answer.send(Outcome::Row);
}
