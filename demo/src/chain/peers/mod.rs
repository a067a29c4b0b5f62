//! The retrying hops built on the libraries a Rust user picks instead of nresilience (SPEC
//! P1), each configured as its own documentation shows and used through its public API. A
//! peer hop passes the upstream's status on, answers `502` when its call ends in an error,
//! and sends and reads no nresilience header.

mod reqwest_builtin;
mod reqwest_retry;
mod tower_resilience;
mod tower_retry;

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::hops::traced;
use super::stack::Peer;
use super::stats::{Hop, Stats};
use super::Result;

/// A peer hop's client to the next hop.
#[derive(Debug, Clone)]
pub struct PeerClient(Library);

/// The client of each peer library.
#[derive(Debug, Clone)]
enum Library {
    /// reqwest alone: with `reqwest::retry`, or with no retries at all.
    Reqwest(reqwest::Client),
    /// reqwest under reqwest-middleware's `RetryTransientMiddleware`.
    ReqwestRetry(reqwest_middleware::ClientWithMiddleware),
    /// tower's `Retry` and `Timeout` over hyper-util's client.
    Tower(Box<tower_retry::TowerClient>),
    /// tower-resilience's AIMD limiter, retry and time limiter over hyper-util's client.
    TowerResilience(Box<tower_resilience::TowerResilienceClient>),
}

impl PeerClient {
    /// `peer`'s client for a hop calling `upstream_host`.
    pub fn new(peer: Peer, upstream_host: &str) -> Result<Self> {
        Ok(Self(match peer {
            Peer::NoRetries => Library::Reqwest(reqwest::Client::builder().build()?),
            Peer::Reqwest(timeout) => {
                Library::Reqwest(reqwest_builtin::client(upstream_host, timeout)?)
            }
            Peer::ReqwestRetry(timeout) => Library::ReqwestRetry(reqwest_retry::client(timeout)?),
            Peer::Tower(timeout) => Library::Tower(Box::new(tower_retry::client(timeout))),
            Peer::TowerResilience(timeout) => {
                Library::TowerResilience(Box::new(tower_resilience::client(timeout)?))
            }
        }))
    }

    /// Calls `url` and reads the answer through: its status, or the error the call ended in.
    pub async fn get(&self, url: &str) -> Result<StatusCode> {
        match &self.0 {
            Library::Reqwest(client) => read(client.get(url).send().await?).await,
            Library::ReqwestRetry(client) => read(client.get(url).send().await?).await,
            Library::Tower(client) => tower_retry::get(client.as_ref().clone(), url).await,
            Library::TowerResilience(client) => {
                tower_resilience::get(client.as_ref().clone(), url).await
            }
        }
    }
}

/// A reqwest answer's status, once its body is read through.
async fn read(response: reqwest::Response) -> Result<StatusCode> {
    let status = response.status();
    response.bytes().await?;
    Ok(status)
}

#[derive(Clone)]
struct PeerHop {
    hop: Hop,
    stats: Arc<Stats>,
    client: PeerClient,
    upstream: String,
}

/// A hop that answers by calling `upstream` with a peer library's client.
pub fn peer_app(hop: Hop, stats: Arc<Stats>, client: PeerClient, upstream: String) -> Router {
    let state = PeerHop {
        hop,
        stats,
        client,
        upstream,
    };
    traced(
        Router::new().route("/", get(forward)).with_state(state),
        hop,
    )
}

async fn forward(State(state): State<PeerHop>) -> Response {
    state.stats.received(state.hop);
    match state.client.get(&state.upstream).await {
        Ok(status) => status.into_response(),
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}
