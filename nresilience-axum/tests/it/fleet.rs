//! `FleetLayer` end to end (F1–F3): twenty nresilience clients, each with its own budget,
//! calling one real axum server on loopback that fails every fifth request fast. The server
//! counts what each attempt says it is; with the layer, the clients follow its advice and the
//! fleet's retries fall to about the share it accepts.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use nresilience_axum::wire;
use nresilience_axum::FleetLayer;
use nresilience_client::Client;
use nresilience_core::{Backoff, RetryPolicy};

use crate::support::loopback;

const CLIENTS: usize = 20;
const CALLS: usize = 100;

#[derive(Clone, Default)]
struct Seen {
    requests: Arc<AtomicU64>,
    /// Whether each request, in arrival order, said it was a retry.
    retries: Arc<Mutex<Vec<bool>>>,
}

async fn failing_one_in_five(State(seen): State<Seen>, headers: HeaderMap) -> StatusCode {
    let retry = wire::read_attempt(&headers).is_some_and(wire::AttemptOf::is_retry);
    seen.retries.lock().unwrap().push(retry);
    if seen.requests.fetch_add(1, Ordering::Relaxed) % 5 == 4 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

/// Retries per first attempt over the second half of the run, and the last answer's
/// `x-nresilience-fleet`.
async fn run(fleet: Option<FleetLayer>) -> (f64, Option<String>) {
    let seen = Seen::default();
    let mut app = Router::new()
        .route("/", get(failing_one_in_five))
        .with_state(seen.clone());
    if let Some(fleet) = fleet {
        app = app.layer(fleet);
    }
    let (listener, addr) = loopback().await;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = format!("http://{addr}/");
    let clients = (0..CLIENTS).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            let policy = RetryPolicy::builder()
                .backoff(Backoff::none())
                .build()
                .unwrap();
            let client = Client::builder(policy).build();
            let mut last = None;
            for _ in 0..CALLS {
                // A retry the budget refuses ends the call with the refusal (B7).
                if let Ok(response) = client.get(&url).await {
                    last = response
                        .headers()
                        .get(wire::FLEET)
                        .map(|value| value.to_str().unwrap().to_owned());
                }
            }
            last
        })
    });
    let mut last = None;
    for client in clients.collect::<Vec<_>>() {
        last = client.await.unwrap();
    }
    let retries = seen.retries.lock().unwrap();
    let half = &retries[retries.len() / 2..];
    let (again, first) = half.iter().fold(
        (0, 0),
        |(r, f), &retry| {
            if retry {
                (r + 1, f)
            } else {
                (r, f + 1)
            }
        },
    );
    (f64::from(again) / f64::from(first), last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f1_f3_clients_following_the_service_hold_the_fleet_near_its_accepted_share() {
    let (alone, told) = run(None).await;
    assert_eq!(told, None);
    // Each client's budget banks 30 tokens: one in five failing, they retry every failure.
    assert!(alone > 0.2, "{alone}");

    let (followed, told) = run(Some(FleetLayer::new())).await;
    let told = told.expect("every answer carries the advice");
    assert!(told.starts_with("retries="), "{told}");
    assert!(told.contains("accepted=0.100"), "{told}");
    assert!(
        followed < 0.15,
        "{followed} retries per first attempt; told {told}"
    );
}

#[test]
fn f2_a_share_outside_zero_to_one_is_refused() {
    assert!(FleetLayer::accepting(1.5).is_none());
    assert!(FleetLayer::accepting(-0.1).is_none());
    assert!(FleetLayer::accepting(0.25).is_some());
}
