//! `AdmissionLayer` end to end (F4): a refusal is the overload signal without the handler,
//! over a real socket; and through a surge at twice the service's capacity, in paused time,
//! retries arriving take nothing from the first attempts it serves.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::Router;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use nresilience_axum::{wire, AdmissionLayer};
use nresilience_core::overload::OverloadControl;
use tokio::sync::{Notify, Semaphore};
use tower::ServiceExt;

use crate::support::loopback;

#[derive(Clone)]
struct Held {
    started: Arc<AtomicU64>,
    release: Arc<Notify>,
}

async fn held_until_released(State(held): State<Held>) -> &'static str {
    held.started.fetch_add(1, Ordering::SeqCst);
    held.release.notified().await;
    "done"
}

/// A service whose handlers wait to be released, behind a limit of 2 in the handlers: a
/// normal first attempt may fill 2, a retry 1.
fn held_service() -> (Router, Held) {
    let held = Held {
        started: Arc::new(AtomicU64::new(0)),
        release: Arc::new(Notify::new()),
    };
    let layer = AdmissionLayer::with_control(OverloadControl::new().floor(1).initial(2)).unwrap();
    let app = Router::new()
        .route("/", get(held_until_released))
        .with_state(held.clone())
        .layer(layer);
    (app, held)
}

#[tokio::test]
async fn f4_over_its_limit_a_retry_is_refused_with_the_overload_signal_and_no_handler() {
    let (app, held) = held_service();
    let (listener, addr) = loopback().await;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let get = |attempt: Option<&'static str>| {
        let mut request = Request::get(format!("http://{addr}/"));
        if let Some(attempt) = attempt {
            request = request.header(wire::ATTEMPT, attempt);
        }
        client.request(request.body(Body::empty()).unwrap())
    };

    let first = tokio::spawn(get(None));
    while held.started.load(Ordering::SeqCst) < 1 {
        tokio::task::yield_now().await;
    }
    let refused = get(Some("2")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        wire::read_overloaded(refused.headers()),
        "the overload signal (C1)"
    );
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(
        held.started.load(Ordering::SeqCst),
        1,
        "no handler ran for it"
    );

    // A first attempt has the room the retry did not.
    let second = tokio::spawn(get(None));
    while held.started.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    held.release.notify_waiters();
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(second.await.unwrap().unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn f4_a_grpc_request_is_refused_with_unavailable_and_no_retry_pushback() {
    let (app, held) = held_service();
    let first = tokio::spawn(
        app.clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap()),
    );
    while held.started.load(Ordering::SeqCst) < 1 {
        tokio::task::yield_now().await;
    }
    let retry = Request::get("/")
        .header("content-type", "application/grpc")
        .header(wire::GRPC_PREVIOUS_ATTEMPTS, "1")
        .body(Body::empty())
        .unwrap();
    let refused = app.oneshot(retry).await.unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::OK,
        "gRPC answers in its status"
    );
    assert_eq!(refused.headers()["grpc-status"], "14");
    assert_eq!(refused.headers()["grpc-retry-pushback-ms"], "-1");
    assert_eq!(held.started.load(Ordering::SeqCst), 1);
    held.release.notify_waiters();
    first.await.unwrap().unwrap();
}

/// The service: four handlers at a time, 20 ms each: 200 requests a second.
const CAPACITY_PER_SECOND: u64 = 200;
const WORKERS: usize = 4;
const HANDLING: Duration = Duration::from_millis(20);
/// Users send twice the capacity, each waiting a second, 300 ms for each attempt.
const SURGE: Duration = Duration::from_secs(20);
const PATIENCE: Duration = Duration::from_secs(1);
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(300);
/// After a failure, the callers retry 50 ms later, twice at most, whatever the answer.
const RETRIES: u32 = 2;
const RETRY_AFTER: Duration = Duration::from_millis(50);

#[derive(Clone)]
struct Service {
    workers: Arc<Semaphore>,
}

async fn limited(State(service): State<Service>) -> StatusCode {
    let _permit = service.workers.acquire().await.unwrap();
    tokio::time::sleep(HANDLING).await;
    StatusCode::OK
}

/// The share of the surge's first attempts answered `200` within their attempt's timeout,
/// with callers that retry (or not), and say how long they wait (or not), against the
/// service with the layer (or not).
async fn surge(layer: bool, retries: bool, say_deadline: bool) -> f64 {
    let service = Service {
        workers: Arc::new(Semaphore::new(WORKERS)),
    };
    let mut app = Router::new().route("/", get(limited)).with_state(service);
    if layer {
        app = app.layer(AdmissionLayer::new());
    }
    let served = Arc::new(AtomicU64::new(0));
    let interval = Duration::from_secs(1) / u32::try_from(2 * CAPACITY_PER_SECOND).unwrap();
    let mut ticks = tokio::time::interval(interval);
    let mut calls = Vec::new();
    let sent = SURGE.as_nanos() / interval.as_nanos();
    for _ in 0..sent {
        ticks.tick().await;
        let (app, served) = (app.clone(), Arc::clone(&served));
        calls.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + PATIENCE;
            for attempt in 1..=1 + if retries { RETRIES } else { 0 } {
                let left = deadline
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(ATTEMPT_TIMEOUT);
                if left.is_zero() {
                    return;
                }
                let mut request = Request::get("/").header(wire::ATTEMPT, attempt.to_string());
                if say_deadline {
                    request = request.header(wire::DEADLINE, left.as_millis().to_string());
                }
                let request = request.body(Body::empty()).unwrap();
                let answer = tokio::time::timeout(left, app.clone().oneshot(request)).await;
                if matches!(answer, Ok(Ok(ref response)) if response.status() == StatusCode::OK) {
                    if attempt == 1 {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }));
    }
    for call in calls {
        call.await.unwrap();
    }
    served.load(Ordering::Relaxed) as f64 / sent as f64
}

/// F4's goal: in a surge at twice the service's capacity, the first attempts it serves with
/// retries arriving are at least those it serves with none, within a point — whether the
/// callers say how long they wait (the expected wait refuses what cannot be served in time)
/// or not (the limit binds as requests accumulate, and retries have half a first attempt's
/// share of it). Without the layer the queue holds what its callers have given up on and the
/// service serves almost nothing in time, retries or none.
#[tokio::test(start_paused = true)]
async fn f4_in_a_surge_at_twice_capacity_retries_take_nothing_from_first_attempts() {
    for deadline in [true, false] {
        let unadmitted = surge(false, false, deadline).await;
        let unadmitted_retries = surge(false, true, deadline).await;
        let admitted = surge(true, false, deadline).await;
        let admitted_retries = surge(true, true, deadline).await;
        println!(
            "deadline sent: {deadline}; first attempts served, no layer: {unadmitted:.4} \
             ({unadmitted_retries:.4} with retries); the layer: {admitted:.4} \
             ({admitted_retries:.4} with retries)"
        );
        assert!(
            admitted_retries >= admitted - 0.01,
            "with retries {admitted_retries:.4}, with none {admitted:.4}"
        );
        assert!(
            admitted_retries > unadmitted.max(unadmitted_retries) + 0.2,
            "the layer serves first attempts a queue alone does not"
        );
    }
}
