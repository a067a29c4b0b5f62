//! The reqwest retry middleware against real axum servers on loopback: the behaviour suite
//! every HTTP driver runs, then what only the middleware does — a streaming body, which reqwest
//! cannot clone, is sent once (SPEC N1).
//!
//! Servers run on their own runtime in real time; the client runs on a paused clock with no
//! attempt timeout or deadline, so the only timers are the delays under test and virtual
//! time measures them exactly.

#![cfg(feature = "reqwest")]
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Extensions;
use nresilience_client::reqwest::{retry_error, RetryMiddleware};
use nresilience_client::{Hedgeable, Retryable};
use nresilience_core::{Hedge, RetryError, RetryPolicyBuilder};
use reqwest_middleware::{ClientWithMiddleware, Middleware, Next};
use support::driver::{Driver, NestingProbe, Outbound, Reply, Setup};
use support::{policy, server, slow_server, unmarked};

support::suite::behaviour_suite!(Reqwest);

/// A reqwest client with the retry middleware, and a probe behind it when the suite asks.
struct Reqwest(ClientWithMiddleware);

impl Driver for Reqwest {
    type Error = reqwest_middleware::Error;

    fn with(policy: RetryPolicyBuilder, setup: Setup) -> Self {
        let middleware = RetryMiddleware::new(policy.build().unwrap())
            .retry_non_idempotent(setup.retry_non_idempotent);
        // No timers of its own (no pool idle sweep), so that a paused clock only ever
        // advances to the delays under test.
        let client = recommended()
            .pool_idle_timeout(None)
            .no_proxy()
            .build()
            .unwrap();
        let mut client = reqwest_middleware::ClientBuilder::new(client).with(middleware);
        if let Some(probe) = setup.probe {
            client = client.with(SeeNesting(probe));
        }
        Self(client.build())
    }

    async fn send(&self, outbound: Outbound) -> Result<Reply, RetryError<Self::Error>> {
        let mut request = self
            .0
            .request(outbound.method.clone(), outbound.url())
            .headers(outbound.headers);
        if !outbound.body.is_empty() {
            request = request.body(outbound.body);
        }
        if let Some(choice) = outbound.retryable {
            request = request.with_extension(Retryable(choice));
        }
        if let Some(choice) = outbound.hedgeable {
            request = request.with_extension(Hedgeable(choice));
        }
        match request.send().await {
            Ok(response) => Ok(Reply {
                status: response.status(),
                headers: response.headers().clone(),
                attempts: response.extensions().get().copied(),
                body: response.bytes().await.unwrap(),
            }),
            Err(error) => {
                // Every failure of a call the middleware ran is its retry error.
                assert!(retry_error(&error).is_some(), "{error:?}");
                let reqwest_middleware::Error::Middleware(error) = error else {
                    unreachable!("a retry error is a middleware error")
                };
                Err(error.downcast().unwrap())
            }
        }
    }

    fn is_connect(error: &reqwest_middleware::Error) -> bool {
        matches!(error, reqwest_middleware::Error::Reqwest(error) if error.is_connect())
    }
}

/// The inner client as the middleware's docs recommend: reqwest's own retries off.
fn recommended() -> reqwest::ClientBuilder {
    reqwest::Client::builder().retry(reqwest::retry::never())
}

/// Notes the nesting context each request goes out in, behind the retry middleware.
struct SeeNesting(NestingProbe);

#[async_trait::async_trait]
impl Middleware for SeeNesting {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.see();
        next.run(request, extensions).await
    }
}

#[tokio::test(start_paused = true)]
async fn n1_a_streaming_body_is_sent_once_unmarked_not_refused() {
    let (addr, script) = server(&[(503, None)]);
    let body = reqwest::Body::wrap(http_body_util::Full::new(Bytes::from_static(b"stream")));
    let response = Reqwest::new(policy())
        .0
        .put(format!("http://{addr}/"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
    assert_eq!(script.received_bodies(), vec![Bytes::from("stream")]);
}

/// How many attempts passed the middleware behind the retry middleware, counted in an
/// extension of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Passed(u32);

/// Which attempt, in the order they were sent, carried the extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent(u32);

/// Counts each attempt it passes on in the request's [`Passed`] extension, and numbers it in
/// [`Sent`].
#[derive(Default)]
struct CountPassed(AtomicU32);

#[async_trait::async_trait]
impl Middleware for CountPassed {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let passed = extensions.get::<Passed>().map_or(0, |passed| passed.0);
        extensions.insert(Passed(passed + 1));
        extensions.insert(Sent(self.0.fetch_add(1, Ordering::Relaxed) + 1));
        next.run(request, extensions).await
    }
}

/// A client whose retry middleware runs under `policy`, with [`CountPassed`] behind it.
fn counted(policy: RetryPolicyBuilder) -> ClientWithMiddleware {
    let inner = recommended()
        .pool_idle_timeout(None)
        .no_proxy()
        .build()
        .unwrap();
    reqwest_middleware::ClientBuilder::new(inner)
        .with(RetryMiddleware::new(policy.build().unwrap()))
        .with(CountPassed::default())
        .build()
}

/// The caller's extensions: [`Passed`] at 10.
fn callers() -> Extensions {
    let mut extensions = Extensions::new();
    extensions.insert(Passed(10));
    extensions
}

/// A GET of `addr` through `client` with the [`callers`] extensions, and those extensions
/// after the call.
async fn get_with_callers(
    client: &ClientWithMiddleware,
    addr: std::net::SocketAddr,
) -> (reqwest_middleware::Result<reqwest::Response>, Extensions) {
    let mut extensions = callers();
    let request = client.get(format!("http://{addr}/")).build().unwrap();
    let response = client
        .execute_with_extensions(request, &mut extensions)
        .await;
    (response, extensions)
}

#[tokio::test(start_paused = true)]
async fn every_attempt_starts_from_the_callers_extensions_and_the_answering_one_returns_them() {
    let (addr, script) = server(&[(503, None), (200, None)]);
    let client = counted(policy());
    let (response, extensions) = get_with_callers(&client, addr).await;
    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.requests(), 2);
    // The retry started from the caller's 10, not from the first attempt's 11.
    assert_eq!(extensions.get::<Passed>(), Some(&Passed(11)));
    assert_eq!(extensions.get::<Sent>(), Some(&Sent(2)));
}

#[tokio::test(start_paused = true)]
async fn a_first_attempt_that_answers_returns_its_extensions() {
    let (addr, script) = server(&[(200, None)]);
    let client = counted(policy());
    let (response, extensions) = get_with_callers(&client, addr).await;
    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.requests(), 1);
    assert_eq!(extensions.get::<Passed>(), Some(&Passed(11)));
    assert_eq!(extensions.get::<Sent>(), Some(&Sent(1)));
}

#[tokio::test(start_paused = true)]
async fn hg1_the_answering_hedge_returns_its_extensions_not_the_first_attempts() {
    // The first attempt is answered after 5 s; the hedge sent at 50 ms at once.
    let (addr, script) = slow_server(vec![(200, None, Duration::from_secs(5))]);
    let hedging = Hedge::after(Duration::from_millis(50));
    let client = counted(policy().max_attempts(2).hedge(Some(hedging)));
    let (response, extensions) = get_with_callers(&client, addr).await;
    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.requests(), 2);
    assert_eq!(extensions.get::<Passed>(), Some(&Passed(11)));
    assert_eq!(extensions.get::<Sent>(), Some(&Sent(2)));
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_leaves_the_callers_extensions_as_they_were() {
    // A port nobody listens on: bind, read the address, close.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = counted(policy().backoff(nresilience_core::Backoff::none()));
    let (response, extensions) = get_with_callers(&client, addr).await;
    let error = response.unwrap_err();
    assert_eq!(retry_error(&error).map(RetryError::attempts), Some(3));
    assert_eq!(extensions.get::<Passed>(), Some(&Passed(10)));
    assert_eq!(extensions.get::<Sent>(), None);
}

#[tokio::test(start_paused = true)]
async fn e2_h4_with_the_recommended_client_each_attempt_is_one_request() {
    // Three 503s: three attempts, each one request on the wire, the last answer returned.
    let (addr, script) = server(&[(503, None), (503, None), (503, None)]);
    let driver = Reqwest::new(policy().backoff(nresilience_core::Backoff::none()));
    let reply = driver.send(Outbound::get(addr)).await.unwrap();
    assert_eq!(reply.status, 503);
    assert_eq!(script.requests(), 3, "one request per attempt, none hidden");
}
