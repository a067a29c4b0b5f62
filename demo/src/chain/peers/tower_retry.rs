//! tower 0.5's `Retry` over hyper-util's client, as tower's documentation composes it: a
//! `Policy` that spends a shared `TpsBudget` (its defaults: 20 % extra load, 10 retries a
//! second in reserve) and retries at once, as the `Policy` and `budget` examples do, a cap of
//! three retries from the `Policy` example, and a `Timeout` inside the `Retry`, so it bounds
//! each attempt. Server errors and failed attempts are retried.

use std::future::{ready, Ready};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Request, Response, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::retry::budget::{Budget, TpsBudget};
use tower::retry::{Policy, Retry};
use tower::timeout::Timeout;
use tower::{BoxError, ServiceExt};

use super::super::Result;

/// The retries a request may make on top of its first attempt.
const RETRIES: u32 = 3;

/// hyper-util's client, each attempt bounded by a `Timeout`, retried by `Retry`.
pub(super) type TowerClient = Retry<Attempts, Timeout<Client<HttpConnector, Empty<Bytes>>>>;

/// The retry policy: a budget shared by every request of the hop, and the retries left to
/// this one.
#[derive(Debug, Clone)]
pub(super) struct Attempts {
    budget: Arc<TpsBudget>,
    retries_left: u32,
}

impl<B> Policy<Request<Empty<Bytes>>, Response<B>, BoxError> for Attempts {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _request: &mut Request<Empty<Bytes>>,
        result: &mut std::result::Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let failed = match result {
            Ok(response) => response.status().is_server_error(),
            Err(_) => true,
        };
        if !failed {
            self.budget.deposit();
            return None;
        }
        if self.retries_left == 0 || !self.budget.withdraw() {
            return None;
        }
        self.retries_left -= 1;
        Some(ready(()))
    }

    fn clone_request(&mut self, request: &Request<Empty<Bytes>>) -> Option<Request<Empty<Bytes>>> {
        let mut copy = Request::new(Empty::new());
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.headers_mut() = request.headers().clone();
        Some(copy)
    }
}

/// A client whose attempts each get `timeout`.
pub(super) fn client(timeout: Duration) -> TowerClient {
    let hyper = Client::builder(TokioExecutor::new()).build_http();
    let policy = Attempts {
        budget: Arc::new(TpsBudget::default()),
        retries_left: RETRIES,
    };
    Retry::new(policy, Timeout::new(hyper, timeout))
}

/// GETs `url` through `client` and reads the answer through.
pub(super) async fn get(client: TowerClient, url: &str) -> Result<StatusCode> {
    let request = Request::get(url).body(Empty::new())?;
    let response = client.oneshot(request).await?;
    let status = response.status();
    response.into_body().collect().await?;
    Ok(status)
}
