//! The fleet's one server: a hop whose handler fails a share of its requests fast, counting
//! by second the first attempts and the retries that reach it (F1).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use nresilience_axum::{wire, FleetLayer, NestedRetryLayer};

/// What reached the server, by second of the run.
#[derive(Debug, Default)]
pub(super) struct Arrivals {
    /// `(first attempts, retries)` in each second.
    seconds: Mutex<Vec<(u64, u64)>>,
}

impl Arrivals {
    fn count(&self, second: usize, retry: bool) {
        let mut seconds = self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        if seconds.len() <= second {
            seconds.resize(second + 1, (0, 0));
        }
        let counts = &mut seconds[second];
        if retry {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }

    /// The first attempts and retries of the seconds in `from..to`.
    pub(super) fn between(&self, from: usize, to: usize) -> (u64, u64) {
        let seconds = self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        seconds
            .iter()
            .take(to)
            .skip(from)
            .fold((0, 0), |(f, r), &(first, retry)| (f + first, r + retry))
    }
}

#[derive(Clone)]
struct Server {
    started: Instant,
    arrivals: Arc<Arrivals>,
    /// Requests answered, for the failures' spacing.
    answered: Arc<AtomicU64>,
    /// Fails in a million requests.
    failing_ppm: u64,
}

/// The server's app: `failing` of its requests, spread evenly, answered `503` at once; with
/// `coordinated`, behind a `FleetLayer` (F2).
pub(super) fn app(failing: f64, coordinated: bool, arrivals: Arc<Arrivals>) -> Router {
    let server = Server {
        started: Instant::now(),
        arrivals,
        answered: Arc::new(AtomicU64::new(0)),
        // In [0, 1): exact to a millionth, as the flag is read.
        failing_ppm: (failing * 1e6).round() as u64,
    };
    let app = Router::new()
        .route("/", get(answer))
        .with_state(server)
        .layer(NestedRetryLayer::new());
    if coordinated {
        app.layer(FleetLayer::new())
    } else {
        app
    }
}

async fn answer(State(server): State<Server>, headers: HeaderMap) -> StatusCode {
    let retry = wire::read_attempt(&headers).is_some_and(wire::AttemptOf::is_retry);
    let second = usize::try_from(server.started.elapsed().as_secs()).unwrap_or(usize::MAX);
    server.arrivals.count(second, retry);
    let n = server.answered.fetch_add(1, Ordering::Relaxed);
    // The n-th request fails when it crosses a multiple of a million: `failing` of them, evenly.
    let fails = (n + 1) * server.failing_ppm / 1_000_000 > n * server.failing_ppm / 1_000_000;
    if fails {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}
