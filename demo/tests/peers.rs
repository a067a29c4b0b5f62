//! The peer rows' hops (SPEC P1): each is the peer library itself, retrying as its
//! documentation configures it, and none sends an nresilience header.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use demo::chain::{self, peer_app, Hop, Peer, PeerClient, Stats};

/// An upstream that answers `503` to its first `failures` requests and `200` after, and
/// keeps the names of every header it was sent.
#[derive(Clone, Default)]
struct Upstream {
    failures: u32,
    seen: Arc<AtomicU32>,
    headers: Arc<Mutex<Vec<String>>>,
}

async fn answer(State(upstream): State<Upstream>, request: Request) -> StatusCode {
    let mut headers = upstream.headers.lock().unwrap();
    headers.extend(request.headers().keys().map(|name| name.to_string()));
    if upstream.seen.fetch_add(1, Ordering::SeqCst) < upstream.failures {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

async fn serve(app: Router) -> SocketAddr {
    chain::serve(app, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap()
}

/// Calls a backend hop built on `peer` in front of an upstream failing `failures` times:
/// the hop's answer, and how many requests the upstream saw with which headers.
async fn through(peer: Peer, failures: u32) -> (StatusCode, u32, Vec<String>) {
    let upstream = Upstream {
        failures,
        ..Upstream::default()
    };
    let at = serve(
        Router::new()
            .route("/", get(answer))
            .with_state(upstream.clone()),
    )
    .await;
    let client = PeerClient::new(peer, "127.0.0.1").unwrap();
    let stats = Arc::new(Stats::new());
    let hop = serve(peer_app(
        Hop::Backend,
        Arc::clone(&stats),
        client,
        format!("http://{at}/"),
    ))
    .await;
    let status = reqwest::get(format!("http://{hop}/"))
        .await
        .unwrap()
        .status();
    assert_eq!(stats.received_total(Hop::Backend), 1);
    let headers = upstream.headers.lock().unwrap().clone();
    (status, upstream.seen.load(Ordering::SeqCst), headers)
}

const SHORT: Duration = Duration::from_secs(1);

#[tokio::test]
async fn p1_each_peer_retries_a_server_error_as_its_documentation_configures_it() {
    for peer in [
        Peer::Reqwest(SHORT),
        Peer::ReqwestRetry(SHORT),
        Peer::Tower(SHORT),
        Peer::TowerResilience(SHORT),
    ] {
        let (status, seen, headers) = through(peer, 1).await;
        assert_eq!((status, seen), (StatusCode::OK, 2), "{peer:?}");
        assert!(
            headers
                .iter()
                .all(|name| !name.starts_with("x-nresilience")),
            "{peer:?} sent {headers:?}"
        );
    }
}

#[tokio::test]
async fn p1_each_peer_stops_at_its_own_retry_count_and_passes_the_status_on() {
    // reqwest's own retries: 2 on top of the first; reqwest-retry and the tower policy: 3;
    // tower-resilience's README: 5 attempts.
    for (peer, attempts) in [
        (Peer::NoRetries, 1),
        (Peer::Reqwest(SHORT), 3),
        (Peer::Tower(SHORT), 4),
        (Peer::TowerResilience(SHORT), 5),
    ] {
        let (status, seen, _) = through(peer, u32::MAX).await;
        assert_eq!(
            (status, seen),
            (StatusCode::SERVICE_UNAVAILABLE, attempts),
            "{peer:?}"
        );
    }
}
