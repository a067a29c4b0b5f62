//! The reqwest middleware against real axum servers on loopback (SPEC H1–H5, K13, N1, N5, B7).
//!
//! Servers run on their own runtime in real time; the client runs on a paused clock with no
//! attempt timeout or deadline, so the only timers are the delays under test and virtual
//! time measures them exactly.

#![cfg(feature = "reqwest")]
#![allow(clippy::unwrap_used)]

mod support;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use bytes::Bytes;
use http::Extensions;
use nresilience_client::reqwest::{retry_error, RetryMiddleware};
use nresilience_client::{Retryable, MARKER_HEADER};
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::{Backoff, BudgetOptions, RetryBudget, RetryPolicy, StopReason};
use reqwest_middleware::{ClientWithMiddleware, Middleware, Next};
use support::{marked, policy, server, slow_server, unmarked};
use tokio::time::Instant;
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// A reqwest client with no timers of its own (no pool idle sweep), so that a paused clock
/// only ever advances to the delays under test.
fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(None)
        .no_proxy()
        .build()
        .unwrap()
}

fn with(middleware: RetryMiddleware) -> ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest_client())
        .with(middleware)
        .build()
}

fn client(policy: nresilience_core::RetryPolicyBuilder) -> ClientWithMiddleware {
    with(RetryMiddleware::new(policy.build().unwrap()))
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/")
}

#[tokio::test(start_paused = true)]
async fn n1_marker_is_on_the_first_attempt_and_every_retry() {
    let (addr, script) = server(&[(503, None), (500, None)]);
    let response = client(policy()).get(url(addr)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.markers(), marked(3));
}

#[tokio::test(start_paused = true)]
async fn n1_h3_post_without_opt_in_is_sent_once_unmarked_and_its_answer_returned() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy())
        .post(url(addr))
        .body("order")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503, "the answer, not an error");
    assert_eq!(script.markers(), unmarked());
}

#[tokio::test(start_paused = true)]
async fn h3_retry_non_idempotent_opts_every_post_in_with_its_body_replayed() {
    let (addr, script) = server(&[(503, None), (502, None)]);
    let client = with(RetryMiddleware::new(policy().build().unwrap()).retry_non_idempotent(true));
    let response = client.post(url(addr)).body("order").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.markers(), marked(3));
    assert_eq!(
        *script.bodies.lock().unwrap(),
        vec![Bytes::from("order"); 3]
    );
}

#[tokio::test(start_paused = true)]
async fn h3_a_per_request_extension_wins_both_ways() {
    let (addr, script) = server(&[(503, None), (503, None)]);
    let response = client(policy())
        .post(url(addr))
        .body("order")
        .with_extension(Retryable(true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.markers(), marked(3));

    let (addr, script) = server(&[(503, None)]);
    let client = with(RetryMiddleware::new(policy().build().unwrap()).retry_non_idempotent(true));
    let response = client
        .get(url(addr))
        .with_extension(Retryable(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
}

#[tokio::test(start_paused = true)]
async fn n1_a_streaming_body_is_sent_once_unmarked_not_refused() {
    let (addr, script) = server(&[(503, None)]);
    let body = reqwest::Body::wrap(http_body_util::Full::new(Bytes::from_static(b"stream")));
    let response = client(policy())
        .put(url(addr))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
    assert_eq!(*script.bodies.lock().unwrap(), vec![Bytes::from("stream")]);
}

#[tokio::test(start_paused = true)]
async fn n1_a_request_already_marked_is_not_stamped_twice() {
    let (addr, script) = server(&[(503, None)]);
    client(policy())
        .get(url(addr))
        .header(MARKER_HEADER, "1")
        .send()
        .await
        .unwrap();
    assert_eq!(script.markers(), marked(2));
}

#[tokio::test(start_paused = true)]
async fn n1_a_policy_of_one_attempt_does_not_stamp() {
    let (addr, script) = server(&[(503, None)]);
    let response = client(policy().max_attempts(1))
        .get(url(addr))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(script.markers(), unmarked());
}

#[tokio::test(start_paused = true)]
async fn k13_retry_after_seconds_is_obeyed_exactly() {
    let (addr, script) = server(&[(429, Some("2")), (503, Some("1"))]);
    let start = Instant::now();
    let response = client(policy()).get(url(addr)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert_eq!(script.requests(), 3);
}

#[tokio::test(start_paused = true)]
async fn h2_garbage_retry_after_falls_back_to_the_curve() {
    let (addr, _) = server(&[(503, Some("soon")), (503, Some("-5"))]);
    let start = Instant::now();
    let response = client(policy()).get(url(addr)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // The transient curve without jitter: 100 ms, then 200 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(300));
}

// Real time: the deadline arms a timer during the attempt, which a paused clock would jump
// to while the request is on the wire.
#[tokio::test]
async fn h2_retry_after_past_the_deadline_stops_at_once() {
    let (addr, script) = server(&[(503, Some("60"))]);
    let start = std::time::Instant::now();
    let error = client(policy().deadline(Some(Duration::from_secs(10))))
        .get(url(addr))
        .send()
        .await
        .unwrap_err();
    let failed = retry_error(&error).unwrap();
    assert_eq!(failed.reason(), StopReason::DeadlineExceeded);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(script.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn h4_attempts_exhausted_on_a_retryable_status_return_the_last_response() {
    let (addr, script) = server(&[(502, None), (503, None), (500, None)]);
    let response = client(policy()).get(url(addr)).send().await.unwrap();
    assert_eq!(response.status(), 500);
    assert_eq!(script.requests(), 3);
}

#[tokio::test(start_paused = true)]
async fn b7_budget_refusal_end_to_end_is_call_rejected_with_a_hint() {
    let (addr, script) = server(&[(503, None); 10]);
    let options = BudgetOptions::default()
        .minimum_per_second(4.0)
        .capacity(1.0);
    let client = client(
        policy()
            .backoff(Backoff::none())
            .budget(RetryBudget::automatic().with_options(options)),
    );
    let start = Instant::now();
    let error = client.get(url(addr)).send().await.unwrap_err();
    assert!(error.is_middleware());
    let failed = retry_error(&error).unwrap();
    assert_eq!(failed.reason(), StopReason::BudgetExhausted);
    assert_eq!(failed.attempts(), 2);
    assert_eq!(
        script.requests(),
        2,
        "the refused retry never reached the server"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(100), "the pause");
    let rejected = failed.rejection().unwrap();
    assert_eq!(rejected.retry_after, Some(Duration::from_millis(150)));
}

#[tokio::test(start_paused = true)]
async fn h5_a_storm_against_one_host_cannot_throttle_retries_to_another() {
    let (stormy, stormy_script) = server(&[(503, None); 20]);
    let (calm, calm_script) = server(&[(503, None)]);
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(2.0);
    let client = client(
        policy()
            .backoff(Backoff::none())
            .max_attempts(10)
            .budget(RetryBudget::automatic().with_options(options)),
    );
    let error = client.get(url(stormy)).send().await.unwrap_err();
    assert_eq!(
        retry_error(&error).unwrap().reason(),
        StopReason::BudgetExhausted
    );
    assert_eq!(stormy_script.requests(), 3, "two tokens, two retries");
    let response = client.get(url(calm)).send().await.unwrap();
    assert_eq!(response.status(), 200, "the calm host has its own bucket");
    assert_eq!(calm_script.requests(), 2);
}

#[tokio::test(start_paused = true)]
async fn b1_a_single_attempt_post_still_deposits() {
    let (addr, script) = server(&[(503, None)]);
    let options = BudgetOptions::default()
        .minimum_per_second(0.0)
        .capacity(1.0);
    let client = client(
        policy()
            .backoff(Backoff::none())
            .budget(RetryBudget::automatic().with_options(options)),
    );
    // Spend the one token.
    client.get(url(addr)).send().await.unwrap();
    for _ in 0..10 {
        let response = client.post(url(addr)).body("x").send().await.unwrap();
        assert_eq!(response.status(), 200);
    }
    // Ten successful POSTs funded exactly one retry; the next retry is refused.
    script.then(&[(503, None), (503, None)]);
    let error = client.get(url(addr)).send().await.unwrap_err();
    let failed = retry_error(&error).unwrap();
    assert_eq!(failed.reason(), StopReason::BudgetExhausted);
    assert_eq!(failed.attempts(), 2);
    assert_eq!(script.requests(), 2 + 10 + 2);
}

#[tokio::test]
async fn e1_connection_refused_is_transient_retried_and_the_last_error_kept() {
    // A port nobody listens on: bind, read the address, close.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = client(
        RetryPolicy::builder()
            .backoff(Backoff::constant(Duration::from_millis(1)))
            .attempt_ceiling(None),
    );
    let error = client.get(url(addr)).send().await.unwrap_err();
    let failed = retry_error(&error).unwrap();
    assert_eq!(failed.reason(), StopReason::AttemptsExhausted);
    assert_eq!(failed.attempts(), 3);
    match failed.last_error() {
        Some(reqwest_middleware::Error::Reqwest(last)) => assert!(last.is_connect(), "{last}"),
        other => panic!("expected the connect error, got {other:?}"),
    }
}

#[tokio::test]
async fn e5_an_attempt_cut_by_its_timeout_is_retried() {
    let slow = Duration::from_secs(5);
    let (addr, script) = slow_server(vec![(200, None, slow), (200, None, slow)]);
    let client = client(
        policy()
            .backoff(Backoff::none())
            .attempt_timeout(Some(Duration::from_millis(100))),
    );
    let start = std::time::Instant::now();
    let response = client.get(url(addr)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(script.requests(), 3);
    assert!(start.elapsed() < slow, "{:?}", start.elapsed());

    let (addr, _) = slow_server(vec![(200, None, slow); 3]);
    let error = client.get(url(addr)).send().await.unwrap_err();
    let failed = retry_error(&error).unwrap();
    assert_eq!(failed.reason(), StopReason::AttemptsExhausted);
    assert!(failed.is_timeout());
}

// ===== nesting =====

/// Records what the nesting context says while the request goes out, behind the retry
/// middleware.
#[derive(Clone, Default)]
struct SeeNesting(Arc<Mutex<Vec<Option<NestingSource>>>>);

#[async_trait::async_trait]
impl Middleware for SeeNesting {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.lock().unwrap().push(nesting::current());
        next.run(request, extensions).await
    }
}

/// Collects the names of the spans opened on this thread.
#[derive(Clone, Default)]
struct SpanNames(Arc<Mutex<Vec<&'static str>>>);

thread_local! {
    static RECORDING: RefCell<Option<SpanNames>> = const { RefCell::new(None) };
}

/// Hands each new span's name to the recording of the thread that opened it, if any.
struct ThreadSpans;

impl<S: Subscriber> Layer<S> for ThreadSpans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        RECORDING.with(|recording| {
            if let Some(names) = recording.borrow().as_ref() {
                names.0.lock().unwrap().push(attrs.metadata().name());
            }
        });
    }
}

impl SpanNames {
    /// Records the spans this thread opens from now on.
    ///
    /// One global subscriber routes each span to the recording of its thread: a per-thread
    /// default subscriber races on tracing's global callsite cache with the tests running in
    /// parallel, which can leave a callsite disabled for it.
    fn record(&self) {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(ThreadSpans),
            )
            .unwrap();
        });
        RECORDING.with(|recording| *recording.borrow_mut() = Some(self.clone()));
    }

    fn count(&self, name: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|n| **n == name)
            .count()
    }
}

#[tokio::test(start_paused = true)]
async fn n5_a_retrying_call_runs_in_a_retrying_context_and_a_single_attempt_does_not() {
    let (addr, _) = server(&[(503, None)]);
    let seen = SeeNesting::default();
    let client = reqwest_middleware::ClientBuilder::new(reqwest_client())
        .with(RetryMiddleware::new(policy().build().unwrap()))
        .with(seen.clone())
        .build();
    client.get(url(addr)).send().await.unwrap();
    client.post(url(addr)).send().await.unwrap();
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![
            Some(NestingSource::InProcess),
            Some(NestingSource::InProcess),
            None
        ]
    );
    assert_eq!(nesting::current(), None, "restored afterwards");
}

#[tokio::test(start_paused = true)]
async fn n5_a_retrying_call_inside_a_retrying_context_is_reported_once() {
    let names = SpanNames::default();
    names.record();
    let (addr, _) = server(&[(503, None), (503, None)]);
    let client = client(policy());

    client.get(url(addr)).send().await.unwrap();
    assert_eq!(names.count("NestedRetry"), 0, "not nested");
    assert_eq!(names.count("HTTP"), 3, "one span per attempt");

    nesting::scope(NestingSource::Header, async {
        client.get(url(addr)).send().await.unwrap();
        assert_eq!(names.count("NestedRetry"), 1, "before its first attempt");
        client.get(url(addr)).send().await.unwrap();
        client.post(url(addr)).send().await.unwrap();
    })
    .await;
    assert_eq!(
        names.count("NestedRetry"),
        2,
        "once per retrying call, never for a single attempt"
    );
}
