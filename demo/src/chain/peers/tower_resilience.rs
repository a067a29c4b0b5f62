//! tower-resilience 0.13 over hyper-util's client, configured as tower-resilience's README
//! shows: its AIMD `AdaptiveLimiterLayer` outermost, its `RetryLayer` inside it, and its
//! `TimeLimiterLayer` inside the retry, so it bounds each attempt.
//!
//! - Retry, from the README's "Retry" and "Retry budgets" snippets: `.max_attempts(5)` (the
//!   first attempt and four retries) and `.exponential_backoff(Duration::from_millis(100))`,
//!   which doubles from 100 ms with no jitter and no cap (100, 200, 400, 800 ms). Its budget is
//!   the snippet's `RetryBudgetBuilder::new().token_bucket().tokens_per_second(10.0)
//!   .max_tokens(100)` ("Token bucket: allow up to 10 retries/sec, bursting to 100."), shared
//!   by every request of the hop: it starts full, and "retries withdraw a token and successes
//!   deposit one back", every success, retried or not. The snippets' `on_retry`, `on_success`
//!   and `on_budget_exhausted` prints are left out.
//! - Adaptive concurrency, from the README's "Adaptive Concurrency" AIMD snippet:
//!   `.initial_limit(10).min_limit(1).max_limit(100)`, `.increase_by(1)` ("Add 1 on success"),
//!   `.decrease_factor(0.5)` ("Halve on failure") and
//!   `.latency_threshold(Duration::from_millis(100))`.
//! - Per-attempt timeout, from the README's "Time Limiter" snippet:
//!   `.timeout_duration(timeout).cancel_running_future(true)` ("Cancel on timeout"); the
//!   demo's 1 s and 5 s are the README's `fast()` ("1s timeout, cancel on timeout") and
//!   `standard()` ("5s timeout, cancel on timeout") presets. It times each attempt up to the
//!   response head ("response status and headers are covered, but response-body frames are
//!   not"), as tower's `Timeout` does in the tower peer.
//!
//! The order is the one tower-resilience's composition guide gives under "With Adaptive
//! Concurrency" (the `AdaptiveLimiterLayer` line above the `RetryLayer` line) and the
//! adaptive crate's "Combining with Other Patterns" example gives as "Middle: adaptive
//! concurrency limiting" over "Inner: retry transient failures"; the guide's "Per-attempt
//! timeout (each attempt gets 10s)" puts the time limiter innermost, inside the retry.
//!
//! The retry retries every error by default: transport failures and time-outs. Server errors
//! come back as responses, which it retries through its `retry_on_response` predicate. When
//! the attempts or the budget run out on a `5xx`, it hands that last response back, so the
//! hop passes the upstream's status on; when they run out on an error, the call ends in it.
//!
//! The limiter sheds nothing: a call over the limit waits for a slot, with no bound on the
//! wait. Standing outside the retry, it sees one outcome per call, timed from the moment it
//! has a slot: an error halves the limit (down to 1), and so does an answer slower than
//! 100 ms, which every retried call is, its first backoff alone being 100 ms. Any other
//! answer raises the limit by one, a `5xx` included when the budget refused its retry and it
//! came back fast.

use std::fmt;
use std::time::Duration;

use axum::http::{Request, Response, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, Error as ClientError};
use hyper_util::rt::TokioExecutor;
use tower::{ServiceBuilder, ServiceExt};

// The leading `::` names the crate, not this module, which shares its name.
use ::tower_resilience::adaptive::{AdaptiveLimiterLayer, AdaptiveService, Aimd};
use ::tower_resilience::retry::{Retry, RetryBudgetBuilder, RetryLayer};
use ::tower_resilience::timelimiter::{
    FixedTimeout, TimeLimiter, TimeLimiterError, TimeLimiterLayer,
};

use super::super::Result;

/// The request each attempt sends.
type Req = Request<Empty<Bytes>>;

/// How an attempt fails: hyper-util's error, or the time limiter's time-out.
type AttemptError = TimeLimiterError<ClientError>;

/// The layers, outermost first, over hyper-util's client.
type Stack = AdaptiveService<
    Retry<
        TimeLimiter<Client<HttpConnector, Empty<Bytes>>, FixedTimeout>,
        Req,
        Response<Incoming>,
        AttemptError,
    >,
    Aimd,
>;

/// hyper-util's client under tower-resilience's AIMD limiter, retry and time limiter.
///
/// Clones share the limiter's limit and the retry's budget.
#[derive(Clone)]
pub(super) struct TowerResilienceClient(Stack);

impl fmt::Debug for TowerResilienceClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tower-resilience's services implement no `Debug`; the limiter's state is what varies.
        f.debug_struct("TowerResilienceClient")
            .field("limit", &self.0.limit())
            .field("in_flight", &self.0.in_flight())
            .finish_non_exhaustive()
    }
}

/// A client whose attempts each get `timeout`.
pub(super) fn client(timeout: Duration) -> Result<TowerResilienceClient> {
    let budget = RetryBudgetBuilder::new()
        .token_bucket()
        .tokens_per_second(10.0)
        .max_tokens(100)
        .build()?;
    let retry = RetryLayer::<Req, Response<Incoming>, AttemptError>::builder()
        .max_attempts(5)
        .exponential_backoff(Duration::from_millis(100))
        .budget(budget)
        .retry_on_response(|response: &Response<Incoming>| response.status().is_server_error())
        .build();
    let limiter = AdaptiveLimiterLayer::new(
        Aimd::builder()
            .initial_limit(10)
            .min_limit(1)
            .max_limit(100)
            .increase_by(1)
            .decrease_factor(0.5)
            .latency_threshold(Duration::from_millis(100))
            .build()?,
    );
    let time_limiter = TimeLimiterLayer::builder()
        .timeout_duration(timeout)
        .cancel_running_future(true)
        .build();
    let hyper = Client::builder(TokioExecutor::new()).build_http();
    Ok(TowerResilienceClient(
        ServiceBuilder::new()
            .layer(limiter)
            .layer(retry)
            .layer(time_limiter)
            .service(hyper),
    ))
}

/// GETs `url` through `client` and reads the answer through.
pub(super) async fn get(client: TowerResilienceClient, url: &str) -> Result<StatusCode> {
    let request = Request::get(url).body(Empty::new())?;
    let response = client.0.oneshot(request).await?;
    let status = response.status();
    response.into_body().collect().await?;
    Ok(status)
}
